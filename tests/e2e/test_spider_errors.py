"""Spider errors as a user meets them: counted by type, listed, and fixed by ``crawlq reparse``
over the kept bodies or WARC records, without one HTTP request (the server's log says so).

Every command runs as a subprocess (``python -m crawlq``) against a loopback fault server.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_fault_app
from tests.conftest import run_crawlq

FAST = ["--delay", "0", "--retry-delay", "0.05", "--max-depth", "2"]

SPIDER = """
from crawlq.spider import Spider


class Docs(Spider):
    name = "docs"

    def parse(self, response):
        yield {{"page": response.url, "kind": "seed"}}
        yield from self.children(response, "t")

    def parse_child(self, response, tag):
{body}
        yield {{"page": response.url, "tag": tag, "from": response.meta["from"]}}
        yield from self.children(response, tag)

    def children(self, response, tag):
        return response.follow_all(
            callback=self.parse_child, meta={{"from": response.url}}, cb_kwargs={{"tag": tag}}
        )
"""
BROKEN = """
        n = int(response.url.rsplit("/", 1)[1])
        if n == 2:
            raise KeyError("price")
        if n == 4:
            yield 42
"""
FIXED = """
        pass
"""


@pytest.fixture(scope="module")
def server_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def site(server_log: RequestLog) -> Iterator[str]:
    with ServerThread(make_fault_app(server_log)) as server:
        yield server.base_url


def spider_file(tmp_path: Path, name: str, body: str, spider_name: str = "docs") -> str:
    path = tmp_path / f"{name}.py"
    source = SPIDER.format(body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8))
    path.write_text(source.replace('name = "docs"', f"name = {spider_name!r}"))
    return f"{path}:Docs"


def jsonl(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def items_of(store: Path) -> list[dict[str, object]]:
    rows = jsonl(run_crawlq("export", "--store", str(store), "--what", "items").stdout)
    return sorted(rows, key=lambda r: (str(r["page"]), json.dumps(r, sort_keys=True)))


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_spider_errors_are_counted_listed_and_reparsed_without_a_request(
    tmp_path: Path, site: str, server_log: RequestLog
) -> None:
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    seeds = [f"{site}/page/1", f"{site}/status/404"]
    crawl = run_crawlq(
        "crawl", *seeds, "--store", str(store), "--store-body", "--spider", broken, *FAST
    )
    out = lines(crawl.stdout)
    assert "pages stored: 6 this run, 6 in store" in out  # pages 1-5 and the 404
    assert "spider errors: 2 this run, 2 in store (KeyError 1, TypeError 1)" in out
    warning = [line for line in lines(crawl.stderr) if line.startswith("crawlq: warning:")]
    assert warning == [
        "crawlq: warning: 2 pages have spider errors (KeyError 1, TypeError 1): `crawlq export"
        " --what errors` lists them; after fixing the spider, `crawlq reparse --errors-only`"
        " reruns it on the kept bodies"
    ]
    assert [r["page"] for r in items_of(store)] == [f"{site}/page/{n}" for n in (1, 3, 5)]

    errors = jsonl(run_crawlq("export", "--store", str(store), "--what", "errors").stdout)
    assert [(e["url"], e["error_type"], e["callback"], e["replayable"]) for e in errors] == [
        (f"{site}/page/2", "KeyError", "parse_child", True),
        (f"{site}/page/4", "TypeError", "parse_child", True),
    ]
    assert errors[0]["error"] == "spider_error: KeyError: callback 'parse_child': 'price'"
    pages = jsonl(
        run_crawlq("export", "--store", str(store), "--what", "pages", "--errors-only").stdout
    )
    assert [p["url"] for p in pages] == [e["url"] for e in errors]

    fetched = server_log.requests()
    fixed = spider_file(tmp_path, "fixed", FIXED)
    proc = run_crawlq("reparse", "--store", str(store), "--spider", fixed, "--errors-only")
    assert server_log.requests() == fetched  # not one HTTP request
    assert lines(proc.stdout)[1:] == [
        "spider errors fixed: 2, still failing: 0",
        "items written: 2",
        "requests yielded by callbacks: 4 (not followed: reparse crawls nothing)",
        "spider errors in store: 0",
    ]
    assert lines(proc.stdout)[0].startswith("reparsed 2 of 2 pages, 2 updated in the store")
    after = items_of(store)
    reparsed = [
        r
        for r in after
        if r.get("tag") == "t" and r["page"] in (errors[0]["url"], errors[1]["url"])
    ]
    assert reparsed == [  # the callback its request named, with its cb_kwargs and meta
        {
            "page": f"{site}/page/2",
            "tag": "t",
            "from": f"{site}/page/1",
            "_url": f"{site}/page/2",
            "_spider": "docs",
        },
        {
            "page": f"{site}/page/4",
            "tag": "t",
            "from": f"{site}/page/3",
            "_url": f"{site}/page/4",
            "_spider": "docs",
        },
    ]
    assert len(after) == 5
    assert run_crawlq("export", "--store", str(store), "--what", "errors").stdout == ""

    # All pages, twice: the same store each time (items keyed by page and index).
    everything = run_crawlq("reparse", "--store", str(store), "--spider", fixed)
    assert lines(everything.stdout)[0].startswith("reparsed 5 of 6 pages, 5 updated")
    assert "skipped: 1 whose status reaches no callback (404 1)" in lines(everything.stdout)
    once = items_of(store)
    run_crawlq("reparse", "--store", str(store), "--spider", fixed)
    assert items_of(store) == once
    assert [r["page"] for r in once] == [f"{site}/page/{n}" for n in (1, 2, 3, 4, 5)]
    assert server_log.requests() == fetched


def test_fail_on_spider_errors_exits_3_and_reparse_can_too(tmp_path: Path, site: str) -> None:
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    args = ["--store", str(store), "--store-body", "--spider", broken, *FAST]
    proc = run_crawlq(
        "crawl", f"{site}/page/1", *args, "--fail-on-spider-errors", "-q", check=False
    )
    assert proc.returncode == 3, proc.stderr
    assert "crawlq: warning: 2 pages have spider errors" in proc.stderr
    again = run_crawlq(
        "reparse", "--store", str(store), "--spider", broken, "--errors-only",
        "--fail-on-spider-errors", "-q", check=False,
    )  # fmt: skip
    assert again.returncode == 3
    assert "spider errors fixed: 0, still failing: 2 (KeyError 1, TypeError 1)" in again.stdout
    fixed = spider_file(tmp_path, "fixed", FIXED)
    done = run_crawlq(
        "reparse", "--store", str(store), "--spider", fixed, "--fail-on-spider-errors", "-q"
    )
    assert "spider errors in store: 0" in done.stdout


def test_reparse_reads_the_warc_records_of_pages_kept_without_a_body(
    tmp_path: Path, site: str, server_log: RequestLog
) -> None:
    store, warc = tmp_path / "crawl.db", tmp_path / "warc"
    broken = spider_file(tmp_path, "broken", BROKEN)
    crawl = run_crawlq(
        "crawl", f"{site}/page/1", "--store", str(store), "--warc", str(warc),
        "--spider", broken, *FAST,
    )  # fmt: skip
    assert "the kept bodies" in crawl.stderr  # WARC records make them replayable
    fetched = server_log.requests()
    fixed = spider_file(tmp_path, "fixed", FIXED)
    without = run_crawlq("reparse", "--store", str(store), "--spider", fixed, "--errors-only")
    assert lines(without.stdout)[0].startswith("reparsed 0 of 2 pages")
    assert (
        "skipped: 2 no body kept (crawl with --store-body or --warc to keep them); 2 of them"
        " are in WARC files: give --warc DIR" in lines(without.stdout)
    )
    with_warc = run_crawlq(
        "reparse", "--store", str(store), "--spider", fixed, "--errors-only", "--warc", str(warc)
    )
    assert "spider errors fixed: 2, still failing: 0" in lines(with_warc.stdout)
    assert server_log.requests() == fetched
    assert [r["page"] for r in items_of(store)] == [f"{site}/page/{n}" for n in (1, 2, 3, 4, 5)]


def test_pages_without_a_kept_body_are_not_replayable(tmp_path: Path, site: str) -> None:
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    crawl = run_crawlq("crawl", f"{site}/page/1", "--store", str(store), "--spider", broken, *FAST)
    assert "they were stored without bodies" in crawl.stderr
    errors = jsonl(run_crawlq("export", "--store", str(store), "--what", "errors").stdout)
    assert [e["replayable"] for e in errors] == [False, False]
    fixed = spider_file(tmp_path, "fixed", FIXED)
    proc = run_crawlq("reparse", "--store", str(store), "--spider", fixed, "--errors-only")
    assert "spider errors in store: 2 (KeyError 1, TypeError 1)" in lines(proc.stdout)


def test_a_rerun_without_store_body_does_not_say_the_kept_bodies_are_gone(
    tmp_path: Path, site: str
) -> None:
    # The first run kept the bodies; the second, without --store-body, fetches nothing new:
    # the store's pages with spider errors are the first run's, replayable.
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    args = ["--store", str(store), "--spider", broken, *FAST]
    run_crawlq("crawl", f"{site}/page/1", *args, "--store-body", "-q")
    again = run_crawlq("crawl", f"{site}/page/1", *args, "-q")
    warning = [line for line in lines(again.stderr) if line.startswith("crawlq: warning:")]
    assert warning == [
        "crawlq: warning: 2 pages have spider errors (KeyError 1, TypeError 1): `crawlq export"
        " --what errors` lists them; after fixing the spider, `crawlq reparse --errors-only`"
        " reruns it on the kept bodies"
    ]
    errors = jsonl(run_crawlq("export", "--store", str(store), "--what", "errors").stdout)
    assert [e["replayable"] for e in errors] == [True, True]
    fixed = spider_file(tmp_path, "fixed", FIXED)
    proc = run_crawlq("reparse", "--store", str(store), "--spider", fixed, "--errors-only")
    assert "spider errors fixed: 2, still failing: 0" in lines(proc.stdout)


def test_reparse_leaves_other_spiders_pages_alone_unless_asked(tmp_path: Path, site: str) -> None:
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    run_crawlq(
        "crawl", f"{site}/page/1", "--store", str(store), "--store-body", "--spider", broken,
        *FAST, "-q",
    )  # fmt: skip
    other = spider_file(tmp_path, "other", FIXED, spider_name="renamed")
    proc = run_crawlq("reparse", "--store", str(store), "--spider", other, "--errors-only")
    assert "skipped: 2 parsed by another spider (docs 2; --all-spiders takes them too)" in (
        lines(proc.stdout)
    )
    proc = run_crawlq(
        "reparse", "--store", str(store), "--spider", other, "--errors-only", "--all-spiders"
    )
    assert "spider errors fixed: 2, still failing: 0" in lines(proc.stdout)
    spiders = {r["_spider"] for r in items_of(store) if r.get("tag") == "t"}
    assert spiders == {"docs", "renamed"}  # the reparsed pages' items are the new spider's


def test_reparse_of_a_missing_store_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_crawlq("reparse", "--store", str(tmp_path / "none.db"), check=False)
    assert proc.returncode == 2
    assert "no such store file" in proc.stderr
    assert not (tmp_path / "none.db").exists()


def test_errors_export_as_csv_and_parquet(tmp_path: Path, site: str) -> None:
    store = tmp_path / "crawl.db"
    broken = spider_file(tmp_path, "broken", BROKEN)
    run_crawlq(
        "crawl", f"{site}/page/1", "--store", str(store), "--store-body", "--spider", broken,
        *FAST, "-q",
    )  # fmt: skip
    out = tmp_path / "errors.csv"
    run_crawlq("export", "--store", str(store), "--what", "errors", "-o", str(out))
    rows = out.read_text().splitlines()
    assert rows[0] == (
        "url,final_url,status,error_type,error,callback,spider,fetched_at,fingerprint,"
        "replayable,warc_file,warc_offset"
    )
    assert len(rows) == 3
    import pyarrow.parquet as pq

    parquet = tmp_path / "errors.parquet"
    run_crawlq("export", "--store", str(store), "--what", "errors", "-o", str(parquet))
    table = pq.read_table(parquet)
    assert table.column("error_type").to_pylist() == ["KeyError", "TypeError"]
    assert table.column("replayable").to_pylist() == [True, True]


def test_each_spider_error_logs_one_traceback(tmp_path: Path, site: str) -> None:
    """At the default log level: the callback's traceback once, not chained under a second
    one for the SpiderError that wraps it (issue 21)."""
    broken = spider_file(tmp_path, "broken", BROKEN)
    proc = run_crawlq(
        "crawl", f"{site}/page/1", "--store", str(tmp_path / "crawl.db"), "--spider", broken,
        *FAST,
    )  # fmt: skip
    errors = [line for line in lines(proc.stderr) if "spider error on" in line]
    assert len(errors) == 2, proc.stderr  # page 2's KeyError, page 4's TypeError
    assert proc.stderr.count("Traceback (most recent call last)") == 2, proc.stderr
    assert "direct cause" not in proc.stderr
    assert 'raise KeyError("price")' in proc.stderr  # the spider's own line is shown
