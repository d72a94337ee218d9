"""crawlq.secrecy: passwords never shown, never stored; private file modes; store strings."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from crawlq.errors import ConfigError, FrontierUnavailable, InvalidURL
from crawlq.secrecy import (
    create_private,
    has_password,
    quote_userinfo,
    redact,
    without_password,
)
from crawlq.settings import Settings, check_store


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://me:s3cret@h:6380/1", "rediss://me:***@h:6380/1"),
        ("postgresql://me:s3@cret@db:5432/x", "postgresql://me:***@db:5432/x"),  # unescaped @
        ("postgresql://me:s3%40cret@db/x", "postgresql://me:***@db/x"),
        ("amqp://guest:s3cret@127.0.0.1:5672//", "amqp://guest:***@127.0.0.1:5672//"),
        ("redis:/:s3cret@h:6379/0", "redis:/:***@h:6379/0"),  # a typo in the scheme
        ("redsi://:s3cret@h/0", "redsi://:***@h/0"),
        ("'redis//:s3cret@h:6391/0': expected", "'***@h:6391/0': expected"),  # QA: no ":/"
        ("redis:s3cret@h:6391/0", "***@h:6391/0"),
        ("s3cret@127.0.0.1:6391", "***@127.0.0.1:6391"),  # no scheme at all, a port
        ("bad URL 'redis://:s3cret@h/x': want", "bad URL 'redis://:***@h/x': want"),
        ("host=db password=s3cret dbname=y", "host=db password=*** dbname=y"),
        ("postgresql://u@h/d?password=s3cret&x=1", "postgresql://u@h/d?password=***&x=1"),
        (
            "a redis://:one@h/0 and postgres://u:two@h/d",
            "a redis://:***@h/0 and postgres://u:***@h/d",
        ),
    ],
)
def test_redact_hides_every_password(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert "s3" not in redact(text) and "cret" not in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://postgres@127.0.0.1:5432/test",  # a user name is not a secret
        "http://h.test/a@b?c=d@e",
        "mailto:x@example.org",
        "/var/crawl/crawlq.db",
        "invalid URL 'ftp://x': scheme 'ftp' is not http or https",
    ],
)
def test_redact_leaves_text_without_passwords_alone(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("postgresql://me:s3cret@db:5432/x", "postgresql://me@db:5432/x"),
        ("postgresql://me:s3@cret@db/x", "postgresql://me@db/x"),
        ("redis://:s3cret@h:6379/0", "redis://h:6379/0"),
        (
            "postgresql://me@db/x?sslmode=require&password=s3cret",
            "postgresql://me@db/x?sslmode=require",
        ),
        ("postgresql://me@db/x?password=s3cret", "postgresql://me@db/x"),
        ("postgresql://me@db/x", "postgresql://me@db/x"),
        ("/var/crawl/crawlq.db", "/var/crawl/crawlq.db"),
    ],
)
def test_without_password(url: str, stored: str) -> None:
    assert without_password(url) == stored
    assert has_password(url) == (url != stored)


def test_errors_never_carry_a_password() -> None:
    for error in (
        ConfigError("frontier", "bad Redis URL 'redis://:s3cret@h/x'"),
        FrontierUnavailable("Redis unavailable at redis://u:s3cret@h/0"),
        InvalidURL("ftp://u:s3cret@h/", "scheme 'ftp' is not http or https"),
    ):
        assert "s3cret" not in str(error)
        assert "***" in str(error)


@pytest.mark.parametrize(
    "store",
    [
        "host=db password=s3cret dbname=crawl",
        "dbname=crawl user=me password=s3cret",
        "password=s3cret",
        "redis://:s3cret@h:6379/0",
        "mysql://u:s3cret@h/db",
    ],
)
def test_a_store_that_is_neither_a_path_nor_a_url_is_refused(store: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_store(store)
    assert info.value.name == "store"
    assert "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match=r"^store: "):
        Settings.build(env={}, cli={"store": store})


@pytest.mark.parametrize(
    "store",
    [
        "crawlq.db",
        "/var/crawl/run 1/crawlq.db",
        "crawl=1.db",  # one word with a '=' is still a file name
        "sqlite:///crawlq.db",
        "postgresql://me:s3cret@db/x",
        "postgres://me@db/x",
    ],
)
def test_paths_and_supported_urls_are_stores(store: str) -> None:
    assert check_store(store) == store


def test_create_private_honours_a_stricter_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        assert create_private(tmp_path / "a")
        os.umask(0o077)
        assert create_private(tmp_path / "b", 0o640)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o600
    (tmp_path / "c").write_text("mine")
    (tmp_path / "c").chmod(0o644)
    assert not create_private(tmp_path / "c")  # an existing file is left as it is
    assert (tmp_path / "c").read_text() == "mine"
    assert stat.S_IMODE((tmp_path / "c").stat().st_mode) == 0o644


def test_quote_userinfo_takes_the_last_at_as_the_separator() -> None:
    assert quote_userinfo("postgresql://me:p@ss@db/x") == "postgresql://me:p%40ss@db/x"
    assert quote_userinfo("postgresql://me:pass@db/x?a=b@c") == "postgresql://me:pass@db/x?a=b@c"
    assert quote_userinfo("/a@b/c.db") == "/a@b/c.db"


def test_worker_children_get_no_frontier_or_store_on_their_command_line() -> None:
    from crawlq.cli.worker import _without_options

    argv = ["--frontier", "redis://:pw@h/0", "--job", "j", "--store=postgresql://u:pw@h/d",
            "--processes", "4", "--processes=2", "-q"]  # fmt: skip
    assert _without_options(argv, ("--processes", "--frontier", "--store")) == ["--job", "j", "-q"]
