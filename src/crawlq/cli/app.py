"""The ``crawlq`` click group: one thin function per command, each in its own module."""

from __future__ import annotations

import click

from crawlq import __version__
from crawlq.cli.crawl_cmd import crawl
from crawlq.cli.export_cmd import export
from crawlq.cli.seed_cmd import seed
from crawlq.cli.serve_cmd import serve
from crawlq.cli.status_cmd import status
from crawlq.cli.worker_cmd import worker

__all__ = ["cli"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="crawlq")
def cli() -> None:
    """crawlq: a distributed web crawler and scraper."""


cli.add_command(crawl)
cli.add_command(export)
cli.add_command(serve)
cli.add_command(seed)
cli.add_command(worker)
cli.add_command(status)
