"""URL normalisation, canonical URLs, host keys and request fingerprints. Pure functions, no I/O.

Two forms of a URL matter to crawlq:

* the *request URL* (`normalize`): absolute, percent-encoded where the browser would encode,
  fragment dropped. It is what we fetch and what users see in exports.
* the *canonical URL* (`canonicalize`): the request URL with scheme and host lower-cased,
  default port dropped, query arguments sorted, percent-encoding normalised (w3lib's
  ``canonicalize_url``). Two request URLs with one canonical URL are one page, so the
  fingerprint is taken over the canonical URL.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urljoin, urlsplit

from w3lib.url import canonicalize_url, safe_url_string

from crawlq.errors import InvalidURL

__all__ = ["canonicalize", "fingerprint", "host_key", "normalize"]

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


def normalize(url: str, base: str | None = None) -> str:
    """Return the absolute request URL for ``url``, resolved against ``base`` when given.

    Args:
        url: An absolute URL, or a relative one when ``base`` is given.
        base: The URL to resolve relative references against (RFC 3986 §5).

    Returns:
        The URL made safe (w3lib ``safe_url_string``: host lower-cased and IDNA-encoded,
        unsafe characters percent-encoded), its fragment and a default port removed.

    Raises:
        InvalidURL: The result is not http/https or has no host; the message names the URL.
    """
    raw = url.strip()
    if base is not None:
        raw = urljoin(base, raw)
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
    safe = safe_url_string(raw)
    hash_at = safe.find("#")
    if hash_at >= 0:
        safe = safe[:hash_at]
    default_port = _DEFAULT_PORTS[scheme]
    if default_port in safe:
        parts = urlsplit(safe)
        if parts.netloc.endswith(default_port):
            safe = parts._replace(netloc=parts.netloc.removesuffix(default_port)).geturl()
    return safe


def canonicalize(url: str) -> str:
    """Return the canonical form of a request URL (see the module docstring).

    Args:
        url: An absolute http(s) URL, normally the output of `normalize`.

    Returns:
        The canonical URL; fragments are always dropped.
    """
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
    digest = hashlib.sha1(method.upper().encode("ascii"), usedforsecurity=False)
    digest.update(b"\0")
    digest.update(canonicalize(url).encode("utf-8"))
    digest.update(b"\0")
    digest.update(body)
    return digest.digest()
