"""An operator's tools over a job, beside the worker loop rather than in it.

* `crawlq.ops.story`: what crawlq knows of one URL, as one story (``crawlq inspect``).
* `crawlq.ops.dead`: dead letters to list and replay (``crawlq dead list``, ``dead replay``).
* `crawlq.ops.report`: one job's report (``crawlq status``, its exporter, the dashboard).
* `crawlq.ops.reparse`: a spider's callbacks again over stored responses (``crawlq reparse``).
* `crawlq.ops.try_url`: one URL through the crawl's step, nothing stored or queued
  (``crawlq fetch``, ``crawlq parse``, ``crawlq shell``).

They sit above the engines (they call `crawlq.engine`'s step, parse and seeding, and the
Celery engine's counterpart is `crawlq.celery.operate`). The package itself exports nothing:
import from the module that defines a name.
"""

__all__: list[str] = []
