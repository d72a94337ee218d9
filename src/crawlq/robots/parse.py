"""Reading a robots.txt file: its text (RFC 9309 §2.3, §2.5) and the records crawlq uses.

* Encoding (§2.3: UTF-8): a leading byte order mark is dropped (it would otherwise glue onto
  the first ``User-agent`` line and lose the first group); a UTF-16 BOM selects UTF-16. A
  body that is not valid UTF-8 is read as latin-1, so that no line is lost to replacement
  characters.
* Size (§2.5): only the first `MAX_ROBOTS_BYTES` are parsed; a last line cut in half is
  dropped.
* The rules are parsed by protego; ``Crawl-delay`` (seconds) and ``Sitemap:`` are "other
  records" (§2.2.4), not part of the standard, read here for politeness and sitemaps.
"""

from __future__ import annotations

import codecs
import contextlib
from urllib.parse import urljoin

from protego import Protego

__all__ = ["MAX_ROBOTS_BYTES", "crawl_delay_s", "robots_text", "sitemaps"]

MAX_ROBOTS_BYTES = 500 * 1024
"""RFC 9309 §2.5: parse at least, and here at most, 500 KiB."""


def robots_text(body: bytes) -> str:
    """Decode robots.txt (RFC 9309 §2.3: UTF-8), dropping a line cut by the size limit (§2.5).

    A UTF-8 byte order mark is dropped; a UTF-16 one selects UTF-16. A body that is not
    valid UTF-8 is decoded as latin-1, which keeps every line (the rules' ASCII is the same).
    """
    cut = len(body) >= MAX_ROBOTS_BYTES
    if body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = body[: len(body) // 2 * 2].decode("utf-16", errors="replace")
        return text[: text.rfind("\n") + 1] if cut else text
    body = body.removeprefix(codecs.BOM_UTF8)
    if cut:
        body = body[: body.rfind(b"\n") + 1]
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("latin-1")


def crawl_delay_s(rules: Protego | None, token: str) -> float | None:
    """``Crawl-delay`` of the group for product ``token``, in seconds, or None."""
    if rules is None:
        return None
    delay = rules.crawl_delay(token)
    return None if delay is None else float(delay)


def sitemaps(rules: Protego | None, origin: str) -> tuple[str, ...]:
    """The ``Sitemap:`` URLs of a parsed file, resolved against its URL, unvalidated."""
    if rules is None:
        return ()
    robots_url = f"{origin}/robots.txt"
    found: list[str] = []
    for line in rules.sitemaps:
        with contextlib.suppress(ValueError):  # web input: "http://[bad" and the like
            if line.strip():
                found.append(urljoin(robots_url, line.strip()))
    return tuple(found)
