"""`HostCredentials`: the ``Authorization`` header a request to one host is sent with.

Credentials come from this process's own configuration only: the ``auth_*`` keys of a
``[hosts."example.com"]`` table in the settings file or ``CRAWLQ_HOSTS`` (read into
``Settings.host_auth`` by `crawlq.settings`), which name the environment variables holding
the password (basic, RFC 7617) or the token (bearer, RFC 6750 §2.1). The secrets are read
from the environment when the fetcher is made and live only here: not in the settings, the
job's settings, requests, errors or logs (``repr`` shows the hosts only).

Which requests carry them: the host of the request decides, hop by hop (a redirect to
another host is a request to that host), robots.txt of the host included. A table's host
matches exactly, never its subdomains (unlike the politeness overrides of the same table:
a subdomain may be another party); ``host`` matches every port and scheme of that host,
``host:port`` that port only (the form of `crawlq.urls.host_key`, so no port means 80 for
http and 443 for https there).

A request record in a WARC file has the value written ``[redacted]`` (`REDACTED`) unless
``warc_keep_auth`` (`crawlq.fetch.exchange.raw_exchange`).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping

from crawlq.errors import ConfigError, InvalidURL
from crawlq.settings import Settings
from crawlq.urls import host_key, host_name, split_host
from crawlq.web.headers import header_problem

__all__ = ["CREDENTIAL_HEADERS", "REDACTED", "HostCredentials"]

REDACTED = "[redacted]"
"""What a WARC request record holds in place of a credential header's value."""

CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
"""Request header names (lower case) whose values are credentials."""


class HostCredentials:
    """The ``Authorization`` value for each configured host (module docstring).

    Args:
        values: Host key (``host`` or ``host:port``; any case, an IP literal in any
            notation: keys are kept as `crawlq.urls.host_key` writes hosts) -> header value.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = {_key(host): value for host, value in values.items()}

    @classmethod
    def from_settings(
        cls, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> HostCredentials:
        """The credentials ``settings.host_auth`` names, read from ``environ``.

        Raises:
            ConfigError: A variable it names is not set or empty, or its value cannot be
                sent in a header (CR, LF, a control character); named ``hosts``, the message
                names the host and the variable, never the value.
        """
        env = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for host, user, password_env, token_env in settings.host_auth:
            variable = token_env or password_env or ""
            secret = env.get(variable, "")
            key = "auth_token_env" if token_env else "auth_password_env"
            if not secret:
                raise ConfigError(
                    "hosts",
                    f"hosts.{host}.{key} names environment variable {variable}, which is not "
                    "set (or empty)",
                )
            if token_env:
                value = f"Bearer {secret}"
            else:
                pair = f"{user}:{secret}".encode()
                value = "Basic " + base64.b64encode(pair).decode("ascii")
            if header_problem("X-Credential", value) is not None:
                raise ConfigError(
                    "hosts",
                    f"hosts.{host}.{key}: environment variable {variable} holds a character "
                    "a header may not (CR, LF, NUL or another control character)",
                )
            values[host] = value
        return cls(values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"HostCredentials(hosts={sorted(self._values)})"

    def hosts(self) -> list[str]:
        """The configured host keys, sorted (no secrets)."""
        return sorted(self._values)

    def for_url(self, url: str) -> str | None:
        """The ``Authorization`` value for a request to ``url``, or None (no credentials)."""
        if not self._values:
            return None
        try:
            key = host_key(url)
        except InvalidURL:
            return None
        value = self._values.get(key)
        if value is not None:
            return value
        return self._values.get(_key(host_name(url)))


def _key(value: str) -> str:
    """``value`` (``host``, ``host:port``, ``[v6]:port``) as `crawlq.urls.host_key` writes it."""
    host, port = split_host(value)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host
