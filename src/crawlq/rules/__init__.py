"""The crawl's rules, one named module each, called by both engines (native and Celery).

* `crawlq.rules.politeness`: per-host delay and concurrency, overrides, Crawl-delay cap,
  pushback, host backoff, circuit breaker, AutoThrottle (RFC 9110 §10.2.3 Retry-After).
* `crawlq.rules.scope`: allowed domains, include/exclude, depth, URL length.
* `crawlq.rules.retry`: a failure's class, backoff with equal jitter, Retry-After (RFC 9110).
* `crawlq.rules.proxies`: proxy URLs, identity, rotation, what counts as a proxy's failure.

Pure: the frontier backends store and enforce these numbers, they do not decide them. The
package itself exports nothing: import from the module that defines a name.
"""

__all__: list[str] = []
