"""Help texts name every form the code accepts (issue 21: `export --help` left out Parquet).

Read from the click commands themselves, in process: what ``crawlq --help`` and ``crawlq CMD
--help`` print.
"""

from __future__ import annotations

import click
import pytest

from crawlq.cli.app import cli

_FORMAT_WORDS = {
    "jsonl": "JSON Lines",
    "json": "JSON array",
    "csv": "CSV",
    "parquet": "Parquet",
}


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    found = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            sub = click.Context(command)
            found += [
                (f"{name} {s}", command.get_command(sub, s)) for s in command.list_commands(sub)
            ]
        else:
            found.append((name, command))
    return [(n, c) for n, c in found if c is not None]


def test_the_export_summary_names_every_format_of_format() -> None:
    export = dict(_commands())["export"]
    [fmt] = [p for p in export.params if p.name == "fmt"]
    assert isinstance(fmt.type, click.Choice)
    line = export.get_short_help_str(limit=60)  # as `crawlq --help` lists it
    for choice in fmt.type.choices:
        assert _FORMAT_WORDS[str(choice)] in line, line


@pytest.mark.parametrize(("name", "command"), _commands(), ids=lambda v: str(v))
def test_every_frontier_option_names_the_redis_schemes_the_code_takes(
    name: str, command: click.Command
) -> None:
    for param in command.params:
        if isinstance(param, click.Option) and "--frontier" in param.opts:
            text = param.help or ""
            assert "redis://" in text, (name, text)
            assert "rediss://" in text and "unix://" in text, (name, text)
