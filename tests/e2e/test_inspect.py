"""``crawlq inspect URL``: one URL's story in each state, embedded (SQLite) and shared (Redis +
PostgreSQL).

The crawl's state is made through the frontier and store contracts (as a worker makes it),
and the command runs as a separate process while the frontier is held open, as by a crawl in
progress: the embedded frontier is read without taking its lock.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from crawlq.frontier import Frontier, HostPolicy
from crawlq.records import DeadRecord, FilteredRecord, ItemRecord, PageRecord
from crawlq.request import CrawlRequest
from crawlq.store import ResultBatch, Store
from crawlq.urls import canonicalize
from tests.conftest import pg_schema, run_crawlq

SITE = "http://site.test"
HOME = f"{SITE}/index.html"


def linked(path: str) -> CrawlRequest:
    return CrawlRequest(f"{SITE}/{path}", priority=-1, depth=1, referrer=HOME)


async def make_every_state(frontier: Frontier, store: Store) -> dict[str, Any]:
    """Queued, in flight, delayed, stored, dead and filtered URLs, as a crawl leaves them."""
    names = ("flight", "retry", "stored", "dead", "robots", "queued")
    await frontier.push([linked(n) for n in names])
    got = await frontier.lease(5, "worker-7", 60.0)
    leases = {le.request.url.rsplit("/", 1)[1]: le for le in got}
    assert sorted(leases) == sorted(names[:5])  # FIFO within a priority
    now = time.time()
    assert await frontier.retry(leases["retry"], 3600.0, "http_503")
    page = PageRecord(
        leases["stored"].request.fingerprint, f"{SITE}/stored", f"{SITE}/stored", 200,
        "text/html", 1, "Stored", now, 1234, 0.1, 1, None, "default",
        warc_file="crawlq-1.warc.gz", warc_offset=4096, referrer=HOME,
    )  # fmt: skip
    items = [ItemRecord(page.fingerprint, i, page.url, "default", {"i": i}, now) for i in (0, 1)]
    dead = DeadRecord(
        leases["dead"].request.fingerprint, f"{SITE}/dead", "http_503",
        "503 Service Unavailable after 4 attempts", 1, 1, now, HOME,
    )  # fmt: skip
    robots = FilteredRecord(leases["robots"].request.fingerprint, f"{SITE}/robots",
                            "robots_txt", 1, now)  # fmt: skip
    await store.write(ResultBatch(pages=[page], items=items, dead=[dead], filtered=[robots]))
    assert await frontier.ack([leases["stored"], leases["robots"]]) == 2
    assert await frontier.dead(leases["dead"], "http_503")
    return {"deadline_ms": leases["flight"].deadline_ms}


def inspect(url: str, *where: str) -> dict[str, Any]:
    proc = run_crawlq("inspect", url, *where, "--json")
    story = json.loads(proc.stdout)
    assert isinstance(story, dict)
    return story


def check_every_story(where: tuple[str, ...], made: dict[str, Any]) -> None:
    queued = inspect(f"{SITE}/queued", *where)
    assert queued["state"] == "queued"
    assert queued["canonical_url"] == canonicalize(f"{SITE}/queued")
    assert queued["fingerprint"] == linked("queued").fingerprint.hex()
    assert queued["details"]["priority"] == -1 and queued["details"]["depth"] == 1
    assert queued["details"]["attempts"] == 0 and queued["details"]["ready_at"]
    assert queued["request"]["referrer"] == HOME

    flight = inspect(f"{SITE}/flight", *where)
    assert flight["state"] == "in_flight"
    assert flight["details"]["worker"] == "worker-7" and flight["details"]["attempt"] == 1
    deadline = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(made["deadline_ms"] // 1000))
    assert flight["details"]["lease_deadline"].startswith(deadline)

    retry = inspect(f"{SITE}/retry", *where)
    assert retry["state"] == "delayed"
    assert (retry["details"]["attempt"], retry["details"]["last_error"]) == (1, "http_503")
    assert retry["details"]["due"] > queued["details"]["ready_at"]

    stored = inspect(f"{SITE}/stored", *where)
    assert stored["state"] == "stored"
    d = stored["details"]
    assert (d["status"], d["warc_file"], d["warc_offset"], d["items"]) == (
        200, "crawlq-1.warc.gz", 4096, 2,
    )  # fmt: skip
    assert d["error"] is None and d["referrer"] == HOME and d["fetched_at"]

    dead = inspect(f"{SITE}/dead", *where)
    assert dead["state"] == "dead"
    d = dead["details"]
    assert (d["reason"], d["attempts"], d["referrer"]) == ("http_503", 1, HOME)
    assert d["last_error"] == "503 Service Unavailable after 4 attempts" and d["at"]

    robots = inspect(f"{SITE}/robots", *where)
    assert (robots["state"], robots["details"]["reason"]) == ("filtered", "robots_txt")

    never = inspect(f"{SITE}/never?b=2&a=1#top", *where)
    assert never["state"] == "never_seen"
    assert never["canonical_url"] == f"{SITE}/never?a=1&b=2"
    assert never["details"] == {} and never["notes"] == []

    # the same URL written another way is the same fingerprint: one story
    assert inspect("HTTP://SITE.test/queued#x", *where)["state"] == "queued"
    # ...and so is the URL with the session and tracking parameters the crawl strips (QA)
    tracked = inspect(f"{SITE}/queued?utm_source=mail&sid=9", *where)
    assert (tracked["state"], tracked["canonical_url"]) == ("queued", f"{SITE}/queued")


async def test_inspect_tells_each_state_of_an_embedded_crawl(tmp_path: Path) -> None:
    from crawlq.frontier.sqlite import SqliteFrontier
    from crawlq.store.sqlite import SqliteStore

    path = tmp_path / "crawl.db"
    frontier = await SqliteFrontier.open(path, default_policy=HostPolicy(0.0, 10))
    store = await SqliteStore.open(path)
    try:
        made = await make_every_state(frontier, store)
        check_every_story(("--store", str(path)), made)
        table = run_crawlq("inspect", f"{SITE}/dead", "--store", str(path)).stdout
        assert "dead-lettered" in table and HOME in table and "http_503" in table
        # a table written to a pipe keeps a long URL on one line (rich wraps at 80 columns)
        long_url = f"{SITE}/never/" + "x" * 150
        table = run_crawlq("inspect", long_url, "--store", str(path)).stdout
        assert long_url in table
        busy = run_crawlq("dead", "replay", "--store", str(path), check=False)
        assert busy.returncode == 1  # a crawl owns the file: a replay waits for it to end
        assert "in use by another crawlq process" in busy.stderr
    finally:  # the frontier stayed owned by this "crawl" throughout
        await store.close()
        await frontier.close()


async def test_inspect_tells_each_state_of_a_shared_job(
    redis_url: str, job: str, postgres_url: str
) -> None:
    from crawlq.frontier.redis import RedisFrontier
    from crawlq.store.postgres import PostgresStore

    async with pg_schema(postgres_url) as schema:
        options = urllib.parse.quote(f"-csearch_path={schema}")
        sep = "&" if "?" in postgres_url else "?"
        store_url = f"{postgres_url}{sep}options={options}"
        frontier = await RedisFrontier.open(
            redis_url, job, default_policy=HostPolicy(0.0, 10), create=True
        )
        store = await PostgresStore.open(store_url)
        try:
            await frontier.job_settings({"store": store_url})
            made = await make_every_state(frontier, store)
            where = ("--frontier", redis_url, "--job", job)
            check_every_story(where, made)  # the store named by the job
            assert inspect(f"{SITE}/dead", *where, "--store", store_url)["state"] == "dead"
        finally:
            await store.close()
            await frontier.close()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("not a url",), "URL: 'not a url'"),
        (("ftp://site.test/x",), "scheme 'ftp' is not http or https"),
        ((f"{SITE}/x", "--store", "/nonexistent/crawl.db"), "'/nonexistent/crawl.db': no such"),
        ((f"{SITE}/x", "--frontier", "redis://127.0.0.1:6379/9"), "--job"),
    ],
)
def test_bad_input_is_one_message_naming_it(args: tuple[str, ...], words: str) -> None:
    proc = run_crawlq("inspect", *args, check=False)
    assert proc.returncode == 2
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unknown_job_is_named(redis_url: str, job: str) -> None:
    proc = run_crawlq("inspect", f"{SITE}/x", "--frontier", redis_url, "--job", job, check=False)
    assert proc.returncode == 2
    assert f"'{job}': no such job" in proc.stderr
    proc = run_crawlq("dead", "list", "--frontier", redis_url, "--job", job, check=False)
    assert proc.returncode == 2 and f"'{job}': no such job" in proc.stderr


async def test_a_replay_checks_the_job_scope_again(redis_url: str, job: str) -> None:
    from crawlq.frontier.redis import RedisFrontier

    frontier = await RedisFrontier.open(
        redis_url, job, default_policy=HostPolicy(0.0, 10), create=True
    )
    try:
        await frontier.job_settings({"store": "unused.db", "allowed_domains": ["site.test"]})
        await frontier.push([linked("in"), CrawlRequest("http://elsewhere.test/out")])
        for lease in await frontier.lease(2, "w", 60.0):
            await frontier.dead(lease, "timeout")
        where = ("--frontier", redis_url, "--job", job)
        proc = run_crawlq("dead", "replay", *where)
        assert "replayed 1 dead letter (timeout 1); 1 left dead: out of the job's scope" in (
            proc.stdout
        )
        assert (await frontier.inspect(linked("in").fingerprint)).state == "queued"
        out = CrawlRequest("http://elsewhere.test/out").fingerprint
        assert (await frontier.inspect(out)).state == "dead"
    finally:
        await frontier.close()
