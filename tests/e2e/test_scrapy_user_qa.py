"""What a fresh Scrapy user tripped over (issue 22's second QA round): each test failed on the
code before its fix. Commands run as subprocesses; nothing but loopback is ever a target."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

SEED = "http://127.0.0.1:1/"
"""A seed no test fetches: every command here stops before its first request."""


def _one_line_refusal(proc: subprocess.CompletedProcess[str], *names: str) -> None:
    """Exit 2, no traceback, and the error names each of ``names``."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for name in names:
        assert name in proc.stderr


@pytest.mark.parametrize("agent", ["", "   "], ids=["empty", "blank"])
def test_crawl_refuses_an_empty_user_agent_and_creates_nothing(tmp_path: Path, agent: str) -> None:
    store = tmp_path / "bad.db"
    proc = run_crawlq("crawl", SEED, "--store", str(store), "--user-agent", agent, check=False)
    _one_line_refusal(proc, "--user-agent", "product token")
    assert list(tmp_path.iterdir()) == []


def test_the_environment_variable_is_named(tmp_path: Path) -> None:
    store = tmp_path / "bad.db"
    proc = run_crawlq(
        "crawl", SEED, "--store", str(store), check=False, env={"CRAWLQ_USER_AGENT": ""}
    )
    _one_line_refusal(proc, "CRAWLQ_USER_AGENT")
    assert list(tmp_path.iterdir()) == []


def test_fetch_refuses_an_empty_user_agent() -> None:
    proc = run_crawlq("fetch", SEED, "--user-agent", "", check=False)
    _one_line_refusal(proc, "--user-agent")


def test_seed_refuses_an_empty_user_agent(redis_url: str, job: str) -> None:
    proc = run_crawlq(
        "seed", SEED, "--frontier", redis_url, "--job", job, "--user-agent", "", check=False
    )
    _one_line_refusal(proc, "--user-agent")


def test_a_worker_refuses_a_bad_user_agent_in_the_job_settings(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    """Shared state is untrusted: an empty user_agent written into the job is one line."""
    import redis

    from crawlq.frontier.redis import Keyspace

    store = str(tmp_path / "s.db")
    run_crawlq("seed", SEED, "--frontier", redis_url, "--job", job, "--store", store)
    client = redis.Redis.from_url(redis_url)
    try:
        key = Keyspace(job).job_info
        stored = json.loads(client.hget(key, "settings"))  # type: ignore[arg-type]
        client.hset(key, "settings", json.dumps({**stored, "user_agent": ""}))
    finally:
        client.close()
    proc = run_crawlq(
        "worker",
        "--frontier",
        redis_url,
        "--job",
        job,
        "--store",
        store,
        "--exit-when-done",
        check=False,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "user_agent" in proc.stderr and f"job {job!r}" in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "user_agent" in line]
    assert len(errors) == 1 and errors[0].startswith("Error: user_agent: ''"), proc.stderr


SPIDERS = """
import logging

from crawlq.spider import Spider


class InitBoom(Spider):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        raise RuntimeError("no API key")


class Starts(Spider):
    name = "starts"
    start_urls = ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"]


class NoStarts(Spider):
    pass
"""


@pytest.fixture
def spiders(tmp_path: Path) -> str:
    path = tmp_path / "spiders" / "qa_spiders.py"
    path.parent.mkdir()
    path.write_text(SPIDERS)
    return str(path)


@pytest.mark.parametrize(
    ("cls", "said"),
    [("Nope", "'Nope'"), ("InitBoom", "InitBoom() raised RuntimeError: no API key")],
)
def test_seed_loads_and_checks_the_spider_first(
    tmp_path: Path, spiders: str, cls: str, said: str
) -> None:
    store = tmp_path / "s.db"
    proc = run_crawlq(
        "seed", SEED, "--store", str(store), "--spider", f"{spiders}:{cls}", check=False
    )
    _one_line_refusal(proc, "--spider", said)
    assert not store.exists() and not Path(f"{store}.lock").exists()


def test_seed_refuses_a_spider_file_that_is_not_there(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    proc = run_crawlq("seed", SEED, "--store", str(store), "--spider", "nope.py:X", check=False)
    _one_line_refusal(proc, "--spider", "nope.py")
    assert not store.exists()


def test_seed_with_no_urls_seeds_the_spiders_start_urls(tmp_path: Path, spiders: str) -> None:
    store = tmp_path / "s.db"
    proc = run_crawlq("seed", "--store", str(store), "--spider", f"{spiders}:Starts")
    assert proc.stdout.startswith("queued 2 new of 2"), proc.stdout


def test_seed_with_no_urls_and_a_spider_without_start_urls_says_so(
    tmp_path: Path, spiders: str
) -> None:
    store = tmp_path / "s.db"
    proc = run_crawlq("seed", "--store", str(store), "--spider", f"{spiders}:NoStarts", check=False)
    _one_line_refusal(proc, "no URLs to seed")


def test_crawl_refuses_an_item_type_that_is_not_an_item_class(tmp_path: Path) -> None:
    """QA round 2: ``--item-type mw.py:Tag`` (a plain class) was accepted and never used."""
    code = tmp_path / "mw.py"
    code.write_text("class Tag:\n    pass\n")
    store = tmp_path / "s.db"
    proc = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--store", str(store), "--item-type", f"{code}:Tag",
        check=False,
    )  # fmt: skip
    _one_line_refusal(proc, "item_type")
    assert "Tag is not a dataclass, attrs class, pydantic model or TypedDict" in proc.stderr
    assert not store.exists()
