"""Per-host auth on the Celery engine: ``crawl --engine celery --processes 1`` gives its local
worker the names of the credentials' variables (``CRAWLQ_HOSTS``), never their values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.celery_engine.conftest import CeleryJob
from tests.e2e.test_auth import BASIC, BASIC_TABLE, PASSWORD, Sites, _config, _pages

pytestmark = pytest.mark.e2e


def test_a_celery_crawl_sends_the_credentials_to_their_host_only(
    tmp_path: Path, celery_job: CeleryJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITE_PW", PASSWORD)
    store = celery_job.store
    config = _config(tmp_path, BASIC_TABLE)
    with Sites(BASIC) as sites:
        seeds = [f"{sites.base}/private", f"{sites.other}/"]
        proc = celery_job.crawl(
            seeds,
            "--config", str(config), "--processes", "1", "--delay", "0",
        )  # fmt: skip
        assert _pages(store)[f"{sites.base}/private/2"] == 200
        assert sites.log.headers("Authorization", "/private/2") == [BASIC]
        other = sites.other_log.requests()
        assert other and [r.header("Authorization") for r in other] == [None] * len(other)
    assert PASSWORD not in proc.stdout + proc.stderr
