"""URL normalisation, canonical URLs, host keys and request fingerprints. Pure functions, no I/O.

Two forms of a URL matter to crawlq:

* the *request URL* (`normalize`): absolute, percent-encoded where the browser would encode,
  fragment and userinfo (``user:password@``) dropped. It is what we fetch and what users
  see in exports.
* the *canonical URL* (`canonicalize`): the request URL with scheme and host lower-cased,
  default port dropped, query arguments sorted, percent-encoding normalised (w3lib's
  ``canonicalize_url``). Two request URLs with one canonical URL are one page, so the
  fingerprint is taken over the canonical URL.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

from crawlq.errors import InvalidURL

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
    r"(https?)://[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::([1-9][0-9]{0,4}))?"
    r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*(?:\?[A-Za-z0-9\-._~!$&()*+,;=:@/?]+)?"
)
_CANONICAL_URL = re.compile(
    r"(https?)://[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?(?::([1-9][0-9]{0,4}))?/[A-Za-z0-9\-._~/]*"
)
_KEYS_CACHE_SIZE = 16384
"""Entries of the `url_keys` cache: about 0.5 KiB each, so at most ~8 MiB per process."""


def normalize(url: str, base: str | None = None) -> str:
    """Return the absolute request URL for ``url``, resolved against ``base`` when given.

    Args:
        url: An absolute URL, or a relative one when ``base`` is given.
        base: The URL to resolve relative references against (RFC 3986 §5).

    Returns:
        The URL made safe (w3lib ``safe_url_string``: host lower-cased and IDNA-encoded,
        unsafe characters percent-encoded), its fragment, a default port and any userinfo
        (``user:password@``) removed: crawlq never sends credentials from a URL (no Basic
        auth), and never stores or logs them.

    Raises:
        InvalidURL: The result is not http/https or has no host; the message names the URL.
    """
    raw = url.strip()
    if base is not None:
        raw = urljoin(base, raw)
    if _is_plain(_SIMPLE_URL.fullmatch(raw)):
        return raw
    return _normalize_general(url, raw)


def _is_plain(match: re.Match[str] | None) -> bool:
    """True for a fast-path match whose port (if any) is in range and not the default."""
    if match is None:
        return False
    port = match.group(2)
    if port is None:
        return True
    return int(port) <= 65535 and f":{port}" != _DEFAULT_PORTS[match.group(1)]


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
    netloc = netloc.removesuffix(_DEFAULT_PORTS[scheme])
    if netloc != parts.netloc:
        safe = parts._replace(netloc=netloc).geturl()
    return safe


def canonicalize(url: str) -> str:
    """Return the canonical form of a request URL (see the module docstring).

    Args:
        url: An absolute http(s) URL, normally the output of `normalize`.

    Returns:
        The canonical URL; fragments are always dropped.
    """
    if "/." not in url and _is_plain(_CANONICAL_URL.fullmatch(url)):
        return url  # nothing to sort, unquote or resolve (see _CANONICAL_URL)
    from w3lib.url import canonicalize_url

    return canonicalize_url(url, keep_fragments=False)


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
