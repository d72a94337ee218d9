"""Where a fetch's connections may go: the guarded resolver, and proxies.

* The guarded resolver (`GuardedResolver`): DNS answers filtered by the private-address
  guard (`crawlq.web.addresses`). aiohttp connects only to addresses its resolver returned,
  so what it drops is never connected to, and a DNS answer that changes between two lookups
  ("DNS rebinding") gains nothing. When every address of a host is refused it raises
  `AddressRefused`, which `crawlq.fetch.Fetcher` turns into
  `crawlq.errors.PrivateAddressError`. IP-literal hosts skip resolvers; the fetcher judges
  those itself.
* Proxies: `crawlq.rules.proxies` states the rules; this module applies them to aiohttp.
  HTTP and HTTPS proxies go through aiohttp's ``proxy=`` (absolute-URI requests for http
  targets, a CONNECT tunnel for https ones) on a session of their own, whose resolver only
  ever resolves proxy hosts (so it is not guarded: they are this process's configuration).
  The credentials go in ``proxy_headers`` (``Proxy-Authorization``), never in a URL aiohttp
  could quote into a message. SOCKS5 proxies go through aiohttp-socks' ``ProxyConnector``
  (the ``socks`` extra), one session each, with remote DNS (the proxy resolves the target's
  name).
* `guard_target` judges the *target* of a proxied request before anything is sent: an IP
  literal by the guard, a name by resolving it here through `GuardedResolver` (a name only
  the proxy can resolve is a ``dns_error``).
* `proxy_failure` sorts an exception of a proxied request into the proxy's failure
  (`ProxyFailed`), the target's connect failure, or neither (None:
  `crawlq.fetch.exchange.classify` decides).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from crawlq.errors import ConfigError, FetchError, ProxyFailed, TransientFetchError
from crawlq.rules.proxies import PROXY_SIDE_ERRORS, SOCKS_TARGET_REPLIES, Proxy, proxy_status_error
from crawlq.web.addresses import AddressGuard, is_ip_literal

__all__ = [
    "AddressRefused",
    "GuardedResolver",
    "guard_target",
    "proxy_failure",
    "proxy_kwargs",
    "proxy_status_failure",
    "socks_connector",
    "socks_errors",
]

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


# -- proxies ---------------------------------------------------------------------------------------


def socks_connector(proxy: Proxy, limit: int) -> aiohttp.BaseConnector:
    """An aiohttp connector that tunnels every connection through SOCKS5 ``proxy``.

    Raises:
        ConfigError: aiohttp-socks is not installed (the message names the ``socks`` extra).
    """
    try:
        from aiohttp_socks import ProxyConnector, ProxyType
    except ImportError as exc:
        raise ConfigError(
            "proxies", f"socks5 proxies need aiohttp-socks: pip install 'crawlq[socks]' ({exc})"
        ) from None
    return ProxyConnector(
        host=proxy.host,
        port=proxy.port,
        proxy_type=ProxyType.SOCKS5,
        username=proxy.user,
        password=proxy.password,
        rdns=True,
        limit=limit,
    )


def proxy_kwargs(proxy: Proxy | None, headers: dict[str, str], url: str) -> dict[str, Any]:
    """``session.request`` arguments that send a request of ``url`` through ``proxy``.

    ``Proxy-Authorization`` goes on the CONNECT request of an https target (aiohttp's
    ``proxy_headers``), and for an http target on the request itself (added to ``headers``),
    which only the proxy reads: it does not forward it.
    """
    if proxy is None or proxy.scheme == "socks5":
        return {}
    if not proxy.user:
        return {"proxy": proxy.address}
    credential = aiohttp.encode_basic_auth(proxy.user, proxy.password or "")
    if not url.startswith("https:"):
        headers["Proxy-Authorization"] = credential
        return {"proxy": proxy.address}
    return {"proxy": proxy.address, "proxy_headers": {"Proxy-Authorization": credential}}


async def guard_target(
    guard: AddressGuard, resolver: Callable[[], GuardedResolver], url: str, host: str, port: int
) -> None:
    """Resolve a proxied request's target here so that the guard judges it (module docstring).

    Raises:
        AddressRefused: Every address of ``host`` is refused (the caller's
            `PrivateAddressError`).
        TransientFetchError: ``dns_error``: ``host`` does not resolve here.
    """
    if guard.exempt(host) or is_ip_literal(host):
        return  # IP literals: the caller's check_literal judged it already
    try:
        await resolver().resolve(host, port, socket.AF_UNSPEC)
    except OSError as exc:
        raise TransientFetchError(
            url, "dns_error", f"{host} (resolved here to guard it, before the proxy): {exc}"
        ) from exc


def proxy_status_failure(
    url: str, proxy: Proxy, status: int, headers: dict[str, str]
) -> ProxyFailed | None:
    """The proxy's failure a response through ``proxy`` shows (407; 5xx blaming the proxy)."""
    if status == 407:
        return ProxyFailed(url, proxy.id, "proxy_auth_required", f"{proxy} answered 407")
    if status >= 500:
        error = proxy_status_error(headers.get("proxy-status"))
        if error in PROXY_SIDE_ERRORS:
            return ProxyFailed(url, proxy.id, "proxy_error", f"{proxy} answered {status} ({error})")
    return None


def proxy_failure(url: str, proxy: Proxy, exc: BaseException) -> FetchError | None:
    """Whose failure ``exc`` of a request through ``proxy`` is (module docstring).

    Returns:
        `ProxyFailed` for the proxy's; a ``connect_error`` `TransientFetchError` when the
        proxy reports the target unreachable; None when neither can be told (the caller
        classifies it as a direct request's failure).
    """
    if isinstance(exc, aiohttp.ClientHttpProxyError):  # the CONNECT answer was not 2xx
        headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
        failure = proxy_status_failure(url, proxy, exc.status, headers)
        error = proxy_status_error(headers.get("proxy-status"))
        if failure is None and error is not None and error not in PROXY_SIDE_ERRORS:
            return TransientFetchError(
                url, "connect_error", f"{proxy} could not reach the target ({error})"
            )
        return failure or ProxyFailed(
            url, proxy.id, "proxy_refused", f"{proxy} refused the tunnel: {exc.status}"
        )
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return ProxyFailed(url, proxy.id, "proxy_connect_error", f"no connection to {proxy}")
    if proxy.scheme == "socks5":
        return _socks_failure(url, proxy, exc)
    return None


def socks_errors() -> tuple[type[BaseException], ...]:
    """What a SOCKS5 proxy's refusal raises (aiohttp-socks' exceptions), or () without it.

    Imported on the first call (aiohttp-socks and python-socks are ~10 ms of imports), which
    `Fetcher` makes when it opens its first SOCKS5 session: a process without SOCKS5 proxies
    never loads them, and no other request can raise them.
    """
    global _socks_errors_loaded
    if _socks_errors_loaded is None:
        try:
            from aiohttp_socks import ProxyConnectionError, ProxyError, ProxyTimeoutError
        except ImportError:  # pragma: no cover - depends on the install
            _socks_errors_loaded = ()
        else:
            _socks_errors_loaded = (ProxyConnectionError, ProxyError, ProxyTimeoutError)
    return _socks_errors_loaded


_socks_errors_loaded: tuple[type[BaseException], ...] | None = None


def _socks_failure(url: str, proxy: Proxy, exc: BaseException) -> FetchError | None:
    """The failure an aiohttp-socks exception shows (its ``error_code``: the SOCKS5 reply)."""
    errors = socks_errors()
    if not errors or not isinstance(exc, errors):
        return None
    code = getattr(exc, "error_code", None)
    if code is None and type(exc).__name__ != "ProxyError":  # no connection, or a timeout
        return ProxyFailed(url, proxy.id, "proxy_connect_error", f"no connection to {proxy}")
    if code in SOCKS_TARGET_REPLIES:
        return TransientFetchError(
            url, "connect_error", f"{proxy} could not reach the target (SOCKS5 reply {code})"
        )
    return ProxyFailed(url, proxy.id, "proxy_refused", f"{proxy} refused: {exc}")
