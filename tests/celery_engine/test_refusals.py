"""A worker that refuses a job says why and gives up on a URL after a bounded number of tries;
``scrape`` tasks return what happened; the implicit job's settings can be seen.

Real ``celery worker`` processes, real Redis, loopback servers only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.celery import make_app
from crawlq.settings import Settings
from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import (
    CeleryWorker,
    job_counts,
    redis_broker_state,
    stored_dead,
)
from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

StartWorker = Callable[..., CeleryWorker]

REFUSALS = 3
"""The workers' ``celery_max_refusals`` in these tests (the default is 5)."""


class Lines:
    """The lines a process writes to a pipe, read by a thread as they come."""

    def __init__(self, pipe: object) -> None:
        self.lines: list[str] = []
        self._pipe = pipe
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._pipe:  # type: ignore[attr-defined]
            self.lines.append(line)

    def wait_for(self, text: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in {timeout_s}s:\n{''.join(self.lines)}")

    def join(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)


def test_a_worker_with_another_store_is_reported_and_its_urls_end_dead_lettered(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    log = RequestLog()
    store = tmp_path / "store.db"
    other = tmp_path / "other.db"
    with ServerThread(make_fault_app(log=log)) as server:
        worker = workers(
            celery_redis_url, redis_url, queue, "--concurrency", "1",
            CRAWLQ_STORE=str(other), CRAWLQ_CELERY_MAX_REFUSALS=str(REFUSALS),
        )  # fmt: skip
        seeds = [server.base_url + "/page/1", server.base_url + "/page/2"]
        cmd = [
            sys.executable, "-m", "crawlq", "crawl", *seeds, "--engine", "celery",
            "--broker", celery_redis_url, "--frontier", redis_url, "--job", job,
            "--store", str(store), "-q", "--delay", "0", "--ignore-robots",
        ]  # fmt: skip
        env = {**__import__("os").environ, "CRAWLQ_CELERY_QUEUE": queue}
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            err = Lines(proc.stderr)
            # the issue asks for 10 s; a loaded shared machine gets more
            line = err.wait_for("refuses job", 60)
            assert f"refuses job {job}: store" in line, line
            assert str(other) not in line or str(store) in line  # it names the job's store
            assert f"crawlq job settings {job}" in line
            out, _ = proc.communicate(timeout=110)
            stderr = err.join()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        # every seed was refused, so nothing was stored: exit 4 with the reasons (README)
        assert proc.returncode == 4, (out, stderr, worker.log_tail())
        assert out.startswith("crawl failed: no page stored"), out  # stdout: communicate's
        assert log.requests() == []  # the refusing worker fetched nothing
    dead = stored_dead(store)
    assert sorted((d["url"], d["reason"]) for d in dead) == [(u, "worker_refused") for u in seeds]
    assert all("refuses job" in str(d["detail"]) and "store" in str(d["detail"]) for d in dead)
    counts = job_counts(redis_url, job)
    assert (counts["pending"], counts["dead"]) == (0, 2)
    # bounded: each URL's task was delivered and refused exactly REFUSALS times, no more
    assert counts["refused"] == 2 * REFUSALS
    assert redis_broker_state(celery_redis_url, queue)["queued"] == 0
    assert "dead letters" in out or "dead" in out

    report = json.loads(
        run_crawlq("status", "--frontier", redis_url, "--job", job, "--json").stdout
    )
    assert report["engine"] == "celery"
    assert report["dead"] == 2
    [refusal] = report["refusals"]
    assert refusal["worker"].endswith(tuple("0123456789"))  # host:pid
    assert refusal["reason"].startswith("store")
    assert isinstance(refusal["at_ms"], int)
    text = run_crawlq("status", "--frontier", redis_url, "--job", job).stdout
    assert f"refused by {refusal['worker']}" in text

    shown = json.loads(run_crawlq("job", "settings", job, "--frontier", redis_url, "--json").stdout)
    assert shown["job"] == job
    assert shown["settings"]["store"] == str(store)
    assert shown["settings"]["delay_s"] == 0


def test_scrape_results_say_what_happened_and_private_addresses_warn_once_per_host(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    log = RequestLog()
    with (
        ServerThread(make_fault_app(log=log)) as seeded,
        ServerThread(make_fault_app(log=log), host="127.0.0.2") as private,
    ):
        site, hidden = seeded.base_url, private.base_url
        worker = workers(
            celery_redis_url, redis_url, queue, "--concurrency", "1",
            CRAWLQ_JOB=job,  # the implicit job of scrape.delay(url): nobody seeded it
            CRAWLQ_SEED_HOSTS="127.0.0.1", CRAWLQ_DELAY_S="0", CRAWLQ_MAX_DEPTH="0",
            CRAWLQ_OBEY_ROBOTS="false", CRAWLQ_CELERY_RESULT_EXPIRES_S="120",
        )  # fmt: skip
        app = make_app(
            Settings.build(
                env={},
                cli={"broker_url": celery_redis_url, "frontier": redis_url, "celery_queue": queue},
            )
        )
        try:
            scrape = app.crawlq.scrape
            stored = scrape.delay(site + "/page/1").get(timeout=90)
            again = scrape.delay(site + "/page/1").get(timeout=90)
            first = scrape.delay(hidden + "/page/1").get(timeout=90)
            second = scrape.delay(hidden + "/page/2").get(timeout=90)
            gone = scrape.delay(site + "/status/404").get(timeout=90)
            bad = scrape.delay(123).get(timeout=90)
        finally:
            app.close()
        paths = [(r.path) for r in log.requests()]
    assert stored == {
        "url": site + "/page/1",
        "job": job,
        "outcome": "stored",
        "status": 200,
        "final_url": site + "/page/1",
        "error": None,
        "items": 0,
    }
    assert again == {"url": site + "/page/1", "job": job, "outcome": "duplicate"}
    for url, result in (
        (hidden + "/page/1", first),
        (hidden + "/page/2", second),
    ):
        assert result == {
            "url": url,
            "job": job,
            "outcome": "filtered",
            "reason": "private_address",
        }
    assert gone["outcome"] == "stored" and gone["status"] == 404
    assert bad["outcome"] == "dropped" and "cannot be crawled" in bad["reason"]
    assert paths == ["/page/1", "/status/404"]  # nothing requested of the private host
    worker.stop()
    logged = worker.log_path.read_text(errors="replace")
    warnings = [ln for ln in logged.splitlines() if "as private_address" in ln]
    assert len(warnings) == 1, warnings  # once per host, not per URL
    assert "WARNING" in warnings[0] and "127.0.0.2" in warnings[0]
    assert "--allow-private" in warnings[0] and "CRAWLQ_ALLOW_PRIVATE" in warnings[0]

    shown = json.loads(run_crawlq("job", "settings", job, "--frontier", redis_url, "--json").stdout)
    assert shown["settings"]["seed_hosts"] == ["127.0.0.1"]  # the first worker's, frozen
    assert shown["settings"]["store"] == str(tmp_path / "store.db")
    text = run_crawlq("job", "settings", job, "--frontier", redis_url).stdout
    assert "seed_hosts" in text and f"crawlq job delete {job}" in text


def test_the_worker_banner_lists_crawlqs_tasks(
    celery_redis_url: str, queue: str, tmp_path: Path, workers: StartWorker,
    broker_cleanup: Callable[[str, str], None],
) -> None:  # fmt: skip
    broker_cleanup(celery_redis_url, queue)
    worker = workers(celery_redis_url, celery_redis_url, queue, "--concurrency", "1")
    deadline = time.monotonic() + 60
    while "ready." not in worker.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, worker.log_tail()
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_tail()
        time.sleep(0.1)
    banner = worker.log_path.read_text(errors="replace")
    tasks = banner.split("[tasks]", 1)[1].split("\n\n", 1)[0]
    assert ". crawlq.scrape\n" in tasks + "\n" and ". crawlq.scrape_many" in tasks
    assert "results:     redis://" in banner  # scrape's results: the job's Redis
