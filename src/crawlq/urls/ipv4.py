"""IPv4 hosts in any notation, read as the WHATWG URL Standard (and every browser) reads them.

URL Standard §3.5 "host parsing": a host whose last label is a number is an IPv4 address,
whatever its notation: ``127.1``, ``0x7f.1``, ``2130706433``, ``0177.0.0.1`` and
``1.2.3.0x4`` all name an address, and browsers (and the ada library) write it dotted
(``127.0.0.1``). A host that ends in a number but is not a valid IPv4 address
(``1.2.3.999``, ``foo.123``, ``1.2.3.4.5``) is not a host at all: the URL fails to parse.

Reading them the same way matters for trust as much as for dedup: the private-address guard
(`crawlq.web.addresses`) judges the dotted address, and a host such as ``1.2.3.999`` is never
handed to a DNS resolver.

The three algorithms below follow the Standard step by step (https://url.spec.whatwg.org/):
"ends in a number checker", "IPv4 parser" and "IPv4 number parser"; the serialisation is
"IPv4 serializer". Input is an ASCII host, already lower-cased and percent-decoded (the
Standard runs them after "domain to ASCII"). Pure functions, no I/O.
"""

from __future__ import annotations

import re

__all__ = ["IPv4Error", "dotted", "ends_in_a_number", "parse_ipv4"]

_DIGITS = {
    10: frozenset("0123456789"),
    8: frozenset("01234567"),
    16: frozenset("0123456789abcdefABCDEF"),
}

_BYTE = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED = re.compile(rf"(?:{_BYTE}\.){{3}}{_BYTE}")
"""An address already in the form `dotted` writes (it parses to itself): the common case."""


class IPv4Error(ValueError):
    """A host that ends in a number but is not a valid IPv4 address; the message says why."""


def ends_in_a_number(host: str) -> bool:
    """URL Standard "ends in a number checker": whether ``host`` must be parsed as IPv4.

    True when the last label (a single trailing dot ignored) is all ASCII digits, or is an
    IPv4 number in another notation (``0x``/``0X`` hex, including a bare ``0x``).
    """
    parts = host.split(".")
    if parts[-1] == "":
        if len(parts) == 1:
            return False
        parts.pop()
    last = parts[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return _number(last) is not None


def _number(part: str) -> int | None:
    """URL Standard "IPv4 number parser": the value of one label, or None on failure.

    A leading ``0x``/``0X`` means hexadecimal, a leading ``0`` (with more after it) octal,
    else decimal; the prefix alone (``0x``) is zero.
    """
    if not part:
        return None
    radix = 10
    if len(part) >= 2 and part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) >= 2 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0
    if not _DIGITS[radix].issuperset(part):
        return None
    return int(part, radix)


def parse_ipv4(host: str) -> int:
    """URL Standard "IPv4 parser": the 32-bit address ``host`` names.

    Up to four labels; every label but the last is one byte, and the last fills the
    remaining bytes (``127.1`` is 127.0.0.1, ``2130706433`` is 127.0.0.1 too).

    Args:
        host: A host for which `ends_in_a_number` is true.

    Returns:
        The address as an integer, 0 to 2**32 - 1.

    Raises:
        IPv4Error: ``host`` is not a valid IPv4 address; the message says which rule fails.
    """
    parts = host.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    why = f"host {host!r} ends in a number but is not an IPv4 address"
    if len(parts) > 4:
        raise IPv4Error(f"{why}: more than four parts")
    numbers: list[int] = []
    for part in parts:
        number = _number(part)
        if number is None:
            raise IPv4Error(f"{why}: {part!r} is not a number")
        numbers.append(number)
    for part, number in zip(parts[:-1], numbers[:-1], strict=False):
        if number > 255:
            raise IPv4Error(f"{why}: {part!r} is over 255")
    largest = 256 ** (5 - len(numbers)) - 1
    if numbers[-1] > largest:
        raise IPv4Error(f"{why}: its last part {parts[-1]!r} is over {largest}")
    address = numbers[-1]
    for counter, number in enumerate(numbers[:-1]):
        address += number * 256 ** (3 - counter)
    return address


def dotted(host: str) -> str:
    """``host`` as the URL Standard serialises it: an IPv4 address dotted, else unchanged.

    Args:
        host: An ASCII host name or address, lower-cased and percent-decoded.

    Returns:
        ``a.b.c.d`` when ``host`` ends in a number (URL Standard "IPv4 serializer"),
        otherwise ``host`` itself (a domain, or an IPv6 literal in brackets).

    Raises:
        IPv4Error: ``host`` ends in a number but is not a valid IPv4 address.
    """
    if _DOTTED.fullmatch(host) or not ends_in_a_number(host):
        return host
    address = parse_ipv4(host)
    return ".".join(str((address >> shift) & 0xFF) for shift in (24, 16, 8, 0))
