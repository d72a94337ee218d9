"""The README's Redis quick start, run as written, and the local paths a worker names.

The commands are read from the README's "Distributed crawling (Redis)" block, with only the
site's URL, the Redis database and the job name replaced by this test's own; they run as
subprocesses in a temporary directory, as a user would run them in one terminal. A worker
and its job agree on a local path (SQLite store, spider file) when both name the same file,
however it is spelled; a worker elsewhere is told the one flag that names the job's file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from crawlq.frontier.redis import Keyspace
from crawlq.testing.static import generate_site, make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.sitemap import reachable
from tests.e2e.test_distributed import stored_count, stored_urls

README = Path(__file__).resolve().parents[2] / "README.md"
README_SITE = "http://127.0.0.1:8000/index.html"
README_REDIS = "redis://127.0.0.1:6379/0"


def readme_commands(redis_url: str, job: str, seed_url: str) -> dict[str, list[str]]:
    """The quick start's ``crawlq seed`` and ``crawlq worker`` commands, as argument lists
    after ``crawlq``, with this test's Redis, job and site in place of the README's."""
    text = README.read_text("utf-8")
    section = text[text.index("## Distributed crawling (Redis)") :]
    block = section[section.index("```sh\n") + 6 : section.index("```\n", 6)]
    commands: dict[str, list[str]] = {}
    for line in block.splitlines():
        if line.startswith("crawlq "):
            words = shlex.split(line.split("#", 1)[0])
            words = [
                {README_REDIS: redis_url, "docs": job, README_SITE: seed_url}.get(w, w)
                for w in words
            ]
            commands.setdefault(words[1], words[1:])
    assert set(commands) >= {"seed", "worker", "status"}, block
    return commands


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, set[str]]]:
    """A generated site of 12 pages on loopback: its seed URL and every URL a crawl stores."""
    root = generate_site(tmp_path / "site", n_pages=12)
    with ServerThread(make_static_app(root)) as server:
        found, missing = reachable(root, server.base_url + "/")
        yield server.base_url + "/index.html", found | missing


def crawlq_proc(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``crawlq ARGS`` in ``cwd``, in a session of its own (so that a Ctrl-C reaches it all)."""
    return subprocess.Popen(
        [sys.executable, "-m", "crawlq", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )


def ctrl_c(proc: subprocess.Popen[str], timeout_s: float = 90) -> tuple[str, str]:
    """Press Ctrl-C: SIGINT to the process's group, as a terminal does; its output."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        return proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def status(redis_url: str, job: str, cwd: Path) -> dict:
    done = run_crawlq("status", "--frontier", redis_url, "--job", job, "--json", cwd=cwd)
    return json.loads(done.stdout)


def test_the_readme_quick_start_works_as_written_in_one_directory(
    redis_url: str, job: str, site: tuple[str, set[str]], tmp_path: Path
) -> None:
    seed_url, urls = site
    here = tmp_path / "crawl"
    here.mkdir()
    commands = readme_commands(redis_url, job, seed_url)
    assert commands["worker"][-2:] == ["--processes", "4"]  # the README's, unchanged
    run_crawlq(*commands["seed"], cwd=here)
    workers = crawlq_proc(*commands["worker"], cwd=here)
    try:
        wait_for(lambda: stored_count(here / "crawlq.db") >= len(urls), "the site to be stored")
        wait_for(lambda: status(redis_url, job, here)["done"] == len(urls), "every URL settled")
    finally:
        out, err = ctrl_c(workers)  # the README: Ctrl-C stops the workers
    assert workers.returncode == 0, err
    assert "worker stopped: the job has nothing left to crawl" in out
    assert f"pages stored: {len(urls)} this run" in out
    stored = stored_urls(here / "crawlq.db")
    assert set(stored) == urls and max(stored.values()) == 1


def test_the_jobs_store_however_a_worker_spells_it(
    redis_url: str, job: str, site: tuple[str, set[str]], tmp_path: Path
) -> None:
    seed_url, urls = site
    here = tmp_path / "crawl"
    here.mkdir()
    (tmp_path / "link").symlink_to(here)
    run_crawlq(*readme_commands(redis_url, job, seed_url)["seed"], cwd=here)
    worker = ("worker", "--frontier", redis_url, "--job", job, "--exit-when-done")
    first = run_crawlq(*worker, "--store", "./crawlq.db", cwd=here)
    assert f"pages stored: {len(urls)} this run" in first.stdout
    absolute = str(here / "crawlq.db")
    for store in ("crawlq.db", absolute, str(tmp_path / "link" / "crawlq.db"), "~/crawlq.db"):
        again = run_crawlq(*worker, "--store", store, cwd=here, env={"HOME": str(here)})
        assert "worker finished: the job has nothing left to crawl" in again.stdout, store
    stored = stored_urls(here / "crawlq.db")
    assert set(stored) == urls and max(stored.values()) == 1


def test_a_worker_in_another_directory_is_told_the_one_flag_and_it_works(
    redis_url: str, job: str, site: tuple[str, set[str]], tmp_path: Path
) -> None:
    seed_url, urls = site
    here, elsewhere = tmp_path / "crawl", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    run_crawlq(*readme_commands(redis_url, job, seed_url)["seed"], cwd=here)
    worker = ("worker", "--frontier", redis_url, "--job", job, "--exit-when-done")
    advice = f"give --store {here / 'crawlq.db'} (or CRAWLQ_STORE)"
    refused = run_crawlq(*worker, cwd=elsewhere, check=False)
    assert refused.returncode == 2
    assert refused.stderr.count("--store") == 2, refused.stderr  # the advice, and what it lacks
    assert advice in refused.stderr and "given no --store" in refused.stderr
    other = run_crawlq(*worker, "--store", "crawlq.db", cwd=elsewhere, check=False)
    assert other.returncode == 2 and advice in other.stderr  # the same advice, not "leave out"
    assert "leave these out" not in other.stderr
    assert list(elsewhere.iterdir()) == []  # neither opened the file Redis names
    followed = run_crawlq(*worker, "--store", str(here / "crawlq.db"), cwd=elsewhere)
    assert f"pages stored: {len(urls)} this run" in followed.stdout
    assert set(stored_urls(here / "crawlq.db")) == urls


def test_a_spider_file_given_relatively_or_absolutely_is_the_jobs(
    redis_url: str, job: str, site: tuple[str, set[str]], tmp_path: Path
) -> None:
    seed_url, urls = site
    here = tmp_path / "crawl"
    here.mkdir()
    spider = "from crawlq.spider import Spider\n\nclass S(Spider):\n    name = 's'\n"
    (here / "myspider.py").write_text(spider)
    (here / "other.py").write_text(spider)
    run_crawlq("seed", seed_url, "--frontier", redis_url, "--job", job, "--spider", "myspider.py:S",
               "--delay", "0", cwd=here)  # fmt: skip
    worker = ("worker", "--frontier", redis_url, "--job", job, "--exit-when-done")
    relative = run_crawlq(*worker, "--spider", "myspider.py:S", cwd=here)
    assert f"pages stored: {len(urls)} this run" in relative.stdout
    for given in (f"{here}/myspider.py:S", "./myspider.py:S"):
        same = run_crawlq(*worker, "--spider", given, cwd=here)
        assert "worker finished" in same.stdout, given
    job_spider = f"{here / 'myspider.py'}:S"
    wrong = run_crawlq(*worker, "--spider", "other.py:S", cwd=here, check=False)
    assert wrong.returncode == 2
    [message] = [line for line in wrong.stderr.splitlines() if line.startswith("Error:")]
    assert job_spider in message and str(here / "other.py") in message
    assert "own configuration must name it" in message and "give --spider" not in message
    nothing = run_crawlq(*worker, cwd=here, check=False)
    assert nothing.returncode == 2
    assert "given no --spider" in nothing.stderr and "give --spider" not in nothing.stderr


def test_summaries_of_a_shared_job_say_this_run_and_the_jobs(
    redis_url: str, job: str, site: tuple[str, set[str]], tmp_path: Path
) -> None:
    seed_url, urls = site
    dead_url = "http://127.0.0.1:9/nothing-here"  # nothing listens: one dead letter
    common = ("--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db"))
    crawl = run_crawlq(
        "crawl", seed_url, dead_url, *common, "--processes", "2", "--delay", "0",
        "--max-retries", "0", "--allow-domain", "127.0.0.1",
    )  # fmt: skip
    out = crawl.stdout
    assert f"pages stored: {len(urls)} this run" in out
    assert "dead-lettered: 1 this run, 1 by this job (" in out
    assert "filtered: 0 this run, 0 by this job" in out
    # the two workers' own counts reach the summary, as an embedded crawl's do
    assert re.search(r"^links not followed: \d+ this run \(.*offsite \d+", out, re.M), out
    assert re.search(r"^retries: 0 this run$", out, re.M), out
    assert re.search(r"^frontier round trips: \d+ this run", out, re.M), out
    assert "(the job's, all its workers)" in out
    again = run_crawlq("worker", *common, "--exit-when-done", "--processes", "2")
    assert "pages stored: 0 this run" in again.stdout
    assert "dead-lettered: 0 this run, 1 by this job (" in again.stdout  # the job's, labelled
    assert re.search(r"^retries: 0 this run$", again.stdout, re.M), again.stdout


def test_status_counts_workers_as_soon_as_they_start(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    # A heartbeat every 120 s: a worker that beat only after its first interval would not be
    # counted while this test waits.
    run_crawlq("seed", "http://127.0.0.1:9/a", "--frontier", redis_url, "--job", job,
               "--store", str(tmp_path / "s.db"), env={"CRAWLQ_HEARTBEAT_S": "120"},
               cwd=tmp_path)  # fmt: skip
    workers = crawlq_proc(
        "worker", "--frontier", redis_url, "--job", job, "--store", "s.db", "--processes", "4",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for(
            lambda: len(status(redis_url, job, tmp_path)["workers"]) == 4, "4 live workers", 60
        )
    finally:
        _, err = ctrl_c(workers)
    assert workers.returncode == 0, err
    assert status(redis_url, job, tmp_path)["workers"] == []  # they left the job on the way out


def test_a_deleted_jobs_worker_does_not_recreate_its_keys(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    run_crawlq("seed", "http://127.0.0.1:9/a", "--frontier", redis_url, "--job", job,
               "--store", str(tmp_path / "s.db"), env={"CRAWLQ_HEARTBEAT_S": "0.5"})  # fmt: skip
    worker = crawlq_proc(
        "worker", "--frontier", redis_url, "--job", job, "--store", str(tmp_path / "s.db"),
        cwd=tmp_path,
    )  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    try:
        wait_for(lambda: client.zcard(Keyspace(job).workers) == 1, "the worker's heartbeat", 60)
        run_crawlq("job", "delete", job, "--frontier", redis_url, "--force")
        _, err = worker.communicate(timeout=60)  # it stops at its next heartbeat
        assert worker.returncode == 1 and "is gone" in err, err
        assert client.exists(Keyspace(job).workers) == 0
        assert list(client.scan_iter(match=Keyspace(job).pattern())) == []
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate(timeout=30)
        client.close()
