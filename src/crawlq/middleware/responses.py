"""`response`: a `crawlq.request.FetchResult` made by a middleware, not by a fetch."""

from __future__ import annotations

from collections.abc import Mapping

from crawlq.request import CrawlRequest, FetchResult

__all__ = ["response"]


def response(
    request: CrawlRequest,
    body: bytes | str = b"",
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
) -> FetchResult:
    """A response to ``request`` that ``process_request`` returns to skip the fetch.

    Args:
        request: The request it answers (its URL is the response's).
        body: The body; a ``str`` is encoded with ``encoding``.
        status: HTTP status.
        headers: Response headers (names lower-cased here); default ``text/html``.
        encoding: The body's character encoding.
    """
    data = body.encode(encoding) if isinstance(body, str) else body
    given = {k.lower(): v for k, v in (headers or {"content-type": "text/html"}).items()}
    text = data.decode(encoding, errors="replace")
    return FetchResult(request.url, request.url, status, given, data, encoding, text, 0.0)
