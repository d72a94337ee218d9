"""`SeedSpool`: seeds checked once, kept on disk, read back in batches as they were given."""

from __future__ import annotations

import os
import stat

from crawlq.engine.seeding import BAD_SHOWN, SeedSpool
from crawlq.request import CrawlRequest
from crawlq.sitemap import sitemap_request


def test_lines_come_back_in_batches_in_order_with_their_fields() -> None:
    lines = [
        ("line 1", "http://a.example/1"),
        ("line 2", '{"url": "http://b.example/2", "priority": 7, "meta": {"k": [1, 2]}}'),
        ("line 3", "http://a.example:8080/3"),
    ]
    with SeedSpool() as spool:
        spool.read_lines(lines, priority=3)
        spool.add(sitemap_request("http://c.example/sitemap.xml", priority=1))
        assert (spool.given, spool.bad_count) == (4, 0)
        assert spool.hosts == ("a.example", "b.example", "a.example:8080", "c.example")
        batches = list(spool.batches(3))
        assert [len(b) for b in batches] == [3, 1]
        got = [r for batch in batches for r in batch]
        assert [r.url for r in got] == [
            "http://a.example/1",
            "http://b.example/2",
            "http://a.example:8080/3",
            "http://c.example/sitemap.xml",
        ]
        assert [r.priority for r in got] == [3, 7, 3, 1]
        assert dict(got[1].meta) == {"k": [1, 2]}
        assert got[3] == sitemap_request("http://c.example/sitemap.xml", priority=1)
        assert got[0].fingerprint == CrawlRequest("http://a.example/1").fingerprint
        assert [r.url for b in spool.batches(500) for r in b] == [r.url for r in got]  # again


def test_a_line_break_inside_an_argument_does_not_split_it() -> None:
    given = '{"url": "http://a.example/x",\n "priority": 2}'
    with SeedSpool() as spool:
        spool.read_lines([("input 1", given), ("input 2", "http://a.example/y")])
        got = [r for batch in spool.batches() for r in batch]
    assert [(r.url, r.priority) for r in got] == [
        ("http://a.example/x", 2),
        ("http://a.example/y", 0),
    ]


def test_bad_lines_are_counted_and_the_first_ones_named() -> None:
    lines = [(f"line {n}", "not a url" if n % 2 else f"http://a.example/{n}") for n in range(40)]
    with SeedSpool() as spool:
        spool.read_lines(lines)
        assert (spool.given, spool.bad_count) == (20, 20)
        assert len(spool.bad) == BAD_SHOWN
        assert spool.bad[0].startswith("line 1: invalid URL 'not a url'")


def test_the_spool_file_is_private_and_unlinked() -> None:
    with SeedSpool() as spool:
        spool.add(CrawlRequest("http://a.example/", cookies={"session": "secret"}))
        info = os.fstat(spool._file.fileno())
        assert stat.S_IMODE(info.st_mode) == 0o600
        assert info.st_nlink == 0  # no name in any directory: gone with the process
