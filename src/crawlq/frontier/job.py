"""The job record contract (`JobRecord`): the settings stored with a crawl job.

The first producer or worker of a job fixes its settings; the others adopt them
(`crawlq.engine.job.bind_job`), so a worker joining later needs only the frontier URL and
the job name.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["JobRecord"]


class JobRecord(Protocol):
    """The job's settings, stored once with its frontier."""

    async def job_settings(self, proposed: dict[str, Any] | None) -> dict[str, Any] | None:
        """The settings stored with the job, storing ``proposed`` first if there are none.

        The first producer or worker of a job fixes its settings (politeness, retries, scope,
        spider) so that workers joining later need only the frontier URL and job name.

        Args:
            proposed: JSON-serialisable settings to store if the job has none yet, or None to
                only read.

        Returns:
            The stored settings (``proposed`` if they were just stored), or None.
        """
        ...
