"""A Celery crawl through a proxy: ``crawl --engine celery --processes 1 --proxy URL`` gives
its local worker the proxy through the environment; the proxy's own log is the evidence."""

from __future__ import annotations

import pytest

from crawlq.testing import RequestLog, ServerThread
from crawlq.testing.proxy import HttpProxy
from tests.celery_engine.conftest import CeleryJob, stored_dead, stored_urls
from tests.e2e.test_proxy_workers import PAGES, SECRET, _basic, _site

pytestmark = pytest.mark.e2e


def test_every_request_of_a_celery_crawl_goes_through_the_proxy(celery_job: CeleryJob) -> None:
    store = celery_job.store
    log = RequestLog()
    with ServerThread(_site(log)) as site, HttpProxy(user="bob", password=SECRET) as proxy:
        base = site.base_url
        proc = celery_job.crawl(
            [f"{base}/a/0", f"{base}/b/0"],
            "--processes", "1", "--delay", "0", "--ignore-robots", "--max-retries", "0",
            "--proxy", f"http://bob:{SECRET}@{proxy.address}",
        )  # fmt: skip
        proxied, auth = sorted(proxy.log), set(proxy.auth)
    expected = [f"{base}/{f}/{i}" for f in "ab" for i in range(PAGES)]
    assert sorted(stored_urls(store)) == sorted(expected) and stored_dead(store) == []
    assert proxied == sorted(f"GET {url}" for url in expected)
    assert log.count() == len(proxied) and auth == {_basic("bob")}  # none went direct
    assert SECRET not in proc.stdout + proc.stderr
