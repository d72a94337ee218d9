"""Which links a spider's `crawlq.spider.Response` offers to follow: `LinkRules`.

Two settings decide it: ``skip_extensions`` (asset URLs left out, by default
`IGNORED_EXTENSIONS`) and ``obey_robots`` (``rel="nofollow"`` and ``<meta name="robots">``
honoured by `crawlq.spider.Response.follow_all`). Scope (domains, depth) is not decided
here but by the engine (`crawlq.rules.scope`).
"""

from __future__ import annotations

from dataclasses import dataclass

from crawlq.settings import DEFAULT_SKIP_EXTENSIONS, Settings

__all__ = ["IGNORED_EXTENSIONS", "LinkRules"]

IGNORED_EXTENSIONS: frozenset[str] = frozenset(DEFAULT_SKIP_EXTENSIONS)
"""Path extensions (lower case, no dot) that `extract_links` leaves out by default: the
default of the ``skip_extensions`` setting (`crawlq.settings.DEFAULT_SKIP_EXTENSIONS`)."""


@dataclass(frozen=True, slots=True)
class LinkRules:
    """How a spider's `crawlq.spider.Response` picks the links it offers to follow.

    Attributes:
        skip_extensions: Path extensions (lower case, no dot) whose links are left out
            (the ``skip_extensions`` setting).
        honour_nofollow: `crawlq.spider.Response.follow_all` without hrefs leaves out links
            marked ``rel="nofollow"``, and every link of a page whose ``<meta name="robots">``
            says ``nofollow`` or ``none`` (the ``obey_robots`` setting).
    """

    skip_extensions: frozenset[str] = IGNORED_EXTENSIONS
    honour_nofollow: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> LinkRules:
        """The rules of a crawl: ``skip_extensions`` and ``obey_robots``."""
        return cls(frozenset(settings.skip_extensions), settings.obey_robots)
