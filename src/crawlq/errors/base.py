"""The root of the error tree, and the two errors about invalid input that every layer raises.

`CrawlqError` redacts passwords from its message (`crawlq.secrecy.redact`); `ConfigError`
names the setting or option, `InvalidURL` the URL.
"""

from __future__ import annotations

from crawlq.secrecy import redact

__all__ = [
    "ConfigError",
    "CrawlqError",
    "InvalidURL",
]


class CrawlqError(Exception):
    """Root of every error crawlq raises.

    Its message never carries a password: text arguments go through `crawlq.secrecy.redact`,
    so a frontier, broker or store URL (or a driver's message echoing one) shows as
    ``redis://:***@host``, whichever path reports it.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ConfigError(CrawlqError, ValueError):
    """A setting, CLI option or spider path is invalid.

    Raised by `crawlq.settings.Settings` and the CLI. ``name`` is the setting or option.
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name


class InvalidURL(CrawlqError, ValueError):
    """A URL that crawlq cannot fetch (no http/https scheme, no host, unparsable).

    Raised by `crawlq.urls.normalize` and so by `crawlq.request.CrawlRequest`.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"invalid URL {url!r}: {reason}")
        self.url = url
        self.reason = reason
