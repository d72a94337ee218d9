"""The ``crawlq`` click group: one thin function per command, each in its own module.

Commands are imported when they are invoked (click's lazy-group pattern), so ``crawlq crawl``
does not pay for importing the test web server behind ``crawlq serve`` and vice versa.
"""

from __future__ import annotations

import importlib

import click

from crawlq import __version__

__all__ = ["cli"]

_COMMANDS = {
    "crawl": "crawlq.cli.crawl_cmd:crawl",
    "dashboard": "crawlq.cli.dashboard_cmd:dashboard",
    "dead": "crawlq.cli.dead_cmd:dead",
    "export": "crawlq.cli.export_cmd:export",
    "fetch": "crawlq.cli.try_cmd:fetch",
    "inspect": "crawlq.cli.inspect_cmd:inspect",
    "job": "crawlq.cli.jobs_cmd:job",
    "jobs": "crawlq.cli.jobs_cmd:jobs",
    "parse": "crawlq.cli.try_cmd:parse",
    "reparse": "crawlq.cli.reparse_cmd:reparse",
    "seed": "crawlq.cli.seed_cmd:seed",
    "serve": "crawlq.cli.serve_cmd:serve",
    "settings": "crawlq.cli.settings_cmd:settings",
    "shell": "crawlq.cli.shell_cmd:shell",
    "status": "crawlq.cli.status_cmd:status",
    "worker": "crawlq.cli.worker_cmd:worker",
}
"""Command name -> ``module:attribute`` of its click command."""


class _LazyGroup(click.Group):
    """A click group that imports a command's module only when the command is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crawlq")
def cli() -> None:
    """crawlq: a distributed web crawler and scraper."""
