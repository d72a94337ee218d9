"""Which ``store`` values name a store: a file path, ``sqlite:///PATH`` or ``postgresql://…``.

`check_store` refuses anything else (another scheme, a libpq ``key=value`` string) with a
`ConfigError` naming ``store`` that never repeats a password.
"""

from __future__ import annotations

import re

from crawlq.errors import ConfigError

__all__ = ["check_store"]

_STORE_SCHEMES = ("sqlite:///", "postgresql://", "postgres://")
_LIBPQ_KEYS = (
    "host|hostaddr|port|dbname|user|password|passfile|service|options|sslmode|sslcert|sslkey"
    "|sslrootcert|sslpassword|connect_timeout|application_name|target_session_attrs"
    "|channel_binding|gssencmode|krbsrvname|requirepeer|client_encoding|keepalives"
)
_KEY_VALUE = re.compile(rf"(?i)(?:^|\s)(?:{_LIBPQ_KEYS})\s*=")
"""A libpq ``key=value`` connection string: a word of it starts with a libpq keyword and
``=`` (a file name such as ``crawl=1.db`` is still a path)."""


def check_store(store: str) -> str:
    """Return ``store`` if it names a store: a path, ``sqlite:///PATH`` or ``postgresql://…``.

    ``postgres://…`` is accepted too. Anything else is refused rather than taken for a file
    name: a libpq ``key=value`` string (``host=db password=x dbname=y``) would otherwise
    become a SQLite file named after the password. The message never repeats the password.

    Raises:
        ConfigError: Neither a path nor a supported URL; the error names ``store``.
    """
    if store.startswith(_STORE_SCHEMES):
        return store
    if "://" in store or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", store):
        raise ConfigError(
            "store",
            f"unsupported store URL {store!r}: use a file path, sqlite:///PATH or postgresql://…",
        )
    if _KEY_VALUE.search(store):
        raise ConfigError(
            "store",
            "a key=value connection string is neither a file path nor a URL: give "
            "postgresql://USER@HOST:PORT/DB (a password goes after USER and a colon) or a "
            "SQLite file path",
        )
    if not store.strip():
        raise ConfigError("store", f"no file path in store URL {store!r}")
    return store
