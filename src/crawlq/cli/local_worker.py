"""``crawlq local-worker`` (hidden): a worker process of an embedded crawl on several cores.

Started by ``crawlq crawl`` (`crawlq.engine.local_crawl.LocalProcessesCrawl`), never by hand:
it connects to its parent's socket, takes its settings from it and works the parent's
frontier and store (`crawlq.engine.owner_client.LocalWorker`). It prints no progress or
summary (its parent reports the crawl once), ignores SIGINT (the parent forwards a stop as
SIGTERM) and ends when the crawl is drained, when stopped, or when its parent is gone.
"""

from __future__ import annotations

import click

from crawlq.cli.running import run_or_exit
from crawlq.cli.terminal import configure_logging
from crawlq.engine.owner_client import LocalWorker

__all__ = ["local_worker"]


@click.command(hidden=True)
@click.option("--socket", "path", required=True, help="The parent's socket.")
@click.option("-q", "--quiet", is_flag=True, help="Errors only.")
@click.option("-v", "--verbose", count=True, help="More log lines (repeatable).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text")
def local_worker(path: str, quiet: bool, verbose: int, log_format: str) -> None:
    """Work the frontier and store of the crawl whose socket is PATH (module docstring)."""
    configure_logging(-1 if quiet else verbose, None, log_format)
    run_or_exit(LocalWorker(path), None, failure="worker process stopped", child=True)
