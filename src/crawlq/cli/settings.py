"""``crawlq settings``: every setting with its option, environment variable, default and unit."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import json
import textwrap
from collections.abc import Sequence
from typing import Any

import click

from crawlq.cli.option_settings import setting_of_option
from crawlq.cli.options import wide_option
from crawlq.cli.terminal import table_width
from crawlq.settings import Settings, suggest

__all__ = ["settings", "settings_table"]

_COMMANDS = ("crawl", "seed", "worker", "reparse")
"""The commands whose options set settings (their names are looked up in the CLI group)."""
_UNITS = {"_s": "seconds", "_bytes": "bytes"}


@click.command()
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--json", "as_json", is_flag=True, help="A JSON array, with each description.")
@wide_option
def settings(names: tuple[str, ...], as_json: bool, wide: bool) -> None:
    """List every setting: its command-line option, environment variable, default and unit.

    A setting comes, lowest precedence first, from its default, a --config TOML file (keys
    are the setting names), a spider's custom_settings, its CRAWLQ_<NAME> environment
    variable, then its option. With NAME..., show only those settings, with their
    descriptions (a misspelt NAME gets suggestions).

    The table fits the terminal (200 columns off one): a default too long for it is cut
    with …; --wide prints it whole, --json too.
    """
    rows = settings_table()
    if names:
        known = {row["setting"]: row for row in rows}
        chosen = []
        for name in names:
            key = name.lower().removeprefix("--").replace("-", "_").removeprefix("crawlq_")
            key = key if key in known else setting_of_option(key) or key  # an option's name
            if key not in known:
                close = suggest(key)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                raise click.BadParameter(f"no setting {name!r}{hint}", param_hint="NAME")
            chosen.append(known[key])
        rows = chosen
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = table_width(wide=wide)
    cells = _fitted([[_cell(row[c]) for c in _COLUMNS] for row in rows], width)
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(_COLUMNS)]
    click.echo(_line(_COLUMNS, widths, width))
    fill = 88 if width is None else max(min(88, width - 4), 20)
    for row, line in zip(rows, cells, strict=True):
        click.echo(_line(line, widths, width))
        if names and row["description"]:
            click.echo(textwrap.indent(textwrap.fill(row["description"], fill), "    "))


_COLUMNS = ("setting", "option", "environment", "default", "unit")
_DEFAULT = _COLUMNS.index("default")


def _line(cells: Sequence[str], widths: list[int], width: int | None) -> str:
    """One row, padded to the column widths; cut with … past ``width`` (a narrow terminal)."""
    text = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _fitted(cells: list[list[str]], width: int | None) -> list[list[str]]:
    """The table's cells with each default cut (``…``) so that a line fits ``width``.

    The other columns are short names and are kept whole; None: no limit (``--wide``).
    """
    if width is None:
        return cells
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(_COLUMNS)]
    others = sum(w for i, w in enumerate(widths) if i != _DEFAULT) + 2 * (len(_COLUMNS) - 1)
    room = max(width - others, len("default"))
    for line in cells:
        if len(line[_DEFAULT]) > room:
            line[_DEFAULT] = line[_DEFAULT][: room - 1] + "…"
    return cells


def settings_table() -> list[dict[str, Any]]:
    """One row per setting, in declaration order.

    Keys: ``setting``, ``option`` (the command-line option, or None: file and environment
    only), ``environment`` (``CRAWLQ_<NAME>``), ``default`` (JSON-ready: a list for a
    tuple), ``unit`` (``seconds``, ``bytes`` or None) and ``description`` (the field's
    docstring in `crawlq.settings.Settings`).
    """
    options = _options()
    docs = _descriptions()
    rows = []
    for f in dataclasses.fields(Settings):
        if f.name not in Settings.field_names():  # explicit; host_auth (from hosts tables)
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        if f.default_factory is not dataclasses.MISSING:  # pragma: no cover - none today
            default = f.default_factory()
        unit = next((u for suffix, u in _UNITS.items() if f.name.endswith(suffix)), None)
        rows.append(
            {
                "setting": f.name,
                "option": options.get(f.name),
                "environment": f"CRAWLQ_{f.name.upper()}",
                "default": list(default) if isinstance(default, tuple) else default,
                "unit": unit,
                "description": docs.get(f.name, ""),
            }
        )
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


@functools.cache
def _options() -> dict[str, str]:
    """Setting name -> its option, from the options of the commands that set settings."""
    from crawlq.cli.app import cli

    found: dict[str, str] = {}
    ctx = click.Context(cli)
    for name in _COMMANDS:
        command = cli.get_command(ctx, name)
        if command is None:  # pragma: no cover - the group lists them
            continue
        for param in command.params:
            if isinstance(param, click.Option) and param.name and not param.hidden:
                setting = setting_of_option(param.name)
                if setting is not None:
                    found.setdefault(setting, max(param.opts, key=len))
    return found


@functools.cache
def _descriptions() -> dict[str, str]:
    """Setting name -> its attribute docstring in `Settings`, whitespace collapsed."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(Settings)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs
