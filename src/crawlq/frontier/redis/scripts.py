"""Lua scripts of the Redis frontier: loaded once from package data, run with EVALSHA.

Each ``.lua`` file beside this module is one atomic multi-key step with a KEYS/ARGV header;
``_lib.lua`` holds the helpers they share and is put in front of each before loading.
`Script.run` uses the cached SHA-1 and falls back to ``SCRIPT LOAD`` when the server answers
``NOSCRIPT`` (a restart or ``SCRIPT FLUSH`` emptied its script cache).

A Redis at its ``maxmemory`` (``noeviction``) refuses a script without flags at its first
command that may grow memory (``OOM``, raised by that ``redis.call`` before anything was
written). The scripts that drain a job (they move or delete its entries: ``lease``,
``settle``, ``renew``, ``requeue``...) or write small per-host, per-origin or per-worker
entries open with ``#!lua flags=allow-oom`` (Redis 7 script flags, which must be the first
line of the source: `Script` puts it before ``_lib.lua``), so a full Redis can drain itself;
``push`` (new URLs), ``drain_inbox``, ``revive`` and job creation have no flags and are
refused (`crawlq.errors.FrontierFull`). See https://redis.io/docs/latest/develop/interact/programmability/eval-intro/#eval-flags

A script whose first statement calls ``check_job()`` (every script that writes, see
``_lib.lua``) is given the job hash and the job id its caller joined in front of its own
``KEYS`` and ``ARGV`` (`Script.run`'s ``job``), and fails with ``CRAWLQ_JOB_GONE`` (see
`crawlq.frontier.redis.errors`) before writing anything when the job is gone or replaced.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

__all__ = ["SCRIPTS", "Script"]


_LIB = resources.files("crawlq.frontier.redis").joinpath("_lib.lua").read_text("utf-8")
"""Helpers shared by the scripts (``_lib.lua``), put in front of each one."""


class Script:
    """One Lua script of this package.

    Args:
        name: File name without ``.lua``.
        package: The package whose folder holds the file (the Celery engine keeps its own
            scripts beside its own Redis module, and loads them with this class).
    """

    def __init__(self, name: str, package: str = "crawlq.frontier.redis") -> None:
        self.name = name
        folder = resources.files(package)
        body = folder.joinpath(f"{name}.lua").read_text("utf-8")
        self.checks_job = re.search(r"^(local \w+ = )?check_job\(\)", body, re.M) is not None
        """The script checks the job's id first: `run` needs ``job``."""
        shebang = ""
        if body.startswith("#!lua"):  # Redis 7 script flags: the line must come first
            shebang, _, body = body.partition("\n")
            shebang += "\n"
        self.allows_oom = "allow-oom" in shebang.strip().split("flags=", 1)[-1].split(",")
        """The script runs on a Redis at its ``maxmemory`` (``#!lua flags=allow-oom``)."""
        self.source = shebang + _LIB + body
        self.sha = hashlib.sha1(self.source.encode("utf-8"), usedforsecurity=False).hexdigest()

    async def run(
        self,
        client: Redis,
        keys: Sequence[str],
        args: Sequence[str | bytes | int | float],
        job: tuple[str, str] | None = None,
    ) -> Any:
        """Run the script atomically on ``client`` and return its reply.

        Args:
            client: The connection.
            keys: The script's own KEYS (as its header numbers them).
            args: The script's own ARGV.
            job: ``(job hash key, job id)`` for a script that `checks_job`; an id of ``""``
                (the caller joined no job) fails the check.

        Raises:
            ValueError: ``job`` missing for a script that checks it.
            redis.exceptions.RedisError: Whatever the server or connection raised, except
                NOSCRIPT, which is handled by loading the script and running it again.
        """
        if self.checks_job:
            if job is None:
                raise ValueError(f"script {self.name} checks the job id: give job=(key, id)")
            keys, args = [job[0], *keys], [job[1], *args]
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


SCRIPTS = {
    name: Script(name)
    for name in (
        "job_open",
        "job_settings",
        "idle",
        "push",
        "lease",
        "settle",
        "requeue",
        "renew",
        "drain_inbox",
        "recover_claims",
        "revive",
        "inspect",
        "strike",
        "proxy_strike",
        "policy",
        "robots_get",
        "robots_claim",
        "robots_put",
        "item_keys",
    )
}
"""Every script, by name, parsed once per process."""
