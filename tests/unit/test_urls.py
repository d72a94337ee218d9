from __future__ import annotations

import random
import string

import pytest
from w3lib.url import canonicalize_url

from crawlq.errors import InvalidURL
from crawlq.request import CrawlRequest
from crawlq.urls import canonical as urls_module
from crawlq.urls import canonicalize, fingerprint, host_key, normalize


@pytest.mark.parametrize(
    ("url", "base", "expected"),
    [
        ("http://example.com/a#frag", None, "http://example.com/a"),
        ("HTTP://Example.com/a b", None, "http://example.com/a%20b"),
        ("http://h.test:80/p", None, "http://h.test/p"),
        ("https://h.test:443/p", None, "https://h.test/p"),
        ("https://h.test:80/p", None, "https://h.test:80/p"),
        ("../b/c.html?x=1#y", "http://h.test/a/d/e.html", "http://h.test/a/b/c.html?x=1"),
        ("//other.test/p", "https://h.test/", "https://other.test/p"),
        ("  /root  ", "http://h.test/x/y", "http://h.test/root"),
        ("http://h.test/ünï", None, "http://h.test/%C3%BCn%C3%AF"),
    ],
)
def test_normalize(url: str, base: str | None, expected: str) -> None:
    assert normalize(url, base) == expected


@pytest.mark.parametrize(
    "url", ["ftp://h.test/x", "mailto:a@b.test", "not a url", "http://", "http://h.test:99999/"]
)
def test_normalize_rejects_and_names_the_url(url: str) -> None:
    with pytest.raises(InvalidURL) as info:
        normalize(url)
    assert url in str(info.value)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://h.test/p?b=2&a=1", "http://h.test/p?a=1&b=2"),
        ("HTTP://H.TEST/p", "http://h.test/p"),
        ("http://h.test:80/p", "http://h.test/p"),
        ("http://h.test/p#x", "http://h.test/p#y"),
        ("http://h.test/%7Euser", "http://h.test/~user"),
    ],
)
def test_same_canonical_url_same_fingerprint(a: str, b: str) -> None:
    assert canonicalize(normalize(a)) == canonicalize(normalize(b))
    assert fingerprint("GET", normalize(a)) == fingerprint("get", normalize(b))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://h.test/p", "https://h.test/p"),
        ("http://h.test/p", "http://h.test/P"),
        ("http://h.test/p?a=1", "http://h.test/p?a=2"),
        ("http://h.test:8080/p", "http://h.test/p"),
    ],
)
def test_different_pages_different_fingerprints(a: str, b: str) -> None:
    assert fingerprint("GET", a) != fingerprint("GET", b)


def test_fingerprint_is_20_raw_bytes_and_covers_method_and_body() -> None:
    fp = fingerprint("GET", "http://h.test/")
    assert isinstance(fp, bytes) and len(fp) == 20
    assert fingerprint("POST", "http://h.test/") != fp
    assert fingerprint("POST", "http://h.test/", b"a") != fingerprint(
        "POST", "http://h.test/", b"b"
    )


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://Example.COM/x", "example.com"),
        ("http://example.com:80/x", "example.com"),
        ("https://example.com:443/x", "example.com"),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
        ("http://[::1]:81/", "[::1]:81"),
    ],
)
def test_host_key(url: str, key: str) -> None:
    assert host_key(url) == key


def test_crawl_request_normalises_and_round_trips() -> None:
    req = CrawlRequest("HTTP://H.test/a b#frag", priority=3, depth=2, meta={"k": 1})
    assert req.url == "http://h.test/a%20b"
    assert req.host == "h.test"
    assert CrawlRequest.from_json(req.to_json()) == req
    assert CrawlRequest.from_json('{"url": "http://h.test/x"}').priority == 0
    with pytest.raises(ValueError, match="not a crawl request"):
        CrawlRequest.from_json('["http://h.test/"]')
    with pytest.raises(InvalidURL):
        CrawlRequest("javascript:alert(1)")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"meta": [1]}, "meta must be a JSON object"),
        ({"cb_kwargs": "s"}, "cb_kwargs must be a JSON object"),
        ({"method": "GET\r\nX: y"}, "method must be an HTTP token"),
        ({"method": ""}, "method must be an HTTP token"),
        ({"callback": 7}, "callback must be a spider method"),
    ],
)
def test_crawl_request_refuses_fields_that_could_not_be_sent_or_stored(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        CrawlRequest("http://h.test/", **fields)  # type: ignore[arg-type]
    assert CrawlRequest("http://h.test/", method="PROPFIND").method == "PROPFIND"


def _random_urls(count: int) -> list[str]:
    """URLs near the fast paths' edges: ports, dot segments, quotes, empty paths and queries."""
    rng = random.Random(20261129)
    path_chars = string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/%"
    hosts = ["a.test", "x-y.example.org", "127.0.0.1", "h1", "UP.test", "b.test."]
    ports = ["", ":8080", ":1", ":65535", ":65536", ":80", ":443", ":0"]
    urls = []
    for _ in range(count):
        path = "/" + "".join(rng.choice(path_chars) for _ in range(rng.randint(0, 12)))
        query = "?" + "".join(rng.choice(path_chars + "?") for _ in range(rng.randint(0, 8)))
        urls.append(
            f"{rng.choice(['http', 'https', 'HTTP'])}://{rng.choice(hosts)}{rng.choice(ports)}"
            f"{path if rng.random() < 0.9 else ''}{query if rng.random() < 0.5 else ''}"
        )
    return urls


def test_fast_paths_agree_with_w3lib() -> None:
    """normalize/canonicalize skip w3lib for plain URLs; the answers must not change."""
    checked = 0
    for url in _random_urls(20000):
        try:
            expected = urls_module._normalize_general(url, url)
        except InvalidURL:
            with pytest.raises(InvalidURL):
                normalize(url)
            continue
        assert normalize(url) == expected, url
        assert canonicalize(expected) == canonicalize_url(expected, keep_fragments=False), url
        checked += 1
    assert checked > 15000


def test_url_keys_agree_with_the_functions_they_cache() -> None:
    for url in _random_urls(5000):
        try:
            expected = normalize(url)
        except InvalidURL:
            continue
        keys = urls_module.url_keys(url)
        get_fp = fingerprint("GET", expected)
        assert keys == (expected, canonicalize(expected), host_key(expected), get_fp), url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:secret@h.test/a", "http://h.test/a"),
        ("HTTP://User:Secret@H.test:80/a#f", "http://h.test/a"),
        ("https://user:p@ss@h.test:8443/a?q=1", "https://h.test:8443/a?q=1"),  # unescaped @
        ("http://user@h.test/", "http://h.test/"),
        ("http://:secret@h.test/", "http://h.test/"),
        ("http://h.test/a@b", "http://h.test/a@b"),  # an @ in the path is no userinfo
    ],
)
def test_normalize_strips_credentials(url: str, expected: str) -> None:
    """Issue 12.9: credentials in a URL are never fetched (Basic auth), stored or logged."""
    assert normalize(url) == expected
    keys = urls_module.url_keys(url)
    assert keys.url == expected
    assert "secret" not in keys.canonical and "user" not in keys.canonical.lower()
    assert keys.get_fingerprint == urls_module.url_keys(expected).get_fingerprint
    request = CrawlRequest(url)
    assert request.url == expected
    assert request.fingerprint == CrawlRequest(expected).fingerprint
