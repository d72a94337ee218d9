"""The Celery engine reads coding labels and stray NULs by the same rules as the native one
(`crawlq.web.codings`, `crawlq.web.decode`: issue 23); real ``celery worker`` process, real Redis,
the raw loopback server of `tests.engine.test_coding_labels`."""

from __future__ import annotations

import pytest

from tests.celery_engine.conftest import CeleryJob, stored_dead, stored_pages
from tests.engine.test_coding_labels import ROUTES
from tests.engine.test_responses import after
from tests.raw_server import RawServer

pytestmark = pytest.mark.e2e


def test_a_celery_crawl_keeps_pages_with_harmless_labels_and_stray_nuls(
    celery_job: CeleryJob,
) -> None:
    seeds = ["/none", "/utf-8", "/stray-nul", "/x-unknown", "/png"]
    with RawServer(ROUTES) as server:
        base = server.base_url
        proc = celery_job.crawl(
            [base + path for path in seeds],
            "--processes", "1", "--delay", "0", "--ignore-robots", "--max-depth", "1",
        )  # fmt: skip
        asked = server.requests()
    assert "crawl finished" in proc.stdout
    pages = {str(p["url"]).removeprefix(base): p for p in stored_pages(celery_job.store)}
    for path, title in [
        ("/none", "label /none"),
        ("/utf-8", "label /utf-8"),
        ("/stray-nul", "stray NUL"),
    ]:
        assert (pages[path]["status"], pages[path]["title"], pages[path]["error"]) == (
            200,
            title,
            None,
        )
        assert asked[after(path)] == 1
    assert pages["/png"]["error"] == "binary_body: image/png signature"
    dead = {str(d["url"]).removeprefix(base): d for d in stored_dead(celery_job.store)}
    assert dead["/x-unknown"]["reason"] == "unsupported_content_coding"
    assert "'x-unknown'" in str(dead["/x-unknown"]["detail"])
    assert (asked["/after-x-unknown"], asked["/after-png"]) == (0, 0)
