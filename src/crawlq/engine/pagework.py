"""Page work off the event loop: parsing and synchronous spider callbacks, with a time budget.

lexbor parses in C without the GIL, and a callback is the user's code: either can take long
(a deeply nested page parses in time that grows with the square of its depth; a callback may
sleep or compute). On the event loop thread that would stop everything else the worker does
meanwhile: renewing its leases (so another worker fetches the page again), answering SIGTERM,
fetching. So `PageWork.run` hands the work to a page thread and waits for it without blocking
the loop.

One thread does the work of a worker, one job at a time, in submission order: spider
callbacks run one at a time, as they did on the loop, and need no locks. A job that runs past
its budget (``parse_timeout_s``) raises `PageTimeout` in its caller; a thread cannot be
killed, so that thread is *abandoned*: it finishes the job in the background (its result is
dropped) and exits, and a fresh thread takes the jobs queued after it. The threads are daemon
threads: an abandoned one never holds up the process's exit.

When the worker is stopping, waits are cut to `STOP_GRACE_S` (`PageWork.hurry`): a page still
in work then is abandoned as if cancelled, and its lease goes back to the queue, so SIGTERM is
answered in about a second whatever a callback does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["STOP_GRACE_S", "PageTimeout", "PageWork"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

STOP_GRACE_S = 1.0
"""Seconds a stopping worker still waits for a page in work before giving its lease back."""


_POLL_S = 0.25
"""Seconds between two looks, while a page is in work, at its budget and at `PageWork.hurry`."""


class PageTimeout(TimeoutError):
    """A page's parse or callback ran past its time budget.

    The work goes on in an abandoned thread; its result is dropped.
    """


@dataclass(eq=False, slots=True)
class _Job(Generic[_T]):
    fn: Callable[[], _T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[_T]
    started: float | None = None  # time.monotonic() when its thread took it
    dropped: bool = False  # its caller gave up before it started: skip it


@dataclass(eq=False, slots=True)
class _Slot:
    """One page thread and the job it runs."""

    name: str
    job: _Job[Any] | None = None
    abandoned: bool = False


class PageWork:
    """A worker's page thread (see the module docstring).

    The thread is started on first use and replaced when it is abandoned; `close` lets it
    exit. `crawlq.engine.deps.Deps` holds one per worker.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()
        self._names = itertools.count()
        self._hurry_at: float | None = None
        self.abandoned = 0
        """Threads abandoned so far (each was stuck on a page past its budget)."""

    async def run(self, fn: Callable[[], _T], budget_s: float) -> _T:
        """Run ``fn()`` on the page thread and return its result (or raise its exception).

        Args:
            fn: The work; it must not touch the event loop.
            budget_s: Seconds ``fn`` may run once started (time queued behind other pages
                does not count).

        Raises:
            PageTimeout: ``fn`` ran past ``budget_s``.
            asyncio.CancelledError: The caller was cancelled, or the worker is stopping
                (`hurry`) and ``fn`` had not returned `STOP_GRACE_S` later.
        """
        loop = asyncio.get_running_loop()
        job: _Job[_T] = _Job(fn, loop, loop.create_future())
        self._start_thread()
        self._queue.put(job)
        try:
            while True:
                now = time.monotonic()
                end = now + budget_s if job.started is None else job.started + budget_s
                if self._hurry_at is not None:
                    end = min(end, self._hurry_at + STOP_GRACE_S)
                await asyncio.wait((job.future,), timeout=min(max(0.0, end - now), _POLL_S))
                if job.future.done():
                    return job.future.result()
                now = time.monotonic()
                if self._hurry_at is not None and now >= self._hurry_at + STOP_GRACE_S:
                    self._abandon(lambda slot: slot.job is job)
                    raise asyncio.CancelledError("stopping: page work abandoned")
                # Ours, or the job ahead of ours, is past its budget: a fresh thread goes on.
                self._abandon(functools.partial(_stuck_since, now - budget_s))
                if job.started is not None and now - job.started >= budget_s:
                    raise PageTimeout(f"ran past its budget of {budget_s:g}s")
        except BaseException:
            job.dropped = True
            raise

    def hurry(self) -> None:
        """The worker is stopping: wait for page work at most `STOP_GRACE_S` from now on."""
        if self._hurry_at is None:
            self._hurry_at = time.monotonic()

    def close(self) -> None:
        """Let the page thread exit once idle (a daemon thread: nothing waits for it)."""
        with self._lock:
            for _ in self._slots:
                self._queue.put(None)
            self._slots.clear()

    def _start_thread(self) -> None:
        with self._lock:
            if self._slots:
                return
            slot = _Slot(f"crawlq-page-{next(self._names)}")
            self._slots.append(slot)
        threading.Thread(target=self._work, args=(slot,), name=slot.name, daemon=True).start()

    def _abandon(self, stuck: Callable[[_Slot], bool]) -> None:
        with self._lock:
            for slot in [s for s in self._slots if stuck(s)]:
                slot.abandoned = True
                self._slots.remove(slot)
                self.abandoned += 1
                logger.warning("page thread %s abandoned, stuck on a page", slot.name)
        self._start_thread()

    def _work(self, slot: _Slot) -> None:
        while not slot.abandoned:
            job = self._queue.get()
            if job is None:
                return  # close()
            if job.dropped:
                continue
            slot.job = job
            job.started = time.monotonic()
            try:
                outcome: tuple[bool, Any] = (True, job.fn())
            except BaseException as exc:  # handed to the waiting task
                outcome = (False, exc)
            slot.job = None
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                job.loop.call_soon_threadsafe(_settle, job.future, outcome)


def _stuck_since(before: float, slot: _Slot) -> bool:
    """True when ``slot`` runs a job it started at ``before`` or earlier."""
    job = slot.job
    return job is not None and job.started is not None and job.started <= before


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
