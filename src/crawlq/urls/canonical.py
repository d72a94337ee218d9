"""Request URLs, canonical URLs, host keys and request fingerprints. Pure functions, no I/O.

Two forms of a URL matter to crawlq:

* the *request URL* (`normalize`): absolute, percent-encoded where the browser would encode,
  fragment and userinfo (``user:password@``) dropped, an IPv4 host in any notation written
  dotted (`crawlq.urls.ipv4`). It is what we fetch and what users see in exports.
* the *canonical URL* (`canonicalize`): the request URL with scheme and host lower-cased,
  default port dropped, query arguments sorted, percent-encoding normalised (w3lib's
  ``canonicalize_url``). Two request URLs with one canonical URL are one page, so the
  fingerprint (20-byte SHA-1) is taken over the canonical URL.

Errors: `InvalidURL` naming the URL and why (not http(s), no host, a bad port, a host that
ends in a number but is no IPv4 address).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from crawlq.errors import InvalidURL
from crawlq.urls.ipv4 import IPv4Error, dotted
from crawlq.urls.references import resolve

__all__ = [
    "UrlKeys",
    "canonicalize",
    "fingerprint",
    "host_key",
    "normalize",
    "request_fingerprint",
    "url_keys",
]

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}
# Fast paths. A URL of this shape (lower-case scheme and host, a path, an optional non-empty
# query, only characters that need no escaping, no fragment) is already what w3lib's
# safe_url_string returns, and with a path of unreserved characters only and no query, what
# canonicalize_url returns. tests/unit/test_urls.py checks both claims against w3lib on
# random URLs, so a w3lib change that breaks them fails the suite.
_SIMPLE_URL = re.compile(
    r"(https?)://([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*(?:\?[A-Za-z0-9\-._~!$&()*+,;=:@/?]+)?"
)
_CANONICAL_URL = re.compile(
    r"(https?)://([a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::([1-9][0-9]{0,4}))?/[A-Za-z0-9\-._~/]*"
)
_dotted_host = lru_cache(maxsize=1024)(dotted)
"""`dotted`, remembered for the few IP hosts a crawl meets again and again."""
_KEYS_CACHE_SIZE = 16384
"""Entries of the `url_keys` cache: about 0.5 KiB each, so at most ~8 MiB per process."""


def normalize(url: str, base: str | None = None) -> str:
    """Return the absolute request URL for ``url``, resolved against ``base`` when given.

    Args:
        url: An absolute URL, or a relative one when ``base`` is given.
        base: The URL to resolve relative references against, as browsers do (`resolve`).

    Returns:
        The URL made safe (w3lib ``safe_url_string``: host lower-cased and IDNA-encoded,
        unsafe characters percent-encoded), its fragment, a default port and any userinfo
        (``user:password@``) removed: crawlq never sends credentials from a URL (no Basic
        auth), and never stores or logs them. An IPv4 host in another notation (``127.1``,
        ``0x7f.1``, ``2130706433``) is written dotted, as browsers write it (`dotted`).

    Raises:
        InvalidURL: The result is not http/https or has no host, its host ends in a number
            but is not an IPv4 address (``1.2.3.999``, ``foo.123``), or ``url`` cannot be
            resolved against ``base``; the message names the URL.
    """
    raw = url.strip()
    if base is not None:
        raw = resolve(raw, base)
    match = _SIMPLE_URL.fullmatch(raw)
    if match is not None and _is_plain(match):
        return _fast_host(url, raw, match)
    return _normalize_general(url, raw)


def _is_plain(match: re.Match[str] | None) -> bool:
    """True for a fast-path match whose port (if any) is in range and not the default."""
    if match is None:
        return False
    port = match.group(3)
    if port is None:
        return True
    return int(port) <= 65535 and f":{port}" != _DEFAULT_PORTS[match.group(1)]


def _fast_host(url: str, plain: str, match: re.Match[str]) -> str:
    """``plain`` (a fast-path match) with its host dotted when it ends in a number.

    A host ends in a number only if its last label starts with a digit (``0x`` included), so
    a domain costs one character test.
    """
    host = match.group(2)
    if not host[host.rfind(".") + 1].isdigit():
        return plain
    try:
        fixed = _dotted_host(host)
    except IPv4Error as exc:
        raise InvalidURL(url, str(exc)) from exc
    return plain if fixed == host else plain[: match.start(2)] + fixed + plain[match.end(2) :]


def _dotted_netloc(url: str, netloc: str) -> str:
    """``netloc`` (``host[:port]``, no userinfo) with an IPv4 host written dotted.

    The host is percent-decoded and lower-cased first, as the URL Standard's host parser
    does before it looks for a number (``127%2E1`` is ``127.0.0.1``).
    """
    if netloc.startswith("["):  # IPv6 literal
        return netloc
    host, colon, port = netloc.partition(":")
    text = (unquote(host) if "%" in host else host).lower()
    try:
        fixed = _dotted_host(text)
    except IPv4Error as exc:
        raise InvalidURL(url, str(exc)) from exc
    return netloc if fixed == text else fixed + colon + port


def _with_dotted_host(url: str, out: str) -> str:
    """``out`` (an absolute URL made from ``url``) with an IPv4 host written dotted."""
    start = out.find("//") + 2
    if start < 2:
        return out
    end = len(out)
    for stop in "/?#":
        at = out.find(stop, start)
        if 0 <= at < end:
            end = at
    userinfo, at_sign, hostport = out[start:end].rpartition("@")
    fixed = _dotted_netloc(url, hostport)
    if fixed == hostport:
        return out
    return f"{out[:start]}{userinfo}{at_sign}{fixed}{out[end:]}"


def _normalize_general(url: str, raw: str) -> str:
    """`normalize` for any URL: validate it and let w3lib make it safe."""
    try:
        parts = urlsplit(raw)
        scheme = parts.scheme.lower()
        if scheme not in _SCHEMES:
            raise InvalidURL(url, f"scheme {parts.scheme!r} is not http or https")
        if not parts.hostname:
            raise InvalidURL(url, "no host")
        if parts.port == 0:  # parts.port raises ValueError on a port out of range
            raise InvalidURL(url, "port 0")
    except InvalidURL:
        raise
    except ValueError as exc:
        raise InvalidURL(url, str(exc)) from exc
    from w3lib.url import safe_url_string  # imported here: plain URLs never get this far

    safe = safe_url_string(raw)
    hash_at = safe.find("#")
    if hash_at >= 0:
        safe = safe[:hash_at]
    parts = urlsplit(safe)
    netloc = parts.netloc.rpartition("@")[2]  # credentials are never fetched nor stored
    netloc = _dotted_netloc(url, netloc.removesuffix(_DEFAULT_PORTS[scheme]))
    if netloc != parts.netloc:
        safe = parts._replace(netloc=netloc).geturl()
    return safe


def canonicalize(url: str) -> str:
    """Return the canonical form of a request URL (see the module docstring).

    Args:
        url: An absolute http(s) URL, normally the output of `normalize`.

    Returns:
        The canonical URL; fragments are always dropped; an IPv4 host in another notation
        is written dotted (as `normalize` writes it).

    Raises:
        InvalidURL: The host ends in a number but is not an IPv4 address (``1.2.3.999``).
    """
    match = _CANONICAL_URL.fullmatch(url)
    if match is not None and "/." not in url and _is_plain(match):
        return _fast_host(url, url, match)  # nothing to sort, unquote or resolve
    from w3lib.url import canonicalize_url

    return _with_dotted_host(url, canonicalize_url(url, keep_fragments=False))


def host_key(url: str) -> str:
    """Return the politeness key of ``url``: lower-cased ``host`` or ``host:port``.

    Default ports (80 for http, 443 for https) are left out, so ``http://A.com:80/`` and
    ``http://a.com/`` share one key and one politeness budget.

    Raises:
        InvalidURL: ``url`` has no host.
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise InvalidURL(url, "no host")
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(url, str(exc)) from exc
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is None or (parts.scheme, port) in (("http", 80), ("https", 443)):
        return host
    return f"{host}:{port}"


class UrlKeys(NamedTuple):
    """The three forms of one URL that a crawl needs (see `url_keys`)."""

    url: str
    """The request URL (`normalize`)."""
    canonical: str
    """The canonical URL (`canonicalize` of the request URL): what fingerprints cover."""
    host: str
    """The politeness key (`host_key`)."""
    get_fingerprint: bytes
    """`fingerprint` of a GET of this URL with no body: most requests are exactly that."""


@lru_cache(maxsize=_KEYS_CACHE_SIZE)
def url_keys(url: str) -> UrlKeys:
    """Return the request URL, canonical URL and host key of ``url``, from a bounded cache.

    Every discovered link goes through these three functions, and navigation links repeat
    from page to page, so the results are kept in a process-wide LRU cache of
    `_KEYS_CACHE_SIZE` entries (the functions are pure, so a cached answer is exact).

    Args:
        url: An absolute URL (surrounding whitespace ignored).

    Returns:
        ``UrlKeys(url, canonical, host, get_fingerprint)``.

    Raises:
        InvalidURL: As `normalize` (failures are not cached).
    """
    safe = normalize(url)
    if _is_plain(_SIMPLE_URL.fullmatch(safe)):  # no userinfo, lower-case, no default port
        start = safe.index("//") + 2
        host = safe[start : safe.index("/", start)]
    else:
        host = host_key(safe)
    canonical = canonicalize(safe)
    return UrlKeys(safe, canonical, host, request_fingerprint("GET", canonical))


def request_fingerprint(method: str, canonical_url: str, body: bytes = b"") -> bytes:
    """Return the fingerprint of a request whose URL is already canonical (see `fingerprint`).

    Args:
        method: HTTP method, upper case.
        canonical_url: The output of `canonicalize`.
        body: Request body bytes.

    Returns:
        20 raw bytes.
    """
    digest = hashlib.sha1(method.encode("ascii"), usedforsecurity=False)
    digest.update(b"\0")
    digest.update(canonical_url.encode("utf-8"))
    digest.update(b"\0")
    digest.update(body)
    return digest.digest()


def fingerprint(method: str, url: str, body: bytes = b"") -> bytes:
    """Return the 20-byte SHA-1 fingerprint of a request.

    The digest covers the upper-cased method, the canonical URL and the body, separated by
    NUL bytes, so ``GET http://a/?x=1&y=2`` and ``get http://A/?y=2&x=1#f`` are one request.

    Args:
        method: HTTP method, any case.
        url: Request URL (it is canonicalised here).
        body: Request body bytes, empty for GET.

    Returns:
        20 raw bytes (not hex): the dedup key in every frontier and store.
    """
    return request_fingerprint(method.upper(), canonicalize(url), body)
