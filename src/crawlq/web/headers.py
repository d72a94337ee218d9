r"""Request header rules that need no HTTP client: what a request's headers may be, and Referer.

A request's headers come from spiders (``CrawlRequest(headers=...)``, ``response.follow``),
the command line (``--header``), settings (``default_headers``), inbox entries and task
messages, so they are untrusted input and checked in one place, `check_headers`:

* a name is a ``token`` (RFC 9110 §5.6.2: ``!#$%&'*+-.^_`|~``, digits and letters);
* a value is ``field-value`` (RFC 9110 §5.5): visible ASCII, space and tab, and obs-text
  (bytes 0x80-0xFF, here characters U+0080-U+00FF) — never CR, LF or NUL, so no value can end
  the header or add another; surrounding spaces and tabs are removed;
* at most `MAX_HEADERS` headers of at most `MAX_HEADER_BYTES` each (name and value), the
  limit servers put on one header line (Apache's ``LimitRequestFieldSize``, 8190).

Some names are refused, each with its reason (`OWNED_HEADERS`): the framing and connection
headers the HTTP client must own (``Host``, ``Content-Length``, ``Transfer-Encoding``,
``Connection`` and the other hop-by-hop headers of RFC 9110 §7.6.1), ``Cookie`` (the cookie
jar and a request's ``cookies`` make it, README "Cookies"), and the credential headers
``Authorization`` and ``Proxy-Authorization``: a request's headers travel in the frontier,
the broker and dead letters, and job headers are stored with the job, so a credential there
would be kept in shared state (credentials belong to a process's own configuration).

Names are matched without regard to case; a request keeps the spelling it was given.
`parse_header_line` reads one ``Name: value`` line (``--header``). `referer` applies a
Referrer Policy (W3C Referrer Policy, https://www.w3.org/TR/referrer-policy/ §8.3 "Determine
request's Referrer") to the URL of the page a link was found on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "CONTENT_HEADERS",
    "MAX_HEADERS",
    "MAX_HEADER_BYTES",
    "NO_HEADERS",
    "OWNED_HEADERS",
    "REFERRER_POLICIES",
    "check_headers",
    "header_problem",
    "merge_headers",
    "parse_header_line",
    "referer",
    "without_content_headers",
]

MAX_HEADERS = 64
"""Most headers one request (or ``default_headers``) may carry."""

MAX_HEADER_BYTES = 8190
"""Largest header, name and value together, in characters (one header line a server takes)."""

NO_HEADERS: Mapping[str, str] = MappingProxyType({})
"""The headers of a request that has none (shared, read-only)."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 §5.6.2 ``token``: a field name."""

_FIELD_VALUE = re.compile(r"[\t\x20-\x7E\x80-\xFF]*")
"""RFC 9110 §5.5 ``field-value`` characters: VCHAR, SP, HTAB and obs-text; no CR, LF, NUL."""

_HOP_BY_HOP = "the HTTP client sets it (framing and connection headers, RFC 9110 §7.6.1)"
_CREDENTIAL = (
    "credentials are not request headers: request headers are kept in the frontier, the "
    "broker and the job's settings"
)
OWNED_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "host": "the HTTP client sets it from the URL",
        "content-length": _HOP_BY_HOP,
        "transfer-encoding": _HOP_BY_HOP,
        "connection": _HOP_BY_HOP,
        "keep-alive": _HOP_BY_HOP,
        "te": _HOP_BY_HOP,
        "trailer": _HOP_BY_HOP,
        "upgrade": _HOP_BY_HOP,
        "proxy-connection": _HOP_BY_HOP,
        "cookie": "cookies come from the worker's jar and a request's cookies= (README "
        '"Cookies"): pass cookies={"name": "value"} instead',
        "authorization": _CREDENTIAL,
        "proxy-authorization": _CREDENTIAL,
    }
)
"""Header names (lower case) a request may not set, with the reason its message gives."""

REFERRER_POLICIES = (
    "no-referrer",
    "no-referrer-when-downgrade",
    "same-origin",
    "origin",
    "strict-origin",
    "origin-when-cross-origin",
    "strict-origin-when-cross-origin",
    "unsafe-url",
)
"""The policies of the W3C Referrer Policy spec (§3), the values of ``referer_policy``."""


def header_problem(name: object, value: object) -> str | None:
    """Why one header cannot be sent, naming it, or None."""
    if not isinstance(name, str):
        return f"a header name must be a string, got {type(name).__name__}"
    if not _TOKEN.fullmatch(name):
        return f"header name {name[:60]!r} is not an RFC 9110 token"
    owned = OWNED_HEADERS.get(name.lower())
    if owned is not None:
        return f"header {name} may not be set: {owned}"
    if not isinstance(value, str):
        return f"the value of header {name} must be a string, got {type(value).__name__}"
    if not _FIELD_VALUE.fullmatch(value):
        return (
            f"the value of header {name} holds a character a header value may not hold "
            "(CR, LF, NUL or another control character; RFC 9110 §5.5)"
        )
    if len(name) + len(value) > MAX_HEADER_BYTES:
        return f"header {name} is longer than {MAX_HEADER_BYTES} characters, name and value"
    return None


def check_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> Mapping[str, str]:
    """The request headers ``headers`` as a read-only mapping, if every one may be sent.

    Values lose surrounding spaces and tabs. Two names equal but for case are one header
    given twice: refused.

    Raises:
        ValueError: Not a mapping (or pairs) of strings, more than `MAX_HEADERS`, or a
            header that breaks a rule of the module docstring; the message starts with
            ``headers:`` and names the header.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    seen: set[str] = set()
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"headers: expected name: value pairs, got {pair!r:.60}")
        name, value = pair
        problem = header_problem(name, value)
        if problem is not None:
            raise ValueError(f"headers: {problem}")
        if name.lower() in seen:
            raise ValueError(f"headers: header {name} is given twice")
        seen.add(name.lower())
        out[name] = value.strip(" \t")
        if len(out) > MAX_HEADERS:
            raise ValueError(f"headers: more than {MAX_HEADERS} headers")
    return MappingProxyType(out) if out else NO_HEADERS


def parse_header_line(line: str) -> tuple[str, str]:
    """``Name: value`` (``--header``, a ``default_headers`` entry) as a checked pair.

    Raises:
        ValueError: No colon, or a name or value `header_problem` refuses; the message
            names the header (or quotes the start of a line without a colon).
    """
    name, colon, value = line.partition(":")
    if not colon:
        raise ValueError(f"header {line[:60]!r} is not 'Name: value' (no colon)")
    name = name.strip(" \t")
    problem = header_problem(name, value)
    if problem is not None:
        raise ValueError(problem)
    return name, value.strip(" \t")


CONTENT_HEADERS = frozenset(
    {"content-type", "content-length", "content-encoding", "content-language", "content-location"}
)
"""The headers that describe a request's body (lower case): a redirect that drops the body
drops them too (RFC 9110 §15.4: a 301/302/303 that turns a POST into a GET removes the
content headers; 307 and 308 keep method, body and headers)."""


def without_content_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """``headers`` without `CONTENT_HEADERS` (any case); ``headers`` itself when it has none."""
    if not any(name.lower() in CONTENT_HEADERS for name in headers):
        return headers
    return {k: v for k, v in headers.items() if k.lower() not in CONTENT_HEADERS}


def merge_headers(*layers: Mapping[str, str]) -> dict[str, str]:
    """The headers of ``layers``, later ones winning over earlier ones of the same name.

    Names are matched without regard to case; the spelling of the layer that won is kept.
    """
    out: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.items():
            old = spelled.get(name.lower())
            if old is not None:
                del out[old]
            spelled[name.lower()] = name
            out[name] = value
    return out


def referer(referrer: str | None, target: str, policy: str) -> str | None:
    """The ``Referer`` to send to ``target`` for a link found on ``referrer``, or None.

    W3C Referrer Policy §8.3: ``referrer`` is first stripped of credentials and fragment
    (§8.4, "strip url for use as a referrer"); ``origin`` policies send only
    ``scheme://host[:port]/``; ``strict`` ones and ``no-referrer-when-downgrade`` send
    nothing from https to http; ``same-origin`` sends only to the same origin;
    ``no-referrer`` never sends one.

    Args:
        referrer: The URL of the page the request was found on (None: a seed, nothing sent).
        target: The URL requested.
        policy: One of `REFERRER_POLICIES`.
    """
    if referrer is None or policy == "no-referrer":
        return None
    parts = urlsplit(referrer)
    if parts.scheme not in ("http", "https"):
        return None
    netloc = parts.netloc.rpartition("@")[2]
    full = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    origin = urlunsplit((parts.scheme, netloc, "/", "", ""))
    target_parts = urlsplit(target)
    downgrade = parts.scheme == "https" and target_parts.scheme != "https"
    same = (parts.scheme, netloc.lower()) == (
        target_parts.scheme,
        target_parts.netloc.rpartition("@")[2].lower(),
    )
    if policy == "unsafe-url":
        return full
    if policy == "origin":
        return origin
    if policy == "same-origin":
        return full if same else None
    if downgrade and policy != "origin-when-cross-origin":
        return None  # no-referrer-when-downgrade, strict-origin, strict-origin-when-cross-origin
    if policy == "no-referrer-when-downgrade":
        return full
    if policy == "strict-origin":
        return origin
    return full if same else origin  # (strict-)origin-when-cross-origin
