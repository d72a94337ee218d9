"""Behaviour of the embedded frontier beyond the shared contract: ownership and recovery."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawlq.errors import FrontierError, FrontierLocked
from crawlq.frontier import HostPolicy, open_frontier
from crawlq.frontier.robots import RobotsRecord
from crawlq.frontier.sqlite import SCHEMA_VERSION, SqliteFrontier
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import Politeness, Strike, StrikePlan

POLICY = HostPolicy(0.0, 10)


async def test_second_owner_is_refused_naming_the_file_and_pid(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    first = await SqliteFrontier.open(path, default_policy=POLICY)
    try:
        with pytest.raises(FrontierLocked) as info:
            await SqliteFrontier.open(path, default_policy=POLICY)
        assert str(path) in str(info.value)
        assert "pid" in str(info.value)
    finally:
        await first.close()
    again = await SqliteFrontier.open(path, default_policy=POLICY)  # free after close
    await again.close()


def test_leases_of_a_killed_owner_are_requeued_at_open(tmp_path: Path) -> None:
    """A process leases two URLs and dies with SIGKILL; the next owner gets them back at once."""
    path = tmp_path / "f.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from crawlq.frontier import HostPolicy
        from crawlq.frontier.sqlite import SqliteFrontier
        from crawlq.request import CrawlRequest

        async def main():
            f = await SqliteFrontier.open({str(path)!r}, default_policy=HostPolicy(0.0, 10))
            await f.push([CrawlRequest("http://a.test/" + str(i)) for i in range(3)])
            leases = await f.lease(2, "doomed", 3600)
            await f.ack(leases[:0])
            print(len(leases), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.strip() == "2"

    import asyncio

    async def resume() -> None:
        f = await SqliteFrontier.open(path, default_policy=POLICY)
        try:
            assert f.recovered == 2
            stats = await f.stats()
            assert (stats.queued, stats.in_flight, stats.seen) == (3, 0, 3)
            leases = await f.lease(10, "w", 60)
            assert sorted(le.attempt for le in leases) == [1, 2, 2]  # deliveries counted
        finally:
            await f.close()

    asyncio.run(resume())


async def test_state_survives_reopen(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.push([CrawlRequest(f"http://a.test/{i}") for i in range(5)])
    leases = await f.lease(3, "w", 60)
    await f.ack(leases[:1])
    await f.dead(leases[1], "http_404")
    await f.retry(leases[2], 0.0, "http_503")
    await f.close()
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    try:
        stats = await f.stats()
        assert (stats.done, stats.dead, stats.delayed, stats.queued, stats.seen) == (1, 1, 1, 2, 5)
        assert await f.push([CrawlRequest("http://a.test/0")]) == 0
    finally:
        await f.close()


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.close()
    import sqlite3

    with sqlite3.connect(path) as db:
        db.execute("UPDATE frontier_meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(FrontierError, match="newer"):
        await SqliteFrontier.open(path, default_policy=POLICY)


async def test_version_1_file_is_upgraded_and_its_fetched_leases_recovered(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=HostPolicy(0.0, 1))
    await f.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://a.test/2")])
    (first,) = await f.lease(5, "w", 30.0)
    await f.lease(5, "w", 30.0, fetched=[first])  # first: state 5; second: leased
    await f.close()  # as if killed: both leases are left behind
    with sqlite3.connect(path) as db:
        db.execute("UPDATE frontier_meta SET value='1' WHERE key='schema_version'")
        db.execute("DROP INDEX frontier_fetched")
        for column in ("pushbacks", "failures", "flags"):  # added by version 3
            db.execute(f"ALTER TABLE frontier_hosts DROP COLUMN {column}")
    f = await SqliteFrontier.open(path, default_policy=HostPolicy(0.0, 2))
    try:
        assert f.recovered == 2
        assert len(await f.lease(5, "w", 30.0)) == 2
        assert await f.host_strike("a.test", Strike.FAILURE, StrikePlan((1.0,))) == 1
    finally:
        await f.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM frontier_meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "frontier_fetched" in names


async def test_version_2_file_gains_the_robots_table(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.push([CrawlRequest("http://a.test/1")])
    await f.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE frontier_meta SET value='2' WHERE key='schema_version'")
        db.execute("DROP TABLE frontier_robots")
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    try:
        assert await f.robots_get("http://a.test") is None
        record = RobotsRecord("parsed", 1, 2, body="User-agent: *\nDisallow: /x\n")
        await f.robots_put("http://a.test", record)
        assert await f.robots_get("http://a.test") == record
        assert (await f.stats()).queued == 1
    finally:
        await f.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM frontier_meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)


async def test_version_3_file_counts_the_urls_it_holds_against_the_host_budget(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.push([CrawlRequest(f"http://a.test/{i}") for i in range(3)])
    await f.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE frontier_meta SET value='3' WHERE key='schema_version'")
        # version 4 added the column and filled it from the requests (SQLite cannot drop the
        # last column of this table: a comment follows it)
        db.execute("UPDATE frontier_hosts SET admitted=0")
    rules = Politeness(default=POLICY, max_pages_per_host=4)
    f = await SqliteFrontier.open(path, politeness=rules)
    try:
        assert await f.push([CrawlRequest(f"http://a.test/{i}") for i in range(3, 6)]) == 1
        assert (await f.stats()).over_budget == 2
    finally:
        await f.close()
    f = await SqliteFrontier.open(path, politeness=rules)  # the count survives a reopen
    try:
        assert (await f.stats()).over_budget == 2
        assert await f.push([CrawlRequest("http://a.test/new")]) == 0
    finally:
        await f.close()


async def test_open_frontier_dispatch(tmp_path: Path) -> None:
    f = await open_frontier(f"sqlite:///{tmp_path}/x.db")
    await f.close()
    assert (tmp_path / "x.db").exists()
    with pytest.raises(Exception, match="redis"):
        await open_frontier("redis://127.0.0.1:6379/0")
    with pytest.raises(Exception, match="SQLite file path"):
        await open_frontier("mysql://x")


async def test_argument_errors_name_the_argument(tmp_path: Path) -> None:
    f = await SqliteFrontier.open(tmp_path / "f.db", default_policy=POLICY)
    try:
        with pytest.raises(ValueError, match="n must be"):
            await f.lease(0, "w", 60)
        with pytest.raises(ValueError, match="visibility_timeout_s"):
            await f.lease(1, "w", 0)
        with pytest.raises(ValueError, match="delay_s"):
            HostPolicy(-1, 1)
    finally:
        await f.close()


async def test_version_4_file_gains_the_dead_time_and_keeps_its_dead_letters(
    tmp_path: Path,
) -> None:
    import sqlite3

    from crawlq.frontier.inspection import DeadFilter

    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://a.test/2")])
    for lease in await f.lease(2, "w", 30.0):
        await f.dead(lease, "http_503")
    await f.close()
    with sqlite3.connect(path) as db:  # what crawlq with frontier schema 4 left
        db.execute("UPDATE frontier_meta SET value='4' WHERE key='schema_version'")
        db.execute("DROP INDEX frontier_dead")
        db.execute("ALTER TABLE frontier_requests DROP COLUMN dead_at_ms")
    db.close()
    looked = await SqliteFrontier.open(path, default_policy=POLICY, read_only=True)
    try:  # an old file is read as it is: dead letters without a time
        assert [d.dead_at_ms async for d in looked.dead_letters()] == [None, None]
    finally:
        await looked.close()
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    try:
        assert len([d async for d in f.dead_letters(DeadFilter(reason="http_503"))]) == 2
        assert [d async for d in f.dead_letters(DeadFilter(since_ms=0))] == []  # time unknown
        assert (await f.replay_dead()).queued == 2
    finally:
        await f.close()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM frontier_meta WHERE key='schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
    db.close()


async def test_inspect_reads_a_version_4_file_without_the_dead_time(tmp_path: Path) -> None:
    """``crawlq inspect`` looks at an old file read-only: a dead URL has no dead time, no error."""
    import sqlite3

    path = tmp_path / "f.db"
    f = await SqliteFrontier.open(path, default_policy=POLICY)
    await f.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://a.test/2")])
    (lease,) = await f.lease(1, "w", 30.0)
    await f.dead(lease, "http_503")
    await f.close()
    with sqlite3.connect(path) as db:  # what crawlq with frontier schema 4 left
        db.execute("UPDATE frontier_meta SET value='4' WHERE key='schema_version'")
        db.execute("DROP INDEX frontier_dead")
        db.execute("ALTER TABLE frontier_requests DROP COLUMN dead_at_ms")
    db.close()
    look = await SqliteFrontier.open(path, default_policy=POLICY, read_only=True)
    try:
        dead = await look.inspect(lease.request.fingerprint)
        assert (dead.state, dead.reason, dead.attempts, dead.dead_at_ms) == (
            "dead",
            "http_503",
            1,
            None,
        )
        queued = await look.inspect(CrawlRequest("http://a.test/2").fingerprint)
        assert queued.state == "queued"
    finally:
        await look.close()


async def test_a_read_only_look_needs_no_ownership_and_writes_nothing(tmp_path: Path) -> None:
    from crawlq.errors import FrontierError

    path = tmp_path / "f.db"
    owner = await SqliteFrontier.open(path, default_policy=POLICY)
    try:
        await owner.push([CrawlRequest("http://a.test/1"), CrawlRequest("http://a.test/2")])
        (lease,) = await owner.lease(1, "crawler", 30.0)
        await owner.dead(lease, "timeout")
        look = await SqliteFrontier.open(path, default_policy=POLICY, read_only=True)
        try:  # the owner keeps its lock: the crawl goes on while an operator looks
            state = await look.inspect(CrawlRequest("http://a.test/2").fingerprint)
            assert state.state == "queued"
            (held,) = await owner.lease(1, "crawler", 30.0)
            state = await look.inspect(held.request.fingerprint)
            assert (state.state, state.worker_id) == ("in_flight", "crawler")
            assert [d.reason async for d in look.dead_letters()] == ["timeout"]
            assert await look.job_settings(None) is None
            with pytest.raises(FrontierError, match="read-only"):
                await look.replay_dead()
            with pytest.raises(FrontierError, match="read-only"):
                await look.push([CrawlRequest("http://a.test/3")])
        finally:
            await look.close()
        assert (await owner.stats()).dead == 1
    finally:
        await owner.close()
    with pytest.raises(FrontierError, match=r"no crawlq frontier in .*nothing\.db"):
        await SqliteFrontier.open(tmp_path / "nothing.db", read_only=True)
    assert not (tmp_path / "nothing.db").exists()
    import sqlite3

    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(FrontierError, match="no crawlq frontier in"):
        await SqliteFrontier.open(other, read_only=True)
