"""Proxies: what a proxy URL means, which proxy a request takes, and when a proxy is benched.

Stdlib only: the fetcher (`crawlq.fetch.Fetcher`) sends through the proxy this module
chooses, the engine (`crawlq.engine.fetch_feedback`) counts failures in the frontier, and the
frontier backends store `ProxyState` rows.

* **Which proxies.** The ``proxies`` setting (``--proxy URL``, repeatable, the settings
  file's ``proxies`` list, ``CRAWLQ_PROXIES``): ``http://``, ``https://`` (TLS to the proxy)
  or ``socks5://`` URLs, each ``scheme://[user:password@]host:port``. With
  ``proxy_trust_env`` and no ``proxies``, ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY``
  and ``NO_PROXY`` of the process's environment decide instead (``NO_PROXY``: host names,
  each also matching its subdomains, or ``*``); off by default, so an inherited environment
  changes nothing. Proxies are per process, never a job setting (they may carry credentials).
* **Identity.** In shared state (frontier keys and rows, logs) a proxy is `Proxy.id`: the
  first 16 hex digits of the SHA-1 of ``scheme://host:port``; its credentials are in no
  key, value or message (`Proxy.__str__` is ``scheme://host:port``; `crawlq.secrecy.redact`
  hides any other rendering). They are sent only to the proxy, as ``Proxy-Authorization``
  (HTTP) or in the SOCKS5 username/password handshake (RFC 1929).
* **Rotation** (``proxy_rotation``), among the proxies not benched: ``host`` (default) keeps
  a host on one proxy, by rendezvous hashing of host and proxy id, so benching one proxy
  moves only its hosts; ``request`` takes them in turn.
* **meta["proxy"]** of a request: a proxy URL or None/"" (no proxy, a direct connection).
  Requests travel through the frontier, whose entries are untrusted (an inbox entry can set
  any meta), so a URL is honoured only when its ``scheme://host:port`` is one of this
  process's proxies, and then with this process's credentials for it (credentials in the
  meta are ignored); any other is refused as ``proxy_not_configured`` (`named`). So no entry
  can make a worker connect to an address of its choosing, or send a credential anywhere.
  A direct connection goes through the private-address guard as any.
* **The private-address guard** applies to the *target* host: the fetcher resolves it
  itself (or judges its IP literal) before sending it to a proxy, and refuses it as it would
  a direct request. The proxy's own address is not guarded: it comes from this process's
  configuration (a proxy on loopback is normal). A proxy resolves the name again itself; a
  DNS answer that changes in between is the proxy's to judge.
* **A proxy's failure** (`crawlq.errors.ProxyFailed`) is: no connection to the proxy
  (refused, unreachable, timed out); a 407 (``Proxy-Authentication Required``); a CONNECT
  tunnel or SOCKS5 request the proxy refused for a reason of its own (not "destination
  unreachable": a SOCKS5 reply 3, 4, 5 or 6, or a ``Proxy-Status`` error of the
  destination, is the target's connect failure); a 5xx with a ``Proxy-Status`` header
  (RFC 9209) whose ``error`` is one of `PROXY_SIDE_ERRORS`. A plain 502/503/504 without that
  header is counted as the origin's (a host strike, `crawlq.rules.politeness`): a proxy relays
  the origin's 5xx too, and headers such as ``Via`` do not say who made the answer, so
  counting them would bench every proxy whenever one site is down.
* **The bench.** `FAILURES_TO_BENCH` failures in a row (any worker's; a success resets the
  count) bench a proxy for ``proxy_bench_s``, doubling on each bench in a row up to
  `MAX_BENCH_DOUBLINGS` times (`BenchPlan`). The count lives in the frontier, so every
  worker (native or Celery) sees the same bench.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from crawlq.secrecy import redact
from crawlq.urls.canonical import host_name

__all__ = [
    "FAILURES_TO_BENCH",
    "MAX_BENCH_DOUBLINGS",
    "PROXY_SCHEMES",
    "PROXY_SIDE_ERRORS",
    "SOCKS_TARGET_REPLIES",
    "AllBenched",
    "BenchPlan",
    "Proxy",
    "ProxyPool",
    "ProxyState",
    "parse_proxy",
    "proxy_status_error",
]

PROXY_SCHEMES = ("http", "https", "socks5")
"""Schemes of a proxy URL."""

FAILURES_TO_BENCH = 3
"""A proxy's failures in a row (across every worker) that bench it."""

MAX_BENCH_DOUBLINGS = 4
"""A bench lasts ``proxy_bench_s`` doubled once per earlier bench in a row, at most this often."""

PROXY_SIDE_ERRORS = frozenset(
    {
        "proxy_internal_error",
        "proxy_configuration_error",
        "proxy_loop_detected",
        "proxy_internal_response",
        "http_request_denied",
    }
)
"""``Proxy-Status`` error types (RFC 9209 §2.3) that blame the proxy, not the destination."""

SOCKS_TARGET_REPLIES = frozenset({3, 4, 5, 6})
"""SOCKS5 reply codes (RFC 1928 §6) about the destination: network or host unreachable,
connection refused, TTL expired. Any other refusal is the proxy's."""


@dataclass(frozen=True, slots=True)
class Proxy:
    """One proxy: where it is and the credentials this process sends it.

    ``str(proxy)`` is ``scheme://host:port``: never the credentials.

    Attributes:
        scheme: ``http``, ``https`` or ``socks5``.
        host: Host name or IP address (no brackets).
        port: TCP port (default 8080 for http, 443 for https, 1080 for socks5).
        user: User name, or None.
        password: Password, or None (not shown by repr).
    """

    scheme: str
    host: str
    port: int
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """``scheme://host:port``: what identifies the proxy, without credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def id(self) -> str:
        """16 hex digits of the SHA-1 of `address`: the proxy's name in shared state."""
        return hashlib.sha1(self.address.encode(), usedforsecurity=False).hexdigest()[:16]

    def __str__(self) -> str:
        return self.address


_DEFAULT_PORTS = {"http": 8080, "https": 443, "socks5": 1080}


def parse_proxy(text: str) -> Proxy:
    """Read a proxy URL ``scheme://[user[:password]@]host[:port]``.

    Raises:
        ValueError: Not such a URL (an unknown scheme, no host, a path or query); the
            message shows the URL with its password redacted.
    """
    shown = redact(text)
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad proxy URL {shown!r}: {redact(str(exc))}") from None
    scheme = parts.scheme.lower()
    if scheme == "socks5h":
        scheme = "socks5"  # the proxy resolves names: what crawlq's socks5 does anyway
    if scheme not in PROXY_SCHEMES:
        raise ValueError(f"bad proxy URL {shown!r}: the scheme must be http, https or socks5")
    if not parts.hostname:
        raise ValueError(f"bad proxy URL {shown!r}: no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"bad proxy URL {shown!r}: a proxy URL has no path or query")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return Proxy(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme], user or None, password)


def proxy_status_error(header: str | None) -> str | None:
    """The ``error`` parameter of the last member of a ``Proxy-Status`` header, or None.

    RFC 9209: each proxy appends a member ``name; error=type; …``; the last one is the
    proxy nearest to us, the one that answered.
    """
    if not header:
        return None
    last = header.split(",")[-1]
    for param in last.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "error":
            return value.strip().strip('"').lower() or None
    return None


@dataclass(frozen=True, slots=True)
class ProxyState:
    """What the frontier knows of one proxy (shared by every worker).

    Attributes:
        failures: Failures in a row since its last success or bench.
        benches: Benches in a row (a success resets it): the next bench is longer.
        until_ms: Unix ms its bench ends (0: never benched).
    """

    failures: int = 0
    benches: int = 0
    until_ms: int = 0

    def benched(self, now_ms: int) -> bool:
        """Whether the proxy is benched at ``now_ms``."""
        return self.until_ms > now_ms


@dataclass(frozen=True, slots=True)
class BenchPlan:
    """When a proxy is benched, and for how long (ms, for the frontier's step).

    Attributes:
        failures_to_bench: Failures in a row that bench it.
        bench_ms: The first bench's length.
        max_doublings: How often a bench in a row doubles at most.
    """

    failures_to_bench: int = FAILURES_TO_BENCH
    bench_ms: int = 30_000
    max_doublings: int = MAX_BENCH_DOUBLINGS

    @classmethod
    def of(cls, bench_s: float) -> BenchPlan:
        """The plan for a ``proxy_bench_s`` of ``bench_s`` seconds."""
        return cls(bench_ms=max(1, round(bench_s * 1000)))

    def length_ms(self, benches: int) -> int:
        """How long the ``benches``-th bench in a row lasts (1 for the first)."""
        return int(self.bench_ms * 2 ** min(max(0, benches - 1), self.max_doublings))


class AllBenched(Exception):
    """Raised by `ProxyPool.choose` when every proxy a request could take is benched.

    Attributes:
        until_ms: Unix ms the first of them comes back.
    """

    def __init__(self, until_ms: int) -> None:
        super().__init__(f"every proxy is benched until {until_ms}")
        self.until_ms = until_ms


class ProxyPool:
    """The proxies of one process and the shared bench, as last read from the frontier.

    Args:
        proxies: The configured proxies (the ``proxies`` setting), in order.
        rotation: ``host`` or ``request`` (module docstring).
        environ: With ``proxy_trust_env`` and no ``proxies``: the environment whose
            ``*_PROXY`` and ``NO_PROXY`` variables decide (None: not trusted).

    Raises:
        ValueError: An environment proxy URL is bad, or ``rotation`` is unknown.
    """

    def __init__(
        self,
        proxies: Sequence[Proxy] = (),
        rotation: str = "host",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if rotation not in ("host", "request"):
            raise ValueError(f"proxy_rotation must be host or request, got {rotation!r}")
        self.proxies = tuple(dict.fromkeys(proxies))
        self.rotation = rotation
        self._env: dict[str, str] = {}
        self._env_proxies: dict[str, Proxy] = {}
        if not self.proxies and environ is not None:
            self._env = _env_proxies(environ)
            self._env_proxies = {
                scheme: parse_proxy(url) for scheme, url in self._env.items() if scheme != "no"
            }
        self._known = {p.address: p for p in (*self.proxies, *self._env_proxies.values())}
        self._turn = itertools.count()
        self.states: dict[str, ProxyState] = {}
        """The shared bench by `Proxy.id`, as the engine last read or wrote it."""

    @property
    def active(self) -> bool:
        """Whether any request may go through a proxy."""
        return bool(self._known)

    def all(self) -> tuple[Proxy, ...]:
        """Every proxy this process may use (configured or from the environment)."""
        return tuple(self._known.values())

    def named(self, value: object) -> Proxy | None:
        """The proxy a request's ``meta["proxy"]`` names: one of ours, or None (direct).

        Raises:
            ValueError: ``value`` is not a string or None, or not one of this process's
                proxies (module docstring: meta is untrusted); the message is redacted.
        """
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"meta proxy must be a URL string, got {type(value).__name__}")
        address = parse_proxy(value).address
        proxy = self._known.get(address)
        if proxy is None:
            raise ValueError(f"{address} is not one of this worker's proxies (--proxy)")
        return proxy

    def choose(self, url: str, host: str, now_ms: int) -> Proxy | None:
        """The proxy for a request of ``url`` to ``host``, or None (direct).

        ``host`` (a host name or politeness key; a port is ignored) is read in one written
        form (`crawlq.urls.host_name`), so one host in two notations rotates as one.

        Raises:
            AllBenched: Every proxy the request could take is benched.
        """
        if not self.proxies:
            return self._from_env(url, now_ms)
        free = [p for p in self.proxies if not self._benched(p, now_ms)]
        if not free:
            raise AllBenched(min(self.states[p.id].until_ms for p in self.proxies))
        if self.rotation == "request":
            return free[next(self._turn) % len(free)]
        host = host_name(host)
        return max(free, key=lambda p: hashlib.sha1(f"{host}\n{p.id}".encode()).digest())

    def _benched(self, proxy: Proxy, now_ms: int) -> bool:
        state = self.states.get(proxy.id)
        return state is not None and state.benched(now_ms)

    def _from_env(self, url: str, now_ms: int) -> Proxy | None:
        if not self._env_proxies:
            return None
        parts = urlsplit(url)
        if _bypassed(host_name(url), self._env.get("no", "")):
            return None
        proxy = self._env_proxies.get(parts.scheme) or self._env_proxies.get("all")
        if proxy is not None and self._benched(proxy, now_ms):
            raise AllBenched(self.states[proxy.id].until_ms)
        return proxy


def _env_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``{scheme: url}`` from ``*_proxy`` variables (lower case wins, as in urllib)."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        lower = name.lower()
        scheme = lower.removesuffix("_proxy")
        wanted = value and lower.endswith("_proxy") and scheme in ("http", "https", "all", "no")
        if wanted and (scheme not in found or name.islower()):
            found[scheme] = value
    return found


def _bypassed(host: str, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` (comma-separated names, ``.name`` or ``*``) covers ``host``.

    Both are read in one written form (`crawlq.urls.host_name`: an IP literal in any
    notation, an IPv6 address with or without brackets), without a port.
    """
    host = host_name(host).rstrip(".")
    for entry in (host_name(e.strip().lstrip(".")).rstrip(".") for e in no_proxy.split(",")):
        if entry == "*" or (entry and (host == entry or host.endswith("." + entry))):
            return True
    return False
