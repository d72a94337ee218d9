"""Sitemaps on the Celery engine: ``crawlq crawl --engine celery --sitemap`` with no seed URL,
and a robots.txt ``Sitemap:`` line read with ``--follow-sitemaps``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, crawl_celery, job_counts, stored_pages
from tests.conftest import run_crawlq
from tests.engine.sitemap_site import SitemapSite, put_gzipped_index, url_entry, urlset

pytestmark = pytest.mark.e2e


def test_celery_reads_an_index_of_gzipped_sitemaps_and_robots_txt_sitemaps(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    site = SitemapSite()
    with ServerThread(site.app()) as server:
        base = server.base_url
        put_gzipped_index(site, base)
        site.robots = "User-agent: *\nDisallow: /private/\nSitemap: /from-robots.xml\n"
        site.put(
            "/from-robots.xml",
            urlset(
                url_entry(f"{base}/p/6"), url_entry(f"{base}/private/7"), url_entry(f"{base}/p/1")
            ),
        )
        worker = workers(celery_redis_url, redis_url, queue, "--concurrency", "2")
        store = tmp_path / "store.db"
        proc = crawl_celery(
            [], celery_redis_url, redis_url, job, queue, store,
            "--sitemap", f"{base}/sitemap_index.xml", "--follow-sitemaps", "--delay", "0",
        )  # fmt: skip
        assert "crawl finished" in proc.stdout, worker.log_tail()
        paths = Counter(site.paths())
    assert paths == Counter(
        ["/robots.txt", "/sitemap_index.xml", "/s1.xml.gz", "/s2.xml", "/from-robots.xml"]
        + [f"/p/{n}" for n in range(1, 7)]
    ), worker.log_tail()
    pages = {str(p["url"]): p for p in stored_pages(store)}
    sitemaps = ["sitemap_index.xml", "s1.xml.gz", "s2.xml", "from-robots.xml"]
    expected = {f"{base}/{s}" for s in sitemaps} | {f"{base}/p/{n}" for n in (1, 3, 4, 5, 6)}
    assert set(pages) == expected | {f"{base}/p/2?a=1&b=2"}
    assert all(p["error"] is None and p["status"] == 200 for p in pages.values())
    out = run_crawlq("export", "--store", str(store), "--what", "filtered").stdout
    filtered = [json.loads(line) for line in out.splitlines() if line]
    assert [(f["url"], f["reason"]) for f in filtered] == [(f"{base}/private/7", "robots_txt")]
    counts = job_counts(redis_url, job)
    assert counts["pending"] == 0
    assert counts["seen"] == len(pages) + 1
