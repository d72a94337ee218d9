"""The private-address decision (crawlq.web.addresses): every refused range, and what stays open."""

from __future__ import annotations

import pytest

from crawlq.web.addresses import AddressGuard, bare_host, is_ip_literal, refusal


@pytest.mark.parametrize(
    ("ip", "name"),
    [
        ("127.0.0.1", "loopback 127.0.0.0/8"),
        ("127.255.255.254", "loopback 127.0.0.0/8"),
        ("10.0.0.1", "private 10.0.0.0/8"),
        ("10.255.255.255", "private 10.0.0.0/8"),
        ("172.16.0.1", "private 172.16.0.0/12"),
        ("172.31.255.255", "private 172.16.0.0/12"),
        ("192.168.1.1", "private 192.168.0.0/16"),
        ("169.254.169.254", "link-local 169.254.0.0/16"),  # cloud metadata
        ("100.64.0.1", "shared (CGNAT) 100.64.0.0/10"),
        ("100.127.255.255", "shared (CGNAT) 100.64.0.0/10"),
        ("0.0.0.0", "this-network 0.0.0.0/8"),
        ("0.1.2.3", "this-network 0.0.0.0/8"),
        ("224.0.0.1", "multicast 224.0.0.0/4"),
        ("239.255.255.250", "multicast 224.0.0.0/4"),
        ("240.0.0.1", "reserved 240.0.0.0/4"),
        ("255.255.255.254", "reserved 240.0.0.0/4"),
        ("255.255.255.255", "broadcast 255.255.255.255/32"),
        ("::1", "loopback ::1/128"),
        ("::", "unspecified ::/128"),
        ("fc00::1", "unique-local fc00::/7"),
        ("fd00::1", "unique-local fc00::/7"),
        ("fe80::1", "link-local fe80::/10"),
        ("fe80::1%eth0", "link-local fe80::/10"),
        ("FEBF::1", "link-local fe80::/10"),
        ("fec0::1", "site-local fec0::/10"),
        ("ff02::1", "multicast ff00::/8"),
    ],
)
def test_refused_ranges_are_named(ip: str, name: str) -> None:
    assert refusal(ip) == name


@pytest.mark.parametrize(
    "ip",
    [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "172.15.255.255",  # just below 172.16/12
        "172.32.0.0",  # just above it
        "100.63.255.255",  # just below 100.64/10
        "100.128.0.0",  # just above it
        "169.253.255.255",
        "11.0.0.1",
        "192.169.0.1",
        "223.255.255.255",  # just below multicast
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "::ffff:8.8.8.8",  # IPv4-mapped public
        "2002:0808:0808::1",  # 6to4 of 8.8.8.8
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    ],
)
def test_public_addresses_are_allowed(ip: str) -> None:
    assert refusal(ip) is None


@pytest.mark.parametrize(
    ("ip", "name"),
    [
        ("::ffff:127.0.0.1", "loopback 127.0.0.0/8 (IPv4-mapped)"),
        ("::ffff:7f00:1", "loopback 127.0.0.0/8 (IPv4-mapped)"),
        ("::FFFF:169.254.169.254", "link-local 169.254.0.0/16 (IPv4-mapped)"),
        ("::ffff:10.1.2.3", "private 10.0.0.0/8 (IPv4-mapped)"),
        ("::ffff:0.0.0.0", "this-network 0.0.0.0/8 (IPv4-mapped)"),
        ("2002:7f00:1::1", "loopback 127.0.0.0/8 (6to4)"),
        ("2002:a9fe:a9fe::", "link-local 169.254.0.0/16 (6to4)"),
        ("2002:c0a8:0101::1", "private 192.168.0.0/16 (6to4)"),
        ("64:ff9b::7f00:1", "loopback 127.0.0.0/8 (NAT64)"),
        ("64:ff9b::a00:1", "private 10.0.0.0/8 (NAT64)"),
    ],
)
def test_ipv6_forms_of_an_ipv4_address_are_judged_as_that_address(ip: str, name: str) -> None:
    assert refusal(ip) == name


@pytest.mark.parametrize("ip", ["", "example.com", "127.1", "1.2.3.4.5", "::g", "300.1.1.1"])
def test_what_is_not_an_address_is_refused(ip: str) -> None:
    assert refusal(ip) == "unparsable address"


def test_the_guard_allows_its_hosts_case_insensitively_whatever_the_port() -> None:
    guard = AddressGuard.of(hosts=["Intranet.Example:8080", "127.0.0.1", "[::1]:80"])
    assert guard.allowed_hosts == frozenset({"intranet.example", "127.0.0.1", "::1"})
    assert guard.check("INTRANET.example", "10.0.0.5") is None
    assert guard.check("intranet.example:443", "10.0.0.5") is None
    assert guard.check("intranet.example.", "10.0.0.5") is None  # the FQDN form
    assert guard.check("127.0.0.1", "127.0.0.1") is None
    assert guard.check("::1", "::1") is None
    # another host on the same address is not exempt: the exemption is by name
    assert guard.check("other.example", "10.0.0.5") == "private 10.0.0.0/8"
    assert guard.check("sub.intranet.example", "10.0.0.5") == "private 10.0.0.0/8"
    assert guard.check("127.0.0.2", "127.0.0.2") == "loopback 127.0.0.0/8"
    assert guard.check("public.example", "93.184.216.34") is None


def test_allow_private_turns_the_guard_off() -> None:
    guard = AddressGuard(allow_private=True)
    for ip in ("127.0.0.1", "169.254.169.254", "fd00::1", "::ffff:10.0.0.1"):
        assert guard.check("anything.example", ip) is None
    assert guard.check_literal("127.0.0.2") is None


def test_check_literal_judges_ip_hosts_only() -> None:
    guard = AddressGuard()
    assert guard.check_literal("example.com") is None  # a name: DNS decides, later
    assert guard.check_literal("127.0.0.1") == "loopback 127.0.0.0/8"
    assert guard.check_literal("::ffff:127.0.0.1") == "loopback 127.0.0.0/8 (IPv4-mapped)"
    assert guard.check_literal("127.1") == "unparsable address"  # fail closed
    assert guard.check_literal("8.8.8.8") is None


@pytest.mark.parametrize(
    ("host", "literal"),
    [("127.0.0.1", True), ("::1", True), ("2130706433", True), ("example.com", False),
     ("1.example", False), ("localhost", False)],
)  # fmt: skip
def test_is_ip_literal_is_aiohttps_test(host: str, literal: bool) -> None:
    assert is_ip_literal(host) is literal


@pytest.mark.parametrize(
    ("value", "host"),
    [("Example.COM:8080", "example.com"), ("[::1]:80", "::1"), ("[fe80::1]", "fe80::1"),
     ("::1", "::1"), ("host.", "host"), (" 127.0.0.1 ", "127.0.0.1")],
)  # fmt: skip
def test_bare_host(value: str, host: str) -> None:
    assert bare_host(value) == host
