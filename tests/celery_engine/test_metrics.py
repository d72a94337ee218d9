"""A Celery worker (prefork pool of 2) serves the same worker metrics, summed over its pool."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import pytest

from crawlq.testing.fault_server import make_fault_app
from crawlq.testing.thread import ServerThread
from tests.celery_engine.conftest import CeleryWorker, crawl_celery, stored_dead, stored_pages
from tests.e2e.faulty_site import make_faulty_app
from tests.e2e.test_metrics import by_label, export, scrape
from tests.services import free_port

pytestmark = pytest.mark.e2e


def metered_worker(
    workers: Callable[..., CeleryWorker],
    broker: str,
    frontier: str,
    queue: str,
    *,
    concurrency: int,
) -> tuple[CeleryWorker, int]:
    """A Celery worker serving metrics, once its endpoint answers; and the endpoint's port."""
    port = free_port()
    worker = workers(
        broker, frontier, queue, "--concurrency", str(concurrency), CRAWLQ_METRICS_PORT=str(port)
    )
    deadline = time.monotonic() + 60
    while True:  # the main process serves once it has started (worker_init)
        try:
            scrape(port)
            return worker, port
        except OSError:
            assert time.monotonic() < deadline, worker.log_tail()
            time.sleep(0.1)


def test_celery_worker_metrics_add_up_to_the_store(
    site_root: Path,
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    broker_cleanup(celery_redis_url, queue)
    store = tmp_path / "store.db"
    worker, port = metered_worker(workers, celery_redis_url, redis_url, queue, concurrency=2)
    with ServerThread(make_faulty_app(site_root)) as server:
        proc = crawl_celery(
            server.base_url + "/index.html", celery_redis_url, redis_url, job, queue, store,
            "--delay", "0", "--host-concurrency", "8", "--max-retries", "1",
            "--retry-delay", "0.01",
        )  # fmt: skip
    assert "crawl finished" in proc.stdout, worker.log_tail()
    m = scrape(port)
    pages, dead = stored_pages(store), stored_dead(store)
    assert dead, "the site must produce dead letters"
    statuses = Counter(f"{int(str(p['status'])) // 100}xx" for p in pages)
    assert by_label(m["crawlq_pages_total"], "status_class") == dict(statuses)
    assert by_label(m["crawlq_dead_letters_total"], "reason") == dict(
        Counter(str(d["reason"]) for d in dead)
    )
    filtered = export(store, "filtered")
    assert filtered, "the site must produce filtered URLs"
    assert by_label(m["crawlq_filtered_total"], "reason") == dict(
        Counter(f["reason"] for f in filtered)
    )
    assert by_label(m["crawlq_retries_total"], "reason") == {"http_500": len(dead)}
    assert sum(m["crawlq_leases_in_flight"].values()) == 0


def test_celery_cookie_wall_revisits_are_counted_once(
    celery_redis_url: str,
    redis_url: str,
    job: str,
    queue: str,
    tmp_path: Path,
    workers: Callable[..., CeleryWorker],
    broker_cleanup: Callable[[str, str], None],
) -> None:
    """A cookie wall's redirect whose revisit was published is a hop, not a second page."""
    broker_cleanup(celery_redis_url, queue)
    store = tmp_path / "store.db"
    worker, port = metered_worker(workers, celery_redis_url, redis_url, queue, concurrency=1)
    walls = ["/cookie-wall/a", "/cookie-wall/again?never=1", "/cookie-wall/count?count=1"]
    with ServerThread(make_fault_app()) as server:
        seed = server.base_url + "/set-cookie/s/1?" + urlencode([("link", w) for w in walls])
        proc = crawl_celery(seed, celery_redis_url, redis_url, job, queue, store, "--delay", "0")
    assert "crawl finished" in proc.stdout, worker.log_tail()
    m = scrape(port)
    pages, dead = stored_pages(store), stored_dead(store)
    statuses = Counter(f"{int(str(p['status'])) // 100}xx" for p in pages)
    assert dict(statuses) == {"2xx": 2}  # the seed and wall a; "again" is a redirect loop
    assert by_label(m["crawlq_pages_total"], "status_class") == dict(statuses)
    assert sorted(str(d["reason"]) for d in dead) == ["redirect_loop", "too_many_redirects"]
    assert by_label(m["crawlq_dead_letters_total"], "reason") == {
        "redirect_loop": 1,
        "too_many_redirects": 1,
    }
    assert sum(m["crawlq_cookie_wall_hops_total"].values()) == 12  # a, again, count x10
