"""Seed hosts: the hosts of a job's seeds, exempt from its private-address guard.

Seed hosts (``seed_hosts``, exempt from the private-address guard) are computed by each
producer from its seeds (`with_seed_hosts`) and, like the other job settings, fixed by the
first one: a later ``crawlq seed`` does not add its hosts to a running job (workers already
hold the job's settings). `new_private_seed_hosts` finds the seeds that will therefore be
refused, so that the producer can warn about them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Iterable, Sequence

from crawlq.request import CrawlRequest
from crawlq.settings import Settings
from crawlq.web.addresses import AddressGuard, bare_host, is_ip_literal

__all__ = [
    "new_private_seed_hosts",
    "warn_private_seed_hosts",
    "with_seed_host_names",
    "with_seed_hosts",
]

logger = logging.getLogger(__name__)

_LOOKUP_TIMEOUT_S = 5.0
"""Seconds `new_private_seed_hosts` spends at most on DNS lookups, all hosts together."""
_LOOKUP_MAX_HOSTS = 50
"""Most new seed hosts `new_private_seed_hosts` looks up (it only decides a warning)."""


def with_seed_hosts(settings: Settings, requests: Iterable[CrawlRequest]) -> Settings:
    """``settings`` with the hosts of ``requests`` added to ``seed_hosts`` (bare, in order).

    The value is computed, not given: it is not added to ``settings.explicit``, so a job
    that already exists keeps its own seed hosts instead of refusing the producer.
    """
    return with_seed_host_names(settings, (r.host for r in requests))


def with_seed_host_names(settings: Settings, hosts: Iterable[str]) -> Settings:
    """``settings`` with ``hosts`` (`CrawlRequest.host` values) added to ``seed_hosts``.

    As `with_seed_hosts`, for a producer that keeps its seeds' hosts but not the seeds
    (`crawlq.engine.seeding.SeedSpool`).
    """
    names = dict.fromkeys(bare_host(h) for h in settings.seed_hosts)
    names.update(dict.fromkeys(bare_host(h) for h in hosts))
    return dataclasses.replace(settings, seed_hosts=tuple(h for h in names if h))


async def new_private_seed_hosts(proposed: Settings, job: Settings) -> list[str]:
    """Seed hosts of a producer that the job's guard refuses: the job does not exempt them.

    A host counts when it is not among the job's ``seed_hosts`` (and the job does not
    ``allow_private``) and it is an IP literal in a refused range, or a name that resolves
    (now, through the system resolver) to a refused address. Lookups that fail or take
    longer than `_LOOKUP_TIMEOUT_S` seconds count as not private: this only decides a warning.

    Args:
        proposed: The producer's settings (`with_seed_hosts` applied).
        job: The settings in force after `bind_job`.

    Returns:
        The hosts, in the order of ``proposed.seed_hosts``.
    """
    guard = AddressGuard.of(allow_private=job.allow_private, hosts=job.seed_hosts)
    new = [h for h in proposed.seed_hosts if not guard.exempt(h)]
    if not new:
        return []
    private = [h for h in new if is_ip_literal(h) and guard.check_literal(h) is not None]
    names = [h for h in new if not is_ip_literal(h)][:_LOOKUP_MAX_HOSTS]
    if names:
        loop = asyncio.get_running_loop()
        lookups = [loop.getaddrinfo(h, None, type=socket.SOCK_STREAM) for h in names]
        try:
            answers = await asyncio.wait_for(
                asyncio.gather(*lookups, return_exceptions=True), _LOOKUP_TIMEOUT_S
            )
        except TimeoutError:
            answers = []
        for host, answer in zip(names, answers, strict=False):
            if isinstance(answer, BaseException):
                continue
            if any(guard.check(host, str(info[4][0])) is not None for info in answer):
                private.append(host)
    return [h for h in new if h in private]


def warn_private_seed_hosts(job: Settings, hosts: Sequence[str]) -> None:
    """Log one warning naming the seed hosts that the job's private-address guard refuses.

    Args:
        job: The job's settings in force.
        hosts: From `new_private_seed_hosts`; nothing is logged when empty.
    """
    if hosts:
        logger.warning(
            "job %s: %s resolve%s to a private address but %s not among the job's seed hosts "
            "(%s): %s URLs will be filtered as private_address. Seed hosts are fixed when a "
            "job starts; start a new --job, or start the job with --allow-private",
            job.job,
            ", ".join(hosts),
            "" if len(hosts) > 1 else "s",
            "are" if len(hosts) > 1 else "is",
            ", ".join(job.seed_hosts) or "none",
            "their" if len(hosts) > 1 else "its",
        )
