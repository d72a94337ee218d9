"""One IP address, one host: the written form of `crawlq.urls.canonical_host`, everywhere.

An IPv6 address has many notations (``[0:0:0:0:0:0:0:1]``, ``[::0001]``, ``[::1]``; for an
IPv4-mapped one ``[::ffff:7f00:1d]`` and ``[::FFFF:127.0.0.29]``); RFC 5952 gives each one
text form, and every comparison of hosts reads that form: request and canonical URLs, host
keys, scope, politeness overrides, the private-address guard, per-host credentials, proxy
rotation and ``NO_PROXY``, the export and dead-letter ``--host`` filters, cookies. The guard
is tested as a decision function: nothing here sends traffic.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from yarl import URL

from crawlq.errors import InvalidURL
from crawlq.export.filters import RecordFilter
from crawlq.fetch.auth import HostCredentials
from crawlq.fetch.jar import CookieJar
from crawlq.frontier.inspection import host_matches
from crawlq.request import CrawlRequest
from crawlq.rules.politeness import HostPolicy, Politeness
from crawlq.rules.proxies import ProxyPool, parse_proxy
from crawlq.rules.scope import FilterReason, Scope
from crawlq.settings import Settings
from crawlq.urls import (
    canonical_host,
    canonicalize,
    fingerprint,
    host_key,
    host_name,
    normalize,
    split_host,
    url_keys,
)
from crawlq.web.addresses import AddressGuard, bare_host

MAPPED = ["::ffff:7f00:1d", "::FFFF:7F00:1D", "::ffff:127.0.0.29", "0:0:0:0:0:ffff:7f00:1d",
          "0000:0000:0000:0000:0000:FFFF:127.0.0.29", "::ffff:7f00:001d"]  # fmt: skip
"""Notations of the IPv4-mapped 127.0.0.29 (RFC 4291 §2.5.5.2)."""
LOOPBACK = ["::1", "0:0:0:0:0:0:0:1", "::0001", "0000:0000:0000:0000:0000:0000:0000:0001"]
"""Notations of ::1."""


@pytest.mark.parametrize(
    ("notations", "form"),
    [
        (MAPPED, "::ffff:127.0.0.29"),  # RFC 5952 §5: the IPv4 part dotted
        (LOOPBACK, "::1"),
        (["2001:DB8:0:0:1:0:0:1", "2001:0db8::1:0:0:1"], "2001:db8::1:0:0:1"),  # §4.2.3
        (["2001:db8:0:0:0:0:2:1"], "2001:db8::2:1"),  # §4.2.1: "::" as long as possible
        (["2001:db8:0:1:1:1:1:1"], "2001:db8:0:1:1:1:1:1"),  # §4.2.2: not for one group
        (["FE80::1%eth0"], "fe80::1%eth0"),  # the zone is kept as written
    ],
)
def test_every_notation_of_an_ipv6_address_has_one_written_form(
    notations: list[str], form: str
) -> None:
    for written in notations:
        assert canonical_host(written) == form, written
        assert canonical_host(f"[{written}]") == form, written


@pytest.mark.parametrize(
    ("host", "form"),
    [("Example.COM", "example.com"), ("127.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
     ("1.2.3.999", "1.2.3.999"), ("1::2::3", "1::2::3"), ("[v1.x]", "v1.x")],
)  # fmt: skip
def test_other_hosts_are_lower_cased_and_ipv4_dotted(host: str, form: str) -> None:
    assert canonical_host(host) == form


@pytest.mark.parametrize(
    ("notations", "form"), [(MAPPED, "[::ffff:127.0.0.29]"), (LOOPBACK, "[::1]")]
)
def test_urls_of_one_ipv6_address_are_one_url_one_host_one_fingerprint(
    notations: list[str], form: str
) -> None:
    for written in notations:
        url = f"http://[{written}]:8080/p?b=2&a=1#top"
        assert normalize(url) == f"http://{form}:8080/p?b=2&a=1"
        assert canonicalize(normalize(url)) == f"http://{form}:8080/p?a=1&b=2"
        assert canonicalize(f"http://[{written}]:8080/p") == f"http://{form}:8080/p"
        assert host_key(url) == f"{form}:8080"
        assert host_key(f"http://[{written}]:80/") == form
        assert url_keys(url).host == f"{form}:8080"
        assert CrawlRequest(url).host == f"{form}:8080"
        assert fingerprint("GET", url) == fingerprint("GET", f"http://{form}:8080/p?a=1&b=2")
        assert normalize("/x/../y#f", base=url) == f"http://{form}:8080/y"


@pytest.mark.parametrize("url", ["http://[1::2::3]/", "http://[::ffff:1.2.3.999]/"])
def test_a_bracketed_host_that_is_no_ipv6_address_is_no_url(url: str) -> None:
    with pytest.raises(InvalidURL):
        normalize(url)


@pytest.mark.parametrize(
    ("value", "parts"),
    [("[::FFFF:7f00:1d]:8080", ("::ffff:127.0.0.29", "8080")), ("[::0001]", ("::1", "")),
     ("0:0:0:0:0:0:0:1", ("::1", "")), ("Example.com:81", ("example.com", "81")),
     ("http://[::0001]:81/x", ("::1", "81")), ("127.1", ("127.0.0.1", ""))],
)  # fmt: skip
def test_split_host_reads_hosts_as_users_and_keys_write_them(
    value: str, parts: tuple[str, str]
) -> None:
    assert split_host(value) == parts
    assert host_name(value) == parts[0]


def test_scope_allows_the_seed_address_in_any_notation() -> None:
    scope = Scope([host_key("http://[::ffff:7f00:1d]:8080/")])
    assert scope.allowed_domains == frozenset({"::ffff:127.0.0.29"})
    for written in MAPPED:
        assert scope.check(CrawlRequest(f"http://[{written}]:8080/x")) is None, written
    assert Scope(["[::FFFF:127.0.0.29]"]).check(CrawlRequest("http://[::ffff:7f00:1d]/")) is None
    assert Scope(["[::1]"]).check(CrawlRequest("http://[::2]/")) == FilterReason.OFFSITE


def test_a_politeness_override_applies_to_its_address_in_any_notation() -> None:
    slow = HostPolicy(2.0, 1)
    rules = Politeness(overrides={"::ffff:127.0.0.29": slow})
    for written in MAPPED:
        assert rules.configured(f"[{written}]:8080") == slow, written
    assert rules.configured("[::ffff:127.0.0.30]") is None
    # from the settings' hosts table, written in another notation
    settings = Settings.build(cli={"hosts": (("[::FFFF:7f00:1d]", 2.0, 1),)}, env={})
    settings_rules = Politeness.from_settings(settings)
    assert settings_rules.configured(host_key("http://[::ffff:127.0.0.29]:81/")) == slow


def test_the_guard_exempts_a_seed_address_in_any_notation_and_no_other() -> None:
    guard = AddressGuard.of(hosts=[host_key("http://[::ffff:7f00:1d]:8080/")])
    assert guard.allowed_hosts == frozenset({"::ffff:127.0.0.29"})
    for written in MAPPED:
        assert bare_host(f"[{written}]:8080") == "::ffff:127.0.0.29"
        assert guard.check_literal(written) is None, written  # the seed: allowed
    loopback = AddressGuard.of(hosts=["[0:0:0:0:0:0:0:1]"])
    for written in LOOPBACK:
        assert loopback.check_literal(written) is None, written
    # other private addresses stay refused, in every notation (decided, never contacted)
    for private in ("::ffff:10.0.0.1", "::ffff:a00:1", "::FFFF:0A00:0001"):
        assert guard.check_literal(private) == "private 10.0.0.0/8 (IPv4-mapped)", private
        assert loopback.check_literal(private) == "private 10.0.0.0/8 (IPv4-mapped)", private
    assert guard.check_literal("::ffff:127.0.0.30") == "loopback 127.0.0.0/8 (IPv4-mapped)"
    assert loopback.check_literal("::2") is None  # public (2000::/3 aside, not refused)
    assert AddressGuard().check_literal("::0001") == "loopback ::1/128"


def test_credentials_of_an_address_go_to_it_in_any_notation() -> None:
    creds = HostCredentials({"[::FFFF:7f00:1d]": "Basic one", "[0:0:0:0:0:0:0:1]:8080": "Bearer t"})
    assert creds.hosts() == ["[::1]:8080", "[::ffff:127.0.0.29]"]
    for written in MAPPED:
        assert creds.for_url(f"http://[{written}]:81/") == "Basic one", written
    assert creds.for_url("http://[::0001]:8080/") == "Bearer t"
    assert creds.for_url("http://[::1]:8081/") is None  # that port only
    assert creds.for_url("http://[::ffff:127.0.0.30]/") is None


def test_proxy_rotation_and_no_proxy_read_one_host_in_any_notation() -> None:
    pool = ProxyPool([parse_proxy(f"http://127.0.0.1:{port}") for port in range(3128, 3136)])
    for last in range(16):
        hex_form, dotted = f"::ffff:7f00:{last:x}", f"::ffff:127.0.0.{last}"
        assert pool.choose(f"http://[{hex_form}]/", hex_form, 0) == pool.choose(
            f"http://[{dotted}]/", dotted, 0
        )
    env = {"HTTP_PROXY": "http://127.0.0.1:3128", "NO_PROXY": "[::FFFF:7f00:1d],0:0:0:0:0:0:0:1"}
    trusting = ProxyPool(environ=env)
    assert trusting.choose("http://[::ffff:127.0.0.29]/", "::ffff:127.0.0.29", 0) is None
    assert trusting.choose("http://[::1]:81/", "::1", 0) is None
    assert trusting.choose("http://[::2]/", "::2", 0) is not None


def test_host_filters_match_an_address_in_any_notation() -> None:
    page = SimpleNamespace(url="http://[::ffff:127.0.0.29]:8080/p")  # a record's URL
    for wanted in ("[::ffff:7f00:1d]", "::FFFF:7F00:1D", "[::ffff:7f00:1d]:8080"):
        assert RecordFilter(host=wanted).keeps(page), wanted
    assert not RecordFilter(host="[::ffff:7f00:1d]:8081").keeps(page)
    assert host_matches("[::ffff:127.0.0.29]:8080", "[::ffff:7f00:1d]")
    assert host_matches("[::ffff:127.0.0.29]:8080", "::ffff:7f00:1d")
    assert host_matches("[::1]", "[0:0:0:0:0:0:0:1]")
    assert not host_matches("[::ffff:127.0.0.29]:8080", "[::ffff:7f00:1d]:8081")
    assert host_matches("example.com:8080", "Example.COM")  # as before


async def test_a_cookie_set_under_one_notation_goes_to_the_others() -> None:
    jar = CookieJar()
    jar.update_cookies({"s": "v"}, URL(normalize("http://[::ffff:7f00:1d]:8080/"), encoded=True))
    for written in MAPPED:
        target = URL(normalize(f"http://[{written}]:8080/x"), encoded=True)
        assert {k: m.value for k, m in jar.filter_cookies(target).items()} == {"s": "v"}
