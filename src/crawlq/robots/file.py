"""robots.txt, the file: what a fetch of it means, and how its bytes are read (RFC 9309).

`fetch_record` fetches ``scheme://host[:port]/robots.txt`` through `crawlq.fetch.Fetcher`
and returns the `crawlq.frontier.robots.RobotsRecord` to keep (§2.3.1's status rules):

* 2xx: ``parsed`` (§2.3.1.1), the body decoded by `robots_text`.
* Redirects followed up to five hops (§2.3.1.2); more, or one that cannot be followed (a
  bad ``Location``, a refused private address), and 3xx not followed: ``unavailable``.
* 4xx: ``unavailable``, everything allowed (§2.3.1.3).
* 5xx, 408, 429 and network failures: ``unreachable`` for ``failure_ttl_ms`` only (§2.3.1.4;
  crawlq retries the page instead of assuming a complete disallow, see `crawlq.robots`),
  or the earlier good copy kept for that long (§2.4).
* The page's own host refused by the private-address guard: `PrivateAddressError` is
  raised, nothing is recorded (no request was sent).

Reading the file:

* Encoding (§2.3: UTF-8): a leading byte order mark is dropped (it would otherwise glue onto
  the first ``User-agent`` line and lose the first group); a UTF-16 BOM selects UTF-16. A
  body that is not valid UTF-8 is read as latin-1, so that no line is lost to replacement
  characters.
* Size (§2.5): only the first `MAX_ROBOTS_BYTES` are parsed; a last line cut in half is
  dropped.
* The rules are parsed by protego; ``Crawl-delay`` (seconds, `crawl_delay_s`) and
  ``Sitemap:`` (`sitemaps`) are "other records" (§2.2.4), not part of the standard, read
  here for politeness and sitemaps.

Times are Unix ms.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
from urllib.parse import urljoin, urlsplit

from protego import Protego

from crawlq.errors import (
    PermanentFetchError,
    PrivateAddressError,
    ProxiesBenched,
    ProxyFailed,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.fetch import Fetcher
from crawlq.frontier.robots import RobotsRecord
from crawlq.web.addresses import bare_host

__all__ = [
    "MAX_ROBOTS_BYTES",
    "MAX_ROBOTS_REDIRECTS",
    "crawl_delay_s",
    "fetch_record",
    "robots_text",
    "sitemaps",
]

logger = logging.getLogger("crawlq.robots")

MAX_ROBOTS_BYTES = 500 * 1024
"""RFC 9309 §2.5: parse at least, and here at most, 500 KiB."""
MAX_ROBOTS_REDIRECTS = 5
"""RFC 9309 §2.3.1.2: follow at least five consecutive redirects (and here at most five)."""


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


async def fetch_record(
    fetcher: Fetcher,
    origin: str,
    earlier: RobotsRecord | None,
    *,
    now_ms: int,
    ttl_ms: int,
    failure_ttl_ms: int,
) -> RobotsRecord:
    """Fetch ``origin``'s robots.txt and return the record to keep (rules: module docstring).

    Args:
        fetcher: Fetches robots.txt; its timeouts and private-address guard apply.
        origin: ``scheme://host[:port]``.
        earlier: The last good copy, kept (for ``failure_ttl_ms``) if this fetch fails.
        now_ms: The fetch time, Unix ms.
        ttl_ms: Lifetime of a parsed or unavailable record, ms.
        failure_ttl_ms: Lifetime of an unreachable record, ms.

    Raises:
        PrivateAddressError: The origin's host itself is refused by the guard.
    """
    robots_url = f"{origin}/robots.txt"
    hops = 0

    def guard(_next_url: str) -> str | None:
        nonlocal hops
        hops += 1
        return "robots_redirect_limit" if hops > MAX_ROBOTS_REDIRECTS else None

    expires = now_ms + ttl_ms
    try:
        result = await fetcher.fetch(
            robots_url, redirect_guard=guard, truncate_body_bytes=MAX_ROBOTS_BYTES
        )
    except TooManyRedirects:  # §2.3.1.2: unavailable
        return RobotsRecord("unavailable", now_ms, expires, detail="too many redirects")
    except PrivateAddressError as exc:
        if bare_host(exc.host) == bare_host(urlsplit(robots_url).hostname or ""):
            raise  # the page's host itself is refused: `check` raises it for the page
        detail = f"a redirect to a refused private address ({exc.host})"
        logger.warning(
            "%s: %s; robots.txt unavailable, everything allowed (RFC 9309 §2.3.1.2)",
            robots_url,
            detail,
        )
        return RobotsRecord("unavailable", now_ms, expires, detail=detail)
    except PermanentFetchError as exc:
        if exc.reason == "bad_redirect":  # a redirect we cannot follow: unavailable
            return RobotsRecord("unavailable", now_ms, expires, detail=str(exc))
        return _unreachable(robots_url, str(exc), earlier, now_ms, failure_ttl_ms)
    except (ProxyFailed, ProxiesBenched):
        raise  # the proxy's failure, not the origin's: the engine tries another proxy
    except TransientFetchError as exc:  # includes RetryableStatus (5xx, 408, 429)
        return _unreachable(robots_url, str(exc), earlier, now_ms, failure_ttl_ms)
    if 200 <= result.status < 300:  # §2.3.1.1
        return RobotsRecord("parsed", now_ms, expires, body=robots_text(result.body))
    logger.debug("%s: status %d, robots.txt unavailable", robots_url, result.status)
    # 3xx not followed (§2.3.1.2), 4xx (§2.3.1.3)
    return RobotsRecord("unavailable", now_ms, expires, detail=f"status {result.status}")


def _unreachable(
    robots_url: str, detail: str, earlier: RobotsRecord | None, now: int, failure_ttl_ms: int
) -> RobotsRecord:
    expires = now + failure_ttl_ms
    if earlier is not None and earlier.status != "unreachable":
        logger.warning("%s unreachable, keeping the cached copy: %s", robots_url, detail)
        return RobotsRecord(  # §2.4: the earlier copy, until the next try
            earlier.status, now, expires, body=earlier.body, detail=f"unreachable: {detail}"
        )
    logger.warning("%s unreachable: %s", robots_url, detail)
    return RobotsRecord("unreachable", now, expires, detail=detail)
