"""Celery: the no-op ceiling, a tutorial-style Celery crawler, and crawlq's Celery engine.

Run by hand (never part of the tests)::

    python bench/celery_bench.py [--rounds 3] [--tasks 20000] [--only noop,tutorial,crawlq]

Everything runs against one Redis broker (``--broker``, default ``redis://127.0.0.1:6379/13``;
the bench deletes its own queues and keys) and the PostgreSQL manual served on loopback (nginx
when installed, as in ``bench/_harness.py``). Every Celery worker is one ``celery worker``
with the prefork pool and ``--concurrency 2`` (this machine has 2 cores).

* **noop**: ``--tasks`` tasks that do nothing but count themselves (one Redis INCR, to know
  when all ran), published by this process while the worker consumes them. Twice: with
  Celery's defaults (JSON, prefetch 4, early ack) and with crawlq's configuration
  (`crawlq.celery.runtime.config`: late ack, prefetch 1, 10 priority steps). tasks/s is the ceiling
  of any one-task-per-URL crawler on this machine.
* **tutorial**: the crawler of a Celery tutorial: a ``crawl(url)`` task fetching with urllib,
  finding links with ``html.parser``, ``SADD`` dedup in Redis and ``.delay()`` per new link,
  the page's size kept in a Redis hash. Celery's defaults.
* **crawlq**: ``crawlq crawl SEED --engine celery --delay 0 --host-concurrency 16`` with a
  ``celery -A crawlq.celery worker``; ``celery_batch`` 16 (the default: discovered links are
  sent as tasks of up to 16 URLs of one host) and 1 (one task per URL).

Measured: wall seconds from the first task sent to the last one settled; CPU seconds (user +
system) of the worker's process tree over the same span, plus the producer's (this process for
noop; the ``crawlq crawl`` process for crawlq, its start-up included). For crawlq,
``pages_per_s`` uses the elapsed time the command prints (seeding to done, to 0.1 s, the
command polls every 0.2 s) and ``pages_per_s_wall`` the command's whole run, start-up
(about 0.4 s of imports) included.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from celery import Celery

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import DEFAULT_CORPUS, CorpusServer, tree_cpu_s

DEFAULT_BROKER = "redis://127.0.0.1:6379/13"
BROKER = os.environ.get("CELERY_BENCH_BROKER", DEFAULT_BROKER)
PREFIX = os.environ.get("CELERY_BENCH_PREFIX", "celerybench")
MODE = os.environ.get("CELERY_BENCH_MODE", "defaults")

# -- the apps the bench's workers import (celery -A celery_bench) ---------------------------

app = Celery("celery_bench", broker=BROKER, set_as_current=False)
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    task_default_queue=PREFIX,
)
if MODE == "crawlq":
    from crawlq.celery.runtime.config import celery_config
    from crawlq.settings import Settings

    app.conf.update(
        celery_config(Settings.build(env={}, cli={"broker_url": BROKER, "celery_queue": PREFIX}))
    )

_redis: Any = None


def _client() -> Any:
    global _redis
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(BROKER)
    return _redis


@app.task(name="bench.noop")
def noop() -> None:
    _client().incr(f"{PREFIX}:ran")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            for name, value in attrs:
                if name == "href" and value:
                    self.hrefs.append(value)


@app.task(name="bench.tutorial_crawl")
def tutorial_crawl(url: str) -> None:
    r = _client()
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read()
            html = "html" in resp.headers.get("content-type", "")
        r.hset(f"{PREFIX}:pages", url, len(body))
        if html:
            parser = _Links()
            parser.feed(body.decode("utf-8", errors="replace"))
            host = urlsplit(url).netloc
            for href in parser.hrefs:
                link = urldefrag(urljoin(url, href))[0]
                if urlsplit(link).netloc == host and r.sadd(f"{PREFIX}:seen", link):
                    r.incr(f"{PREFIX}:pending")
                    tutorial_crawl.delay(link)
    except OSError:
        r.hset(f"{PREFIX}:errors", url, 1)
    finally:
        r.decr(f"{PREFIX}:pending")


# -- the driver -------------------------------------------------------------------------------


class Worker:
    """A ``celery worker`` in its own session, stopped by its process group id."""

    def __init__(self, app_name: str, queue: str, env: dict[str, str], log: Path) -> None:
        cmd = [
            sys.executable, "-m", "celery", "-A", app_name, "worker", "--concurrency", "2",
            "--loglevel", "INFO", "-Q", queue, "--without-gossip", "--without-mingle",
            "--without-heartbeat",
        ]  # fmt: skip
        self.log = log
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                cmd,
                env={**os.environ, **env},
                cwd=Path(__file__).resolve().parent,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while not re.search(r"celery@\S+ ready", log.read_text()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"worker did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        time.sleep(0.5)  # the pool processes finish starting

    def cpu_s(self) -> float:
        return tree_cpu_s(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _cleanup(prefix: str) -> None:
    r = _client()
    for key in r.scan_iter(match=f"{prefix}*"):
        r.unlink(key)
    for key in r.scan_iter(match=f"_kombu.binding*.{prefix}*"):
        r.unlink(key)


def _self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def run_noop(mode: str, n_tasks: int, workdir: Path) -> dict[str, float]:
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    env = {"CELERY_BENCH_BROKER": BROKER, "CELERY_BENCH_PREFIX": prefix, "CELERY_BENCH_MODE": mode}
    os.environ.update(env)
    bench_app = _fresh_app(prefix, mode)
    worker = Worker("celery_bench", prefix, env, workdir / f"noop-{mode}.log")
    try:
        r = _client()
        cpu0, me0, t0 = worker.cpu_s(), _self_cpu_s(), time.perf_counter()
        with bench_app.producer_or_acquire() as producer:
            for _ in range(n_tasks):
                bench_app.send_task("bench.noop", producer=producer)
        published = time.perf_counter() - t0
        publisher_cpu = _self_cpu_s() - me0
        while int(r.get(f"{prefix}:ran") or 0) < n_tasks:
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        cpu = worker.cpu_s() - cpu0
    finally:
        worker.stop()
        bench_app.close()
        _cleanup(prefix)
    return {
        "wall_s": wall,
        "tasks_per_s": n_tasks / wall,
        "worker_cpu_s": cpu,
        "worker_cpu_ms_per_task": 1000 * cpu / n_tasks,
        "publish_s": published,
        "publisher_cpu_s": publisher_cpu,
    }


def _fresh_app(prefix: str, mode: str) -> Celery:
    """A producer app for one run (queue ``prefix``), configured as the worker's."""
    producer = Celery("celery_bench_producer", broker=BROKER, set_as_current=False)
    producer.conf.update(app.conf)
    producer.conf.task_default_queue = prefix
    if mode == "crawlq":
        from crawlq.celery.runtime.config import celery_config
        from crawlq.settings import Settings

        cli = {"broker_url": BROKER, "celery_queue": prefix}
        producer.conf.update(celery_config(Settings.build(env={}, cli=cli)))
    return producer


def run_tutorial(seed: str, workdir: Path) -> dict[str, float]:
    prefix = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    env = {"CELERY_BENCH_BROKER": BROKER, "CELERY_BENCH_PREFIX": prefix}
    os.environ.update(env)
    bench_app = _fresh_app(prefix, "defaults")
    worker = Worker("celery_bench", prefix, env, workdir / "tutorial.log")
    try:
        r = _client()
        cpu0, t0 = worker.cpu_s(), time.perf_counter()
        r.sadd(f"{prefix}:seen", seed)
        r.set(f"{prefix}:pending", 1)
        bench_app.send_task("bench.tutorial_crawl", args=[seed])
        while int(r.get(f"{prefix}:pending") or 0) > 0:
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        cpu = worker.cpu_s() - cpu0
        pages = int(r.hlen(f"{prefix}:pages"))
    finally:
        worker.stop()
        bench_app.close()
        _cleanup(prefix)
    return {"wall_s": wall, "pages": pages, "pages_per_s": pages / wall, "worker_cpu_s": cpu}


def run_crawlq(seed: str, batch: int, workdir: Path) -> dict[str, float]:
    queue = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
    job = queue
    store = workdir / f"{job}.db"
    env = {
        "CRAWLQ_BROKER_URL": BROKER,
        "CRAWLQ_CELERY_QUEUE": queue,
        "CRAWLQ_CELERY_BATCH": str(batch),
    }
    worker = Worker("crawlq.celery", queue, env, workdir / f"crawlq-{batch}.log")
    try:
        cpu0 = worker.cpu_s()
        cmd = [
            sys.executable, "-m", "crawlq", "crawl", seed, "--engine", "celery",
            "--broker", BROKER, "--job", job, "--store", str(store), "--delay", "0",
            "--host-concurrency", "16", "-q",
        ]  # fmt: skip
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        out = proc.stdout.read() if proc.stdout else ""
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"crawl failed: {out}\n{worker.log.read_text()[-3000:]}")
        cpu = worker.cpu_s() - cpu0
        crawl_cpu = usage.ru_utime + usage.ru_stime
    finally:
        worker.stop()
        _cleanup(queue)
        _cleanup(f"crawlq:{{{job}}}")
    pages = int(re.search(r"pages stored: (\d+) this run", out).group(1))  # type: ignore[union-attr]
    elapsed = float(re.search(r"elapsed: ([\d.]+)s", out).group(1))  # type: ignore[union-attr]
    return {
        "wall_s": wall,
        "crawl_elapsed_s": elapsed,
        "pages": pages,
        "pages_per_s": pages / elapsed,
        "pages_per_s_wall": pages / wall,
        "worker_cpu_s": cpu,
        "crawl_cmd_cpu_s": crawl_cpu,
        "cpu_ms_per_page": 1000 * (cpu + crawl_cpu) / pages,
    }


def _median(rows: list[dict[str, float]]) -> dict[str, str]:
    out = {}
    for key in rows[0]:
        values = [row[key] for row in rows]
        out[key] = f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--only", default="noop,tutorial,crawlq")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="celery-bench-") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)  # nginx's workers may run as another user
        results: dict[str, list[dict[str, float]]] = {}
        if "noop" in only:
            for mode in ("defaults", "crawlq"):
                for _ in range(args.rounds):
                    results.setdefault(f"noop ({mode})", []).append(
                        run_noop(mode, args.tasks, workdir)
                    )
        if only & {"tutorial", "crawlq"}:
            server = CorpusServer(args.corpus, workdir / "server")
            try:
                print(f"corpus served by {server.kind} at {server.url}", file=sys.stderr)
                for _ in range(args.rounds):
                    if "tutorial" in only:
                        results.setdefault("tutorial", []).append(run_tutorial(server.url, workdir))
                    if "crawlq" in only:
                        for batch in (16, 1):
                            results.setdefault(f"crawlq celery_batch={batch}", []).append(
                                run_crawlq(server.url, batch, workdir)
                            )
            finally:
                server.stop()
        for name, rows in results.items():
            print(f"## {name} ({len(rows)} rounds: median [min-max])")
            for key, value in _median(rows).items():
                print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
