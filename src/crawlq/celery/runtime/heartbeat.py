"""Worker-process heartbeats of the Celery engine, so that a dead worker's URLs are found.

`Heartbeat` is one daemon thread per process that records ``host:pid`` (`process_id`) in
each of its jobs' ``workers`` sorted set every ``interval_s`` seconds, with its own
synchronous Redis connections (it beats while the event loop is busy with downloads).
`crawlq.celery.runtime.state.CeleryState.orphans` takes the URLs of processes whose beat is stale.
A beat is written only while the job exists (``heartbeat.lua``, one atomic step): a process
still beating after ``crawlq job delete`` never re-creates the deleted job's keys.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Mapping

import redis as sync_redis

from crawlq.clock import SystemClock
from crawlq.frontier.redis import Keyspace
from crawlq.frontier.redis.scripts import Script

__all__ = ["Heartbeat", "process_id"]

logger = logging.getLogger(__name__)

_BEAT = Script("heartbeat", "crawlq.celery.runtime").source
"""``heartbeat.lua``: ZADD into the job's ``workers`` only while its job hash exists."""


def process_id() -> str:
    """This worker process as its heartbeat names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat:
    """A daemon thread that records this worker process's heartbeat in its jobs' Redis.

    One per process (`Heartbeat.of_process`): it beats every job added to it every
    ``interval_s`` seconds, also while the process's tasks download (the thread runs beside
    them), so a stale heartbeat means a dead process (`CeleryState.orphans`). A failed beat
    (Redis restarting) is logged at debug level and the beats go on.

    Args:
        interval_s: Seconds between two beats.
    """

    _of_this_process: Heartbeat | None = None
    """The process's one heartbeat thread (`of_process`); None before the first use."""
    _lock = threading.Lock()

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.pid = os.getpid()
        self._jobs: dict[tuple[str, str], sync_redis.Redis] = {}
        self._jobs_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="crawlq-heartbeat", daemon=True)
        self._thread.start()

    @classmethod
    def of_process(cls, interval_s: float) -> Heartbeat:
        """This process's heartbeat thread, started on first use (after a fork too)."""
        with cls._lock:
            beat = cls._of_this_process
            if beat is None or beat.pid != os.getpid():  # none yet, or the parent's (a fork)
                beat = cls._of_this_process = cls(interval_s)
            beat.interval_s = min(beat.interval_s, interval_s)
            return beat

    def add(self, url: str, job: str) -> None:
        """Beat for ``job`` on the Redis at ``url`` too (at once, then every interval)."""
        with self._jobs_lock:
            if (url, job) in self._jobs:
                return
            client = sync_redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
            self._jobs[(url, job)] = client
        self._beat({(url, job): client})

    def stop(self) -> None:
        """Stop beating and close the connections."""
        self._stop.set()
        with self._jobs_lock:
            jobs, self._jobs = self._jobs, {}
        for client in jobs.values():
            with contextlib.suppress(sync_redis.RedisError, OSError):
                client.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._jobs_lock:
                jobs = dict(self._jobs)
            self._beat(jobs)

    def _beat(self, jobs: Mapping[tuple[str, str], sync_redis.Redis]) -> None:
        member = process_id()
        for (_url, job), client in jobs.items():
            try:
                now = SystemClock().wall_ms()
                keys = Keyspace(job)
                beat = client.register_script(_BEAT)  # EVALSHA, loaded again after NOSCRIPT
                beat(keys=[keys.job_info, keys.workers], args=[member, now])
            except (sync_redis.RedisError, OSError) as exc:
                logger.debug("heartbeat of %s for job %s failed: %s", member, job, exc)
