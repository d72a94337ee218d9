"""Spider errors: their kind read from a page's error, and how the CLI shows them."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from rich.console import Console

from crawlq.cli.reports import ProgressDisplay, print_summary, spider_errors_warning
from crawlq.engine import CrawlReport, Progress
from crawlq.engine.outcome import WorkerCounters
from crawlq.frontier import FrontierStats
from crawlq.records import spider_error, spider_error_type
from crawlq.settings import suggest
from crawlq.spider import Response, Spider, SpiderError, start_callback
from crawlq.store import StoreCounts


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (spider_error("KeyError", "callback 'parse': 'title'"), "KeyError"),
        (spider_error("MissingCallback", "spider X has no callback 'y'"), "MissingCallback"),
        (spider_error("my.module.Oops", "callback 'parse': x: y"), "my.module.Oops"),
        ("spider_error: SpiderError: callback 'parse' on http://h/p: ValueError: v", "ValueError"),
        (
            "spider_error: SpiderError: callback 'p' on http://h/p: spider S has no callback",
            "SpiderError",
        ),
        ("spider_error: item is not JSON-serialisable: Object of type date", "UnserialisableItem"),
        ("spider_error: what is this", "SpiderError"),
        (None, None),
        ("http_404", None),
        ("parse_timeout: ran past 10s", None),
        ("links_capped: 10000 of 20000", None),
    ],
)
def test_the_kind_of_a_spider_error(error: str | None, kind: str | None) -> None:
    assert spider_error_type(error) == kind


class Raises(Spider):
    def parse(self, response: Response) -> object:
        raise LookupError("no such thing")

    def bad(self, response: Response) -> object:
        return 42


def _response(callback: str | None = None) -> Response:
    from crawlq.request import CrawlRequest, FetchResult

    req = CrawlRequest("http://example.test/", callback=callback)
    result = FetchResult(req.url, req.url, 200, {}, b"", None, "", 0.0)
    return Response(req, result)


@pytest.mark.parametrize(
    ("callback", "kind", "detail"),
    [
        (None, "LookupError", "no such thing"),
        (
            "bad",
            "TypeError",
            "produced a int; expected an item (a dict, dataclass, attrs or pydantic instance)"
            " or a CrawlRequest",
        ),
        ("missing", "MissingCallback", "spider Raises has no callback 'missing'"),
    ],
)
def test_a_spider_error_knows_its_kind(callback: str | None, kind: str, detail: str) -> None:
    with pytest.raises(SpiderError) as info:
        start_callback(Raises(), _response(callback))
    assert (info.value.kind, info.value.detail) == (kind, detail)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("delay", ["delay_s"]),
        ("max_body", ["max_body_bytes"]),
        ("TIMEOUT", ["timeout_s"]),
        ("dealy_s", ["delay_s", "max_delay_s", "retry_delay_s"]),
        ("zzzz", []),
    ],
)
def test_suggest_close_setting_names(name: str, expected: list[str]) -> None:
    assert suggest(name) == expected


def _report(
    spider_errors: dict[str, int], this_run: dict[str, int], *, full: bool = True
) -> CrawlReport:
    return CrawlReport(
        stopped_by="done",
        counters=WorkerCounters(pages=3, spider_errors=Counter(this_run)),
        store=StoreCounts(
            pages=5, items=1, dead=0, filtered=0, spider_errors_by_type=spider_errors
        ),
        frontier=FrontierStats(0, 0, 0, 0, 0, 0),
        elapsed_s=1.0,
        seeded=1,
        full_counters=full,
    )


def test_the_summary_counts_spider_errors_by_kind() -> None:
    out = io.StringIO()
    print_summary(_report({"KeyError": 2, "TypeError": 3}, {"TypeError": 1}), out)
    assert "spider errors: 1 this run, 5 in store (TypeError 3, KeyError 2)" in out.getvalue()
    out = io.StringIO()
    print_summary(_report({"KeyError": 2}, {}, full=False), out)
    assert "spider errors: 2 in store (KeyError 2)" in out.getvalue().splitlines()
    out = io.StringIO()
    print_summary(_report({}, {}), out)
    assert "spider errors" not in out.getvalue()


def test_the_warning_says_how_to_list_and_replay() -> None:
    assert spider_errors_warning(_report({}, {}), replayable=0) is None
    one = spider_errors_warning(_report({"KeyError": 1}, {}), replayable=1)
    assert one is not None and one.startswith(
        "crawlq: warning: 1 page has spider errors (KeyError 1)"
    )
    assert "crawlq reparse --errors-only" in one and "without bodies" not in one
    lost = spider_errors_warning(_report({"KeyError": 1}, {}), replayable=0)
    assert lost is not None and "they were stored without bodies" in lost
    assert "reparse --errors-only" not in lost


def test_the_warning_counts_the_pages_stored_without_bodies() -> None:
    some = spider_errors_warning(_report({"KeyError": 2, "TypeError": 1}, {}), replayable=2)
    assert some is not None and some.endswith(
        "after fixing the spider, `crawlq reparse --errors-only` reruns it on the kept bodies;"
        " 1 of them were stored without bodies (crawl with --store-body or --warc to make them"
        " replayable by `crawlq reparse`)"
    )


def test_the_live_display_shows_spider_errors() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    counters = WorkerCounters(pages=7, spider_errors=Counter({"KeyError": 2, "TypeError": 1}))
    with ProgressDisplay(console) as display:
        display.update(
            Progress(FrontierStats(0, 0, 0, 0, 0, 0), counters, in_flight=0, elapsed_s=2.0)
        )
    text = buffer.getvalue()
    assert "spider errors" in text
    assert "3 (KeyError 2, …)" in text
