"""The Celery engine's runtime (L4): what a task does in a worker, with no Celery in it.

The package `crawlq.celery` around it holds the entry points (L5): the app and its tasks,
``crawl --engine celery``, the local worker, the operator's views. What they run is here, and
imports neither celery nor anything above the engines: ``jobs.py`` (one job's runtime per worker
thread: take, fetch, write, settle), ``host_slots.py`` (politeness slots, fetch or send back),
``writes.py`` (a task's outcomes in the crash-safe order, run counters), ``wire.py`` (what a
task carries and what a ``scrape`` task answers), ``config.py`` (the Celery configuration and
priorities: kombu's queue types only), and the job's shared state in Redis: ``state.py``
(`crawlq.celery.runtime.state.CeleryState`: dedup, pending URLs, runners, host slots, counters;
its Lua scripts lie beside it), ``state_values.py`` (what it answers, its entries decoded),
``inspection.py`` (the operator's reads and replays), ``refusals.py`` (workers that refuse the
job) and ``heartbeat.py`` (each worker process's heartbeat thread).

The package itself exports nothing: import from the module that defines a name.
"""

__all__: list[str] = []
