"""The guarded resolver: DNS answers filtered by the private-address guard (`crawlq.web.addresses`).

aiohttp connects only to addresses its resolver returned, so what `GuardedResolver` drops
is never connected to, and a DNS answer that changes between two lookups ("DNS rebinding")
gains nothing. When every address of a host is refused it raises `AddressRefused`, which
`crawlq.fetch.Fetcher` turns into `crawlq.errors.PrivateAddressError`. IP-literal hosts
skip resolvers; the fetcher judges those itself.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from crawlq.web.addresses import AddressGuard

__all__ = ["AddressRefused", "GuardedResolver"]

logger = logging.getLogger("crawlq.fetch")


class AddressRefused(Exception):
    """Raised by `GuardedResolver` when every address of a host is refused.

    Not an `OSError`, so that aiohttp does not turn it into a DNS error: it leaves
    ``session.request`` as is and `Fetcher` turns it into `PrivateAddressError`.

    Attributes:
        host: The host looked up.
        range_name: The refused range of (the first of) its addresses (`crawlq.web.addresses`).
    """

    def __init__(self, host: str, range_name: str) -> None:
        super().__init__(f"{host} is on a {range_name} address")
        self.host = host
        self.range_name = range_name


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that returns only the addresses an `AddressGuard` allows.

    aiohttp connects only to addresses its resolver returned (and caches them, by host, for
    the connector's DNS cache time), so what this drops is never connected to.

    Args:
        guard: The guard to apply.
        inner: The resolver that does the lookups (default: aiohttp's ``DefaultResolver``,
            created on first use inside the running event loop).

    Raises:
        AddressRefused: From `resolve`, when the host has addresses and all are refused.
    """

    def __init__(self, guard: AddressGuard, inner: AbstractResolver | None = None) -> None:
        self.guard = guard
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` with the inner resolver and keep the allowed addresses."""
        if self._inner is None:
            self._inner = aiohttp.DefaultResolver()
        infos = await self._inner.resolve(host, port, family)
        if self.guard.exempt(host):
            return infos
        kept = _allowed(self.guard, host, infos)
        if infos and not kept:
            range_name = self.guard.check(host, infos[0]["host"]) or "refused"
            raise AddressRefused(host, range_name)
        if len(kept) < len(infos):
            logger.debug("%s: dropped %d private addresses", host, len(infos) - len(kept))
        return kept

    async def close(self) -> None:
        """Close the inner resolver."""
        if self._inner is not None:
            await self._inner.close()


def _allowed(guard: AddressGuard, host: str, infos: Sequence[ResolveResult]) -> list[ResolveResult]:
    return [info for info in infos if guard.check(host, info["host"]) is None]
