"""The job record contract (`crawlq.frontier.job.JobRecord`), checked on every backend."""

from __future__ import annotations

import asyncio

from .conftest import MakeFrontier


async def test_the_first_settings_proposed_are_the_jobs(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    assert await f.job_settings(None) is None  # a read stores nothing
    assert await f.job_settings(None) is None
    assert await f.job_settings({"delay_s": 1.0, "include": ["a"]}) == {
        "delay_s": 1.0,
        "include": ["a"],
    }
    assert await f.job_settings({"delay_s": 2.0}) == {"delay_s": 1.0, "include": ["a"]}
    assert await f.job_settings(None) == {"delay_s": 1.0, "include": ["a"]}


async def test_concurrent_proposals_store_one_of_them(make_frontier: MakeFrontier) -> None:
    f = await make_frontier()
    got = await asyncio.gather(*(f.job_settings({"n": i}) for i in range(8)))
    assert len({g["n"] for g in got if g is not None}) == 1
    assert await f.job_settings(None) == got[0]
