"""A request's JSON form, as it crosses processes: `request_json` and `request_fields`.

The format of the Redis inbox, the SQLite frontier and Celery task messages: one JSON object
with ``url`` and the fields that differ from their defaults (`crawlq.request.CrawlRequest.to_json`
lists them). Text read back is untrusted: `request_fields` checks every field's type and
range before `crawlq.request.CrawlRequest` is built from it, refuses ``NaN``, ``Infinity``
and floats where integers belong, and measures the nesting of arrays and objects with a linear
scan before the recursive JSON parser sees it (`crawlq.request.limits.MAX_JSON_NESTING`).
No error message quotes a cookie value.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawlq.request.limits import MAX_DEPTH, MAX_JSON_NESTING, MAX_REFERRER_CHARS, PRIORITY_LIMIT
from crawlq.urls import url_keys
from crawlq.web.cookies import NO_COOKIES
from crawlq.web.headers import NO_HEADERS, check_headers

if TYPE_CHECKING:  # the request module imports this one
    from crawlq.request.crawl_request import CrawlRequest

__all__ = ["request_fields", "request_json"]

_JSON_NESTING_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, so brackets inside strings do not count) or a bracket."""


def request_json(request: CrawlRequest) -> str:
    """The JSON text of ``request`` (`crawlq.request.CrawlRequest.to_json`)."""
    data: dict[str, Any] = {"url": request.url}
    if request.method != "GET":
        data["method"] = request.method
    if request.body:
        data["body_b64"] = base64.b64encode(request.body).decode("ascii")
    if request.priority:
        data["priority"] = request.priority
    if request.depth:
        data["depth"] = request.depth
    if request.callback:
        data["callback"] = request.callback
    if request.cb_kwargs:
        data["cb_kwargs"] = dict(request.cb_kwargs)
    if request.meta:
        data["meta"] = dict(request.meta)
    _handling_json(request, data)
    return json.dumps(data, separators=(",", ":"))


def _handling_json(request: CrawlRequest, data: dict[str, Any]) -> None:
    """Add the fields of ``request`` that say how to send and settle it (beyond the URL's)."""
    if request.referrer:
        data["referrer"] = request.referrer
    if request.cookies:
        data["cookies"] = dict(request.cookies)
    if request.revisit:
        data["revisit"] = True
    if request.headers:
        data["headers"] = dict(request.headers)
    if request.errback:
        data["errback"] = request.errback
    if request.dont_filter:
        data["dont_filter"] = True
        data["visit"] = request.visit


def request_fields(text: str | bytes) -> dict[str, Any]:
    """The checked keyword arguments of a `CrawlRequest` from JSON text.

    The rules and errors are those of `crawlq.request.CrawlRequest.from_json`, which builds
    the request from them (its own checks then run as for any request).
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    nesting = _json_nesting(text)
    if nesting > MAX_JSON_NESTING:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_NESTING} levels")
    data = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        if "cookie" in text.lower():  # never echo cookie values
            raise ValueError("not a crawl request object with a url string")
        raise ValueError(f"not a crawl request object: {text!r:.200}")
    method = data.get("method", "GET")
    if not isinstance(method, str):
        raise ValueError(f"method must be a string, got {method!r:.40}")
    body = data.get("body_b64")
    if body is not None and not isinstance(body, str):
        raise ValueError("body_b64 must be a base64 string")
    try:
        body_bytes = base64.b64decode(body, validate=True) if body else b""
    except binascii.Error as exc:
        raise ValueError(f"body_b64 is not base64: {exc}") from exc
    fields: dict[str, Any] = {
        "url": data["url"],
        "method": method,
        "body": body_bytes,
        "priority": _bounded_int(data, "priority", -PRIORITY_LIMIT, PRIORITY_LIMIT),
        "depth": _bounded_int(data, "depth", 0, MAX_DEPTH),
        "callback": data.get("callback"),
        "cb_kwargs": data.get("cb_kwargs") or {},
        "meta": data.get("meta") or {},
        "cookies": data.get("cookies") or NO_COOKIES,
        "revisit": data.get("revisit", False),
        "referrer": _referrer(data.get("referrer")),
        "headers": _headers(data.get("headers")),
        "errback": data.get("errback"),
        "dont_filter": data.get("dont_filter", False),
        "visit": data.get("visit", ""),
    }
    return fields


def _headers(value: Any) -> Mapping[str, str]:
    """A JSON request's ``headers``: an object of strings (`CrawlRequest` checks each)."""
    if value is None:
        return NO_HEADERS
    if not isinstance(value, dict):
        raise ValueError(f"headers must be an object of name: value, got {value!r:.40}")
    return check_headers(value)


def _referrer(value: Any) -> str | None:
    """A JSON request's ``referrer``, checked and normalised (see `CrawlRequest.from_json`)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"referrer must be a URL string, got {value!r:.40}")
    if len(value) > MAX_REFERRER_CHARS:
        raise ValueError(f"referrer longer than {MAX_REFERRER_CHARS} characters")
    return url_keys(value).url  # cached: the links of one page share their referrer


def _json_nesting(text: str) -> int:
    """How deep arrays and objects nest in ``text``, up to one past `MAX_JSON_NESTING`.

    Linear and not recursive. Exact for valid JSON; for invalid JSON any answer will do,
    since the parser refuses it anyway.
    """
    if text.count("[") + text.count("{") <= MAX_JSON_NESTING:
        return 0  # cannot nest deeper than it has brackets
    depth = 0
    for match in _JSON_NESTING_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_JSON_NESTING:
                return depth
        elif token in "]}":
            depth -= 1
    return 0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a request may hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _bounded_int(data: Mapping[str, Any], name: str, low: int, high: int) -> int:
    """``data[name]`` (0 when absent) if it is an integer in ``low..high``."""
    value = data.get(name, 0)
    if type(value) is not int:
        raise ValueError(f"{name} must be an integer, got {value!r:.40}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value!r:.40}")
    return value
