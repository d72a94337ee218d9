"""Errors of a fetch, each already classified: `TransientFetchError` or `PermanentFetchError`.

``FetchError.reason`` is a short machine-readable code (``timeout``, ``http_503``,
``body_too_large``) that the engine records with a dead letter or a retry.
"""

from __future__ import annotations

from crawlq.errors.base import CrawlqError

__all__ = [
    "BodyTooLarge",
    "FetchError",
    "PermanentFetchError",
    "PrivateAddressError",
    "Retry",
    "RetryableStatus",
    "RobotsUnreachable",
    "TooManyRedirects",
    "TransientFetchError",
]


class FetchError(CrawlqError):
    """A fetch failed. ``reason`` is a short machine-readable code (``timeout``, ``http_503``).

    Raised by `crawlq.fetch.Fetcher.fetch`. ``transient`` tells the retry policy whether
    another attempt can succeed (see `crawlq.rules.retry`).
    """

    transient: bool = False

    def __init__(self, url: str, reason: str, detail: str = "") -> None:
        text = f"{reason} fetching {url}"
        if detail:
            text += f": {detail}"
        super().__init__(text)
        self.url = url
        self.reason = reason
        self.detail = detail


class TransientFetchError(FetchError):
    """Connect/read timeout, connection reset, DNS failure: worth retrying."""

    transient = True


class RetryableStatus(TransientFetchError):
    """HTTP 408, 429 or 5xx. ``retry_after_s`` is the server's Retry-After, if any (seconds)."""

    def __init__(self, url: str, status: int, retry_after_s: float | None = None) -> None:
        super().__init__(url, f"http_{status}")
        self.status = status
        self.retry_after_s = retry_after_s


class RobotsUnreachable(TransientFetchError):
    """robots.txt could not be fetched (5xx, 408/429, network failure): the page waits.

    Raised by `crawlq.robots.RobotsCache`. ``requested`` is False when no request was sent for
    this error (a failure remembered from an earlier request): it counts no strike against the
    host (`crawlq.rules.politeness.strike_of`).
    """

    def __init__(self, url: str, detail: str, *, requested: bool) -> None:
        super().__init__(url, "robots_unreachable", detail)
        self.requested = requested


class Retry(TransientFetchError):
    """A downloader middleware asks for another attempt at its request (a soft 404, a ban page).

    Raised by user code in ``process_request``, ``process_response`` or ``process_exception``
    (`crawlq.middleware`); the engine (`crawlq.engine.step`) gives it the request's URL
    and takes it through the retry policy like any transient failure (`crawlq.rules.retry.decide`:
    counted as an attempt, backoff with jitter, dead-lettered after ``max_retries`` with
    ``reason`` as the dead letter's reason). It is no strike against the host unless
    ``reason`` names a connection failure (``timeout``, ``connection_refused``...).

    Args:
        reason: Short code recorded with the retry and the dead letter (``soft_404``).
        detail: Human-readable description (default: none).
    """

    def __init__(self, reason: str, detail: str = "", *, url: str = "") -> None:
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"Retry needs a reason code, got {reason!r:.40}")
        super().__init__(url or "(a middleware's request)", reason, detail)


class ProxyFailed(TransientFetchError):
    """The proxy a fetch went through failed, not the target: another proxy may succeed.

    Raised by `crawlq.fetch.Fetcher.fetch` for a connection to the proxy that fails, a 407,
    a refused CONNECT tunnel or SOCKS handshake, and a 5xx whose ``Proxy-Status`` names an
    error of the proxy itself (`crawlq.rules.proxies` lists what counts). The engine counts it
    against the proxy in the frontier (`crawlq.rules.proxies.ProxyState`) and gives the lease
    back without spending an attempt. ``proxy_id`` identifies the proxy (a hash of its
    ``scheme://host:port``); the message never holds its credentials.
    """

    def __init__(self, url: str, proxy_id: str, reason: str, detail: str = "") -> None:
        super().__init__(url, reason, detail)
        self.proxy_id = proxy_id


class ProxiesBenched(TransientFetchError):
    """Every proxy this fetch could use is benched: no request was sent.

    Raised by `crawlq.fetch.Fetcher.fetch`; ``until_ms`` is the Unix ms the first of them
    comes back. The engine waits and gives the lease back (no attempt spent).
    """

    def __init__(self, url: str, until_ms: int) -> None:
        super().__init__(url, "proxies_benched", "every proxy is benched")
        self.until_ms = until_ms


class PermanentFetchError(FetchError):
    """A failure that another attempt will not fix; recorded as dead, never retried."""


class BodyTooLarge(PermanentFetchError):
    """The response body exceeds ``max_body_bytes``; nothing of it is stored."""

    def __init__(self, url: str, limit_bytes: int) -> None:
        super().__init__(url, "body_too_large", f"over {limit_bytes} bytes")
        self.limit_bytes = limit_bytes


class TooManyRedirects(PermanentFetchError):
    """The redirect chain exceeds the limit (this also ends redirect loops)."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(url, "too_many_redirects", f"more than {limit}")
        self.limit = limit


class PrivateAddressError(PermanentFetchError):
    """The host is on a loopback, private, link-local… address (`crawlq.web.addresses`).

    Raised by `crawlq.fetch.Fetcher.fetch` before any connection to such an address, for the
    request's own host or any redirect hop's; the engine records the URL as filtered with
    reason ``private_address``. ``host`` is the refused host, ``range_name`` the range (the
    resolved address itself is not reported).
    """

    def __init__(self, url: str, host: str, range_name: str) -> None:
        super().__init__(url, "private_address", f"{host} is on a {range_name} address")
        self.host = host
        self.range_name = range_name
