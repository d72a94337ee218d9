"""A generated website with the shape of a real manual, for tests where no corpus is at hand.

`generate_site` writes ``n_pages`` HTML files that link densely to each other with every
kind of href a crawler must handle (relative, root-relative, dot segments, fragments,
duplicates, off-site, mailto/javascript, assets), all reachable from ``index.html``.
"""

from __future__ import annotations

import random
from pathlib import Path

__all__ = ["generate_site"]


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
