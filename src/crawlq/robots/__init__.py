"""robots.txt rules per origin, fetched through `crawlq.fetch.Fetcher` and parsed with protego.

The Robots Exclusion Protocol is RFC 9309; each rule below cites its section.

* Where (§2.3): ``scheme://host[:port]/robots.txt`` governs URLs of that scheme, host and
  port only; the cache is keyed the same way.
* Which group (§2.2.1): the product token of our ``User-Agent`` (the part before ``/``),
  matched case-insensitively; otherwise the ``*`` group.
* Status codes: 2xx is parsed (§2.3.1.1). Redirects are followed up to five hops
  (§2.3.1.2); more, or a redirect that cannot be followed, counts as "unavailable". 4xx is
  "unavailable" and allows everything (§2.3.1.3).
* Unreachable (§2.3.1.4: 5xx, 408/429, network failure): the RFC tells the crawler to
  assume a complete disallow. **crawlq deviates on purpose**: `RobotsCache.allowed` raises
  `crawlq.errors.RobotsUnreachable` (reason ``robots_unreachable``), so the engine retries the page
  with backoff and, after ``max_retries``, dead-letters it with that reason. The page is
  never fetched without rules, and a server outage does not turn into thousands of
  "disallowed" records. The failure is cached for ``failure_ttl_s`` only (a few seconds),
  so a burst of pages for one dead host costs one robots.txt request, and the next burst
  tries again. When an earlier copy was fetched successfully it is kept in use instead
  (§2.4 allows a cached copy past its lifetime while robots.txt is unreachable).
* Caching (§2.4): a fetched copy is used for ``ttl_s`` seconds, at most 24 hours.
* Private addresses: when the fetcher's guard refuses the host itself, `allowed` raises
  its `PrivateAddressError` (nothing is cached: no request was sent), so the page is
  filtered as ``private_address``; a refused redirect hop makes robots.txt unavailable.
* Size (§2.5): only the first 500 KiB are parsed; a last line cut in half is dropped.
* ``Crawl-delay`` is not part of RFC 9309; it is one of the "other records" that §2.2.4
  lets crawlers interpret. `RobotsCache.crawl_delay_s` exposes it as such.
* Encoding (§2.3: UTF-8): a leading byte order mark is dropped (it would otherwise glue onto
  the first ``User-agent`` line and lose the first group); a UTF-16 BOM selects UTF-16. A
  body that is not valid UTF-8 is read as latin-1, so that no line is lost to replacement
  characters.

The package: `crawlq.robots.cache` (`RobotsCache`, the verdicts, and sharing through the job's
frontier: `crawlq.frontier.robots.SharedRobots`, `crawlq.robots.cache.load_shared`) and
`crawlq.robots.file` (the file: what a fetch's status means, its text and its records); the
shared record itself is `crawlq.frontier.robots.RobotsRecord`, a plain value the frontier
backends store.

Sharing: with a ``shared`` store (the job's frontier, see `crawlq.frontier.contract.Frontier`)
robots.txt is fetched once per origin per job, not once per worker: the record (status class,
text, fetch time and expiry) lives in the frontier, the first worker that needs a missing or
expired one claims the fetch (``robots_claim``, which reads and claims in one round trip) and
stores the result, and the others wait for it and read it. Each process keeps the records it
has used in an LRU, each valid until the shared record's expiry, so the hot path does not ask
the backend per URL.
A stored record that cannot be read is treated as missing and fetched again.

Concurrent callers in one process asking about one origin share a single load (single-flight).
"""

from __future__ import annotations

from crawlq.robots.cache import CLAIM_MARGIN_S, MAX_TTL_S, RobotsCache, RobotsVerdict

__all__ = ["CLAIM_MARGIN_S", "MAX_TTL_S", "RobotsCache", "RobotsVerdict"]
