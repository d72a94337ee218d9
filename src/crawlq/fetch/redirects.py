"""Redirects, followed by hand so that each hop can be checked (RFC 9110 §15.4).

301, 302, 303, 307 and 308 with a ``Location`` are redirects (`REDIRECT_STATUSES`). The
``Location`` is read from its bytes and resolved against the current URL as browsers do
(WHATWG URL Standard: `location_of`, `resolve_location`). 303 switches to GET; so do 301 and
302 after a POST (`redirected_method`). Body headers go with the body; credentials
(``Authorization``, ``Cookie``, ``Proxy-Authorization``) are not sent on to another origin
(`Attempt.follow`). A `RedirectGuard` may stop a chain at any hop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from crawlq.errors import InvalidURL, PermanentFetchError
from crawlq.urls import decode_location, host_name, normalize
from crawlq.web.cookies import NO_COOKIES
from crawlq.web.headers import without_content_headers

__all__ = [
    "REDIRECT_STATUSES",
    "Attempt",
    "RedirectGuard",
    "location_of",
    "not_followed",
    "redirected_method",
    "resolve_location",
]

RedirectGuard = Callable[[str], str | None]
"""Called with each redirect target: None to follow it, or a reason string to stop there."""

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
"""Statuses whose ``Location`` is a redirect to follow (RFC 9110 §15.4)."""
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


@dataclass(slots=True)
class Attempt:
    """One fetch in progress: its fixed inputs and the request of the current hop."""

    url: str  # as the caller gave it; names every error
    current: str
    method: str
    body: bytes
    headers: dict[str, str]
    deadline_s: float  # time.perf_counter() seconds
    guard: RedirectGuard | None
    truncate_body_bytes: int | None
    cookies: Mapping[str, str] = field(default_factory=lambda: NO_COOKIES)  # sent with this hop
    redirects: list[str] = field(default_factory=list)

    def follow(self, status: int, next_url: str, cookies: Mapping[str, str]) -> None:
        """Move to ``next_url``, adjusting method, body, headers and cookies (module docstring)."""
        method, keep_body = redirected_method(status, self.method)
        if method != self.method or not keep_body:
            self.method, self.body = method, b""
            self.headers = dict(without_content_headers(self.headers))
        if _origin(self.current) != _origin(next_url):
            drop = _CREDENTIAL_HEADERS
            self.headers = {k: v for k, v in self.headers.items() if k.lower() not in drop}
        self.redirects.append(self.current)
        self.current = next_url
        self.cookies = cookies


def redirected_method(status: int, method: str) -> tuple[str, bool]:
    """The method of the request that follows a redirect, and whether it keeps the body.

    303 switches to GET (RFC 9110 §15.4.4); so do 301 and 302 after a POST, as browsers do
    (§15.4.2, §15.4.3, WHATWG Fetch "HTTP-redirect fetch"). 307 and 308 keep both.

    Args:
        status: The redirect status.
        method: The method of the redirected request, upper case.
    """
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        return "GET", False
    return method, True


def not_followed(_url: str) -> str:
    """The `RedirectGuard` of a fetch that returns every redirect as it is."""
    return "not_followed"


def location_of(raw: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The first ``Location`` header as browsers read it (`crawlq.urls.decode_location`)."""
    for name, value in raw:
        if len(name) == 8 and name.lower() == b"location":
            return decode_location(value.strip(b" \t")) or None
    return None


def resolve_location(url: str, current: str, location: str) -> str:
    """``location`` resolved against ``current``, the hop that answered with it.

    Raises:
        PermanentFetchError: ``bad_redirect``, naming ``url`` (the fetch's URL): the target
            is not an http(s) URL.
    """
    try:
        return normalize(location, base=current)
    except (InvalidURL, ValueError, UnicodeError) as exc:  # web input: any Location at all
        raise PermanentFetchError(url, "bad_redirect", f"{current} -> {location!r}") from exc


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, host_name(url), parts.port
