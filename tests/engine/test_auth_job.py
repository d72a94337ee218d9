"""A shared job never carries credentials: not stored with it, never adopted from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlq.engine.job import bind_job
from crawlq.errors import ConfigError
from crawlq.frontier import open_frontier
from crawlq.settings import Settings


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        '[hosts."docs.example.com"]\nauth_user = "alice"\nauth_password_env = "DOCS_PW"\n'
        'delay_s = 2\n[hosts."api.example.com"]\nauth_token_env = "API_TOKEN"\n'
    )
    return path


async def test_a_job_stores_the_hosts_politeness_without_the_credentials(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    env = {"DOCS_PW": "pw-1", "API_TOKEN": "tok-1"}
    settings = Settings.build(
        file=_config(tmp_path), env=env, cli={"frontier": redis_url, "job": job}
    )
    assert settings.hosts == (("docs.example.com", 2.0, None),)  # the token-only table: none
    assert len(settings.host_auth) == 2
    frontier = await open_frontier(redis_url, job=job, create=True)
    try:
        bound = await bind_job(frontier, settings, create=True)
        stored = await frontier.job_settings(None)
    finally:
        await frontier.close()
    assert stored is not None
    text = json.dumps(stored)
    for word in ("auth", "DOCS_PW", "API_TOKEN", "alice", "pw-1", "tok-1"):
        assert word not in text, word
    assert stored["hosts"] == [["docs.example.com", 2.0, None]]
    assert bound.host_auth == settings.host_auth  # the worker keeps its own


async def test_a_jobs_stored_hosts_never_bring_credentials_to_a_worker(
    redis_url: str, job: str
) -> None:
    planted = {"attacker.test": {"auth_token_env": "HOME"}}  # a value that is always set
    frontier = await open_frontier(redis_url, job=job, create=True)
    try:
        worker = Settings(frontier=redis_url, job=job, store="crawlq.db")
        proposed = {"hosts": planted, "store": "crawlq.db"}
        assert (await frontier.job_settings(proposed)) is not None
        with pytest.raises(ConfigError) as caught:
            await bind_job(frontier, worker, create=False)
    finally:
        await frontier.close()
    assert caught.value.name == "hosts"
    assert "hosts.attacker.test: credentials (auth_*) are read only from this process's " in str(
        caught.value
    )
    assert f"never from job {job!r}'s settings in its frontier" in str(caught.value)


@pytest.mark.parametrize("source", ["spider", "cli"])
def test_credentials_from_a_spider_or_the_command_line_are_refused(source: str) -> None:
    hosts = {"hosts": {"a.test": {"auth_token_env": "HOME"}}}
    args = {"spider_settings": hosts} if source == "spider" else {"cli": hosts}
    with pytest.raises(ConfigError, match=r"credentials \(auth_\*\) are read only from"):
        Settings.build(env={}, **args)  # type: ignore[arg-type]
