"""Serve a directory of files over HTTP, and unpack a site corpus to serve."""

from __future__ import annotations

import mimetypes
import tarfile
from pathlib import Path

from aiohttp import web

from crawlq.testing.log import RequestLog

__all__ = ["make_static_app", "unpack_corpus"]

_ROOT = web.AppKey("crawlq_static_root", Path)


def make_static_app(root: str | Path, log: RequestLog | None = None) -> web.Application:
    """Build an application that serves the files under ``root``.

    ``/`` and any directory serve its ``index.html`` (a directory path without the trailing
    slash is redirected to it with a 301); other paths serve the file with the
    content type guessed from its extension (``mimetypes``); a missing file, or a path that
    escapes ``root``, is 404.

    Args:
        root: The directory to serve.
        log: Records every request when given.

    Returns:
        An aiohttp application (serve it with `crawlq.testing.ServerThread`).

    Raises:
        NotADirectoryError: ``root`` is not a directory.
    """
    base = Path(root).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"not a directory: {root}")
    app = web.Application(middlewares=[log.middleware()] if log is not None else [])
    app[_ROOT] = base
    app.router.add_get("/{path:.*}", _serve)
    return app


async def _serve(request: web.Request) -> web.StreamResponse:
    base = request.app[_ROOT]
    target = (base / request.match_info["path"]).resolve()
    if not target.is_relative_to(base):
        raise web.HTTPNotFound()
    if target.is_dir():
        if not request.path.endswith("/"):  # as real servers do, so relative links resolve
            raise web.HTTPMovedPermanently(request.rel_url.with_path(request.path + "/"))
        target = target / "index.html"
    if not target.is_file():
        raise web.HTTPNotFound()
    # The whole file in one response, not aiohttp's FileResponse: a client killed
    # mid-download would leave FileResponse's open file to the garbage collector.
    kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    return web.Response(body=target.read_bytes(), content_type=kind)


def unpack_corpus(tarball: str | Path, dest: str | Path) -> Path:
    """Extract a ``.tar.gz`` site corpus safely and return the directory holding its index.

    Extraction uses the tarfile ``"data"`` filter (PEP 706): no absolute paths, no ``..``,
    no links out of ``dest``, no device files.

    Args:
        tarball: Path of the ``.tar.gz`` archive.
        dest: Directory to extract into (created if missing).

    Returns:
        The shallowest directory under ``dest`` that contains ``index.html``.

    Raises:
        FileNotFoundError: The archive holds no ``index.html``.
        tarfile.TarError: The archive is corrupt or has a member the filter refuses.
    """
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:gz") as archive:
        archive.extractall(out, filter="data")
    found = sorted(out.rglob("index.html"), key=lambda p: (len(p.parts), str(p)))
    if not found:
        raise FileNotFoundError(f"no index.html in {tarball}")
    return found[0].parent
