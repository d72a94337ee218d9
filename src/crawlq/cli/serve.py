"""``crawlq serve``: serve a directory or a ``.tar.gz`` site on loopback, to try crawlq on."""

from __future__ import annotations

import signal
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

import click

from crawlq.testing.static import generate_site, make_static_app, unpack_corpus
from crawlq.testing.thread import ServerThread

__all__ = ["serve"]


@click.command()
@click.argument("site", type=click.Path(exists=True), required=False)
@click.option(
    "--generate",
    type=int,
    default=None,
    metavar="N",
    help="Serve a generated site of N linked pages instead of SITE.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="A loopback address.")
@click.option("--port", type=int, default=8000, show_default=True)
def serve(site: str | None, generate: int | None, host: str, port: int) -> None:
    """Serve SITE (a directory, or a .tar.gz of one) over HTTP on a loopback address.

    Runs until Ctrl-C or SIGTERM. Only loopback addresses are accepted: this is a test
    server for crawling your own copy of a site, not a web server.
    """
    with tempfile.TemporaryDirectory(prefix="crawlq-serve-") as tmp:
        if not 0 < port < 65536:
            raise click.BadParameter(f"{port} is not a TCP port (1-65535)", param_hint="--port")
        if site is not None and generate is None:
            path = Path(site)
            try:
                root = unpack_corpus(path, tmp) if path.is_file() else path
            except (tarfile.TarError, FileNotFoundError, OSError) as exc:
                raise click.BadParameter(
                    f"{site}: not a directory or a .tar.gz site with an index.html ({exc})",
                    param_hint="SITE",
                ) from None
        elif generate is not None and site is None:
            if generate < 2:
                raise click.BadParameter(
                    f"need at least 2 pages, got {generate}", param_hint="--generate"
                )
            root = generate_site(tmp, n_pages=generate)
        else:
            raise click.UsageError("give either SITE or --generate N")
        try:
            server = ServerThread(make_static_app(root), host=host, port=port)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--host") from None
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        try:
            server.start()
        except (OSError, RuntimeError) as exc:
            click.echo(f"crawlq: cannot serve on {host}:{port}: {exc}", err=True)
            sys.exit(1)
        try:
            click.echo(f"serving {root} at {server.base_url}/ (Ctrl-C to stop)", err=True)
            stop.wait()
        finally:
            server.stop()
