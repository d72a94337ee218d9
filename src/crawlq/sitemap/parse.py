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
"""

from __future__ import annotations

from crawlq.sitemap.body import body_chunks, first_content
from crawlq.sitemap.model import (
    MAX_BYTES,
    MAX_URLS,
    Sitemap,
)
from crawlq.sitemap.text_reader import TextReader
from crawlq.sitemap.xml_reader import XmlReader

__all__ = ["parse_sitemap"]


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
