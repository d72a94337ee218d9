"""Keeping secrets out of messages, job settings and the files crawlq creates. Stdlib only.

* `redact`: the one function every message that may show a frontier, broker or store URL
  goes through (errors, log lines, the CLI's one-line failures). It hides the password of
  every ``scheme://user:password@host`` URL in a text, also when the password holds an
  unescaped ``@`` (the *last* ``@`` of the authority separates it from the host, as
  urllib and redis-py read it), and the value of every ``password=`` parameter (libpq
  ``key=value`` strings, query strings).
* `without_password`: a URL with its password removed (the user name kept), as a shared job
  stores its ``store`` setting; each worker supplies the password itself.
* `create_private`: create a file readable and writable by its owner only (``0600``); the
  process umask can only make it stricter. `private_opener`: the same for `open`.
* `loggable_entry`: how a log line may show a request entry (an inbox entry): not at all
  when it may hold cookies, whose values are secrets (session ids, login tokens).
"""

from __future__ import annotations

import os
import re

__all__ = [
    "MASK",
    "PRIVATE_MODE",
    "create_private",
    "has_password",
    "loggable_entry",
    "private_opener",
    "quote_userinfo",
    "redact",
    "without_password",
]

MASK = "***"
"""What a redacted password reads as."""

PRIVATE_MODE = 0o600
"""Mode of the files crawlq creates (SQLite stores and frontiers, their lock files, WARC
files, export files): they can hold page bodies and job data, so only their owner may read
them."""

_AUTHORITY = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:/{1,3})(?P<authority>[^/\s'\"<>]*)")
"""A URL's scheme and authority: up to the first ``/``, whitespace or quote. A password may
hold ``?``, ``#`` or ``@`` (unescaped), so those do not end it here; a mistyped ``redis:/``
or ``redis:///`` is read as a scheme too, so a typo does not show the password."""
_TOKEN = re.compile(r"[^\s'\"<>]+@[^\s'\"<>]*")
"""A run of text with an ``@`` in it, up to whitespace or a quote."""
_SERVICE_SCHEMES = frozenset(
    {"redis", "rediss", "unix", "postgres", "postgresql", "amqp", "amqps", "sqlite"}
)
"""Schemes of the services crawlq connects to: a mistyped one before an ``@`` is a URL."""
_PASSWORD_PARAM = re.compile(r"(?i)(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&'\"]+)")


def _split_authority(authority: str) -> tuple[str, str | None, str] | None:
    """``(user, password or None, hostport)`` of an authority with userinfo, else None."""
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        return None
    user, colon, password = userinfo.partition(":")
    return user, (password if colon else None), hostport


def _redact_authority(match: re.Match[str]) -> str:
    parts = _split_authority(match["authority"])
    if parts is None or parts[1] is None:
        return match[0]
    user, _, hostport = parts
    return f"{match['scheme']}{user}:{MASK}@{hostport}"


def _redact_bare(match: re.Match[str]) -> str:
    """Hide what precedes the last ``@`` of a token that is not a ``scheme://`` URL.

    Such a token is a mistyped URL (``redis//:pw@host``, ``redis:pw@host``, ``pw@host:6379``)
    whose part before the ``@`` may be a password.
    """
    token = match[0]
    if _AUTHORITY.match(token):
        return token  # a URL (``scheme:/`` or more): its userinfo was handled already
    before, _, host = token.rpartition("@")
    scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]*", before)
    if (scheme and scheme[0].lower() in _SERVICE_SCHEMES) or re.search(r":\d+(/|$)", host):
        return f"{MASK}@{host}"
    return token  # an e-mail address (``mailto:x@example.org``): no password there


def redact(text: str) -> str:
    """``text`` with every password of a URL or ``password=`` parameter replaced by ``***``.

    ``redis://:s3cret@host:6379/0`` -> ``redis://:***@host:6379/0``;
    ``postgresql://me:p@ss@db/x`` -> ``postgresql://me:***@db/x``;
    ``host=db password=x dbname=y`` -> ``host=db password=*** dbname=y``. User names are kept
    (they are not secrets, and they help to tell accounts apart); URLs without a password are
    returned unchanged. Text with an ``@`` that is not a URL (a mistyped one such as
    ``redis//:pw@host`` or ``pw@host:6379``) loses everything before its last ``@``.
    """
    if "@" in text:
        text = _AUTHORITY.sub(_redact_authority, text)
        text = _TOKEN.sub(_redact_bare, text)
    if "=" in text:
        text = _PASSWORD_PARAM.sub(rf"\g<1>{MASK}", text)
    return text


def has_password(url: str) -> bool:
    """Whether ``url`` carries a password (in its userinfo or a ``password=`` parameter)."""
    return without_password(url) != url


def without_password(url: str) -> str:
    """``url`` with the password of its userinfo removed (``user:pw@`` -> ``user@``).

    A URL without a password, or a string that is not a URL (a file path), is returned as it
    is. A ``password=`` query parameter is dropped too.
    """
    match = _AUTHORITY.match(url)
    if match is not None:
        parts = _split_authority(match["authority"])
        if parts is not None and parts[1] is not None:
            user, _, hostport = parts
            url = f"{match['scheme']}{f'{user}@' if user else ''}{hostport}{url[match.end() :]}"
        head, question, query = url.partition("?")
        if question and "password" in query.lower():
            query, hash_mark, fragment = query.partition("#")
            kept = [p for p in query.split("&") if p.split("=", 1)[0].lower() != "password"]
            url = head + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return url


def quote_userinfo(url: str) -> str:
    """``url`` with any ``@`` of its userinfo percent-encoded (the last ``@`` is the separator).

    ``postgresql://me:p@ss@db/x`` -> ``postgresql://me:p%40ss@db/x``, which every parser
    reads as the user meant (libpq would otherwise take ``ss@db`` for the host, and show it).
    """
    match = _AUTHORITY.match(url)
    if match is None or match["authority"].count("@") < 2:
        return url
    userinfo, _, hostport = match["authority"].rpartition("@")
    quoted = userinfo.replace("@", "%40")
    return f"{match['scheme']}{quoted}@{hostport}{url[match.end() :]}"


def create_private(path: str | os.PathLike[str], mode: int = PRIVATE_MODE) -> bool:
    """Create ``path`` as an empty file with ``mode`` (minus the umask) if it does not exist.

    Used before SQLite opens a database, so that the file (and the ``-wal``/``-shm`` files,
    which SQLite creates with the database's mode) is not world-readable. An existing file is
    left alone, mode included.

    Returns:
        True when this call created the file.

    Raises:
        OSError: The file cannot be created (missing directory, permissions).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def private_opener(path: str, flags: int) -> int:
    """`open`'s ``opener`` for a file crawlq may create: mode `PRIVATE_MODE`, less by the umask.

    The mode applies only when ``flags`` create the file (``"w"``, ``"a"``, ``"x"`` on a
    missing path, as ``O_CREAT`` does); an existing file keeps its mode, as with
    `create_private`.

    Raises:
        OSError: As `os.open`.
    """
    return os.open(path, flags, PRIVATE_MODE)


def loggable_entry(raw: bytes, limit: int = 200) -> str:
    """How a log line shows an entry: ``repr`` of its first ``limit`` bytes, or its size only.

    An entry in which ``cookie`` appears (any case, anywhere: a malformed JSON entry too) may
    carry cookie values, so only its size is shown: ``<entry of 180 bytes with cookies, not
    shown>``.
    """
    if b"cookie" in raw.lower():
        return f"<entry of {len(raw)} bytes with cookies, not shown>"
    return repr(raw[:limit])
