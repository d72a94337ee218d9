"""URLs as crawlq reads them: request URLs, canonical URLs, fingerprints, references, rules.

Pure functions, no I/O; errors are `crawlq.errors.InvalidURL`, naming the URL and why.

* `crawlq.urls.canonical`: the *request URL* (`normalize`: absolute, made safe, fragment and
  userinfo dropped, an IP host in one written form), the *canonical URL* (`canonicalize`:
  what two spellings of one page share), the one written form of a host (`canonical_host`,
  and `host_name` / `split_host` of a ``host:port``), the politeness key (`host_key`), the
  20-byte request `fingerprint`, and the cached `url_keys` (and `normalize_or_none`) of a URL.
* `crawlq.urls.ipv4`: hosts that end in a number read as the WHATWG URL Standard's IPv4
  parser reads them (``127.1``, ``0x7f.1``, ``2130706433`` are ``127.0.0.1``;
  ``1.2.3.999`` is no host).
* `crawlq.urls.references`: relative references resolved as browsers resolve them
  (`resolve`, WHATWG URL Standard through ada; `HrefResolver`, its fast path for the links of
  a page; `has_extension`), link queries in the page's encoding (`encode_query`),
  ``Location`` bytes (`decode_location`).
* `crawlq.urls.rewriting`: the crawl's rewriting rules (`UrlRules`: session ids and tracking
  parameters stripped).
"""

from __future__ import annotations

from crawlq.urls.canonical import (
    UrlKeys,
    canonical_host,
    canonicalize,
    fingerprint,
    host_key,
    host_name,
    normalize,
    request_fingerprint,
    split_host,
    url_keys,
)
from crawlq.urls.references import decode_location, encode_query, query_codec, resolve
from crawlq.urls.rewriting import UrlRules

__all__ = [
    "UrlKeys",
    "UrlRules",
    "canonical_host",
    "canonicalize",
    "decode_location",
    "encode_query",
    "fingerprint",
    "host_key",
    "host_name",
    "normalize",
    "query_codec",
    "request_fingerprint",
    "resolve",
    "split_host",
    "url_keys",
]
