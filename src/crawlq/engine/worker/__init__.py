"""The native engine: one process, many asyncio tasks, leasing from a shared frontier.

The loop (docs/architecture.md): lease a batch → `process` each lease in its own task → buffer
the outcomes → flush them in batches (store write, then push discovered links, then settle the
leases). Settling only after the store write returned is what makes a crash at any moment
re-deliver a URL instead of losing it, and the store's upsert by fingerprint makes the
re-delivery harmless.

The package's modules: the lease loop and the settling of one lease (`loop`: `Worker`), the
leases a worker holds and their heartbeat (`held`), the batched writes (`flush`); what a run
counts is `crawlq.engine.outcome.WorkerCounters`.
"""

from __future__ import annotations

from crawlq.engine.worker.loop import Worker

__all__ = ["Worker"]
