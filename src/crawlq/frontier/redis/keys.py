r"""Every Redis key of a crawl job, spelled in one place.

All keys of job ``J`` live under ``crawlq:{J}:`` (the braces make ``J`` the Redis Cluster
hash tag, so one job's keys share a slot and every script's keys are in one slot). No other
module and no Lua script builds a key name: scripts receive all of theirs in ``KEYS``, and
SCAN patterns (`Keyspace.pattern`, `Keyspace.claims_pattern`, `Keyspace.jobs_pattern`) are
built here too. `Keyspace.host_keys` gives the six host bookkeeping keys (``ready``,
``inflight``, ``next``, ``policy``, ``inbox``, ``idle``) in the one order in which every
script that touches hosts' readiness takes them first (``host_keys()`` in ``_lib.lua``).

| key | type | holds |
|---|---|---|
| ``seen`` | set | 20-byte fingerprints ever pushed (exact dedup) |
| ``bloom`` | string | Bloom filter bits (``dedup="bloom"`` instead of ``seen``) |
| ``reqs`` | hash | fingerprint -> ``score "\n" request JSON`` while not done: the queue score
  (``-priority * 2**33 + push sequence``, decimal) travels with the record, so a request
  released, reaped, retried or replayed goes back to its place (``record_score()`` in
  ``_lib.lua``); the host is the request's own (its URL), never written again |
| ``attempts`` | hash | fingerprint -> deliveries so far (kept while dead) |
| ``q:{host}`` | sorted set | one host's queued fingerprints by score |
| ``ready`` | sorted set | hosts with queued work and a free slot, by next-allowed Unix ms |
| ``inflight`` | hash | host -> slots taken: leases whose requests are not reported done |
| ``next`` | hash | host -> next-allowed Unix ms |
| ``policy`` | hash | host -> ``"delay_ms concurrency[ flags]"``: override; flag ``p`` probing
  (one request at a time), ``d`` down (its URLs are dead-lettered) |
| ``strikes`` | hash | ``kind "\n" host`` -> pushbacks or connection failures in a row |
| ``proxies`` | hash | proxy id (16 hex digits of a SHA-1 of ``scheme://host:port``, never its
  credentials) -> ``"failures benches until_ms"`` (`crawlq.rules.proxies`) |
| ``leases`` | sorted set | ``fingerprint + host`` -> lease deadline Unix ms |
| ``owner`` | hash | fingerprint -> ``"lease_id worker_id"`` (+ ``"\n"`` once its slot is freed) |
| ``delayed`` | sorted set | ``fingerprint + host`` -> retry due Unix ms |
| ``dead`` | hash | fingerprint -> ``reason "\n" record`` (the ``reqs`` value, score included) |
| ``dead_at`` | hash | dead fingerprint -> Unix ms it was dead-lettered |
| ``last_error`` | hash | fingerprint -> reason of its last retry, until acked or dead |
| ``stats`` | hash | counters: queued, inflight, delayed, done, dead, seen, seq, lease_seq,
  retries (ever scheduled), over_budget, dropped |
| ``admitted`` | hash | host -> new fingerprints ever pushed (the ``max_pages_per_host`` count) |
| ``rate`` | hash | slot (second mod 120) -> ``"second count"`` of acks, for pages/s |
| ``inbox`` | list | URLs or JSON requests from any producer (``LPUSH``); "" is a wake-up token |
| ``claim:{worker}`` | list | inbox entries a worker took and has not pushed yet |
| ``rejected`` | list | inbox entries that were not valid requests, with the reason |
| ``workers`` | sorted set | worker id -> last heartbeat Unix ms (written only while the job
  exists: ``renew.lua``, the Celery engine's ``heartbeat.lua``) |
| ``idle`` | sorted set | worker id -> Unix ms it started waiting for work |
| ``job`` | hash | ``id`` (random, set when the job is created; every write checks it),
  ``dedup``, ``settings`` -> JSON, ``engine`` (``celery`` for a Celery-engine job),
  ``created_ms`` (server time), ``layout`` (`LAYOUT`, written when the job is created),
  ``paused`` (set while paused; `crawlq.frontier.redis.jobs`) |
| ``robots`` | hash | origin -> robots.txt record (`crawlq.frontier.robots.RobotsRecord`) |
| ``robots_claims`` | hash | origin -> ``"until_ms holder"``: who fetches its robots.txt now |
| ``item_keys`` | hash | item dedup key digest (20 bytes, never a value) -> the fingerprint of
  the page that owns it (`crawlq.frontier.redis.items`) |
| ``pending`` | hash | Celery engine: fingerprint -> ``owner "\n" request JSON`` until settled |
| ``pending_at`` | sorted set | Celery engine: pending fingerprint -> Unix ms it is due to run |
| ``dead_requests`` | hash | Celery engine: dead-lettered fingerprint -> ``owner "\n" request
  JSON`` (what ``crawlq dead replay`` sends again) |
| ``slots:{host}`` | sorted set | Celery engine: politeness slot token -> hold deadline Unix ms |
| ``running`` | hash | Celery engine: ``host:pid:thread`` of a worker -> the 20-byte fingerprints
  its task runs now (its heartbeat is ``workers`` -> ``host:pid``) |
| ``refusals`` | hash | Celery engine: worker name -> JSON ``{"worker", "reason", "at_ms",
  "count"}`` of its last refusal of the job (a store, spider or setting mismatch; at most 32) |
| ``refused`` | hash | Celery engine: pending fingerprint -> refusals of its task so far |
| ``refused_dead`` | hash | Celery engine: fingerprint dead-lettered ``worker_refused`` -> JSON
  ``{"request", "reason", "worker", "at_ms", "refusals"}``, until a ``crawl`` writes it to the
  store |

Layout 1, before issue 26, also kept a ``scores`` hash (fingerprint -> queue score) and wrote
the host in front of every record (``host "\n" request JSON``). `Keyspace.scores` names that
key only so that `crawlq.frontier.redis.RedisFrontier.open` can recognise such a job and
refuse it with a message naming it.
"""

from __future__ import annotations

__all__ = ["LAYOUT", "Keyspace"]

LAYOUT = 2
"""The key layout this table describes, written in a new job's ``job`` hash (``job_open.lua``
spells the same number)."""


class Keyspace:
    """Key names of one job.

    Args:
        job: The job name (any string without ``}``).

    Raises:
        ValueError: The job name is empty or contains ``{`` or ``}``.
    """

    def __init__(self, job: str) -> None:
        if not job or "{" in job or "}" in job:
            raise ValueError(f"job name must be non-empty without braces, got {job!r}")
        self.job = job
        self.prefix = f"crawlq:{{{job}}}:"
        p = self.prefix
        self.seen = p + "seen"
        self.bloom = p + "bloom"
        self.reqs = p + "reqs"
        self.scores = p + "scores"  # layout 1 only (module docstring)
        self.attempts = p + "attempts"
        self.ready = p + "ready"
        self.inflight = p + "inflight"
        self.next = p + "next"
        self.policy = p + "policy"
        self.strikes = p + "strikes"
        self.proxies = p + "proxies"
        self.leases = p + "leases"
        self.owner = p + "owner"
        self.delayed = p + "delayed"
        self.dead = p + "dead"
        self.dead_at = p + "dead_at"
        self.last_error = p + "last_error"
        self.stats = p + "stats"
        self.admitted = p + "admitted"
        self.rate = p + "rate"
        self.inbox = p + "inbox"
        self.rejected = p + "rejected"
        self.workers = p + "workers"
        self.idle = p + "idle"
        self.job_info = p + "job"
        self.robots = p + "robots"
        self.robots_claims = p + "robots_claims"
        self.item_keys = p + "item_keys"
        self.pending = p + "pending"
        self.pending_at = p + "pending_at"
        self.dead_requests = p + "dead_requests"
        self.running = p + "running"
        self.refusals = p + "refusals"
        self.refused = p + "refused"
        self.refused_dead = p + "refused_dead"

    def host_keys(self) -> tuple[str, str, str, str, str, str]:
        """The host bookkeeping keys, in the order every script takes them first.

        ``ready``, ``inflight``, ``next``, ``policy``, ``inbox``, ``idle``: what a step reads
        or moves to make a host ready and wake idle workers (``host_keys()`` in ``_lib.lua``).
        """
        return (self.ready, self.inflight, self.next, self.policy, self.inbox, self.idle)

    def queue(self, host: str) -> str:
        """The sorted set of one host's queued requests."""
        return f"{self.prefix}q:{host}"

    def slots(self, host: str) -> str:
        """Celery engine: the sorted set of one host's held politeness slots."""
        return f"{self.prefix}slots:{host}"

    def claim(self, worker_id: str) -> str:
        """The list of inbox entries ``worker_id`` has taken but not pushed yet."""
        return f"{self.prefix}claim:{worker_id}"

    def claims_pattern(self) -> str:
        """A SCAN pattern matching every ``claim:{worker}`` list of the job."""
        return self._escaped_prefix() + "claim:*"

    def claim_worker(self, key: bytes) -> str:
        """The worker id of a ``claim:{worker}`` key that `claims_pattern` matched."""
        return key.decode().removeprefix(self.claim(""))

    @staticmethod
    def jobs_pattern() -> str:
        """A SCAN pattern matching the ``job`` hash of every job (one key per job)."""
        return "crawlq:{*}:job"

    @staticmethod
    def job_of(key: bytes) -> str | None:
        """The job name in a ``job`` hash key that `jobs_pattern` matched, or None."""
        text = key.decode("utf-8", "replace")
        if not (text.startswith("crawlq:{") and text.endswith("}:job")):
            return None
        name = text[len("crawlq:{") : -len("}:job")]
        return name if name and "{" not in name and "}" not in name else None

    def pattern(self) -> str:
        """A SCAN/KEYS pattern matching every key of the job."""
        return self._escaped_prefix() + "*"

    def _escaped_prefix(self) -> str:
        """The prefix with its braces escaped for a SCAN/KEYS glob."""
        return self.prefix.replace("{", "\\{").replace("}", "\\}")
