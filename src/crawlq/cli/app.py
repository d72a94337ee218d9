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
    "crawl": "crawlq.cli.crawl:crawl",
    "dashboard": "crawlq.cli.dashboard:dashboard",
    "dead": "crawlq.cli.dead:dead",
    "export": "crawlq.cli.export:export",
    "fetch": "crawlq.cli.try_url:fetch",
    "inspect": "crawlq.cli.inspect:inspect",
    "job": "crawlq.cli.jobs:job",
    "jobs": "crawlq.cli.jobs:jobs",
    "local-worker": "crawlq.cli.local_worker:local_worker",
    "parse": "crawlq.cli.try_url:parse",
    "reparse": "crawlq.cli.reparse:reparse",
    "seed": "crawlq.cli.seed:seed",
    "serve": "crawlq.cli.serve:serve",
    "settings": "crawlq.cli.settings:settings",
    "shell": "crawlq.cli.shell:shell",
    "status": "crawlq.cli.status:status",
    "worker": "crawlq.cli.worker:worker",
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
