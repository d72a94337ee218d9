"""``--frontier`` and ``--job`` of the commands that read a shared job (status, dashboard):
one check each (`crawlq.cli.options.shared_frontier`, `checked_job`), a usage error naming the
option, the password never shown, and no SQLite file created from a typo."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from crawlq.cli.app import cli


@pytest.mark.parametrize("command", ["status", "dashboard"])
def test_a_sqlite_frontier_is_refused_and_not_created(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [command, "--frontier", "typo.db", "--job", "j"])
    assert result.exit_code == 2
    assert "Invalid value for --frontier: 'typo.db': expected redis://" in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["status", "dashboard"])
def test_a_bad_job_name_is_named_and_the_password_never_shown(command: str) -> None:
    url = "redis://:hunter2@127.0.0.1:1/0"
    result = CliRunner().invoke(cli, [command, "--frontier", url, "--job", "no spaces"])
    assert result.exit_code == 2
    assert "Invalid value for --job: a job name must be" in result.output
    assert "'no spaces'" in result.output
    bad = CliRunner().invoke(cli, [command, "--frontier", "rediss:/:hunter2@h/0", "--job", "j"])
    assert bad.exit_code == 2
    assert "hunter2" not in result.output + bad.output
