"""Parsing sitemap files (the sitemaps.org protocol 0.9): formats, limits, safety.

Pure: `parse_sitemap` takes a response body and never raises; what went wrong is in the
result's ``problems``. Rules and their sources (https://www.sitemaps.org/protocol.html):

* Formats: an XML ``<urlset>`` of ``<url>`` entries, an XML ``<sitemapindex>`` of
  ``<sitemap>`` entries (each with ``<loc>`` and optional ``<lastmod>`` and ``<priority>``;
  ``<changefreq>`` and extensions such as ``<image:image>`` are ignored), or a text file of one
  URL per line ("Other Sitemap formats"). Elements are matched by local name whatever their
  namespace, as Scrapy does: many sitemaps get the namespace wrong. Whitespace around a value
  is stripped; entities (``&amp;``) and CDATA sections are the XML parser's; a UTF-8 byte order
  mark and blanks before the document are skipped. A value longer than `MAX_VALUE_CHARS`
  makes its entry invalid (never cut to another URL).
* Compression: a body that starts with the gzip magic bytes is gunzipped here, streamed,
  whatever its URL or ``Content-Type`` says (``sitemap.xml.gz``); ``Content-Encoding: gzip``
  was already undone by the fetcher, so a compressed file sent with that header works too.
* Limits ("no more than 50,000 URLs and ... no larger than 50MB (52,428,800 bytes)",
  uncompressed): of a file listing more than `MAX_URLS`, the first `MAX_URLS` are taken and the
  rest only counted, by a byte scan for their ``<loc>`` tags (or non-blank lines), for the
  error ``sitemap_too_many_urls: 50000 of N``; of a file larger than `MAX_BYTES` (before or
  after gunzip), the first `MAX_BYTES` are parsed and the error is ``sitemap_too_large: more
  than 52428800 bytes``. An index is held to the same limits (50,000 sitemaps).
* Safety: XML is parsed with expat as a stream of events (never a tree: memory stays flat
  whatever the file's size) and a document type declaration is refused (``sitemap_bad_xml:
  DOCTYPE …``): without one no entity can be declared, so neither entity expansion ("billion
  laughs") nor external entities (XXE) can happen, and the parser opens nothing.
* Errors: a body that is not well-formed XML gives ``sitemap_bad_xml: <expat's message> at
  line L, column C``; the entries read before the error are kept (and queued). A sitemap cut
  short (a stray ``&`` in one URL, a truncated transfer) still lists good URLs before the
  break, and its page record says where it broke; lxml's recover mode, which Scrapy uses,
  keeps them too. A broken gzip stream is ``sitemap_gzip_error``; XML whose root is neither
  ``urlset`` nor ``sitemapindex`` (an HTML page) is ``sitemap_unknown_format``; a body with
  nothing in it is ``sitemap_empty``.

The parts, in reading order: `parse_sitemap` sniffs the body; `body_chunks` gunzips it (every
member, RFC 1952 §2.2) as a stream of at most ``max_bytes`` uncompressed bytes, then marks the
sitemap ``too_large``; `XmlReader` reads XML on expat (events, never a tree; a document type or
entity declaration refused), `TextReader` one URL per line, UTF-8 (a line longer than
`MAX_VALUE_CHARS` or holding a NUL is counted ``invalid``). Past ``max_urls`` entries both
only count the rest. What they fill is `crawlq.sitemap.sitemap`.
"""

from __future__ import annotations

import codecs
import re
import zlib
from collections.abc import Iterator
from xml.parsers import expat

from crawlq.sitemap.sitemap import (
    MAX_BYTES,
    MAX_URLS,
    MAX_VALUE_CHARS,
    Sitemap,
    SitemapEntry,
    SitemapKind,
)

__all__ = ["TextReader", "XmlReader", "body_chunks", "first_content", "parse_sitemap"]


def parse_sitemap(body: bytes, *, max_urls: int = MAX_URLS, max_bytes: int = MAX_BYTES) -> Sitemap:
    """Parse a sitemap body: XML (urlset or index) or text, gzipped or not (module docstring).

    Args:
        body: The response body.
        max_urls: Most entries kept; more are counted in ``found``.
        max_bytes: Most bytes parsed, uncompressed.

    Returns:
        The sitemap; problems are in its ``problems``, never raised.
    """
    sitemap = Sitemap()
    chunks = body_chunks(body, max_bytes, sitemap)
    head = first_content(chunks)
    if not head:
        if not sitemap.problems and not sitemap.too_large:
            sitemap.problems.append("sitemap_empty: no URLs")
    else:
        reader: XmlReader | TextReader
        if head.startswith(b"<"):
            reader = XmlReader(sitemap, max_urls)
        else:
            reader = TextReader(sitemap, max_urls)
        reader.feed(head)
        for chunk in chunks:
            if reader.failed:
                break
            reader.feed(chunk)
        reader.close()
    if sitemap.too_large:
        sitemap.problems.insert(0, f"sitemap_too_large: more than {max_bytes} bytes")
    if sitemap.found > max_urls:
        sitemap.problems.insert(0, f"sitemap_too_many_urls: {max_urls} of {sitemap.found}")
    return sitemap


# -- the body, gunzipped and capped --------------------------------------------------------

_CHUNK_BYTES = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_BLANK = b" \t\r\n"


def first_content(chunks: Iterator[bytes]) -> bytes:
    """The body from its first byte that is neither a UTF-8 byte order mark nor a blank.

    Leading blanks are dropped chunk by chunk (never accumulated), so a body of 50 MB of
    newlines costs one pass. Empty when there is no such byte.
    """
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) < len(codecs.BOM_UTF8):
            continue  # a gzip stream may start with very short pieces
        head = head.removeprefix(codecs.BOM_UTF8)
        break
    head = head.lstrip(_BLANK)
    while not head:
        more = next(chunks, None)
        if more is None:
            break
        head = more.lstrip(_BLANK)
    return head


def body_chunks(body: bytes, max_bytes: int, sitemap: Sitemap) -> Iterator[bytes]:
    """The uncompressed body in chunks, at most ``max_bytes`` of it (then ``too_large``)."""
    if body.startswith(_GZIP_MAGIC):
        yield from _gunzip(body, max_bytes, sitemap)
        return
    view = memoryview(body)
    if len(view) > max_bytes:
        sitemap.too_large = True
        view = view[:max_bytes]
    for start in range(0, len(view), _CHUNK_BYTES):
        yield bytes(view[start : start + _CHUNK_BYTES])


def _gunzip(body: bytes, max_bytes: int, sitemap: Sitemap) -> Iterator[bytes]:
    """Gunzip ``body`` as a stream (every member), stopping after ``max_bytes`` of output.

    A compressed body longer than ``max_bytes`` is cut there (the fetcher reads no more),
    so its end is missing: that counts as ``too_large``, not as a broken stream.
    """
    cut = len(body) > max_bytes
    if cut:
        sitemap.too_large = True
        body = body[:max_bytes]
    left = max_bytes
    data = body
    try:
        while data:
            inflater = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
            while data and not inflater.eof:
                out = inflater.decompress(data, min(_CHUNK_BYTES, left + 1))
                data = inflater.unconsumed_tail
                if len(out) > left:
                    sitemap.too_large = True
                    yield out[:left]
                    return
                left -= len(out)
                if out:
                    yield out
            if not inflater.eof:
                if not cut:
                    sitemap.problems.append("sitemap_gzip_error: the gzip stream is cut short")
                return
            data = inflater.unused_data  # another gzip member follows (RFC 1952 §2.2)
            if data and not data.startswith(_GZIP_MAGIC):
                return  # trailing garbage after the last member: ignored, as gzip(1) does
    except zlib.error as exc:
        sitemap.problems.append(f"sitemap_gzip_error: {exc}")


# -- text sitemaps -------------------------------------------------------------------------

_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*\n", re.MULTILINE)


class TextReader:
    """A reader of text sitemaps: one URL per line, UTF-8 (sitemaps.org).

    Past ``max_urls`` URLs the rest is only counted: non-blank lines, by a byte scan.
    """

    def __init__(self, sitemap: Sitemap, max_urls: int) -> None:
        sitemap.kind = SitemapKind.TEXT
        self.sitemap = sitemap
        self.max_urls = max_urls
        self.failed = False
        self.carry = b""

    def feed(self, data: bytes) -> None:
        """Read the whole lines of ``data``; a partial last line waits for the next chunk."""
        data = self.carry + data
        cut = data.rfind(b"\n") + 1
        self.carry = data[cut:]
        if len(self.carry) > MAX_VALUE_CHARS * 4:  # no URL is that long: keep memory bounded
            self.carry = b"\0"  # the rest of the line is dropped with it (invalid)
        if len(self.sitemap.entries) >= self.max_urls:
            self._count(data, cut)
            return
        lines = data[:cut].split(b"\n")
        for n, line in enumerate(lines):
            self._line(line)
            if len(self.sitemap.entries) >= self.max_urls:
                self.sitemap.found += sum(1 for rest in lines[n + 1 :] if rest.strip())
                return

    def close(self) -> None:
        """Read the last line (one without a newline)."""
        if len(self.sitemap.entries) >= self.max_urls:
            self.sitemap.found += bool(self.carry.strip())
        else:
            self._line(self.carry)
        self.carry = b""

    def _count(self, data: bytes, end: int) -> None:
        lines = data.count(b"\n", 0, end)
        self.sitemap.found += lines - len(_BLANK_LINE.findall(data, 0, end))

    def _line(self, raw: bytes) -> None:
        line = raw.strip()
        if not line:
            return
        text = line.decode("utf-8", errors="replace")
        if len(text) > MAX_VALUE_CHARS or "\0" in text:
            self.sitemap.invalid += 1
            return
        self.sitemap.found += 1
        if len(self.sitemap.entries) < self.max_urls:
            self.sitemap.entries.append(SitemapEntry(text))


# -- XML sitemaps --------------------------------------------------------------------------

_MAX_LASTMOD_CHARS = 64

_FIELDS = frozenset({"loc", "lastmod", "priority"})


class _Stop(Exception):
    """Raised from an expat handler to end the parse with ``problem``."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _Full(Exception):
    """Raised from an expat handler at the first entry over the limit: count from there."""


class XmlReader:
    """A streaming reader of sitemap XML on expat (no tree; DTDs refused).

    Past ``max_urls`` entries the rest is not parsed, only counted: the ``<loc>`` start tags
    (spelled with the prefix the entries used) are counted in the remaining bytes, so a 50 MB
    file of tiny entries costs a regex scan instead of millions of parser callbacks. The
    count is then an estimate (a ``<loc>`` in a comment counts) and the rest is not checked
    for well-formedness: those URLs are not queued either way.
    """

    def __init__(self, sitemap: Sitemap, max_urls: int) -> None:
        self.sitemap = sitemap
        self.max_urls = max_urls
        self.failed = False
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.namespace_prefixes = True  # names are "uri local prefix": learn loc's prefix
        parser.buffer_text = True
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._doctype
        parser.EntityDeclHandler = self._entity
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text
        self.parser = parser
        self.depth = 0
        self.entry_name = ""
        self.in_entry = False
        self.field: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.values: dict[str, str | None] = {}
        self.loc_tag = b"<loc"
        self.fed: list[tuple[int, bytes]] = []  # the last two chunks and their offsets
        self.offset = 0
        self.counter: re.Pattern[bytes] | None = None  # set once past the limit
        self.tail = b""

    def feed(self, data: bytes) -> None:
        """Parse the next chunk (or, past the limit, only count its ``<loc>`` tags)."""
        if self.counter is not None:
            self._count(data)
            return
        self.fed = [*self.fed[-1:], (self.offset, data)]
        self.offset += len(data)
        self._parse(data, final=False)

    def close(self) -> None:
        """End the document; a body with no root element is ``sitemap_unknown_format``."""
        if not self.failed and self.counter is None:
            self._parse(b"", final=True)
        if self.sitemap.kind is None and not self.sitemap.problems:
            self.sitemap.problems.append("sitemap_unknown_format: no root element")

    def _parse(self, data: bytes, *, final: bool) -> None:
        try:
            self.parser.Parse(data, final)
        except _Full:
            self._start_counting()
        except _Stop as exc:
            self.failed = True
            self.sitemap.problems.append(exc.problem)
        except expat.ExpatError as exc:
            self.failed = True
            if final and (self.sitemap.too_large or self.sitemap.problems):
                return  # cut at max_bytes, or the gzip stream broke: it cannot end well
            message = expat.errors.messages.get(exc.code, str(exc))
            self.sitemap.problems.append(
                f"sitemap_bad_xml: {message} at line {exc.lineno}, column {exc.offset}"
            )

    def _start_counting(self) -> None:
        """Leave the parser at the first entry over the limit; count the rest of the bytes."""
        self.counter = re.compile(re.escape(self.loc_tag) + rb"[\s>/]")
        at = self.parser.CurrentByteIndex  # the end tag of that entry
        rest = b"".join(
            chunk[max(0, at - start) :] for start, chunk in self.fed if start + len(chunk) > at
        )
        self.fed = []
        self._count(rest)

    def _count(self, data: bytes) -> None:
        assert self.counter is not None
        data = self.tail + data
        self.sitemap.found += len(self.counter.findall(data))
        # a tag cut between two chunks is whole in the next scan; a match never fits the tail
        self.tail = data[-len(self.loc_tag) :]

    def _doctype(self, name: str, *_: object) -> None:
        if name.lower() == "html":
            raise _Stop("sitemap_unknown_format: an HTML document")
        raise _Stop(f"sitemap_bad_xml: DOCTYPE {name[:40]!r} refused (DTDs are not read)")

    def _entity(self, name: str, *_: object) -> None:
        raise _Stop(f"sitemap_bad_xml: entity declaration {name[:40]!r} refused")

    def _start(self, name: str, _attrs: object) -> None:
        self.depth += 1
        parts = name.split(" ")
        local = parts[1] if len(parts) > 1 else parts[0]
        if self.depth == 1:
            if local == "urlset":
                self.sitemap.kind, self.entry_name = SitemapKind.URLSET, "url"
            elif local == "sitemapindex":
                self.sitemap.kind, self.entry_name = SitemapKind.INDEX, "sitemap"
            else:
                raise _Stop(f"sitemap_unknown_format: root element <{local[:40]}>")
        elif self.depth == 2 and local == self.entry_name:
            self.in_entry, self.values = True, {}
        elif self.depth == 3 and self.in_entry and local in _FIELDS:
            self.field, self.parts, self.size = local, [], 0
            if local == "loc" and len(parts) == 3:
                self.loc_tag = f"<{parts[2]}:loc".encode()

    def _text(self, data: str) -> None:
        if self.field is None or self.size > MAX_VALUE_CHARS:
            return
        self.size += len(data)
        if self.size <= MAX_VALUE_CHARS:
            self.parts.append(data)

    def _end(self, _name: str) -> None:
        if self.depth == 3 and self.field is not None:
            value = "".join(self.parts).strip() if self.size <= MAX_VALUE_CHARS else None
            self.values[self.field] = value
            self.field, self.parts = None, []
        elif self.depth == 2 and self.in_entry:
            self.in_entry = False
            self._entry(self.values)
        self.depth -= 1

    def _entry(self, values: dict[str, str | None]) -> None:
        loc = values.get("loc")
        if not loc:
            self.sitemap.invalid += 1
            return
        sitemap = self.sitemap
        sitemap.found += 1
        if len(sitemap.entries) >= self.max_urls:
            raise _Full
        lastmod = values.get("lastmod") or None
        if lastmod is not None and len(lastmod) > _MAX_LASTMOD_CHARS:
            lastmod = None
        sitemap.entries.append(SitemapEntry(loc, lastmod, _priority(values.get("priority"))))


def _priority(text: str | None) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value:  # NaN
        return None
    return min(1.0, max(0.0, value))
