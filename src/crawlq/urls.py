"""URL normalisation, canonical URLs, host keys and request fingerprints. Pure functions, no I/O.

Two forms of a URL matter to crawlq:

* the *request URL* (`normalize`): absolute, percent-encoded where the browser would encode,
  fragment and userinfo (``user:password@``) dropped. It is what we fetch and what users
  see in exports.
* the *canonical URL* (`canonicalize`): the request URL with scheme and host lower-cased,
  default port dropped, query arguments sorted, percent-encoding normalised (w3lib's
  ``canonicalize_url``). Two request URLs with one canonical URL are one page, so the
  fingerprint is taken over the canonical URL.

Relative references (links, ``Location`` headers) are resolved by the WHATWG URL Standard's
basic URL parser, as browsers resolve them (`resolve`, through the ada library): for the
special schemes http and https a backslash counts as a slash, any run of slashes after the
scheme starts the authority (``///host/path``), ``http:path`` is relative to an http base
and names a host under any other base, tabs and newlines are removed and leading and
trailing spaces and controls stripped. The query of a link is percent-encoded in the page's
encoding, its path in UTF-8 (`encode_query`, WHATWG URL "query state"), and a ``Location``
header keeps its bytes (`decode_location`).

`UrlRules` are the crawl's rewriting rules for a URL that enters the crawl (links, redirect
targets, seeds, inbox entries): today, removing session identifiers and tracking parameters
(``strip_url_params``) so that a site minting a new id in every link does not spawn endless
URLs.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

from crawlq.errors import InvalidURL

__all__ = [
    "UrlKeys",
    "UrlRules",
    "canonicalize",
    "decode_location",
    "encode_query",
    "fingerprint",
    "host_key",
    "normalize",
    "query_codec",
    "request_fingerprint",
    "resolve",
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
        base: The URL to resolve relative references against, as browsers do (`resolve`).

    Returns:
        The URL made safe (w3lib ``safe_url_string``: host lower-cased and IDNA-encoded,
        unsafe characters percent-encoded), its fragment, a default port and any userinfo
        (``user:password@``) removed: crawlq never sends credentials from a URL (no Basic
        auth), and never stores or logs them.

    Raises:
        InvalidURL: The result is not http/https or has no host, or ``url`` cannot be resolved
            against ``base``; the message names the URL.
    """
    raw = url.strip()
    if base is not None:
        raw = resolve(raw, base)
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


# -- resolving references as browsers do ----------------------------------------------------

_join: Callable[[str, str], str] | None = None


def resolve(ref: str, base: str) -> str:
    r"""Resolve ``ref`` against ``base`` with the WHATWG URL Standard's basic URL parser.

    This is how browsers resolve a link or a ``Location`` (URL Standard §4.4, "basic URL
    parser"; implemented by the ada library): leading and trailing C0 controls and spaces are
    stripped and tabs and newlines removed anywhere; for http and https a ``\`` counts as a
    ``/`` before the query; any run of slashes and backslashes after a special scheme or at
    the start of a reference begins the authority (``///host/p`` -> ``http://host/p``);
    ``http:p`` is a relative path under an http base and ``http://p`` under any other base;
    dot segments (also ``%2e``) are removed; the host is IDNA-mapped, IPv4 numbers in any
    notation (``0x7f.1``) are made dotted-decimal; non-ASCII in the path and query is
    percent-encoded as UTF-8 (a page in another encoding encodes its query first:
    `encode_query`).

    Args:
        ref: A URL or relative reference, e.g. an ``href`` or a ``Location`` value.
        base: An absolute URL.

    Returns:
        The absolute URL, serialised (the fragment kept; `normalize` drops it). Any scheme.

    Raises:
        InvalidURL: The parser fails (no host after ``http://``, a bad port or IPv6 address,
            lone surrogates); the message names ``ref``.
    """
    global _join
    if _join is None:
        from ada_url import join_url  # ~10 ms to load: only when a reference needs it

        _join = join_url
    try:
        return _join(base, ref)
    except ValueError as exc:  # UnicodeEncodeError (surrogates) is a ValueError too
        raise InvalidURL(ref, f"cannot be resolved against {base}") from exc


@lru_cache(maxsize=64)
def query_codec(encoding: str | None) -> str | None:
    """The codec the queries of a page's links are encoded in, or None for UTF-8.

    WHATWG Encoding "get an output encoding": UTF-16BE/LE (and the replacement encoding)
    give UTF-8; so does an encoding Python does not know, and None.

    Args:
        encoding: The page's character encoding (a Python codec name or label).
    """
    if encoding is None:
        return None
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    if name in ("utf-8", "utf-8-sig") or name.startswith(("utf-16", "utf-32")):
        return None
    return name


def encode_query(url: str, encoding: str | None) -> str:
    """Percent-encode the non-ASCII characters of ``url``'s query in the page's ``encoding``.

    A browser encodes the query of a link in the encoding of the document it is on, and its
    path in UTF-8 (WHATWG URL Standard §4.4, "query state": *percent-encode after encoding*
    with the URL's query encoding, the document's encoding; HTML §2.4.2 "encoding-parsing a
    URL"): on a windows-1252 page ``?q=crème`` requests ``?q=cr%E8me``. A character the
    encoding cannot represent becomes its decimal HTML character reference, percent-encoded
    (``%26%2320013%3B`` for U+4E2D), as the Standard says. Everything else is left as it is
    (`normalize` encodes the rest), so this is cheap to call on every link: an ASCII URL, or
    a UTF-8 (or UTF-16) page, returns ``url`` itself.

    Args:
        url: An absolute URL or a relative reference; its query runs from the first ``?``
            to the first ``#`` after it.
        encoding: The page's character encoding (a Python codec name, such as
            `crawlq.decode.decode_body` gives), or None for UTF-8.

    Returns:
        ``url`` with its query's non-ASCII characters percent-encoded, or ``url`` unchanged.
    """
    if encoding is None or url.isascii():
        return url
    codec = query_codec(encoding)
    if codec is None:
        return url
    start = url.find("?")
    if start < 0:
        return url
    end = url.find("#", start)
    end = len(url) if end < 0 else end
    query = url[start + 1 : end]
    if query.isascii():
        return url
    out: list[str] = []
    for char in query:
        if char < "\x80":
            out.append(char)
            continue
        try:
            data = char.encode(codec)
        except UnicodeEncodeError:  # also lone surrogates
            out.append(f"%26%23{ord(char)}%3B")
            continue
        out.append("".join(f"%{byte:02X}" for byte in data))
    return f"{url[: start + 1]}{''.join(out)}{url[end:]}"


def decode_location(raw: bytes) -> str:
    r"""The text of a ``Location`` header value as browsers take it: bytes kept as bytes.

    HTTP gives a field value as bytes (RFC 9110 §5.5: octets beyond ASCII are ``obs-text``,
    opaque data). Browsers percent-encode each non-ASCII byte of a ``Location`` as it is, and
    resolve the result (web-platform-tests ``fetch/api/redirect/
    redirect-location-escape.tentative.any.js``, from whatwg/fetch#883): a raw UTF-8
    ``/café`` requests ``/caf%C3%A9``, a latin-1 ``/caf\xe9`` requests ``/caf%E9``, a stray
    ``\xff`` ``%FF``. ASCII bytes are kept, ``%`` included (no double encoding).

    Args:
        raw: The header value's bytes, as received.

    Returns:
        An ASCII string to resolve against the response's URL (`normalize`).
    """
    if raw.isascii():
        return raw.decode("ascii")
    return "".join(chr(byte) if byte < 0x80 else f"%{byte:02X}" for byte in raw)


# -- rewriting rules: session identifiers and tracking parameters -----------------------------

_RULES_CACHE_SIZE = 4096
"""URLs whose `UrlRules.apply` answer is remembered (navigation links repeat from page to
page); the cache is emptied when full, so it stays under ~1 MiB."""


def _glob(pattern: str) -> str:
    """A regex for a parameter-name glob: ``*`` any run of name characters, ``?`` one."""
    out = []
    for char in pattern:
        if char == "*":
            out.append("[^=&;/?#]*")
        elif char == "?":
            out.append("[^=&;/?#]")
        else:
            out.append(re.escape(char))
    return "".join(out)


class UrlRules:
    """The crawl's rewriting rules for a URL entering it: strip session and tracking params.

    Applied to every URL that enters a crawl (links and redirect targets by
    `crawlq.scope.Scope.admit`, seeds and inbox entries through
    `crawlq.request.CrawlRequest.rewritten`) before it is fingerprinted and requested, so a
    site that puts a new session id in every link (``/a;jsessionid=1F3…``, ``?PHPSESSID=…``)
    offers one URL per page, not one per visit.

    Removed: query parameters (``name=value`` pairs between ``&``) and path parameters
    (``;name=value`` in a path segment) whose name matches one of ``strip_params``, globs
    matched without regard to case (``utm_*`` matches ``UTM_Source``) against the name as
    written (a percent-encoded name is another name). What remains keeps its order and
    spelling; a query left empty goes with its ``?``.

    Args:
        strip_params: Parameter-name globs (``*`` and ``?``); empty strings are ignored. An
            empty list removes nothing. The crawl's list is the setting ``strip_url_params``
            (`crawlq.settings.Settings`).
    """

    __slots__ = ("_candidate", "_done", "_name", "strip_params")

    def __init__(self, strip_params: Iterable[str]) -> None:
        names = tuple(dict.fromkeys(p.strip() for p in strip_params if p.strip()))
        self.strip_params = names
        self._candidate: re.Pattern[str] | None = None
        self._name: re.Pattern[str] | None = None
        self._done: dict[str, str] = {}  # recent answers for URLs with "?" or ";"
        if names:
            either = "|".join(_glob(name) for name in names)
            self._candidate = re.compile(rf"[;?&](?:{either})(?=[=&;/#]|$)", re.IGNORECASE)
            self._name = re.compile(rf"(?:{either})", re.IGNORECASE)

    def __repr__(self) -> str:
        return f"UrlRules(strip_params={list(self.strip_params)!r})"

    def apply(self, url: str) -> str:
        """Return ``url`` without the parameters the rules strip (``url`` itself if none).

        Args:
            url: An absolute URL, normally normalised (`normalize`).
        """
        if self._candidate is None or ("?" not in url and ";" not in url):
            return url
        done = self._done.get(url)
        if done is None:
            if len(self._done) >= _RULES_CACHE_SIZE:
                self._done.clear()
            done = self._done[url] = self._apply(url)
        return url if done == url else done

    def _apply(self, url: str) -> str:
        assert self._candidate is not None
        if self._candidate.search(url) is None:
            return url
        parts = urlsplit(url)
        path, query = parts.path, parts.query
        if ";" in path:
            path = "/".join(self._strip_segment(segment) for segment in path.split("/"))
        if query:
            query = "&".join(p for p in query.split("&") if not self._strips(p))
        if path == parts.path and query == parts.query:
            return url
        return urlunsplit(parts._replace(path=path, query=query))

    def _strips(self, param: str) -> bool:
        assert self._name is not None
        return self._name.fullmatch(param.split("=", 1)[0]) is not None

    def _strip_segment(self, segment: str) -> str:
        if ";" not in segment:
            return segment
        head, *params = segment.split(";")
        return ";".join([head, *(p for p in params if not self._strips(p))])
