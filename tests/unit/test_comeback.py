"""The redirect rule (`crawlq.engine.redirects.comeback`) as a table: hop, revisit or loop."""

from __future__ import annotations

import pytest

from crawlq.engine.redirects import Comeback, comeback

P = "http://a.test/p"


@pytest.mark.parametrize(
    ("location", "chain", "cookies", "sent", "expected"),
    [
        ("http://a.test/q", [P], {}, {}, Comeback.HOP),
        (P + "#top", [P], {}, {}, Comeback.REVISIT),  # the page's own fragment: once
        ("http://a.test/p?b=2&a=1", [P + "?a=1&b=2"], {}, {}, Comeback.REVISIT),
        (P + "#top", [P, P], {}, {}, Comeback.LOOP),  # fetched twice, nothing new
        (P, [P, "http://a.test/q"], {}, {}, Comeback.REVISIT),  # a -> b -> a: once more
        (P, [P, "http://a.test/q", P, "http://a.test/q"], {}, {}, Comeback.LOOP),
        (P, [P, P], {"ok": "1"}, {}, Comeback.REVISIT),  # a cookie wall's new cookie
        (P, [P, P], {"ok": "2"}, {"ok": "1"}, Comeback.REVISIT),  # a new value
        (P, [P, P], {"ok": "1"}, {"ok": "1"}, Comeback.LOOP),  # the same cookie again
        (P, [P, P], {}, {"ok": "1"}, Comeback.LOOP),  # a cookie dropped is nothing new
        (P, [3, None, "not a url", P], {}, {}, Comeback.REVISIT),  # meta from an inbox
        ("not a url", [P], {}, {}, Comeback.HOP),  # refused by the caller
    ],
)
def test_comeback(
    location: str,
    chain: list[object],
    cookies: dict[str, str],
    sent: dict[str, str],
    expected: Comeback,
) -> None:
    assert comeback(location, chain, cookies, sent) is expected
