from __future__ import annotations

from pathlib import Path

import pytest

from crawlq import __version__
from crawlq.errors import ConfigError
from crawlq.settings import Settings, parse_bytes


def test_defaults_are_polite() -> None:
    s = Settings.build(env={})
    assert (s.delay_s, s.host_concurrency, s.concurrency, s.max_retries) == (1.0, 1, 16, 3)
    assert s.obey_robots
    assert s.max_body_bytes == 10 * 1024 * 1024
    assert s.effective_visibility_timeout_s == 4 * s.timeout_s
    given = Settings.build(env={}, cli={"visibility_timeout_s": 7})
    assert given.effective_visibility_timeout_s == 7


def test_the_default_user_agent_names_the_version() -> None:
    major, minor = __version__.split(".")[:2]
    assert Settings.build(env={}).user_agent == f"crawlq/{major}.{minor}"


def test_precedence_defaults_file_spider_env_cli(tmp_path: Path) -> None:
    conf = tmp_path / "crawl.toml"
    conf.write_text('delay_s = 2.0\nconcurrency = 3\nuser_agent = "file"\nmax_depth = 4\n')
    s = Settings.build(
        file=conf,
        spider_settings={"concurrency": 5, "user_agent": "spider"},
        env={"CRAWLQ_USER_AGENT": "env", "CRAWLQ_MAX_DEPTH": "6", "HOME": "/x"},
        cli={"max_depth": 7, "delay_s": None},
    )
    assert s.delay_s == 2.0  # file (the CLI value None means "not given")
    assert s.concurrency == 5  # spider over file
    assert s.user_agent == "env"  # env over spider
    assert s.max_depth == 7  # cli over env


def test_env_values_are_parsed() -> None:
    s = Settings.build(
        env={
            "CRAWLQ_OBEY_ROBOTS": "false",
            "CRAWLQ_MAX_BODY_BYTES": "2MiB",
            "CRAWLQ_ALLOWED_DOMAINS": "a.test, b.test",
            "CRAWLQ_TEST_REDIS_URL": "ignored: test fixtures' own variables",
        }
    )
    assert not s.obey_robots
    assert s.max_body_bytes == 2 * 1024 * 1024
    assert s.allowed_domains == ("a.test", "b.test")


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ({"cli": {"concurency": 3}}, "concurency"),
        ({"env": {"CRAWLQ_DELAY": "1"}}, "delay"),
        ({"spider_settings": {"DOWNLOAD_DELAY": 1}}, "DOWNLOAD_DELAY"),
    ],
)
def test_unknown_keys_are_errors_naming_the_key(source: dict, name: str) -> None:
    kwargs = {"env": {}, **source}
    with pytest.raises(ConfigError) as info:
        Settings.build(**kwargs)
    assert name in str(info.value)


@pytest.mark.parametrize(
    ("cli", "name"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"delay_s": -1}, "delay_s"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"include": ("(",)}, "include"),
        ({"max_pages": -5}, "max_pages"),
        ({"concurrency": "many"}, "concurrency"),
        ({"obey_robots": "perhaps"}, "obey_robots"),
        ({"user_agent": ""}, "user_agent"),
        ({"user_agent": "  "}, "user_agent"),
        ({"user_agent": "/1.0"}, "user_agent"),
        ({"user_agent": "bot/1\r\nX-Evil: 1"}, "user_agent"),
    ],
)
def test_bad_values_are_errors_naming_the_setting(cli: dict, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(env={}, cli=cli)
    assert str(info.value).startswith(name)


def test_unreadable_settings_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("delay_s = [")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        Settings.build(file=bad, env={})


@pytest.mark.parametrize(
    ("text", "value"), [("10MiB", 10485760), ("500 kB", 500000), ("2048", 2048), ("1.5KiB", 1536)]
)
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


def test_parse_bytes_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="byte size"):
        parse_bytes("ten megs")


@pytest.mark.parametrize(
    ("scrapy", "ours"),
    [
        ("DOWNLOAD_DELAY", "delay_s"),
        ("CONCURRENT_REQUESTS", "concurrency"),
        ("USER_AGENT_X", None),
        ("ROBOTSTXT_OBEY", "obey_robots"),
        ("DEPTH_LIMIT", "max_depth"),
        ("CLOSESPIDER_PAGECOUNT", "max_pages"),
        ("ITEM_PIPELINES", "item_pipelines"),
        ("DOWNLOADER_MIDDLEWARES", "downloader_middlewares"),
    ],
)
def test_scrapy_setting_names_suggest_crawlqs_and_are_not_accepted(
    scrapy: str, ours: str | None
) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(env={}, spider_settings={scrapy: 0})
    if ours is not None:
        assert f"did you mean {ours}?" in str(info.value)


def test_crawl_help_names_every_output_format() -> None:
    from click.testing import CliRunner

    from crawlq.cli.app import cli

    out = CliRunner().invoke(cli, ["crawl", "--help"]).output
    assert "(.jsonl, .json, .csv, .parquet)" in " ".join(out.split())
