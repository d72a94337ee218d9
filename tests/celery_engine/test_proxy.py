"""A Celery crawl through a proxy: ``crawl --engine celery --processes 1 --proxy URL`` gives
its local worker the proxy through the environment; the proxy's own log is the evidence."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy
from tests.celery_engine.conftest import crawl_celery, stored_dead, stored_urls
from tests.e2e.test_proxy_workers import PAGES, SECRET, _basic, _site

pytestmark = pytest.mark.e2e


def test_every_request_of_a_celery_crawl_goes_through_the_proxy(
    tmp_path: Path,
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    store = tmp_path / "store.db"
    log = RequestLog()
    with ServerThread(_site(log)) as site, HttpProxy(user="bob", password=SECRET) as proxy:
        base = site.base_url
        proc = crawl_celery(
            [f"{base}/a/0", f"{base}/b/0"], celery_redis_url, redis_url, job, queue, store,
            "--processes", "1", "--delay", "0", "--ignore-robots", "--max-retries", "0",
            "--proxy", f"http://bob:{SECRET}@{proxy.address}",
        )  # fmt: skip
        proxied, auth = sorted(proxy.log), set(proxy.auth)
    expected = [f"{base}/{f}/{i}" for f in "ab" for i in range(PAGES)]
    assert sorted(stored_urls(store)) == sorted(expected) and stored_dead(store) == []
    assert proxied == sorted(f"GET {url}" for url in expected)
    assert log.count() == len(proxied) and auth == {_basic("bob")}  # none went direct
    assert SECRET not in proc.stdout + proc.stderr
