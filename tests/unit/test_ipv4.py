"""IPv4 hosts in any notation (WHATWG URL Standard §3.5), and the URLs that carry them."""

from __future__ import annotations

import random

import pytest
from ada_url import URL

from crawlq.errors import InvalidURL
from crawlq.urls import canonicalize, fingerprint, normalize, url_keys
from crawlq.urls.ipv4 import IPv4Error, dotted, ends_in_a_number, parse_ipv4

# The URL Standard's examples (§3.5 "host parsing", §3.3 "IPv4 parser" notes) and the
# web-platform-tests url/resources/urltestdata.json cases for IPv4 hosts.
DOTTED = [
    ("127.1", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"),
    ("0X7F.1", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("1.2.3.0x4", "1.2.3.4"),
    ("0x7f000001", "127.0.0.1"),
    ("127.0.0.1.", "127.0.0.1"),  # one trailing dot is ignored
    ("0x", "0.0.0.0"),  # the prefix alone is zero
    ("0xffffffff", "255.255.255.255"),
    ("4294967295", "255.255.255.255"),
    ("0.0.0x100", "0.0.1.0"),
    ("192.168.257", "192.168.1.1"),
    ("192.0x00A80001", "192.168.0.1"),
    ("0300.0250.0.01", "192.168.0.1"),
    ("1.2.3.4", "1.2.3.4"),
]
INVALID = [
    "1.2.3.999",
    "foo.123",
    "foo.0x4",
    "foo.0x",
    "1.2.3.4.5",
    "4294967296",
    "0x100000000",
    "256.0.0.1",
    "09",
    "1.2.3.08",
    "1..2",
    "0xfg.1",
]
DOMAINS = ["example.com", "foo.bar.09a", "1.2.3.4a", "0x7f.example", "xn--1-", "[::1]", "a.", "."]


@pytest.mark.parametrize(("host", "expected"), DOTTED)
def test_a_host_ending_in_a_number_is_written_dotted(host: str, expected: str) -> None:
    assert ends_in_a_number(host)
    assert dotted(host) == expected


@pytest.mark.parametrize("host", INVALID)
def test_a_host_ending_in_a_number_that_is_no_ipv4_address_fails(host: str) -> None:
    assert ends_in_a_number(host)
    with pytest.raises(IPv4Error, match="not an IPv4 address"):
        parse_ipv4(host)
    with pytest.raises(IPv4Error):
        dotted(host)


def test_the_reason_names_the_part_at_fault() -> None:
    with pytest.raises(IPv4Error, match="its last part '999' is over 255"):
        parse_ipv4("1.2.3.999")
    with pytest.raises(IPv4Error, match="'256' is over 255"):
        parse_ipv4("256.0.0.1")
    with pytest.raises(IPv4Error, match="'foo' is not a number"):
        parse_ipv4("foo.123")
    with pytest.raises(IPv4Error, match="more than four parts"):
        parse_ipv4("1.2.3.4.5")
    with pytest.raises(IPv4Error, match="its last part '4294967296' is over 4294967295"):
        parse_ipv4("4294967296")


@pytest.mark.parametrize("host", DOMAINS)
def test_a_domain_is_left_alone(host: str) -> None:
    assert not ends_in_a_number(host)
    assert dotted(host) == host


def test_the_parser_agrees_with_ada_on_random_hosts() -> None:
    """ada implements the URL Standard and is what Node.js uses: same answers, or both fail."""
    rng = random.Random(15)
    pieces = ["0", "1", "7", "9", "00", "08", "0x", "0X", "0x7f", "ff", "255", "256", "a", ""]
    for _ in range(3000):
        labels = [
            "".join(rng.choices(pieces, k=rng.randint(1, 3))) for _ in range(rng.randint(1, 5))
        ]
        host = ".".join(labels)
        if not host or host.startswith(".") or ".." in host:
            continue
        try:
            ada_host: str | None = URL(f"http://{host}/").hostname
        except ValueError:
            ada_host = None
        try:
            ours: str | None = dotted(host.lower())
        except IPv4Error:
            ours = None
        assert ours == ada_host, host


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.1/", "http://127.0.0.1/"),
        ("http://0x7f.1:8080/a?b=1", "http://127.0.0.1:8080/a?b=1"),
        ("http://2130706433/", "http://127.0.0.1/"),
        ("http://0177.0.0.1/x", "http://127.0.0.1/x"),
        ("http://1.2.3.0x4/", "http://1.2.3.4/"),
        ("HTTP://0X7F.1:80/#frag", "http://127.0.0.1/"),
        ("http://user:pw@127.1/p q", "http://127.0.0.1/p%20q"),
        ("http://127%2E1/", "http://127.0.0.1/"),
        ("http://\uff11\uff12\uff17.1/", "http://127.0.0.1/"),  # full-width digits, IDNA-mapped
        ("https://127.0.0.1./", "https://127.0.0.1/"),
    ],
)
def test_request_and_canonical_urls_write_ipv4_hosts_dotted(url: str, expected: str) -> None:
    assert normalize(url) == expected
    assert url_keys(url).url == expected
    assert canonicalize(expected) == expected


def test_one_address_in_two_notations_is_one_request() -> None:
    assert fingerprint("GET", "http://127.1/a") == fingerprint("GET", "http://127.0.0.1/a")
    assert fingerprint("GET", "http://0x7f000001/a?x=1&y=2") == fingerprint(
        "GET", "http://127.0.0.1/a?y=2&x=1"
    )


def test_canonicalize_writes_ipv4_hosts_dotted_on_either_path() -> None:
    assert canonicalize("http://127.1/a") == "http://127.0.0.1/a"  # the fast path
    assert canonicalize("http://127.1/a?b=2&a=1") == "http://127.0.0.1/a?a=1&b=2"  # w3lib's


def test_a_relative_reference_resolves_to_the_dotted_host() -> None:
    assert normalize("//0x7f.1:81/y", base="http://example.com/") == "http://127.0.0.1:81/y"


@pytest.mark.parametrize(
    "url", ["http://1.2.3.999/", "http://foo.123/", "https://1.2.3.4.5:8080/x", "http://0x.0xg.1/"]
)
def test_a_url_whose_host_ends_in_a_number_but_is_no_address_is_invalid(url: str) -> None:
    with pytest.raises(InvalidURL, match="not an IPv4 address") as caught:
        normalize(url)
    assert caught.value.url == url
    assert caught.value.reason.startswith("host ")
    with pytest.raises(InvalidURL, match="not an IPv4 address"):
        canonicalize(url)
    with pytest.raises(InvalidURL, match="not an IPv4 address"):
        url_keys(url)
