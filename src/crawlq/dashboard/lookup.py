"""The dashboard's search box: one URL's story in a job, as ``crawlq inspect`` tells it.

`lookup` takes the path of ``crawlq inspect`` itself: the job's frontier and store opened
for looking (`crawlq.cli.jobview.open_view`), the URL rewritten by the job's URL rules
(`crawlq.cli.inspect.job_url_keys`: ``strip_url_params``), the frontier's state and the
store's record joined (`crawlq.cli.inspect.tell`, `crawlq.ops.story`). So it finds a
URL queued, in flight, delayed (waiting for a retry), dead, filtered, stored, done or never
seen, for either engine. `Lookup` is what the page renders (a table of its fields, in order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crawlq.cli.inspect import job_url_keys, tell
from crawlq.cli.jobview import BadInput, open_view
from crawlq.errors import CrawlqError, InvalidURL
from crawlq.ops.story import UrlStory
from crawlq.urls import url_keys

__all__ = ["Lookup", "lookup", "story_fields"]


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the search box shows for one query.

    Attributes:
        query: What was typed.
        job: The job it was looked up in.
        fields: Label -> value pairs, shown in order.
        error: Why nothing could be looked up (a query that is not a crawlable URL, a job
            that is gone, a frontier that cannot be read).
    """

    query: str
    job: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    error: str | None = None


async def lookup(query: str, frontier_url: str, job: str, store_url: str | None) -> Lookup:
    """Tell the story of ``query`` (a URL) in ``job``, as ``crawlq inspect`` does.

    Args:
        query: The text of the search box.
        frontier_url: The job's Redis.
        job: The job to look in.
        store_url: The store to read (``--store``), or None for the job's own.

    Returns:
        The result; never raises for a bad query or an unreadable backend (said in
        ``error``, or in a note when only the store cannot be read).
    """
    query = query.strip()
    try:
        keys = url_keys(query)
    except InvalidURL as exc:
        return Lookup(query, job, error=f"{query!r} is not a URL crawlq can fetch: {exc.reason}")
    try:
        async with open_view(frontier_url, job, store_url) as view:
            story = await tell(view, job_url_keys(keys, view.settings))
    except BadInput as exc:
        return Lookup(query, job, error=str(exc))
    except CrawlqError as exc:
        return Lookup(query, job, error=f"cannot inspect {keys.url}: {exc}")
    return Lookup(query, job, story_fields(story))


def story_fields(story: UrlStory) -> tuple[tuple[str, str], ...]:
    """The rows the search box shows of a story.

    Its forms, its state and the state's fields, the stored page, the notes.
    """
    fields: list[tuple[str, str]] = [
        ("URL", story.url),
        ("canonical URL", story.canonical_url),
        ("fingerprint", story.fingerprint.hex()),
        ("state", story.state),
    ]
    fields += [(name.replace("_", " "), _text(value)) for name, value in story.details.items()]
    fields.append(("stored page", _stored_page(story.stored)))
    fields += [("note", note) for note in story.notes]
    return tuple(fields)


def _stored_page(stored: dict[str, Any] | None) -> str:
    if stored is None:
        return "none"
    if stored["kind"] != "page":
        return f"none ({stored['kind']} record: {stored['reason']})"
    error = stored.get("error")
    return f"HTTP {stored['status']}" + (f", {error}" if error else "")


def _text(value: Any) -> str:
    """A value as ``crawlq inspect``'s table shows it: ``-`` for none."""
    return "-" if value is None or value == "" else str(value)
