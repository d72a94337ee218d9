"""Example spider: scrape the PostgreSQL 15 manual (one item per page).

Serve an unpacked copy of the manual and crawl it (from the repository root)::

    mkdir -p /tmp/pgdocs
    tar xzf postgresql-15-docs.tar.gz -C /tmp/pgdocs
    python -m http.server 8000 --bind 127.0.0.1 --directory /tmp/pgdocs/postgresql-15 &
    crawlq crawl http://127.0.0.1:8000/index.html \\
        --spider examples/pg_docs_spider.py:PgDocsSpider --delay 0

Items:

* an SQL command reference page (``sql-*.html``, e.g. ``sql-select.html``) gives
  ``{"command", "names", "purpose", "synopsis", "url"}``;
* any other page gives ``{"title", "section", "level", "url"}``, where ``section`` is the
  number of the chapter, part, appendix or section (``"7.8"``, ``"2"``, ``"IV"``, ``"F.1"``)
  or None, and ``level`` says which of these it is.

It shows the Scrapy-style API: ``response.css()`` and ``response.xpath()`` (parsel),
``response.links()`` and ``response.follow()`` with a callback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from crawlq.request import CrawlRequest
from crawlq.spider import Response, Spider

# "7.8. WITH Queries", "Chapter 2. The SQL Language", "Part IV. Client Interfaces", "F.1. x"
_NUMBERED_TITLE = re.compile(
    r"^(?:(?P<word>Chapter|Part|Appendix)\s+)?"
    r"(?P<number>[0-9A-Z]+(?:\.[0-9A-Z]+)*)\.\s+"
    r"(?P<rest>.+)$"
)
_DASH = "\N{EM DASH}"  # "SELECT, TABLE, WITH — retrieve rows from a table or view"


def _squash(text: str | None) -> str:
    return " ".join((text or "").split())


class PgDocsSpider(Spider):
    """Follows every link of the manual; SQL command pages go to `parse_command`."""

    name = "pg_docs"

    def parse(self, response: Response) -> Iterator[dict[str, Any] | CrawlRequest]:
        yield self.page_item(response)
        yield from self.follow_links(response)

    def parse_command(self, response: Response) -> Iterator[dict[str, Any] | CrawlRequest]:
        refentry = response.css("div.refentry")
        if not refentry:  # sql-commands.html, sql-syntax.html: chapter pages, not commands
            yield from self.parse(response)
            return
        names_and_purpose = _squash(
            refentry.xpath('.//div[@class="refnamediv"]/p').xpath("string()").get()
        )
        names, _, purpose = names_and_purpose.partition(_DASH)
        synopsis = "\n\n".join(
            text.strip("\n")
            for text in refentry.css("div.refsynopsisdiv pre.synopsis").xpath("string()").getall()
        )
        yield {
            "command": _squash(refentry.css(".refnamediv h2").xpath("string()").get()),
            "names": [n.strip() for n in names.split(",") if n.strip()],
            "purpose": purpose.strip(),
            "synopsis": synopsis,
            "url": response.url,
        }
        yield from self.follow_links(response)

    def page_item(self, response: Response) -> dict[str, Any]:
        title = _squash(response.css("title::text").get())
        match = _NUMBERED_TITLE.match(title)
        if match is None:
            return {"title": title, "section": None, "level": None, "url": response.url}
        word = match["word"]
        return {
            "title": match["rest"],
            "section": match["number"],
            "level": word.lower() if word else "section",
            "url": response.url,
        }

    def follow_links(self, response: Response) -> Iterator[CrawlRequest]:
        for url in response.links():
            page = url.rsplit("/", 1)[-1]
            callback = self.parse_command if page.startswith("sql-") else self.parse
            request = response.follow(url, callback=callback)
            if request is not None:  # None: a link that cannot be crawled (mailto:, ...)
                yield request
