"""The error tree: one root, every family under it, importable from `crawlq.errors`."""

from __future__ import annotations

import importlib
import inspect

import pytest

import crawlq.errors
from crawlq.errors import (
    BrokerUnavailable,
    ConfigError,
    CrawlqError,
    FetchError,
    FrontierError,
    FrontierUnavailable,
    InvalidURL,
    PermanentFetchError,
    RetryableStatus,
    RobotsUnreachable,
    SpiderError,
    StoreError,
    StoreUnavailable,
    TransientFetchError,
)

FAMILIES = ("crawlq.errors",)  # one module holds the whole tree


def test_every_public_error_derives_from_the_root() -> None:
    for name in crawlq.errors.__all__:
        error = getattr(crawlq.errors, name)
        assert inspect.isclass(error) and issubclass(error, CrawlqError), name


def test_all_lists_every_error_of_every_family_sorted() -> None:
    written = {
        name
        for family in FAMILIES
        for name, value in vars(importlib.import_module(family)).items()
        if inspect.isclass(value) and issubclass(value, BaseException) and not name.startswith("_")
    }
    assert set(crawlq.errors.__all__) == written
    assert crawlq.errors.__all__ == sorted(crawlq.errors.__all__)


@pytest.mark.parametrize(
    ("error", "parent"),
    [
        (ConfigError, CrawlqError),
        (ConfigError, ValueError),
        (InvalidURL, CrawlqError),
        (InvalidURL, ValueError),
        (FrontierUnavailable, FrontierError),
        (BrokerUnavailable, FrontierUnavailable),
        (StoreUnavailable, StoreError),
        (RetryableStatus, TransientFetchError),
        (RobotsUnreachable, TransientFetchError),
        (TransientFetchError, FetchError),
        (PermanentFetchError, FetchError),
        (SpiderError, CrawlqError),
    ],
)
def test_the_tree(error: type[Exception], parent: type[Exception]) -> None:
    assert issubclass(error, parent)


def test_spider_error_is_in_the_tree_and_the_spider_api() -> None:
    import crawlq.spider

    assert "SpiderError" in crawlq.errors.__all__
    assert crawlq.spider.SpiderError is SpiderError
    assert not issubclass(SpiderError, FetchError | FrontierError | StoreError)


def test_lease_lost_is_gone() -> None:
    assert not hasattr(crawlq.errors, "LeaseLost")  # never raised (issue 15)


def test_transient_flag() -> None:
    assert TransientFetchError.transient and RetryableStatus.transient
    assert not PermanentFetchError.transient and not FetchError.transient


def test_messages_redact_passwords() -> None:
    error = FrontierUnavailable("cannot reach redis://:s3cret@host:6379/0")
    assert "s3cret" not in str(error)
