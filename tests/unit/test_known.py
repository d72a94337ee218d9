"""KnownFingerprints: the worker's bounded memory of links the frontier has seen."""

from __future__ import annotations

import pytest

from crawlq.engine.flush import KnownFingerprints
from crawlq.request import CrawlRequest


def req(path: str) -> CrawlRequest:
    return CrawlRequest(f"http://a.test/{path}")


def test_unknown_drops_known_and_repeated_fingerprints_in_order() -> None:
    known = KnownFingerprints(capacity=10)
    known.add_all([req("seen").fingerprint])
    batch = [req("x"), req("seen"), req("y"), req("x"), req("y#frag")]
    assert [r.url for r in known.unknown(batch)] == ["http://a.test/x", "http://a.test/y"]


def test_memory_is_bounded_and_the_oldest_generation_is_forgotten() -> None:
    known = KnownFingerprints(capacity=3)
    fps = [req(str(i)).fingerprint for i in range(10)]
    known.add_all(fps)
    assert len(known) <= 2 * 3
    assert fps[-1] in known
    assert fps[0] not in known  # forgotten: pushed again, the frontier dedups it


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        KnownFingerprints(capacity=0)
