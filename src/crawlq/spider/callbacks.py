"""Which spider method a request's callback names, and under which name a callback is stored.

A request's callback comes from shared state (an inbox entry, a task message: docs/architecture.md
invariant 7), so only a public method of the spider may be named: not a private or special name
(``_helper``, ``__init__``) nor one of the base class's own methods (``start_requests``).
Requests cross processes as JSON, so a callback is stored by its method *name*.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from crawlq.errors import SpiderError
from crawlq.spider.base import Spider

__all__ = ["callback_method", "callback_name", "is_callback"]

_NOT_CALLBACKS = frozenset(n for n in vars(Spider) if n != "parse")
"""The base class's own names other than ``parse`` (``start_requests``, ``wants_status``…)."""


def is_callback(spider: Spider, name: str) -> bool:
    """Whether a request may name ``name`` as its callback on ``spider`` (public methods)."""
    try:
        callback_method(spider, name, "")
    except SpiderError:
        return False
    return True


def callback_method(spider: Spider, name: str, url: str) -> Callable[..., Any]:
    """The spider method a request names as its callback: a public method only (see above).

    Args:
        spider: The spider instance.
        name: The callback name the request carries.
        url: The request's URL, for the error message.

    Raises:
        SpiderError: No such callback.
    """
    method: object = None
    if not name.startswith("_") and name not in _NOT_CALLBACKS:
        method = getattr(spider, name, None)
    if not callable(method):
        raise SpiderError(
            url,
            name,
            f"spider {type(spider).__name__} has no callback {name!r}",
            kind="MissingCallback",
        )
    return method


def callback_name(callback: Callable[..., Any] | str | None) -> str | None:
    """The name under which a callback is stored in a request (requests are JSON)."""
    if callback is None or isinstance(callback, str):
        return callback
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, Spider):
        return str(callback.__name__)
    raise TypeError(
        f"callback must be a spider method or its name, got {callback!r}; "
        "requests are JSON, so a callback is stored by name"
    )
