"""Content codings (RFC 9110 §8.4): undo ``gzip``, ``deflate`` and ``br``, layered or not.

``Content-Encoding`` lists the codings in the order they were applied (§8.4), so a body sent
with ``deflate, gzip`` was deflated, then gzipped: `BodyDecoder` undoes them in reverse
order, one streaming stage per coding, the output of one stage feeding the next. Repeated
``Content-Encoding`` header lines are one list (§5.3).

Supported codings:

* ``gzip`` and its alias ``x-gzip`` (§8.4.1.3; RFC 1952). Members that follow one another
  are all decoded (RFC 1952 §2.2); bytes after the last member that do not start another
  (padding, garbage) are ignored.
* ``deflate`` (§8.4.1.2): the zlib format (RFC 1950), or raw deflate (RFC 1951), which some
  servers send instead: the first two bytes decide (a zlib header is ``CM = 8`` and a multiple
  of 31). Bytes after the end of the stream are ignored.
* ``br`` (RFC 7932), with the ``brotli`` package (1.2 or later: its output limit keeps each
  step bounded). Bytes after the end of the stream make it corrupt (brotli refuses them).
* ``identity``: no coding (§12.5.3 names it for ``Accept-Encoding``, but servers send it).

Labels that say "no coding" (`is_identity_label`) are dropped from the list, as browsers and
curl drop them, so the body is taken as it was received: ``identity``; ``none`` (curl's alias
of ``identity``); ``7bit``, ``8bit`` and ``binary`` (MIME's identity transfer encodings, RFC
2045 §6.2); and charset names such as ``utf-8`` or ``iso-8859-1`` that misconfigured servers
put in ``Content-Encoding`` instead of ``Content-Type``. Empty list items (``gzip,,``, an
empty header) are no coding either (§5.6.1). Browsers pass any unknown coding through
(Chromium's ``URLRequestHttpJob::SetUpSourceStream`` returns the raw stream for an unknown
type); crawlq only passes through the labels above, and `crawlq.web.decode.sniff` still finds a
compressed body that came with one of them (its signature or its share of binary bytes).

Anything else (``compress``, ``zstd``, ``x-foo``, a typo) raises `UnsupportedCoding`, naming
the label, before a byte of the body is read: a body must never be taken for decoded when it
is not. ``zstd`` is not supported: Python 3.11 has no zstd module and crawlq does not depend
on one (it is not in `ACCEPT_ENCODING`, so servers should not send it). A stream that ends
before its end marker is accepted as far as it goes, as browsers do.

Memory stays bounded whatever the ratio: each stage emits at most about `PIECE_BYTES` per
step (zlib's ``max_length``, brotli's ``output_buffer_limit``) and keeps the rest of its
input for the next step, so a ``gzip, gzip`` body whose 64 KiB chunk inflates to a gigabyte
is decoded piece by piece, and the caller (`crawlq.fetch`) stops at its size cap.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from encodings import aliases, normalize_encoding
from typing import NamedTuple, Protocol

import brotli  # type: ignore[import-untyped]  # brotli ships no type information

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_CODINGS",
    "PIECE_BYTES",
    "SUPPORTED_CODINGS",
    "BodyDecoder",
    "CodingError",
    "Codings",
    "CorruptCoding",
    "UnsupportedCoding",
    "is_identity_label",
    "parse_codings",
    "split_codings",
]

SUPPORTED_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "identity"})
"""Content codings `BodyDecoder` undoes (names lower-case, as `parse_codings` returns them)."""

ACCEPT_ENCODING = "gzip, deflate, br"
"""The ``Accept-Encoding`` request header: the codings crawlq asks for (§12.5.3)."""

MAX_CODINGS = 4
"""Most codings decoded in one body (labels that mean no coding not counted); more is
`UnsupportedCoding`. Each stage holds a decompressor (zlib's 32 KiB window, brotli's up to
16 MiB), so a header listing hundreds of them must not build hundreds."""

PIECE_BYTES = 64 * 1024
"""Largest output asked of a stage in one step, in bytes (brotli may exceed it a little)."""

_GZIP_MAGIC = b"\x1f\x8b"

_IDENTITY_LABELS = frozenset({"identity", "none", "7bit", "8bit", "binary"})
"""Labels that mean no coding (module docstring): RFC 9110 §12.5.3, curl, RFC 2045 §6.2."""
_BYTES_CODECS = frozenset(
    {"base64_codec", "bz2_codec", "hex_codec", "quopri_codec", "rot_13", "uu_codec", "zlib_codec"}
)
"""Python codecs that transform bytes (or text) rather than name a charset: never identity."""
_CHARSET_CODECS = frozenset(aliases.aliases.values()) - _BYTES_CODECS
"""Python's charset codecs (``utf_8``, ``cp1252``...), by module name."""


class CodingError(Exception):
    """A body that cannot be decoded. `crawlq.fetch` turns it into a `PermanentFetchError`.

    Attributes:
        coding: The coding at fault, as named in ``Content-Encoding``.
    """

    def __init__(self, coding: str, message: str) -> None:
        super().__init__(message)
        self.coding = coding


class UnsupportedCoding(CodingError):
    """``Content-Encoding`` names a coding that is not supported, or too many of them."""


class CorruptCoding(CodingError):
    """The body is not valid data of its coding (bad gzip, bad brotli…)."""


def is_identity_label(name: str) -> bool:
    """Whether a ``Content-Encoding`` label means no coding (rules in the module docstring).

    Charset names are matched against Python's table of codec aliases (``utf8``,
    ``iso-8859-1``, ``windows-1252``, ``us-ascii``...) without `codecs.lookup`, which keeps
    every unknown name it is asked about for the life of the process: labels come from any
    server.

    Args:
        name: One coding label, lower-cased and stripped (as `split_codings` gives it).

    Returns:
        True for ``identity``, ``none``, ``7bit``, ``8bit``, ``binary`` and charset names;
        False for real codings (``gzip``) and for anything unknown (``x-foo``, ``zstd``).
    """
    if name in _IDENTITY_LABELS:
        return True
    if len(name) > 40:  # longer than any charset name
        return False
    key = normalize_encoding(name)
    return aliases.aliases.get(key, key) in _CHARSET_CODECS


class Codings(NamedTuple):
    """The ``Content-Encoding`` of a response, read by `split_codings`.

    Attributes:
        applied: The codings to undo, in the order they were applied.
        ignored: The labels taken as no coding (`is_identity_label`), lower-cased.
    """

    applied: list[str]
    ignored: list[str]


def split_codings(values: Iterable[str]) -> Codings:
    """Read ``Content-Encoding`` header values: the codings applied, and the labels ignored.

    Args:
        values: Each ``Content-Encoding`` field value received (repeated lines are one list,
            RFC 9110 §5.3).

    Returns:
        The coding names, lower-cased and stripped, in the order they were applied; labels
        that mean no coding (`is_identity_label`) apart, and empty items dropped (§5.6.1).
    """
    applied: list[str] = []
    ignored: list[str] = []
    for value in values:
        for item in value.split(","):
            coding = item.strip().lower()
            if not coding:
                continue
            (ignored if is_identity_label(coding) else applied).append(coding)
    return Codings(applied, ignored)


def parse_codings(values: Iterable[str]) -> list[str]:
    """The codings of ``Content-Encoding`` header values to undo, in the order applied.

    Args:
        values: As `split_codings`.

    Returns:
        `split_codings`'s ``applied``: labels that mean no coding and empty items dropped.
    """
    return split_codings(values).applied


class BodyDecoder:
    """Decodes a body sent with the given content codings, one chunk at a time.

    Feed the body's bytes as they arrive with `feed`, then call `finish`; each yields decoded
    pieces of at most about `PIECE_BYTES`. A caller that stops iterating (its size cap is
    reached) may drop the decoder at once: nothing more is decoded than was asked for.

    Args:
        codings: The codings in the order they were applied (`parse_codings`).

    Raises:
        UnsupportedCoding: A coding is not in `SUPPORTED_CODINGS`, or there are more than
            `MAX_CODINGS`.
    """

    def __init__(self, codings: Iterable[str]) -> None:
        names = [c for c in codings if not is_identity_label(c)]
        if len(names) > MAX_CODINGS:
            listed = ", ".join(names)
            raise UnsupportedCoding(
                listed, f"{len(names)} content codings ({listed:.100}), at most {MAX_CODINGS}"
            )
        for name in names:
            if name not in SUPPORTED_CODINGS:
                raise UnsupportedCoding(
                    name,
                    f"content coding {name!r:.40} is not supported "
                    f"(supported: {', '.join(sorted(SUPPORTED_CODINGS))})",
                )
        self.codings = tuple(names)
        """The codings, in the order they were applied."""
        self._stages: list[_Stage] = [_stage(name) for name in reversed(names)]

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Yield the decoded pieces that ``data`` (the next bytes of the body) completes.

        Raises:
            CorruptCoding: The bytes are not valid data of their coding.
        """
        if not self._stages:
            if data:
                yield data
            return
        self._stages[0].push(data)
        yield from self._drain()

    def finish(self) -> Iterator[bytes]:
        """Yield what is left once the whole body has been fed.

        Raises:
            CorruptCoding: As `feed`.
        """
        if not self._stages:
            return
        for stage in self._stages:
            stage.ending = True
        yield from self._drain()

    def _drain(self) -> Iterator[bytes]:
        last = len(self._stages) - 1
        while piece := self._pull(last, PIECE_BYTES):
            yield piece

    def _pull(self, index: int, max_bytes: int) -> bytes:
        """Up to about ``max_bytes`` out of stage ``index``; b"" when it needs more input."""
        stage = self._stages[index]
        while True:
            try:
                out = stage.pull(max_bytes)
            except (zlib.error, brotli.error) as exc:
                raise CorruptCoding(stage.name, f"bad {stage.name} data: {exc}") from None
            if out or index == 0:
                return out
            upstream = self._pull(index - 1, PIECE_BYTES)
            if not upstream:
                return b""
            stage.push(upstream)


class _Stage(Protocol):
    """One coding being undone: input is pushed in, output pulled out in bounded steps."""

    name: str
    ending: bool  # no more input will come: flush what is held

    def push(self, data: bytes) -> None: ...

    def pull(self, max_bytes: int) -> bytes: ...


def _stage(name: str) -> _Stage:
    if name == "br":
        return _Brotli()
    return _Zlib(name)


class _Zlib:
    """``gzip`` (several members) or ``deflate`` (zlib or raw) with zlib's ``max_length``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ending = False
        self._gzip = name != "deflate"
        self._pending = b""  # input not yet given to zlib
        self._obj: zlib._Decompress | None = None
        self._done = False  # the current stream (member) ended
        self._trailer = False  # what follows the end is not another member: ignore the rest
        self._full = False  # the last step filled max_bytes: zlib may hold more output

    def push(self, data: bytes) -> None:
        self._pending = self._pending + data if self._pending else data

    def pull(self, max_bytes: int) -> bytes:
        while self._pending or self._full:
            if self._done:
                if self._trailer or not self._gzip:
                    self._pending = b""  # bytes after the end: ignored
                    return b""
                if len(self._pending) < 2 and not self.ending:
                    return b""  # is it another member? wait for its second byte
                if not self._pending.startswith(_GZIP_MAGIC):
                    self._trailer, self._pending = True, b""
                    return b""
                self._obj, self._done = None, False  # the next gzip member
            if self._obj is None:
                wbits = self._wbits()
                if wbits is None:
                    return b""  # one byte of deflate: wait for the second
                self._obj = zlib.decompressobj(wbits)
            before = len(self._pending)
            out = self._obj.decompress(self._pending, max_bytes)
            self._full = len(out) >= max_bytes
            if self._obj.eof:
                self._done, self._full = True, False
                self._pending = self._obj.unused_data
            else:
                self._pending = self._obj.unconsumed_tail
            if out:
                return out
            if len(self._pending) == before and not self._done:
                break  # no progress: zlib needs more input
        return b""

    def _wbits(self) -> int | None:
        if self._gzip:
            return zlib.MAX_WBITS | 16
        head = self._pending[:2]
        if len(head) < 2 and not self.ending:
            return None
        # RFC 1950 §2.2: CM (low nibble of CMF) is 8, and CMF*256 + FLG is a multiple of 31.
        if len(head) == 2 and head[0] & 0x0F == 8 and int.from_bytes(head, "big") % 31 == 0:
            return zlib.MAX_WBITS
        return -zlib.MAX_WBITS  # raw deflate (RFC 1951)


class _Brotli:
    """``br`` with brotli's ``output_buffer_limit`` (brotli 1.2 or later)."""

    name = "br"

    def __init__(self) -> None:
        self.ending = False
        self._obj = brotli.Decompressor()
        self._pending = b""
        self._full = False  # the last step reached the limit: brotli may hold more output

    def push(self, data: bytes) -> None:
        self._pending = self._pending + data if self._pending else data

    def pull(self, max_bytes: int) -> bytes:
        obj = self._obj
        while not obj.is_finished():
            if self._full or not obj.can_accept_more_data():
                data = b""  # output held back by the last limit: take it first
            elif self._pending:
                data, self._pending = self._pending, b""
            else:
                return b""
            out: bytes = obj.process(data, output_buffer_limit=max_bytes)
            self._full = len(out) >= max_bytes
            if out:
                return out
            if not data and not obj.can_accept_more_data():
                return b""  # no progress (brotli never does this: a guard against a loop)
        if self._pending:  # brotli refuses these too when they come in the same chunk
            raise brotli.error("bytes after the end of the stream")
        return b""
