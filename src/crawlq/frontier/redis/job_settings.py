"""The job's settings and engine mark, kept in the job hash (``job_settings.lua``).

Settings are JSON in the field ``settings`` (set once, by the first process that proposes
them); the field ``engine`` names the Celery engine when it runs the job.
"""

from __future__ import annotations

import json
from typing import Any

from crawlq.errors import ConfigError
from crawlq.frontier.redis.core import RedisCore

__all__ = ["JobSettingsMixin"]


class JobSettingsMixin(RedisCore):
    """The job hash's settings and engine fields."""

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """See `crawlq.frontier.base.Frontier.job_settings`."""
        k = self.keys
        if proposed is not None:
            text = json.dumps(proposed, sort_keys=True)
            stored = await self._script("job_settings", [], [text])
        else:
            stored = await self._call(lambda: self.client.hget(k.job_info, "settings"))
        if stored is None:
            return None
        try:  # shared state: whoever can write the key may have written anything
            value = json.loads(stored)
            if not isinstance(value, dict):
                raise ValueError(f"a JSON object is expected, not {type(value).__name__}")
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ConfigError(
                "job",
                f"job {self.job!r}'s settings in Redis are unreadable ({exc}); seed the job "
                "again with its settings or use another --job",
            ) from None
        return dict(value)

    async def job_engine(self) -> str:
        """The engine that runs the job: ``celery`` or ``native``.

        ``celery`` when a Celery engine marked it (the job hash's ``engine`` field, see
        `crawlq.celery.runtime.state`).
        """
        engine = await self._call(lambda: self.client.hget(self.keys.job_info, "engine"))
        return "celery" if engine == b"celery" else "native"
