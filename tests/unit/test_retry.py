"""crawlq.rules.retry: Retry-After parsing, jittered backoff, the retry decision (pure)."""

from __future__ import annotations

import itertools
import random
from email.utils import formatdate

import pytest

from crawlq.errors import (
    BodyTooLarge,
    PermanentFetchError,
    RetryableStatus,
    TooManyRedirects,
    TransientFetchError,
)
from crawlq.rules.retry import backoff_s, decide, is_retryable_status, parse_retry_after

NOW_S = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT, the RFC 9110 example date


# --- parse_retry_after (RFC 9110 §10.2.3) ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("120", 120.0), ("0", 0.0), (" 7 ", 7.0), ("3600", 3600.0)],
)
def test_retry_after_seconds(value: str, expected: float) -> None:
    assert parse_retry_after(value, NOW_S) == expected


@pytest.mark.parametrize(
    "value",
    [
        "Sun, 06 Nov 1994 08:51:37 GMT",  # IMF-fixdate
        "Sunday, 06-Nov-94 08:51:37 GMT",  # obsolete RFC 850 form
        "Sun Nov  6 08:51:37 1994",  # obsolete asctime form
        "Sun, 06 Nov 1994 09:51:37 +0100",  # numeric zone
    ],
)
def test_retry_after_http_date(value: str) -> None:
    assert parse_retry_after(value, NOW_S) == pytest.approx(120.0)


def test_retry_after_date_in_the_past_is_zero() -> None:
    assert parse_retry_after(formatdate(NOW_S - 60, usegmt=True), NOW_S) == 0.0


def test_retry_after_date_uses_now() -> None:
    header = formatdate(NOW_S + 30, usegmt=True)
    assert parse_retry_after(header, NOW_S) == pytest.approx(30.0)
    assert parse_retry_after(header, NOW_S + 10) == pytest.approx(20.0)


@pytest.mark.parametrize("value", [None, "", "   ", "soon", "-5", "1.5", "12s", "Sun, 99 Foo"])
def test_retry_after_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value, NOW_S) is None


# --- is_retryable_status ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        *[(code, True) for code in (408, 429, 500, 503, 599)],
        *[(code, False) for code in (200, 301, 400, 404, 410, 499)],
    ],
)
def test_is_retryable_status(status: int, expected: bool) -> None:
    assert is_retryable_status(status) is expected


# --- backoff_s --------------------------------------------------------------------------


@pytest.mark.parametrize("attempt", range(1, 12))
def test_backoff_within_bounds(attempt: int) -> None:
    rng = random.Random(attempt)
    ceiling = min(60.0, 1.0 * 2 ** (attempt - 1))
    for _ in range(200):
        wait = backoff_s(attempt, 1.0, 60.0, rng)
        assert ceiling / 2 <= wait <= ceiling


def test_backoff_grows_until_the_cap() -> None:
    rng = random.Random(42)
    means = [sum(backoff_s(a, 0.5, 30.0, rng) for _ in range(500)) / 500 for a in range(1, 10)]
    for earlier, later in itertools.pairwise(means[:7]):  # 0.5 s .. 30 s: growing
        assert later > earlier * 1.5
    assert all(m <= 30.0 for m in means)
    assert means[-1] == pytest.approx(30.0 * 0.75, rel=0.05)  # capped: mean of U[15, 30]


def test_backoff_is_deterministic_with_a_seed() -> None:
    first = [backoff_s(a, 1.0, 300.0, random.Random(7)) for a in range(1, 6)]
    second = [backoff_s(a, 1.0, 300.0, random.Random(7)) for a in range(1, 6)]
    assert first == second


def test_backoff_jitter_spreads_waits() -> None:
    rng = random.Random(3)
    waits = {round(backoff_s(4, 1.0, 60.0, rng), 6) for _ in range(50)}
    assert len(waits) > 40


def test_backoff_attempt_zero_treated_as_first() -> None:
    assert 0.5 <= backoff_s(0, 1.0, 60.0, random.Random(1)) <= 1.0


# --- decide -----------------------------------------------------------------------------

URL = "http://example.com/a"


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_decide_retries_transient_errors(attempt: int) -> None:
    decision = decide(
        TransientFetchError(URL, "timeout", "read"),
        attempt,
        max_retries=3,
        base_s=1.0,
        cap_s=60.0,
        rng=random.Random(5),
    )
    assert decision.retry
    assert 2 ** (attempt - 1) / 2 <= decision.delay_s <= 2 ** (attempt - 1)
    assert decision.reason == "timeout"
    assert "timeout fetching" in decision.detail


def test_decide_dead_letters_after_max_retries() -> None:
    decision = decide(
        TransientFetchError(URL, "connection_reset"), 4, max_retries=3, base_s=1.0, cap_s=60.0
    )
    assert not decision.retry
    assert decision.delay_s == 0.0
    assert decision.reason == "connection_reset"


def test_decide_zero_retries_never_retries() -> None:
    decision = decide(TransientFetchError(URL, "timeout"), 1, max_retries=0, base_s=1, cap_s=5)
    assert not decision.retry


@pytest.mark.parametrize(
    "error",
    [
        PermanentFetchError(URL, "invalid_url"),
        BodyTooLarge(URL, 1000),
        TooManyRedirects(URL, 10),
    ],
)
def test_decide_never_retries_permanent_errors(error: PermanentFetchError) -> None:
    decision = decide(error, 1, max_retries=5, base_s=1.0, cap_s=60.0)
    assert not decision.retry
    assert decision.reason == error.reason
    assert decision.detail == str(error)


def test_decide_honours_longer_retry_after() -> None:
    error = RetryableStatus(URL, 429, retry_after_s=45.0)
    decision = decide(error, 1, max_retries=3, base_s=1.0, cap_s=60.0, rng=random.Random(1))
    assert decision.retry
    assert decision.delay_s == 45.0
    assert decision.reason == "http_429"


def test_decide_caps_retry_after() -> None:
    error = RetryableStatus(URL, 503, retry_after_s=86400.0)
    decision = decide(error, 1, max_retries=3, base_s=1.0, cap_s=60.0)
    assert decision.delay_s == 60.0


def test_decide_shorter_retry_after_keeps_backoff() -> None:
    error = RetryableStatus(URL, 503, retry_after_s=0.0)
    decision = decide(error, 3, max_retries=3, base_s=1.0, cap_s=60.0, rng=random.Random(1))
    assert 2.0 <= decision.delay_s <= 4.0


def test_decide_status_without_retry_after() -> None:
    decision = decide(RetryableStatus(URL, 500), 1, max_retries=1, base_s=2.0, cap_s=60.0)
    assert decision.retry
    assert 1.0 <= decision.delay_s <= 2.0
    assert decision.reason == "http_500"
