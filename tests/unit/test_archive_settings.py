"""Settings of results: WARC directory and file size, bodies, batch flushes; their CLI options."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crawlq.errors import ConfigError
from crawlq.settings import Settings
from tests.conftest import run_crawlq


def test_defaults_archive_nothing_and_flush_in_small_batches() -> None:
    s = Settings.build(env={})
    assert (s.warc_dir, s.store_body) == (None, False)
    assert s.warc_max_size_bytes == 1_000_000_000
    assert (s.flush_max_items, s.flush_interval_s) == (64, 0.05)


def test_warc_settings_parse_sizes_and_make_the_directory_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    s = Settings.build(
        env={"CRAWLQ_WARC_MAX_SIZE_BYTES": "1GiB", "CRAWLQ_FLUSH_INTERVAL_S": "0.5"},
        cli={"warc_dir": "archive", "store_body": True, "flush_max_items": 500},
    )
    assert s.warc_dir == os.path.join(str(tmp_path), "archive")
    assert s.warc_max_size_bytes == 1024**3
    assert (s.store_body, s.flush_max_items, s.flush_interval_s) == (True, 500, 0.5)


@pytest.mark.parametrize(
    ("values", "name"),
    [
        ({"warc_max_size_bytes": "0"}, "warc_max_size_bytes"),
        ({"warc_max_size_bytes": "lots"}, "warc_max_size_bytes"),
        ({"warc_dir": " "}, "warc_dir"),
        ({"flush_max_items": "0"}, "flush_max_items"),
        ({"flush_interval_s": "-1"}, "flush_interval_s"),
    ],
)
def test_bad_values_name_the_setting(values: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(env={}, cli=values)
    assert info.value.name == name


def test_a_bad_warc_size_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--store", str(tmp_path / "c.db"),
        "--warc", str(tmp_path / "w"), "--warc-max-size", "huge", check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "warc_max_size_bytes" in proc.stderr and "huge" in proc.stderr
    assert not (tmp_path / "w").exists()


def test_an_s3_warc_url_is_kept_one_way_and_the_spool_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    s = Settings.build(
        env={"CRAWLQ_WARC_SPOOL_DIR": "spool"}, cli={"warc_dir": "s3://my-bucket/crawls/a/"}
    )
    assert s.warc_dir == "s3://my-bucket/crawls/a"
    assert s.warc_spool_dir == os.path.join(str(tmp_path), "spool")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("s3://", "names no bucket"),
        ("gs://bucket/x", "give a directory or an s3://bucket/prefix URL"),
        ("s3:/crawls/x", "give a directory or an s3://bucket/prefix URL"),  # one slash
        ("S3:crawls", "give a directory or an s3://bucket/prefix URL"),
        ("s3://me:pw@bucket/x", "credentials do not go in the URL"),
    ],
)
def test_a_bad_warc_url_names_the_setting_and_hides_credentials(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build(env={}, cli={"warc_dir": value})
    assert info.value.name == "warc_dir" and says in str(info.value)
    assert "pw" not in str(info.value).replace("prefix", "")
