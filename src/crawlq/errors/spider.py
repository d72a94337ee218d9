"""The error of a spider callback: `SpiderError`.

Raised by `crawlq.spider.run_callback` (and `crawlq.spider.start_callback`); the engine records
it as the page's error (`crawlq.records.spider_error`, from its ``kind`` and ``detail``) and
does not retry the page.
"""

from __future__ import annotations

from crawlq.errors.base import CrawlqError

__all__ = ["SpiderError"]


class SpiderError(CrawlqError):
    """A spider callback failed, is missing, or produced something that is not an item/request.

    Raised by `crawlq.spider.run_callback`; the engine records it as the page's error and does
    not retry.

    Attributes:
        url: The response URL the callback was given.
        callback: The callback method name.
        reason: What went wrong.
        kind: What the error is, for counting: the class name of the exception the callback
            raised (``KeyError``), ``TypeError`` for a value that is neither an item nor a
            request, ``MissingCallback`` for a callback the spider does not have.
        detail: ``reason`` without the kind (the exception's own message).
    """

    def __init__(
        self,
        url: str,
        callback: str,
        reason: str,
        *,
        kind: str = "SpiderError",
        detail: str | None = None,
    ) -> None:
        super().__init__(f"callback {callback!r} on {url}: {reason}")
        self.url = url
        self.callback = callback
        self.reason = reason
        self.kind = kind
        self.detail = reason if detail is None else detail

    @classmethod
    def raised(cls, url: str, callback: str, exc: BaseException) -> SpiderError:
        """The error for a callback that raised ``exc`` (chain it as the ``__cause__``)."""
        kind = type(exc).__name__
        return cls(url, callback, f"{kind}: {exc}", kind=kind, detail=str(exc))
