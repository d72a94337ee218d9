"""IPv4 hosts in other notations, end to end (README "URL rules and crawler traps").

A loopback page links ``http://127.1:PORT/x`` and ``http://0x7f000001:PORT/y``: the WHATWG
URL Standard reads both as 127.0.0.1, so they are fetched there and stored under the dotted
URL. A link to ``http://1.2.3.999/`` is no URL at all (its host ends in a number but is no
IPv4 address): it is never queued, and a redirect to it dead-letters the redirecting URL as
a bad redirect. Every socket the crawl opens and every name it looks up is recorded: nothing
but 127.0.0.1 is contacted, and nothing is handed to a DNS resolver.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest

from .conftest import crawl
from .rawsite import RawSite, response

INVALID = "http://1.2.3.999/z"


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every host the process connects to or looks up while the test runs."""
    seen: list[str] = []
    connect = socket.socket.connect
    getaddrinfo = socket.getaddrinfo

    def recording_connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple):
            seen.append(str(address[0]))
        return connect(sock, address)

    def recording_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(host.decode() if isinstance(host, bytes) else str(host))
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", recording_connect)
    monkeypatch.setattr(socket, "getaddrinfo", recording_getaddrinfo)
    return seen


async def test_other_notations_of_loopback_are_fetched_as_127_0_0_1_and_stored_dotted(
    db: Path, network: list[str]
) -> None:
    site: RawSite

    def answer(target: bytes) -> bytes:
        if target == b"/":
            links = (
                f'<a href="http://127.1:{site.port}/x">x</a>'
                f'<a href="http://0x7f000001:{site.port}/y">y</a>'
                f'<a href="{INVALID}">invalid</a> <a href="/redir">redirect</a>'
            )
            return response(links)
        if target == b"/redir":
            return response(status=302, headers=((b"Location", b"http://1.2.3.999/r"),))
        return response("<title>ok</title>")

    site = RawSite(answer)
    async with site:
        r = await crawl(db, [f"{site.base}/"], obey_robots=False)
    assert sorted(site.targets) == [b"/", b"/redir", b"/x", b"/y"]
    dotted = f"http://127.0.0.1:{site.port}"
    assert site.base == dotted
    assert set(r.pages) == {f"{dotted}/", f"{dotted}/x", f"{dotted}/y"}
    assert r.pages[f"{dotted}/x"].status == 200
    assert r.dead[f"{dotted}/redir"].reason == "bad_redirect"  # a Location of no URL
    assert r.filtered == {}
    assert r.report.frontier.pending == 0
    assert network, "the recording saw the crawl's own connections"
    assert all(ipaddress.ip_address(host).is_loopback for host in network), network
