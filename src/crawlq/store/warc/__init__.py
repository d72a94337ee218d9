"""WARC archiving of fetched pages, as WARC 1.1 records; warcio is imported only here.

* `crawlq.store.warc.writer`: `WarcWriter`, rotating gzip files, and `WarcLocation`;
* `crawlq.store.warc.records`: what a record holds (decoded payloads, renamed headers);
* `crawlq.store.warc.files`: file names, modes, and the repair of files left ``.open``;
* `crawlq.store.warc.reader`: `read_response`, a response record read back for reparse.
"""

from __future__ import annotations

from crawlq.store.warc.writer import WarcLocation, WarcWriter

__all__ = ["WarcLocation", "WarcWriter"]
