"""Item pipelines and item dedup across two native worker processes of one Redis job (the
Celery engine's test: ``tests/celery_engine/test_items.py``). The spider file defines the
pipeline; each worker loads it from its own command line or environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.request_log import RequestLog
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq

pytestmark = pytest.mark.e2e

SPIDER = """
from crawlq.items import DropItem
from crawlq.spider import Spider


class Tag:
    def process_item(self, item, response):
        if item.get("drop"):
            raise DropItem("asked to")
        item["tagged"] = True
        return item


class Shop(Spider):
    name = "shop"

    def parse(self, response):
        if response.url.endswith("/page/1"):
            for n in range(2, 8):
                yield response.follow(f"/page/{n}", callback="product")
        yield {"sku": "everywhere"}

    def product(self, response):
        yield {"sku": "everywhere"}
        yield {"sku": response.url.rsplit("/", 1)[1]}
        yield {"sku": "x" + response.url.rsplit("/", 1)[1], "drop": True}
"""


def _items(store: Path) -> list[dict[str, object]]:
    out = run_crawlq("export", "--store", str(store), "--what", "items").stdout
    return [json.loads(line) for line in out.splitlines() if line]


def _check(items: list[dict[str, object]]) -> None:
    skus = sorted(str(i["sku"]) for i in items)
    assert skus == ["2", "3", "4", "5", "6", "7", "everywhere"]  # one "everywhere" in all
    assert all(i["tagged"] is True for i in items)


def test_item_dedup_holds_across_two_worker_processes_of_a_redis_job(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    spider = tmp_path / "shop.py"
    spider.write_text(SPIDER)
    store = tmp_path / "store.db"
    with ServerThread(make_fault_app(log=RequestLog())) as server:
        proc = run_crawlq(
            "crawl", server.base_url + "/page/1", "--frontier", redis_url, "--job", job,
            "--processes", "2", "--store", str(store), "--delay", "0",
            "--spider", f"{spider}:Shop", "--pipeline", f"{spider}:Tag",
            "--item-dedup-key", "sku",
        )  # fmt: skip
    _check(_items(store))
    assert "items dropped" in proc.stdout, proc.stdout
    assert "Tag: asked to 6" in proc.stdout
    assert "item_dedup: duplicate_item 6" in proc.stdout
