r"""Cookie rules that need no HTTP client: what a request's cookies may be, and their fingerprint.

A request's cookies (`crawlq.request.CrawlRequest.cookies`) come from spiders, inbox entries,
task messages and the ``Set-Cookie`` answers of redirects, so they are untrusted input. They
must be what a server would send (RFC 6265 §4.1.1), which is also what is safe to write into
a ``Cookie`` header: a name is a token (RFC 9110 §5.6.2), a value is ``*cookie-octet``,
optionally in double quotes (printable ASCII without space, ``"``, ``,``, ``;`` and ``\``),
so no value can end the header or add another.

Sizes follow RFC 6265 §6.1 (at least 4096 bytes per cookie) and what servers accept in one
header line (8190 bytes: Apache's ``LimitRequestFieldSize``, nginx's default buffer, aiohttp's
own cap on a ``Cookie`` header). The jar a worker keeps is `crawlq.fetch`'s business; the
rules here are pure.

Cookie values are secrets (session ids, login tokens): no message made here shows one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

__all__ = [
    "MAX_COOKIES",
    "MAX_COOKIE_BYTES",
    "MAX_COOKIE_HEADER_BYTES",
    "NO_COOKIES",
    "check_cookies",
    "fit_cookies",
    "revisit_fingerprint",
]

MAX_COOKIES = 150
"""Most cookies one request may carry (the most a browser sends in one ``Cookie`` header)."""

MAX_COOKIE_BYTES = 4096
"""Largest cookie, name and value together, in bytes (RFC 6265 §6.1; browsers' limit)."""

MAX_COOKIE_HEADER_BYTES = 8190
"""Largest ``Cookie`` header value a request's cookies may make (``a=1; b=2``), in bytes."""

NO_COOKIES: Mapping[str, str] = MappingProxyType({})
"""The cookies of a request that has none (shared, read-only)."""

_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 6265 §4.1.1 ``cookie-name`` = ``token`` (RFC 9110 §5.6.2)."""

_ATTRIBUTE_NAMES = frozenset(
    {"expires", "max-age", "domain", "path", "secure", "httponly", "samesite", "partitioned"}
    | {"comment", "version"}  # RFC 2109's, still reserved by Python's http.cookies
)
"""``Set-Cookie`` attribute names (RFC 6265 §5.2, RFC 6265bis): a cookie named so is refused,
as the cookie code of Python (and aiohttp's, which uses it) cannot hold it."""

_VALUE = re.compile(
    r'[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*|"[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*"'
)
"""RFC 6265 §4.1.1 ``cookie-value`` = ``*cookie-octet / ( DQUOTE *cookie-octet DQUOTE )``."""


def _problem(name: object, value: object) -> str | None:
    """Why one cookie cannot be sent (never quoting the value), or None."""
    if not isinstance(name, str):
        return f"a cookie name must be a string, got {type(name).__name__}"
    if not _NAME.fullmatch(name):
        return f"cookie name {name[:40]!r} is not an RFC 6265 token"
    if name.lower() in _ATTRIBUTE_NAMES:
        return f"cookie name {name!r} is a Set-Cookie attribute name"
    if not isinstance(value, str):
        return f"the value of cookie {name!r} must be a string, got {type(value).__name__}"
    if not _VALUE.fullmatch(value):
        return (
            f"the value of cookie {name!r} is not an RFC 6265 cookie-value (printable ASCII "
            "without space, comma, semicolon, backslash or inner double quotes)"
        )
    size = len(name) + len(value)
    if size > MAX_COOKIE_BYTES:
        return f"cookie {name!r} is {size} bytes, name and value; at most {MAX_COOKIE_BYTES}"
    return None


def _header_bytes(cookies: Mapping[str, str]) -> int:
    """Length of the ``Cookie`` header value ``a=1; b=2`` these cookies make."""
    if not cookies:
        return 0
    return sum(len(k) + len(v) + 1 for k, v in cookies.items()) + 2 * (len(cookies) - 1)


def check_cookies(cookies: object) -> Mapping[str, str]:
    """Return ``cookies`` as a read-only mapping if every one of them can be sent.

    Args:
        cookies: A mapping of cookie name to value (a JSON object of strings).

    Returns:
        A read-only copy (`NO_COOKIES` when empty).

    Raises:
        ValueError: Not a mapping of strings; a name that is not a token or is an attribute
            name (``path``, ``domain``, ``expires``...); a value outside
            RFC 6265's ``cookie-value``; a cookie over `MAX_COOKIE_BYTES`; more than
            `MAX_COOKIES`; or a ``Cookie`` header over `MAX_COOKIE_HEADER_BYTES`. The
            message starts with ``cookies:`` and names the cookie, never its value.
    """
    if not isinstance(cookies, Mapping):
        raise ValueError(f"cookies: must be an object of name: value, got {type(cookies).__name__}")
    if not cookies:
        return NO_COOKIES
    if len(cookies) > MAX_COOKIES:
        raise ValueError(f"cookies: {len(cookies)} cookies, at most {MAX_COOKIES}")
    for name, value in cookies.items():
        problem = _problem(name, value)
        if problem is not None:
            raise ValueError(f"cookies: {problem}")
    size = _header_bytes(cookies)
    if size > MAX_COOKIE_HEADER_BYTES:
        raise ValueError(
            f"cookies: the Cookie header would be {size} bytes, at most {MAX_COOKIE_HEADER_BYTES}"
        )
    return MappingProxyType(dict(cookies))


def fit_cookies(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str], int]:
    """Keep the cookies a request may carry, in order, dropping the others.

    For cookies that come from a server (a redirect's ``Set-Cookie``): a browser is lenient
    about what it stores (RFC 6265 §5.2), but only cookies that `check_cookies` accepts can
    travel with a queued request.

    Returns:
        ``(cookies, dropped)``: the cookies kept (a later one of a name replaces an earlier
        one), within every limit of `check_cookies`, and how many were dropped.
    """
    kept: dict[str, str] = {}
    dropped = 0
    for name, value in pairs:
        if _problem(name, value) is not None:
            dropped += 1
            continue
        trial = {k: v for k, v in kept.items() if k != name}
        trial[name] = value
        if len(trial) > MAX_COOKIES or _header_bytes(trial) > MAX_COOKIE_HEADER_BYTES:
            dropped += 1
            continue
        kept = trial
    return kept, dropped


def revisit_fingerprint(fingerprint: bytes, cookies: Mapping[str, str]) -> bytes:
    """The fingerprint of a redirect hop back to a URL of its own chain (a revisit).

    Such a hop is the same request as one its chain sent already except, for a cookie wall,
    the cookies a redirect set, so its fingerprint is its own: SHA-1 of the request's own
    fingerprint and its cookies sorted by name (none for a redirect to the page's own
    fragment, ``/p`` -> ``/p#top``), which differs from the request's own fingerprint.
    Which hops are revisits, and when a chain is a loop instead, is decided by
    `crawlq.engine.redirects.comeback`.

    Args:
        fingerprint: The request's fingerprint (`crawlq.urls.request_fingerprint`).
        cookies: Its cookies.

    Returns:
        20 raw bytes.
    """
    digest = hashlib.sha1(fingerprint, usedforsecurity=False)
    for name in sorted(cookies):
        digest.update(b"\0")
        digest.update(f"{name}={cookies[name]}".encode("ascii"))
    return digest.digest()
