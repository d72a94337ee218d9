"""What the web's standards say, as pure functions both engines and the fetcher read.

* `crawlq.web.addresses`: special-purpose IP ranges (IANA registries) and the private-address
  guard's decision.
* `crawlq.web.codings`: content codings decoded in order under a size cap (RFC 9110 §8.4).
* `crawlq.web.cookies`: which cookies a request and a redirect hop carry (RFC 6265).
* `crawlq.web.decode`: a body's character encoding and MIME sniffing (WHATWG Encoding,
  WHATWG MIME Sniffing).
* `crawlq.web.headers`: request header names and values, the Referer policy (RFC 9110 §5.5,
  W3C Referrer Policy).

Imports nothing of crawlq's above layer 0; the package itself exports nothing: import from the
module that defines a name.
"""

__all__: list[str] = []
