"""The Celery engine's shared state in Redis: dedup, pending URLs, politeness slots, counters.

A Celery broker only carries messages; what the native frontier does beside queueing lives
here, under the same job keys (`crawlq.frontier.redis.Keyspace`), one Lua script per atomic
step (``admit.lua``, ``settle.lua``, ``acquire.lua`` beside this module, loaded with the
frontier's `crawlq.frontier.redis.scripts.Script`):

* **Dedup** (``admit``): a URL's fingerprint enters ``seen`` once and stays in ``pending``
  until its outcome is stored (``settle``). Two workers discovering one URL at once enqueue it
  once. A task delivered again after its worker died re-enqueues the links it had admitted
  (they are pending under its own fingerprint), so a crash between admitting and publishing
  loses nothing.
* **A full Redis** (``maxmemory``, ``noeviction``): only ``admit`` is refused
  (`crawlq.errors.FrontierFull`): a task takes its pending URLs (``take``), runs and settles
  them, and the links its pages find are not followed, counted in ``frontier_full``
  (`crawlq.celery.runtime.writes`); so the job drains and its crawl ends.
* **Done**: the crawl is finished when ``pending`` is empty: every admitted URL has a stored
  outcome (page, filtered or dead letter).
* **Politeness** (``acquire``): a host's next-allowed time and its held slots (each with a
  hold deadline, so that a killed worker's slot comes back) move in one step for all workers.
* **Dead workers** (``orphans``): each worker process records a heartbeat in ``workers``
  (`Heartbeat`, a thread of its own, every ``heartbeat_s``), and each task the fingerprints
  it runs in ``running`` (`CeleryState.start_task`). When a worker's heartbeat is stale, the
  URLs it was running and that are still pending are taken in one step, and the caller sends
  them again: a killed worker's URLs need not wait for the broker's visibility timeout.
* **Dead letters** (``settle``, ``replay``): a dead-lettered URL's request is kept in
  ``dead_requests`` (its reason and detail are in the store), so that ``crawlq dead replay``
  can make it pending again and send it as it was (`CeleryState.replay`).
* **Inspection** (``inspect``): one read of a URL's pending entry, due time and the runner
  whose task holds it (`CeleryState.inspect`).
* **Engine mark**: the first `CeleryState.admit` of each instance sets the field ``engine`` of
  the job's ``job`` hash to ``celery`` (if unset), so that ``crawlq status`` reads the Celery
  counters of the job (``pending``) instead of the native frontier's queues.
* **Job identity**: `CeleryState.open` joins the job's id (creating the job, id included,
  for a task of a job nobody seeded) and every script checks it first, as the native
  frontier's do (``check_job`` in ``_lib.lua``): once the job is gone (a Redis restart
  without persistence, deleted keys) or replaced, writes raise `crawlq.errors.JobGone` and
  write nothing, and `CeleryState.counts` raises it too, so ``crawl --engine celery`` stops
  instead of reporting a lost crawl as done. Redis errors are translated by
  `crawlq.frontier.redis.errors.call`, as for the frontier.

Layout: `CeleryState` is assembled here from one mixin per concern over
`crawlq.celery.runtime.state.core.StateCore` (connection, job id, error translation):
`crawlq.celery.runtime.state.admission` (dedup, pending, replay, stale), `.runners` (tasks' runners,
orphans), `.slots` (politeness), `.reads` (counts, live workers, inspect), `.refusals`
(workers that refuse the job, and URLs refused too often: ``refuse.lua``); the values it
answers with are in `.values`, entry decoding in `.entries`, and the process heartbeat in
`.heartbeat`.

This package is the only part of the Celery engine that imports redis.
"""

from __future__ import annotations

from crawlq.celery.runtime.state.admission import (
    TAKE_DUPLICATE,
    TAKE_RUN,
    TAKE_UNSEEN,
    AdmissionMixin,
)
from crawlq.celery.runtime.state.heartbeat import Heartbeat, process_id
from crawlq.celery.runtime.state.reads import ReadsMixin
from crawlq.celery.runtime.state.refusals import (
    REFUSED_DEAD,
    REFUSED_RESEND,
    REFUSED_SETTLED,
    RefusalsMixin,
    RefusedDead,
)
from crawlq.celery.runtime.state.runners import RunnersMixin
from crawlq.celery.runtime.state.slots import SlotsMixin
from crawlq.celery.runtime.state.values import ENGINE_FIELD, RUN_PREFIX, Counts, Grant, TaskState

__all__ = [
    "ENGINE_FIELD",
    "REFUSED_DEAD",
    "REFUSED_RESEND",
    "REFUSED_SETTLED",
    "RUN_PREFIX",
    "TAKE_DUPLICATE",
    "TAKE_RUN",
    "TAKE_UNSEEN",
    "CeleryState",
    "Counts",
    "Grant",
    "Heartbeat",
    "RefusedDead",
    "TaskState",
    "process_id",
]


class CeleryState(AdmissionMixin, RunnersMixin, SlotsMixin, ReadsMixin, RefusalsMixin):
    """One job's Celery-engine state on one Redis connection (used from one event loop).

    Args:
        client: A ``redis.asyncio.Redis`` with ``decode_responses=False``.
        job: The job name.
        clock: Source of "now" (Unix ms), passed to the scripts.
        job_id: The job's id (`open` reads it); None: no job joined, every write fails.
    """
