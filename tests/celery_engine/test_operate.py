"""``crawlq inspect`` and ``crawlq dead list|replay`` on a job run by the Celery engine.

The inspect test makes the job's state through the engine's own path (`CeleryState.admit`,
`start_task`, `settle`) with no broker; the replay test crawls with real Celery workers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from crawlq.celery.runtime.state import CeleryState
from crawlq.engine.job import bind_job
from crawlq.records import DeadRecord, FilteredRecord, PageRecord
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.settings import Settings
from crawlq.store import ResultBatch
from crawlq.store.sqlite import SqliteStore
from crawlq.testing import RequestLog, fault_state, make_fault_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import crawl_celery, job_counts, stored_pages, wait_for
from tests.conftest import run_crawlq

SITE = "http://site.test"
HOME = f"{SITE}/index.html"


def story(url: str, redis_url: str, job: str) -> dict[str, Any]:
    proc = run_crawlq("inspect", url, "--frontier", redis_url, "--job", job, "--json")
    out = json.loads(proc.stdout)
    assert isinstance(out, dict)
    return out


async def test_inspect_tells_what_the_celery_state_knows(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    path = tmp_path / "s.db"
    settings = Settings(job=job, frontier=redis_url, store=str(path), delay_s=0)
    names = ("pending", "running", "stored", "dead", "robots")
    requests = {n: CrawlRequest(f"{SITE}/{n}", depth=1, referrer=HOME) for n in names}
    fp = {n: r.fingerprint for n, r in requests.items()}
    home_fp = CrawlRequest(HOME).fingerprint.hex()
    state = await CeleryState.open(redis_url, job)
    store = await SqliteStore.open(path)
    try:
        await bind_job(state.frontier(Politeness(HostPolicy(0, 1))), settings, create=True)
        assert await state.admit([(r, home_fp) for r in requests.values()], run=False) == [True] * 5
        await state.start_task("host-1:4242:77", [fp["running"]])
        now = time.time()
        page = PageRecord(fp["stored"], f"{SITE}/stored", f"{SITE}/stored", 200, "text/html",
                          1, "S", now, 10, 0.1, 1, None, "default", referrer=HOME)  # fmt: skip
        dead = DeadRecord(fp["dead"], f"{SITE}/dead", "http_503", "503 after 1", 1, 1, now, HOME)
        robots = FilteredRecord(fp["robots"], f"{SITE}/robots", "robots_txt", 1, now)
        await store.write(ResultBatch(pages=[page], dead=[dead], filtered=[robots]))
        assert await state.settle([fp["stored"], fp["robots"]], [fp["dead"]]) == 3

        pending = story(f"{SITE}/pending", redis_url, job)
        assert (pending["engine"], pending["state"]) == ("celery", "pending")
        assert pending["details"]["owner"] == home_fp and pending["details"]["due"]
        assert pending["request"]["referrer"] == HOME and pending["request"]["depth"] == 1
        assert any("broker" in note for note in pending["notes"])  # what it cannot tell

        running = story(f"{SITE}/running", redis_url, job)
        assert running["state"] == "in_flight"
        assert running["details"]["worker"] == "host-1:4242:77"
        assert running["details"]["heartbeat"]  # start_task beat for the process

        stored = story(f"{SITE}/stored", redis_url, job)
        assert (stored["state"], stored["details"]["status"]) == ("stored", 200)
        assert stored["details"]["referrer"] == HOME

        dead_story = story(f"{SITE}/dead", redis_url, job)
        assert dead_story["state"] == "dead"
        d = dead_story["details"]
        assert (d["reason"], d["last_error"], d["referrer"]) == ("http_503", "503 after 1", HOME)
        assert dead_story["request"]["referrer"] == HOME  # kept in dead_requests

        assert story(f"{SITE}/robots", redis_url, job)["state"] == "filtered"
        assert story(f"{SITE}/never", redis_url, job)["state"] == "never_seen"

        listed = run_crawlq(
            "dead", "list", "--frontier", redis_url, "--job", job, "--json"
        ).stdout.splitlines()
        assert [json.loads(line)["url"] for line in listed] == [f"{SITE}/dead"]
    finally:
        await store.close()
        await state.close()


def _site_app(links: list[str]) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        body = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
        return web.Response(text=f"<title>Index</title>{body}", content_type="text/html")

    app = web.Application()
    app.router.add_get("/index.html", index)
    return app


def test_dead_replay_after_the_flag_flips_stores_each_once(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., Any],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    log = RequestLog()
    flaky_app = make_fault_app(log)
    fault_state(flaky_app).switch_down = True
    store = tmp_path / "store.db"
    where = ("--frontier", redis_url, "--job", job)
    env = {"CRAWLQ_CELERY_QUEUE": queue, "CRAWLQ_STORE": str(store)}
    with ServerThread(flaky_app, host="127.0.0.2") as flaky:
        flaky_pages = [f"{flaky.base_url}/switch/a", f"{flaky.base_url}/switch/b"]
        gone = "http://127.0.0.1:9/gone"
        with ServerThread(_site_app([*flaky_pages, gone])) as site:
            index = f"{site.base_url}/index.html"
            worker = workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
            proc = crawl_celery(
                index, celery_redis_url, redis_url, job, queue, store, "--delay", "0",
                "--max-retries", "0", "--ignore-robots", "--allow-private",
                "--allow-domain", "127.0.0.1", "--allow-domain", "127.0.0.2",
            )  # fmt: skip
            assert "crawl finished" in proc.stdout, worker.log_tail()
            assert [log.count(f"/switch/{n}") for n in "ab"] == [1, 1]

            rows = run_crawlq("dead", "list", *where, "--reason", "http_503", "--json", env=env)
            failing = [json.loads(line) for line in rows.stdout.splitlines()]
            assert sorted(r["url"] for r in failing) == flaky_pages
            assert {r["referrer"] for r in failing} == {index}

            fault_state(flaky_app).switch_down = False
            dry = run_crawlq("dead", "replay", *where, "--host", "127.0.0.2", "--dry-run", env=env)
            assert "would replay 2 dead letters (http_503 2); nothing changed" in dry.stdout
            assert job_counts(redis_url, job)["pending"] == 0
            replayed = run_crawlq(
                "dead", "replay", *where, "--host", "127.0.0.2", "--broker", celery_redis_url,
                "--json", env=env,
            )  # fmt: skip
            assert json.loads(replayed.stdout)["replayed"] == 2
            wait_for(
                lambda: (
                    job_counts(redis_url, job)["pending"] == 0
                    and log.count("/switch/b") == 2
                    and len(stored_pages(store)) == 3
                ),
                60,
                "the replayed URLs to be stored",
            )
    assert [log.count(f"/switch/{n}") for n in "ab"] == [2, 2]  # once more each
    stored = sorted((p["url"], p["status"], p["referrer"]) for p in stored_pages(store))
    assert stored == sorted([(index, 200, None)] + [(u, 200, index) for u in flaky_pages])
    left = run_crawlq("dead", "list", *where, "--json", env=env).stdout.splitlines()
    assert [json.loads(line)["url"] for line in left] == [gone]
    counts = job_counts(redis_url, job)
    assert (counts["dead"], counts["pending"]) == (1, 0)
    assert story(flaky_pages[0], redis_url, job)["state"] == "stored"
