"""One IP address, one host: the written form of `crawlq.urls.canonical_host`, everywhere.

An IPv6 address has many notations (``[0:0:0:0:0:0:0:1]``, ``[::0001]``, ``[::1]``; for an
IPv4-mapped one ``[::ffff:7f00:1d]`` and ``[::FFFF:127.0.0.29]``); RFC 5952 gives each one
text form, and every comparison of hosts reads that form: request and canonical URLs, host
keys, scope, politeness overrides, the private-address guard, per-host credentials, proxy
rotation and ``NO_PROXY``, the export and dead-letter ``--host`` filters, cookies. The guard
is tested as a decision function: nothing here sends traffic.
"""

from __future__ import annotations

import pytest

from crawlq.errors import InvalidURL
from crawlq.request import CrawlRequest
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
