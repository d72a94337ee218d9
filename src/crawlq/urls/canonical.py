"""Request URLs, canonical URLs, host keys and request fingerprints. Pure functions, no I/O.

Two forms of a URL matter to crawlq:

* the *request URL* (`normalize`): absolute, percent-encoded where the browser would encode,
  fragment and userinfo (``user:password@``) dropped, an IPv4 host in any notation written
  dotted (`crawlq.urls.ipv4`), an IPv6 host in its one text form (`canonical_host`). It is
  what we fetch and what users see in exports.
* the *canonical URL* (`canonicalize`): the request URL with scheme and host lower-cased,
  default port dropped, query arguments sorted, percent-encoding normalised (w3lib's
  ``canonicalize_url``). Two request URLs with one canonical URL are one page, so the
  fingerprint (20-byte SHA-1) is taken over the canonical URL.

Every comparison of hosts (scope, politeness, robots.txt origins, cookies, per-host
credentials and overrides, the private-address guard, proxy rotation, filters) reads a host
through `canonical_host`, here, directly or by `host_key`, `host_name` or `split_host`: one
host, one written form, whatever notation a link or a setting used.

Errors: `InvalidURL` naming the URL and why (not http(s), no host, a bad port, a host that
ends in a number but is no IPv4 address, a bracketed host that is no IPv6 address).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from crawlq.errors import InvalidURL
from crawlq.urls.ipv4 import IPv4Error, dotted
from crawlq.urls.references import resolve

__all__ = [
    "UrlKeys",
    "canonical_host",
    "canonicalize",
    "fingerprint",
    "host_key",
    "host_name",
    "normalize",
    "normalize_or_none",
    "request_fingerprint",
    "split_host",
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
        ``0x7f.1``, ``2130706433``) is written dotted, as browsers write it (`dotted`); an
        IPv6 host compressed, as browsers write it, in RFC 5952 form (`canonical_host`:
        ``[0:0:0:0:0:0:0:1]`` is ``[::1]``, ``[::ffff:7f00:1d]`` is ``[::ffff:127.0.0.29]``).

    Raises:
        InvalidURL: The result is not http/https or has no host, its host ends in a number
            but is not an IPv4 address (``1.2.3.999``, ``foo.123``), its bracketed host is
            not an IPv6 address, or ``url`` cannot be resolved against ``base``; the
            message names the URL.
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
    """``netloc`` (``host[:port]``, no userinfo) with an IP host in its one written form.

    An IPv4 host is written dotted; the host is percent-decoded and lower-cased first, as
    the URL Standard's host parser does before it looks for a number (``127%2E1`` is
    ``127.0.0.1``). An IPv6 literal is written as `canonical_host` writes it.

    Raises:
        InvalidURL: The host ends in a number but is no IPv4 address, or is bracketed but
            no IPv6 address (URL Standard §3.5: either fails the URL).
    """
    if netloc.startswith("["):  # IPv6 literal
        end = netloc.find("]")
        written = netloc[1:end] if end > 0 else ""
        try:
            fixed = _ipv6_text(written.lower())
        except ValueError as exc:
            raise InvalidURL(url, f"[{written}] is not an IPv6 address") from exc
        return netloc if fixed == written else f"[{fixed}]{netloc[end + 1 :]}"
    host, colon, port = netloc.partition(":")
    text = (unquote(host) if "%" in host else host).lower()
    try:
        fixed = _dotted_host(text)
    except IPv4Error as exc:
        raise InvalidURL(url, str(exc)) from exc
    return netloc if fixed == text else fixed + colon + port


def _ipv6_text(address: str) -> str:
    """The RFC 5952 text of an IPv6 address (no brackets; a ``%zone`` kept as written).

    Raises:
        ValueError: ``address`` is not an IPv6 address.
    """
    parsed = ipaddress.IPv6Address(address)
    mapped = parsed.ipv4_mapped
    if mapped is None:
        return str(parsed)  # RFC 5952 §4: lower case, no leading zeros, longest "::"
    zone = "" if parsed.scope_id is None else f"%{parsed.scope_id}"
    return f"::ffff:{mapped}{zone}"  # RFC 5952 §5: IPv4-mapped, the IPv4 part dotted


@lru_cache(maxsize=4096)
def canonical_host(host: str) -> str:
    """Return the one written form of a host: what every comparison of hosts uses.

    Args:
        host: A host as a URL or a setting writes it, without port: a name, an IPv4 address
            in any notation, or an IPv6 address with or without its brackets.

    Returns:
        The host lower-cased, without brackets; an IPv4 address dotted (``127.1`` is
        ``127.0.0.1``, URL Standard §3.5); an IPv6 address in RFC 5952 §4 text form (lower
        case, leading zeros dropped, the longest run of zero groups written ``::``), an
        IPv4-mapped one with its IPv4 part dotted as RFC 5952 §5 recommends, so
        ``[0:0:0:0:0:0:0:1]``, ``::0001`` and ``::1`` are ``::1``, and
        ``::ffff:7f00:1d`` and ``::FFFF:127.0.0.29`` are ``::ffff:127.0.0.29``. A host
        that only looks like an address (``1.2.3.999``, ``1::2::3``) is returned
        lower-cased: it is no host, and `normalize` refuses a URL with it.
    """
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        if ":" in text:
            return _ipv6_text(text)
        return _dotted_host(text)
    except ValueError:  # IPv4Error included
        return text


def split_host(value: str) -> tuple[str, str]:
    """Split a host key, ``host[:port]``, ``[v6][:port]`` or absolute URL into host and port.

    Args:
        value: As a user, a setting or `host_key` writes a host; a bare IPv6 address (two
            colons or more, no brackets) is a host without port.

    Returns:
        ``(host, port)``: the host as `canonical_host` writes it (no brackets) and the port
        as written (``""`` when none; a URL's default port is not filled in).
    """
    text = value.strip()
    if "//" in text:
        try:
            parts = urlsplit(text)
            number = parts.port
        except ValueError:
            return canonical_host(text), ""
        return canonical_host(parts.hostname or ""), "" if number is None else str(number)
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return canonical_host(text[1:]), ""
        return canonical_host(text[1:end]), text[end + 1 :].removeprefix(":")
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return canonical_host(host), port
    return canonical_host(text), ""


def host_name(value: str) -> str:
    """The host of ``value`` (see `split_host`) without port: ``"[::0001]:80"`` -> ``"::1"``."""
    return split_host(value)[0]


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
        The canonical URL; fragments are always dropped; an IP host is written as
        `normalize` writes it (IPv4 dotted, IPv6 as `canonical_host` writes it).

    Raises:
        InvalidURL: The host ends in a number but is not an IPv4 address (``1.2.3.999``),
            or is bracketed but not an IPv6 address.
    """
    match = _CANONICAL_URL.fullmatch(url)
    if match is not None and "/." not in url and _is_plain(match):
        return _fast_host(url, url, match)  # nothing to sort, unquote or resolve
    from w3lib.url import canonicalize_url

    return _with_dotted_host(url, canonicalize_url(url, keep_fragments=False))


def host_key(url: str) -> str:
    """Return the politeness key of ``url``: its ``host`` or ``host:port``.

    The host is written as `canonical_host` writes it (an IPv6 literal in brackets), and
    default ports (80 for http, 443 for https) are left out, so ``http://A.com:80/`` and
    ``http://a.com/`` share one key and one politeness budget, as do
    ``http://[::ffff:7f00:1d]/`` and ``http://[::ffff:127.0.0.29]/``.

    Raises:
        InvalidURL: ``url`` has no host, or a bad port.
    """
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        raise InvalidURL(url, "no host")
    try:
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(url, str(exc)) from exc
    host = canonical_host(host)
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


@lru_cache(maxsize=4096)  # navigation links repeat from page to page
def normalize_or_none(url: str) -> str | None:
    """``url`` in `normalize` form, or None when it cannot be crawled (cached)."""
    try:
        return url_keys(url).url  # warms the cache that CrawlRequest(url) reads next
    except InvalidURL:
        return None
