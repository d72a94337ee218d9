"""A request in flight: the `Lease` that hands it to a worker, and what fetching it returns.

`Lease` is the frontier contract's unit of work: made by the frontier backends
(`crawlq.frontier.queue.WorkQueue.lease`); renewed, acked, retried, dead-lettered or released by
the engines. Times are Unix milliseconds.

`FetchResult` (the response) and `RawExchange` (its wire form, for WARC) are made by
`crawlq.fetch.Fetcher.fetch` and by the engine's reparse of stored responses; read by the
spider's `crawlq.spider.Response`, the page record and the WARC writer. Whether a body is
HTML is decided once, on construction (`crawlq.web.decode.sniff`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from crawlq.request.crawl_request import CrawlRequest, no_cookies
from crawlq.web.decode import Sniffed, sniff

__all__ = ["FetchResult", "Lease", "RawExchange"]


@dataclass(frozen=True, slots=True)
class Lease:
    """A request handed to one worker until ``deadline_ms``.

    Attributes:
        lease_id: Opaque id, unique per delivery.
        request: The leased request.
        attempt: 1 for the first delivery, +1 per `Frontier.retry` and per expired lease.
        worker_id: Who holds it.
        deadline_ms: Unix time in milliseconds when the lease returns to the queue unless it is
            renewed or settled (ack, retry, dead, release).
        host_down: The request's host was declared unreachable by its circuit breaker
            (`crawlq.rules.politeness`): dead-letter it as ``host_unreachable`` without a request.
    """

    lease_id: str
    request: CrawlRequest
    attempt: int
    worker_id: str
    deadline_ms: int
    host_down: bool = False


@dataclass(frozen=True, slots=True)
class RawExchange:
    """The last HTTP exchange of a fetch as it went over the wire, for archiving (WARC).

    Attributes:
        method: The request method sent.
        request_headers: Request headers as sent, in order, as ``(name, value)`` pairs.
        request_body: Request body bytes.
        http_version: HTTP version of the response, such as ``"1.1"``.
        reason: Reason phrase of the response status line ("" when there is none).
        response_headers: Response headers as received: original names, order and
            repetitions, values decoded as ISO-8859-1 (RFC 9110 §5.5), so every byte
            survives. They describe the body on the wire: ``Content-Encoding`` and
            ``Transfer-Encoding`` may apply to it, unlike to `FetchResult.body`.
    """

    method: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    http_version: str
    reason: str
    response_headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class FetchResult:
    """A complete HTTP response, as returned by `crawlq.fetch.Fetcher.fetch`.

    Attributes:
        url: The requested URL.
        final_url: The URL of the last response after redirects (== ``url`` without any).
        status: HTTP status code of the last response.
        headers: Response headers, names lower-cased; repeated headers joined with ", ".
        body: Decoded-transfer body bytes (gzip/deflate/br removed), at most the size cap.
        encoding: Character encoding chosen for ``text`` (header, then ``<meta>``, then
            detection), or None for non-text bodies.
        text: The body decoded with ``encoding`` ("" for non-text bodies).
        elapsed_s: Seconds from sending the first request to the end of the body.
        redirects: The URLs redirected through, in order, excluding ``final_url``.
        exchange: The request and the response head of the last hop as on the wire (for
            WARC records), or None when the fetcher did not record it.
        location: For a redirect response that was not followed, its target resolved
            against ``final_url`` and normalised; else None.
        sniffed: Whether the body is HTML, and why a body labelled HTML is binary
            (`crawlq.web.decode.sniff`, derived from ``headers`` and ``body``).
        location_cookies: For a redirect not followed, the cookies to send with its target:
            the request's own cookies (when the target is on the same host and not a
            downgrade from https) updated by the response's ``Set-Cookie`` headers, kept
            where RFC 6265 §5.4 sends them to the target (domain, path, secure); empty when
            cookies are off (`crawlq.fetch.Fetcher`).
    """

    url: str
    final_url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    encoding: str | None
    text: str
    elapsed_s: float
    redirects: tuple[str, ...] = ()
    exchange: RawExchange | None = None
    location: str | None = None
    location_cookies: Mapping[str, str] = field(default_factory=no_cookies, repr=False)
    sniffed: Sniffed = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sniffed", sniff(self.headers.get("content-type"), self.body))

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower-cased ("" when absent)."""
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def is_html(self) -> bool:
        """True for a body to parse as HTML (`crawlq.web.decode.sniff`).

        A text/html or application/xhtml+xml body that is not binary, or a body without a
        ``Content-Type`` that starts like HTML (WHATWG MIME Sniffing §7.1).
        """
        return self.sniffed.html

    @property
    def binary(self) -> str | None:
        """Why a body labelled HTML is binary (``"application/pdf signature"``), else None."""
        return self.sniffed.binary
