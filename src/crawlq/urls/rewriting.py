"""The crawl's URL rewriting rules: session identifiers and tracking parameters stripped.

`UrlRules` rewrite a URL that enters the crawl (links, redirect targets, seeds, inbox
entries) before it is fingerprinted: today, removing the parameters named by the setting
``strip_url_params`` so that a site minting a new id in every link does not spawn endless
URLs. Pure, no I/O; the answers for recent URLs are kept in a small per-instance cache.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["UrlRules"]

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
    `crawlq.rules.scope.Scope.admit`, seeds and inbox entries through
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
