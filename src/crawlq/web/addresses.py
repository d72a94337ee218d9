"""The private-address guard: which IP addresses a crawler must not connect to.

A crawler fetches URLs that strangers wrote (links, redirects, a shared inbox). Without a
guard, a page can make it request ``http://169.254.169.254/`` (a cloud metadata service), an
admin panel on ``10.0.0.1`` or a database on ``localhost`` from inside your network (server-
side request forgery). This module decides; `crawlq.fetch` enforces it on the address each
connection actually goes to, so neither a redirect nor DNS rebinding gets around it.

Refused ranges and their sources (IANA IPv4 and IPv6 Special-Purpose Address Registries):

* loopback ``127.0.0.0/8`` (RFC 1122 §3.2.1.3) and ``::1/128`` (RFC 4291 §2.5.3);
* private ``10.0.0.0/8``, ``172.16.0.0/12``, ``192.168.0.0/16`` (RFC 1918 §3);
* link-local ``169.254.0.0/16`` (RFC 3927; cloud metadata services live here) and
  ``fe80::/10`` (RFC 4291 §2.5.6);
* shared address space (carrier-grade NAT) ``100.64.0.0/10`` (RFC 6598);
* "this network" ``0.0.0.0/8`` (RFC 1122 §3.2.1.3) and unspecified ``::/128`` (RFC 4291
  §2.5.2): connecting to them reaches the local host on Linux;
* multicast ``224.0.0.0/4`` (RFC 5771) and ``ff00::/8`` (RFC 4291 §2.7);
* reserved ``240.0.0.0/4`` (RFC 1112 §4) and limited broadcast ``255.255.255.255/32``
  (RFC 919, RFC 8190);
* unique local ``fc00::/7`` (RFC 4193) and the deprecated site-local ``fec0::/10`` (RFC 3879);
* IPv6 forms that carry an IPv4 address are judged by that address: IPv4-mapped
  ``::ffff:0:0/96`` (RFC 4291 §2.5.5.2), 6to4 ``2002::/16`` (RFC 3056 §2) and the NAT64
  well-known prefix ``64:ff9b::/96`` (RFC 6052 §2.1).

Everything here is pure (no I/O). Hosts are compared in the one written form of
`crawlq.urls.canonical_host`, so ``[::ffff:7f00:1d]`` and ``[::ffff:127.0.0.29]`` are one
exempt host.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from crawlq.urls.canonical import host_name

__all__ = ["AddressGuard", "bare_host", "is_ip_literal", "refusal"]

_IPv4 = ipaddress.IPv4Network
_IPv6 = ipaddress.IPv6Network

_V4_RANGES: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_IPv4("127.0.0.0/8"), "loopback"),
    (_IPv4("10.0.0.0/8"), "private"),
    (_IPv4("172.16.0.0/12"), "private"),
    (_IPv4("192.168.0.0/16"), "private"),
    (_IPv4("169.254.0.0/16"), "link-local"),
    (_IPv4("100.64.0.0/10"), "shared (CGNAT)"),
    (_IPv4("0.0.0.0/8"), "this-network"),
    (_IPv4("224.0.0.0/4"), "multicast"),
    (_IPv4("255.255.255.255/32"), "broadcast"),  # before 240/4, which contains it
    (_IPv4("240.0.0.0/4"), "reserved"),
)
"""IPv4 ranges refused, each with the name a refusal reports (module docstring: sources)."""

_V6_RANGES: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_IPv6("::1/128"), "loopback"),
    (_IPv6("::/128"), "unspecified"),
    (_IPv6("fe80::/10"), "link-local"),
    (_IPv6("fec0::/10"), "site-local"),
    (_IPv6("fc00::/7"), "unique-local"),
    (_IPv6("ff00::/8"), "multicast"),
)
"""IPv6 ranges refused, each with the name a refusal reports (module docstring: sources)."""

_NAT64 = _IPv6("64:ff9b::/96")


def refusal(ip: str) -> str | None:
    """Why a connection to ``ip`` is refused, or None when it is a public address.

    Args:
        ip: An IPv4 or IPv6 address in text form; an IPv6 zone (``fe80::1%eth0``) is allowed.

    Returns:
        The name and prefix of the refused range, such as ``"loopback 127.0.0.0/8"`` or
        ``"link-local 169.254.0.0/16 (IPv4-mapped)"``; ``"unparsable address"`` when ``ip``
        is not an IP address (fail closed); None for a public address.
    """
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return "unparsable address"
    if isinstance(address, ipaddress.IPv4Address):
        return _v4_refusal(address)
    embedded, form = _embedded_v4(address)
    if embedded is not None:
        inner = _v4_refusal(embedded)
        return None if inner is None else f"{inner} ({form})"
    for network, name in _V6_RANGES:
        if address in network:
            return f"{name} {network}"
    return None


def _v4_refusal(address: ipaddress.IPv4Address) -> str | None:
    for network, name in _V4_RANGES:
        if address in network:
            return f"{name} {network}"
    return None


def _embedded_v4(
    address: ipaddress.IPv6Address,
) -> tuple[ipaddress.IPv4Address | None, str]:
    """The IPv4 address an IPv6 address stands for, and the form's name (else None, "")."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    return None, ""


def is_ip_literal(host: str) -> bool:
    """Whether ``host`` is written as an IP address, so that no DNS lookup happens for it.

    The same test aiohttp applies before it skips its resolver: all digits and dots, or any
    colon (IPv6). A host that passes it but does not parse is judged by `refusal` (refused).
    """
    return ":" in host or (host.replace(".", "").isdigit())


def bare_host(value: str) -> str:
    """``"Example.COM:8080"`` -> ``"example.com"``; ``"[::0001]:80"`` -> ``"::1"``.

    Without port, IPv6 brackets or a trailing dot, in the written form of
    `crawlq.urls.canonical_host` (lower case, IPv4 dotted, IPv6 as RFC 5952 writes it).
    """
    return host_name(value).rstrip(".")


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """The guard one fetcher applies: refused ranges, minus the job's exemptions.

    Attributes:
        allow_private: Allow every address (``--allow-private``): the guard is off.
        allowed_hosts: Host names (or IP literals) whose addresses are allowed whatever they
            are: a job's seed hosts, so that crawling your own intranet or localhost works
            without a flag. Compared in one written form, ports ignored (`bare_host`).
    """

    allow_private: bool = False
    allowed_hosts: frozenset[str] = field(default=frozenset())

    def __post_init__(self) -> None:
        hosts = frozenset(bare_host(h) for h in self.allowed_hosts if h and h.strip())
        object.__setattr__(self, "allowed_hosts", hosts)

    @classmethod
    def of(cls, *, allow_private: bool = False, hosts: Iterable[str] = ()) -> AddressGuard:
        """A guard from any iterable of host names (see the class attributes)."""
        return cls(allow_private=allow_private, allowed_hosts=frozenset(hosts))

    def exempt(self, host: str) -> bool:
        """Whether ``host`` may connect to any address (guard off, or an allowed host)."""
        return self.allow_private or bare_host(host) in self.allowed_hosts

    def check(self, host: str, ip: str) -> str | None:
        """Why a connection to ``ip``, resolved from ``host``, is refused; None to allow it.

        Args:
            host: The URL's host (name or IP literal; a port is ignored).
            ip: The address the connection would go to.

        Returns:
            The refused range's name (`refusal`), or None.
        """
        if self.exempt(host):
            return None
        return refusal(ip)

    def check_literal(self, host: str) -> str | None:
        """`check` for a host written as an IP address (None for a name: DNS decides later).

        Args:
            host: The URL's host, without brackets (``urlsplit(url).hostname``).
        """
        if not is_ip_literal(host):
            return None
        return self.check(host, host)
