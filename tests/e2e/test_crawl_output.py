"""``crawlq crawl -o/-O FILE`` and ``crawlq export --format json``, ``--status``, ``--host``,
``--spider``: exact record counts from crawls of a small loopback site."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_static_app
from tests.conftest import run_crawlq

FAST = ["--delay", "0", "--retry-delay", "0.05", "-q"]
PAGES = 5  # a.html links to b..e and to missing.html (404)

SPIDER = """
from crawlq.spider import Spider

class TitleSpider(Spider):
    name = "titles"

    def parse(self, response):
        yield {"title": response.css("title::text").get(), "n": len(response.text)}
        yield from response.follow_all()
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("site")
    names = ["a", "b", "c", "d", "e"]
    for name in names:
        links = "".join(f'<a href="{n}.html">{n}</a>' for n in names if n != name)
        if name == "a":
            links += '<a href="missing.html">gone</a>'
        (root / f"{name}.html").write_text(f"<title>page {name}</title>{links}")
    with ServerThread(make_static_app(root, log=RequestLog())) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def spider(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("spider") / "titles.py"
    path.write_text(SPIDER)
    return f"{path}:TitleSpider"


def crawl(site: str, store: Path, *args: str, check: bool = True) -> str:
    proc = run_crawlq("crawl", f"{site}/a.html", "--store", str(store), *FAST, *args, check=check)
    return proc.stderr if check else f"{proc.returncode}\n{proc.stderr}"


def test_crawl_overwrite_json_is_one_array_of_every_item(
    tmp_path: Path, site: str, spider: str
) -> None:
    out = tmp_path / "items.json"
    out.write_text("old contents, replaced")
    said = crawl(site, tmp_path / "c.db", "--spider", spider, "-O", str(out))
    assert f"wrote {PAGES} items to {out}" in said
    items = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(items, list)
    assert sorted(i["title"] for i in items) == [f"page {n}" for n in "abcde"]
    assert {i["_spider"] for i in items} == {"titles"}


def test_crawl_output_what_pages(tmp_path: Path, site: str) -> None:
    out = tmp_path / "pages.jsonl"
    crawl(site, tmp_path / "c.db", "-O", str(out), "--output-what", "pages")
    pages = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(pages) == PAGES + 1  # the 404 page is a stored page too
    assert sorted(p["status"] for p in pages) == [200] * PAGES + [404]


def test_crawl_append_csv_twice_appends_rows_under_one_header(
    tmp_path: Path, site: str, spider: str
) -> None:
    out = tmp_path / "items.csv"
    crawl(site, tmp_path / "one.db", "--spider", spider, "-o", str(out))
    crawl(site, tmp_path / "two.db", "--spider", spider, "-o", str(out))
    with open(out, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["title", "n", "_url", "_spider", "_extra"]
    assert len(rows) == 1 + 2 * PAGES
    assert rows.count(rows[0]) == 1  # the header once
    assert sorted(r[0] for r in rows[1:]) == sorted([f"page {n}" for n in "abcde"] * 2)


def test_crawl_append_to_a_json_array_is_refused_before_crawling(
    tmp_path: Path, site: str, spider: str
) -> None:
    out = tmp_path / "x.json"
    crawl(site, tmp_path / "one.db", "--spider", spider, "-o", str(out))
    assert len(json.loads(out.read_text())) == PAGES
    second = tmp_path / "two.db"
    said = crawl(site, second, "--spider", spider, "-o", str(out), check=False)
    assert said.startswith("2\n")
    assert f"-o {out}: cannot append to a JSON array that already holds data; use -O" in said
    assert not second.exists()  # refused before the crawl
    assert len(json.loads(out.read_text())) == PAGES  # untouched


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-o", "items.txt"], "-o items.txt: cannot tell the format from its extension"),
        (["-O", "no/such/dir/x.jsonl"], "directory no/such/dir does not exist"),
        (["-o", "a.jsonl", "-O", "b.jsonl"], "not both"),
    ],
)
def test_crawl_bad_output_file_is_refused_before_the_crawl(
    tmp_path: Path, site: str, args: list[str], says: str
) -> None:
    store = tmp_path / "c.db"
    proc = run_crawlq(
        "crawl", f"{site}/a.html", "--store", str(store), *FAST, *args, check=False, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert says in proc.stderr
    assert not store.exists()


# -- export --format json and the filters ----------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, site: str, spider: str) -> Path:
    path = tmp_path_factory.mktemp("store") / "c.db"
    crawl(site, path, "--spider", spider)
    return path


def export(store: Path, *args: str) -> str:
    return run_crawlq("export", "--store", str(store), *args).stdout


def test_export_json_of_an_empty_store_is_an_empty_array(tmp_path: Path, site: str) -> None:
    path = tmp_path / "empty.db"
    crawl(site, path, "--max-pages", "1")
    assert json.loads(export(path, "--what", "dead", "--format", "json")) == []
    assert export(path, "--what", "items", "--format", "json") == "[]\n"


def test_export_json_array_to_a_file(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "pages.json"
    run_crawlq("export", "--store", str(store), "-o", str(out))
    pages = json.loads(out.read_text())
    assert len(pages) == PAGES + 1
    assert json.loads(export(store, "--what", "items", "--format", "json"))[0]["_spider"] == (
        "titles"
    )


def test_export_status_filter(store: Path) -> None:
    def count(*args: str) -> int:
        return len(export(store, *args).splitlines())

    assert count("--status", "4xx") == 1
    assert count("--status", "404") == 1
    assert count("--status", "200") == PAGES
    assert count("--status", "2xx,4xx") == PAGES + 1
    assert count("--status", "5xx") == 0
    missing = json.loads(export(store, "--status", "4xx"))
    assert missing["url"].endswith("/missing.html")


def test_export_host_filter(store: Path, site: str) -> None:
    host_port = site.removeprefix("http://")
    assert len(export(store, "--host", "127.0.0.1").splitlines()) == PAGES + 1
    assert len(export(store, "--host", host_port).splitlines()) == PAGES + 1
    assert export(store, "--host", "127.0.0.1:1") == ""
    assert export(store, "--host", "example.org") == ""
    items = export(store, "--what", "items", "--host", "127.0.0.1", "--format", "json")
    assert len(json.loads(items)) == PAGES


def test_export_spider_filter(store: Path) -> None:
    assert len(export(store, "--what", "items", "--spider", "titles").splitlines()) == PAGES
    assert export(store, "--what", "items", "--spider", "other") == ""
    assert len(export(store, "--spider", "titles").splitlines()) == PAGES + 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--what", "items", "--status", "200"], "--status applies to --what pages, errors only"),
        (["--what", "dead", "--spider", "x"], "--spider applies to --what pages, errors, items"),
        (["--status", "2x"], "--status '2x': expected codes or classes"),
    ],
)
def test_export_filters_the_store_cannot_answer_exit_2(
    store: Path, args: list[str], says: str
) -> None:
    proc = run_crawlq("export", "--store", str(store), *args, check=False)
    assert proc.returncode == 2
    assert says in proc.stderr
