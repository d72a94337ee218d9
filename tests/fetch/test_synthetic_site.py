"""crawlq.testing.synthetic: the site's shape; SyntheticServer: crawled by a plain client."""

from __future__ import annotations

import http.client
import re
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from crawlq.errors import ConfigError
from crawlq.testing import SyntheticServer, SyntheticSite

BASES = ["http://127.0.0.1:8000", "http://127.0.0.2:8000", "http://127.0.0.3:8000"]


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v is not None]


def hrefs(html: bytes) -> list[str]:
    parser = _Hrefs()
    parser.feed(html.decode("utf-8"))
    return parser.hrefs


class Client:
    """One keep-alive connection per host, as a plain HTTP/1.1 client would keep."""

    def __init__(self) -> None:
        self.conns: dict[str, http.client.HTTPConnection] = {}

    def get(self, url: str) -> tuple[int, bytes]:
        parts = urlsplit(url)
        conn = self.conns.get(parts.netloc)
        if conn is None:
            conn = self.conns[parts.netloc] = http.client.HTTPConnection(parts.netloc, timeout=5)
        conn.request("GET", parts.path or "/")
        resp = conn.getresponse()
        return resp.status, resp.read()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def test_bfs_over_http_reaches_exactly_the_stated_pages_across_hosts() -> None:
    with SyntheticServer(400, hosts=3) as server:
        site = server.site
        netlocs = {urlsplit(u).netloc for u in site.base_urls}
        client = Client()
        try:
            seen = {site.root_url}
            queue = deque([site.root_url])
            statuses: dict[str, int] = {}
            offsite = 0
            while queue:
                url = queue.popleft()
                status, body = client.get(url)
                statuses[url] = status
                for href in hrefs(body):
                    link = urldefrag(urljoin(url, href))[0]
                    if urlsplit(link).netloc not in netlocs:
                        offsite += 1
                    elif link not in seen:
                        seen.add(link)
                        queue.append(link)
        finally:
            client.close()
        assert len(seen) == site.reachable_pages == 400
        assert set(statuses.values()) == {200}
        assert seen == {site.url_of(i) for i in range(400)}
        by_host = {netloc: sum(urlsplit(u).netloc == netloc for u in seen) for netloc in netlocs}
        assert all(count > 0 for count in by_host.values()), by_host
        assert offsite > 0
        assert server.requests == 400


def test_each_page_answers_on_its_own_host_only_and_robots_txt_is_absent() -> None:
    with SyntheticServer(300, hosts=2) as server:
        site = server.site
        page = 150  # section 1: the second host
        other = site.base_urls[0] + site.path_of(page)
        client = Client()
        try:
            assert site.host_of(page) == 1
            assert client.get(site.url_of(page)) == (200, site.page(page))
            assert client.get(other)[0] == 404
            assert client.get(site.base_urls[1] + "/")[0] == 404
            assert client.get(site.root_url + "robots.txt")[0] == 404
            assert client.get(site.base_urls[0] + "/s9/p900.html")[0] == 404  # beyond N
            assert client.get(site.base_urls[0] + "/s0/p01.html")[0] == 404  # no alias of p1
        finally:
            client.close()


def test_page_sizes_and_link_counts_stay_in_range() -> None:
    site = SyntheticSite(20_000, BASES)
    sizes, counts = [], []
    for page_id in range(0, 20_000, 97):
        html = site.page(page_id)
        sizes.append(len(html))
        counts.append(len(re.findall(rb"<a href=", html)))
    assert min(sizes) >= 5_000
    assert max(sizes) <= 60_000
    assert min(counts) >= 20
    assert max(counts) <= 200
    assert max(sizes) - min(sizes) > 30_000  # sizes spread over the range
    assert max(counts) - min(counts) > 100


def test_links_mix_forms_and_repeat_targets() -> None:
    site = SyntheticSite(5_000, BASES)
    page_id = 1234
    html = site.page(page_id)
    found = hrefs(html)
    resolved = [urldefrag(urljoin(site.url_of(page_id), h))[0] for h in found]
    in_site = [u for u in resolved if "offsite.invalid" not in u]
    assert in_site == [site.url_of(t) for t in site.links_of(page_id)]
    assert len(set(in_site)) < len(in_site)  # duplicates
    assert [h for h in found if h.startswith("http://127.0.0.")]  # absolute
    assert [h for h in found if h.startswith("/s")]  # root-relative
    assert [h for h in found if h.startswith("../")]  # relative to the parent folder
    assert [h for h in found if "#" in h]  # fragments
    assert len(found) - len(in_site) == 1  # one off-site link
    children = set(range(page_id * 8 + 1, page_id * 8 + 9)) & set(range(5_000))
    assert children <= set(site.links_of(page_id))


def test_pages_are_deterministic_from_seed_and_id() -> None:
    one, two = SyntheticSite(1_000, BASES, seed=3), SyntheticSite(1_000, BASES, seed=3)
    other = SyntheticSite(1_000, BASES, seed=4)
    assert [one.page(i) for i in (0, 1, 500, 999)] == [two.page(i) for i in (0, 1, 500, 999)]
    assert one.page(500) != other.page(500)
    assert one.links_of(500) == SyntheticSite(1_000, ["http://127.0.0.9:1"] * 3, 3).links_of(500)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: SyntheticSite(0, BASES), "n_pages"),
        (lambda: SyntheticSite(10, []), "base_urls"),
        (lambda: SyntheticSite(10, BASES).page(10), "page_id"),
        (lambda: SyntheticServer(10, hosts=0), "hosts"),
        (lambda: SyntheticServer(0), "n_pages"),
    ],
)
def test_bad_arguments_name_the_argument(make: object, name: str) -> None:
    with pytest.raises(ConfigError, match=name):
        make()  # type: ignore[operator]
