"""The item keys contract (`crawlq.frontier.items.ItemKeys`), checked on every backend."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import MakeFrontier


async def test_item_keys_go_to_their_first_page_and_stay_its_own(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier()
    page_a, page_b = b"a" * 20, b"b" * 20
    k1, k2, k3 = bytes([1]) * 20, bytes([2]) * 20, bytes([3]) * 20
    assert await f.claim_item_keys([k1, k2], page_a) == [True, True]  # new: page a's
    assert await f.claim_item_keys([k2, k3], page_b) == [False, True]  # k2 is a's
    # page a parsed again (a re-delivered lease, reparse): its keys are still its own
    assert await f.claim_item_keys([k1, k2, k3], page_a) == [True, True, False]
    assert await f.claim_item_keys([], page_a) == []
    # many pages claiming one new key at once: exactly one owns it
    k4 = bytes([4]) * 20
    owners = [bytes([100 + i]) * 20 for i in range(8)]
    got = await asyncio.gather(*(f.claim_item_keys([k4], o) for o in owners))
    assert sorted(g[0] for g in got) == [False] * 7 + [True]
    with pytest.raises(ValueError):
        await f.claim_item_keys([b"short"], page_a)
