"""A static site for tests: generated or unpacked into a directory, then served from it.

* `generate_site` writes a website with the shape of a real manual, for tests where no corpus
  is at hand: ``n_pages`` HTML files that link densely to each other with every kind of href
  a crawler must handle (relative, root-relative, dot segments, fragments, duplicates,
  off-site, mailto/javascript, assets), all reachable from ``index.html``.
* `unpack_corpus` extracts a ``.tar.gz`` site corpus safely (PEP 706's ``"data"`` filter).
* `make_static_app` serves a directory of files over HTTP; `slow_pages` makes it answer late.
"""

from __future__ import annotations

import asyncio
import mimetypes
import random
import tarfile
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from crawlq.testing.request_log import RequestLog

__all__ = ["generate_site", "make_static_app", "slow_pages", "unpack_corpus"]

_ROOT = web.AppKey("crawlq_static_root", Path)


def generate_site(dest: str | Path, n_pages: int = 400, seed: int = 7) -> Path:
    """Write a site of ``n_pages`` linked pages (index.html included) and return its root.

    Pages live at the root and in a ``sub/`` folder. Page ``i`` links to page ``i + 1`` (so
    every page is reachable from the index), to 10-30 random pages with mixed href forms, and
    to things a crawler must not follow as pages (an image, a stylesheet, ``mailto:``, an
    off-site host). No link points at a missing file.

    Args:
        dest: Directory to write into (created if missing).
        n_pages: Number of HTML pages, at least 2.
        seed: Seed of the link pattern (same seed, same site).

    Returns:
        ``dest`` as a Path.
    """
    if n_pages < 2:
        raise ValueError(f"n_pages must be at least 2, got {n_pages}")
    root = Path(dest)
    (root / "sub").mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    paths = ["index.html"] + [
        f"sub/page-{i}.html" if i % 3 == 0 else f"page-{i}.html" for i in range(1, n_pages)
    ]
    (root / "style.css").write_text("body { font-family: serif; }\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    for i, path in enumerate(paths):
        in_sub = path.startswith("sub/")
        targets = [
            paths[(i + 1) % n_pages],
            *rng.sample(paths, k=min(n_pages, rng.randint(10, 30))),
        ]
        links = [_href(target, in_sub, rng) for target in targets]
        links.append(_href(targets[0], in_sub, rng))  # a duplicate
        extras = [
            "mailto:docs@example.invalid",
            "javascript:void(0)",
            "http://offsite.invalid/page.html",
            ("../" if in_sub else "") + "logo.png",
        ]
        body = "\n".join(
            f'<li><a href="{href}">link {n}</a></li>' for n, href in enumerate(links + extras)
        )
        html = (
            '<!DOCTYPE html><html><head><meta charset="utf-8">'
            f"<title>Generated page {i}</title>"
            f'<link rel="stylesheet" href="{"../" if in_sub else ""}style.css"></head>'
            f'<body><h1 id="top">Page {i}</h1><p>{"Lorem ipsum. " * rng.randint(20, 200)}</p>'
            f"<ul>{body}</ul></body></html>"
        )
        (root / path).write_text(html, encoding="utf-8")
    return root


def _href(target: str, from_sub: bool, rng: random.Random) -> str:
    form = rng.randrange(5)
    fragment = "#s" + str(rng.randrange(9)) if rng.random() < 0.3 else ""
    if form == 0:
        return "/" + target + fragment
    if form == 1 and not from_sub:
        return "./" + target + fragment
    if form == 2:
        return "/sub/../" + target + fragment
    if from_sub:
        return (
            ("" if target.startswith("sub/") and form == 3 else "../")
            + (target.removeprefix("sub/") if form == 3 and target.startswith("sub/") else target)
            + fragment
        )
    return target + fragment


def slow_pages(seconds: float) -> Middleware:
    """An aiohttp middleware that answers every page but ``/robots.txt`` ``seconds`` late.

    For tests that need a worker mid-fetch most of the time (a kill, a restart).
    """

    @web.middleware
    async def slow(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path != "/robots.txt":
            await asyncio.sleep(seconds)
        return await handler(request)

    return slow


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
