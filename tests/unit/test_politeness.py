"""The politeness rules (crawlq.rules.politeness): pure functions, no I/O."""

from __future__ import annotations

import pytest

from crawlq.errors import RetryableStatus, RobotsUnreachable, TransientFetchError
from crawlq.rules.politeness import (
    HOST_UNREACHABLE,
    RETRY_AFTER_TOO_LONG,
    AutoThrottle,
    HostPolicy,
    Politeness,
    Strike,
    strike_of,
)
from crawlq.settings import Settings


def test_strike_kinds() -> None:
    url = "http://a.test/"
    assert strike_of(RetryableStatus(url, 429, None)) is Strike.PUSHBACK
    assert strike_of(RetryableStatus(url, 503, None)) is Strike.PUSHBACK
    assert strike_of(RetryableStatus(url, 500, None)) is None  # the URL's own problem
    assert strike_of(RetryableStatus(url, 500, 5.0)) is Strike.PUSHBACK  # it asked for a wait
    assert strike_of(TransientFetchError(url, "connect_error", "refused")) is Strike.FAILURE
    assert strike_of(TransientFetchError(url, "timeout", "slow")) is Strike.FAILURE
    assert strike_of(TransientFetchError(url, "payload_error", "cut")) is None
    assert strike_of(RobotsUnreachable(url, "503", requested=True)) is Strike.FAILURE
    remembered = RobotsUnreachable(url, "503", requested=False)
    assert strike_of(remembered) is None  # no request was sent for it


def test_retry_after_is_the_pause_up_to_its_cap() -> None:
    rules = Politeness(max_retry_after_s=60.0)
    assert rules.plan(Strike.PUSHBACK, 3.0).pauses_s == (3.0,)
    assert rules.dead_reason(Strike.PUSHBACK, 1, 3.0) is None
    assert rules.plan(Strike.PUSHBACK, 3600.0).pauses_s == (60.0,)
    assert rules.dead_reason(Strike.PUSHBACK, 1, 3600.0) == RETRY_AFTER_TOO_LONG


def test_backoff_doubles_up_to_its_cap() -> None:
    rules = Politeness(host_backoff_s=1.0, host_backoff_max_s=5.0)
    pauses = rules.plan(Strike.PUSHBACK, None).pauses_s
    assert pauses[:5] == (1.0, 2.0, 4.0, 5.0, 5.0)
    assert rules.dead_reason(Strike.PUSHBACK, 1000, None) is None  # pushback never gives up


def test_breaker_parks_probes_then_gives_up() -> None:
    rules = Politeness(
        host_backoff_s=0.5, breaker_failures=4, breaker_cooldown_s=30.0, breaker_parks=2
    )
    plan = rules.plan(Strike.FAILURE, None)
    assert plan.pauses_s == (0.5, 1.0, 2.0, 30.0)  # 3 backoffs, then parks
    assert (plan.probe_from, plan.down_from) == (4, 6)
    assert [rules.dead_reason(Strike.FAILURE, n, None) for n in range(1, 7)] == [
        None, None, None, None, None, HOST_UNREACHABLE,
    ]  # fmt: skip


def test_policy_for_overrides_subdomains_and_crawl_delay() -> None:
    rules = Politeness(
        default=HostPolicy(1.0, 2),
        overrides={"example.org": HostPolicy(5.0, 1)},
        max_crawl_delay_s=10.0,
    )
    assert rules.policy_for("www.example.org:8080") == HostPolicy(5.0, 1)
    assert rules.policy_for("example.org") == HostPolicy(5.0, 1)
    assert rules.policy_for("notexample.org") == HostPolicy(1.0, 2)
    assert rules.policy_for("a.test", crawl_delay_s=3.0) == HostPolicy(3.0, 2)
    assert rules.policy_for("a.test", crawl_delay_s=0.5) == HostPolicy(1.0, 2)  # never lowers
    assert rules.policy_for("a.test", crawl_delay_s=99.0) == HostPolicy(10.0, 2)  # capped


def test_from_settings_reads_the_hosts_table(tmp_path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[hosts."Slow.example"]\ndelay_s = 5\n[hosts."fast.example"]\nconcurrency = 8\n'
    )
    s = Settings.build(file=config, env={}, cli={"delay_s": 0.5})
    rules = Politeness.from_settings(s)
    assert rules.policy_for("slow.example") == HostPolicy(5.0, 1)
    assert rules.policy_for("fast.example") == HostPolicy(0.5, 8)


@pytest.mark.parametrize(
    "table",
    ['[hosts."a"]\ndelay_s = -1\n', '[hosts."a"]\nconcurrency = 0\n', '[hosts."a"]\nx = 1\n'],
)
def test_bad_hosts_tables_name_the_key(tmp_path, table: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(table)
    with pytest.raises(ValueError, match="hosts"):
        Settings.build(file=config, env={})


def test_autothrottle_follows_latency_within_bounds() -> None:
    rules = Politeness(autothrottle=True, max_delay_s=1.0)
    throttle = AutoThrottle(rules)
    floor = HostPolicy(0.1, 2)
    delays = []
    for latency in [0.4] * 6 + [2.0] * 6 + [0.01] * 8:
        policy = throttle.observe("a.test", latency, ok=True, floor=floor)
        if policy is not None:
            assert policy.concurrency == 2
            delays.append(policy.delay_s)
    assert all(0.1 <= d <= 1.0 for d in delays)
    peak = max(delays)
    assert peak == pytest.approx(1.0, abs=0.02)  # 2 s latency: capped at max_delay_s
    assert delays[-1] < 0.15  # back to the floor once the server is fast again
    assert delays.index(peak) < len(delays) - 1


def test_autothrottle_never_lowers_on_errors_and_skips_small_changes() -> None:
    throttle = AutoThrottle(Politeness(autothrottle=True, max_delay_s=10.0))
    floor = HostPolicy(0.0, 1)
    assert throttle.observe("a.test", 1.0, ok=True, floor=floor) == HostPolicy(0.5, 1)
    assert throttle.observe("a.test", 0.0, ok=False, floor=floor) is None  # an error: no lower
    assert throttle.observe("a.test", 0.52, ok=True, floor=floor) is None  # under 10 %
