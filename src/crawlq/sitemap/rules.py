"""A spider's sitemap choices: ``sitemap_rules`` (regex -> callback) and ``sitemap_follow``.

`SitemapRules.compile` checks them once, when the spider is loaded (a bad regex or callback
is a `ConfigError` named ``spider``); the engine then asks `callback_for` of each listed URL
and `follows` of each child sitemap. Empty rules mean every URL, with ``parse``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from crawlq.errors import ConfigError

__all__ = ["SitemapRules"]


@dataclass(frozen=True, slots=True)
class SitemapRules:
    """A spider's sitemap choices, compiled (`compile`; semantics in the module docstring).

    Attributes:
        rules: ``(pattern, callback)`` pairs; empty: every URL, callback ``parse``.
        follow: Patterns of child sitemaps to read; empty: every one.
    """

    rules: tuple[tuple[re.Pattern[str], str | None], ...] = ()
    follow: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def compile(
        cls,
        rules: Iterable[tuple[str | re.Pattern[str], Any]] = (),
        follow: Iterable[str | re.Pattern[str]] = (),
        is_callback: Callable[[str], bool] | None = None,
    ) -> SitemapRules:
        """Compile a spider's ``sitemap_rules`` and ``sitemap_follow``.

        Args:
            rules: ``(regex, callback)`` pairs; a callback is a method name, a function
                (its ``__name__`` is taken) or None for ``parse``.
            follow: Regexes.
            is_callback: Says whether a name is a callback the spider may be given; None
                accepts every name.

        Raises:
            ConfigError: Named ``spider``: a regex does not compile, a rule is not a pair,
                or a callback is not one of the spider's public methods.
        """
        compiled: list[tuple[re.Pattern[str], str | None]] = []
        for rule in rules:
            if not isinstance(rule, tuple | list) or len(rule) != 2:
                raise ConfigError("spider", f"sitemap_rules: {rule!r:.80} is not (regex, callback)")
            pattern, callback = rule
            name = callback if callback is None or isinstance(callback, str) else None
            if callback is not None and name is None:
                name = getattr(callback, "__name__", None)
                if not isinstance(name, str):
                    raise ConfigError("spider", f"sitemap_rules: bad callback {callback!r:.80}")
            if name is not None and is_callback is not None and not is_callback(name):
                raise ConfigError(
                    "spider", f"sitemap_rules: {name!r} is not a public method of the spider"
                )
            compiled.append((_regex(pattern, "sitemap_rules"), name))
        patterns = tuple(_regex(p, "sitemap_follow") for p in follow)
        return cls(tuple(compiled), patterns)

    def callback_for(self, url: str) -> tuple[bool, str | None]:
        """Whether to follow a URL a sitemap lists, and with which callback (None: parse)."""
        if not self.rules:
            return True, None
        for pattern, callback in self.rules:
            if pattern.search(url):
                return True, callback
        return False, None

    def follows(self, url: str) -> bool:
        """Whether to read a child sitemap (of an index or robots.txt)."""
        return not self.follow or any(p.search(url) for p in self.follow)


def _regex(pattern: str | re.Pattern[str], what: str) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as exc:
        raise ConfigError("spider", f"{what}: bad regex {pattern!r:.80}: {exc}") from None
