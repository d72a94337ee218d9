"""The streaming reader of sitemap XML (``<urlset>`` or ``<sitemapindex>``) on expat.

Events, never a tree, so memory stays flat whatever the file's size; a document type
declaration or an entity declaration is refused (no entity expansion, no XXE). Elements are
matched by local name whatever their namespace. Past ``max_urls`` entries the rest is only
counted. Problems go to the sitemap's ``problems`` (rules in `crawlq.sitemap.parse`).
"""

from __future__ import annotations

import re
from xml.parsers import expat

from crawlq.sitemap.model import MAX_VALUE_CHARS, Sitemap, SitemapEntry, SitemapKind

__all__ = ["XmlReader"]

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
