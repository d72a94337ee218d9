"""Prometheus metrics end to end: scraped during a crawl of the manual, and adding up after.

Two ``crawlq worker`` processes (one supervisor serving their summed metrics) crawl the
manual with a share of its pages failing (`tests.e2e.faulty_site`); once the job has nothing
pending, the counters equal the store's totals exactly: pages, dead letters by reason,
filtered records by reason, bytes. ``crawlq status --prometheus-port`` exports the frontier
gauges, equal to ``crawlq status --json``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crawlq.testing import RequestLog, make_fault_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.faulty_site import make_faulty_app
from tests.services import free_port

pytestmark = pytest.mark.e2e


def scrape(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """``{sample name: {sorted labels: value}}`` of the endpoint on ``port``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def by_label(samples: dict[tuple[tuple[str, str], ...], float], label: str) -> dict[str, int]:
    return {dict(k)[label]: int(v) for k, v in samples.items() if v}


def wait_scrapable(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            scrape(port)
            return
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"the exporter exited with {proc.returncode}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def status_json(redis_url: str, job: str) -> dict:
    return json.loads(run_crawlq("status", "--frontier", redis_url, "--job", job, "--json").stdout)


def export(store: Path, what: str) -> list[dict]:
    out = run_crawlq("export", "--store", str(store), "--what", what).stdout
    return [json.loads(line) for line in out.splitlines() if line]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_worker_metrics_add_up_to_the_store(
    site_root: Path, redis_url: str, job: str, tmp_path: Path
) -> None:
    store = tmp_path / "store.db"
    metrics_port, gauges_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    with ServerThread(make_faulty_app(site_root)) as server:
        run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, server.base_url + "/index.html",
            "--store", str(store), "--delay", "0.003", "--host-concurrency", "2",
            "--max-retries", "1", "--retry-delay", "0.01",
        )  # fmt: skip
        worker_cmd = [
            sys.executable, "-m", "crawlq", "worker", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--processes", "2", "--metrics-port", str(metrics_port), "-q",
        ]  # fmt: skip
        exporter_cmd = [
            sys.executable, "-m", "crawlq", "status", "--frontier", redis_url, "--job", job,
            "--prometheus-port", str(gauges_port), "--interval", "0.2",
        ]  # fmt: skip
        worker = subprocess.Popen(worker_cmd, env=env)
        exporter = subprocess.Popen(exporter_cmd, env=env, stderr=subprocess.DEVNULL)
        try:
            wait_scrapable(metrics_port, worker)
            during = False  # a scrape that saw pages while the job still had work pending
            deadline = time.monotonic() + 100
            while True:
                pages = sum(scrape(metrics_port).get("crawlq_pages_total", {}).values())
                report = status_json(redis_url, job)
                during = during or (pages > 0 and report["queued"] + report["in_flight"] > 0)
                if report["queued"] + report["in_flight"] + report["delayed"] == 0:
                    break
                assert time.monotonic() < deadline, f"not drained: {report}"
                time.sleep(0.1)
            assert during, "no scrape saw the crawl in progress"

            m = scrape(metrics_port)
            pages_rows, dead_rows = export(store, "pages"), export(store, "dead")
            filtered_rows = export(store, "filtered")
            assert dead_rows and filtered_rows, "the site must produce dead and filtered URLs"
            statuses = Counter(f"{p['status'] // 100}xx" for p in pages_rows)
            assert by_label(m["crawlq_pages_total"], "status_class") == dict(statuses)
            assert by_label(m["crawlq_dead_letters_total"], "reason") == dict(
                Counter(d["reason"] for d in dead_rows)
            )
            assert by_label(m["crawlq_filtered_total"], "reason") == dict(
                Counter(f["reason"] for f in filtered_rows)
            )
            assert sum(m["crawlq_response_bytes_total"].values()) == sum(
                p["size"] for p in pages_rows
            )
            assert sum(m["crawlq_fetch_duration_seconds_count"].values()) == len(pages_rows)
            # each URL that died of its 500s was retried once first (--max-retries 1)
            assert by_label(m["crawlq_retries_total"], "reason") == {"http_500": len(dead_rows)}
            assert sum(m["crawlq_leases_in_flight"].values()) == 0

            wait_scrapable(gauges_port, exporter)
            report = status_json(redis_url, job)
            g = scrape(gauges_port)
            label = (("crawlq_job", job),)
            assert g["crawlq_status_up"][label] == 1
            for key in ("queued", "in_flight", "delayed", "dead", "seen", "done"):
                assert g[f"crawlq_frontier_{key}"][label] == report[key], key
            assert g["crawlq_store_pages"][label] == report["stored"] == len(pages_rows)
            assert g["crawlq_frontier_dead"][label] == len(dead_rows)
        finally:
            stop(exporter)
            stop(worker)
        assert worker.returncode == 0


def test_cookie_wall_revisits_are_counted_once(redis_url: str, job: str, tmp_path: Path) -> None:
    """A cookie wall (``302`` + ``Set-Cookie`` back to itself, then 200) is one stored page:
    its redirect is counted as a cookie-wall hop, not as a second page. A wall that sets the
    same cookie again ends as a ``redirect_loop`` dead letter, one that never lets the crawler
    through as ``too_many_redirects`` (no page): the counters equal the store's totals."""
    store = tmp_path / "store.db"
    metrics_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    log = RequestLog()
    with ServerThread(make_fault_app(log)) as server:
        walls = ["/cookie-wall/a", "/cookie-wall/b", "/cookie-wall/again?never=1"]
        walls.append("/cookie-wall/count?count=1")
        seed = server.base_url + "/set-cookie/s/1?" + urlencode([("link", w) for w in walls])
        run_crawlq(
            "seed", "--frontier", redis_url, "--job", job, seed, "--store", str(store),
            "--delay", "0", "--ignore-robots", "--allow-private",
        )  # fmt: skip
        worker_cmd = [
            sys.executable, "-m", "crawlq", "worker", "--frontier", redis_url, "--job", job,
            "--store", str(store), "--metrics-port", str(metrics_port), "-q",
        ]  # fmt: skip
        worker = subprocess.Popen(worker_cmd, env=env)
        try:
            wait_scrapable(metrics_port, worker)
            deadline = time.monotonic() + 60
            while True:
                report = status_json(redis_url, job)
                if report["queued"] + report["in_flight"] + report["delayed"] == 0:
                    break
                assert time.monotonic() < deadline, f"not drained: {report}"
                time.sleep(0.1)
            m = scrape(metrics_port)
        finally:
            stop(worker)
        assert worker.returncode == 0
    assert log.count("/cookie-wall/a") == log.count("/cookie-wall/b") == 2  # wall, revisit
    pages_rows, dead_rows = export(store, "pages"), export(store, "dead")
    statuses = Counter(f"{p['status'] // 100}xx" for p in pages_rows)
    assert dict(statuses) == {"2xx": 3}  # seed, a, b
    assert by_label(m["crawlq_pages_total"], "status_class") == dict(statuses)
    assert sorted(d["reason"] for d in dead_rows) == ["redirect_loop", "too_many_redirects"]
    assert by_label(m["crawlq_dead_letters_total"], "reason") == {
        "redirect_loop": 1,
        "too_many_redirects": 1,
    }
    assert sum(m["crawlq_response_bytes_total"].values()) == sum(p["size"] for p in pages_rows)
    assert sum(m["crawlq_fetch_duration_seconds_count"].values()) == len(pages_rows)
    # the walls' redirects that were fetched again: a, b, again (once), count (10 times)
    assert sum(m["crawlq_cookie_wall_hops_total"].values()) == 13
