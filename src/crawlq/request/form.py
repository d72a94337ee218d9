"""Form data as a request body or query: the pairs of a form submission, urlencoded.

`CrawlRequest.form` and `crawlq.spider.FormRequest.from_response` write a submission with
`encode_form` (``application/x-www-form-urlencoded``, WHATWG HTML §4.10.21.7: the
``urlencoded`` serializer, spaces as ``+``), and a GET form's data replaces the query of its
action URL (`with_query`), as a browser does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlencode, urlsplit, urlunsplit

__all__ = ["FORM_CONTENT_TYPE", "FormData", "encode_form", "form_pairs", "with_query"]

FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"
"""The ``Content-Type`` of a urlencoded form body."""

FormData = Mapping[str, str | Sequence[str] | None] | Iterable[tuple[str, str]]
"""A form's data: name to value (a list of values for a repeated name; None in a mapping
removes a field of the page's form, `crawlq.spider.FormRequest`), or ``(name, value)``
pairs in order."""


def form_pairs(formdata: FormData | None) -> list[tuple[str, str]]:
    """``formdata`` as ``(name, value)`` pairs in order (None values left out).

    Raises:
        ValueError: A name or value that is not a string.
    """
    if formdata is None:
        return []
    items: Iterable[tuple[object, object]]
    items = formdata.items() if isinstance(formdata, Mapping) else formdata
    pairs: list[tuple[str, str]] = []
    for name, value in items:
        if value is None:
            continue
        values = [value] if isinstance(value, str) else value
        if not isinstance(name, str) or not isinstance(values, Iterable):
            raise ValueError(f"form data: {name!r:.40} must be a string name with string values")
        for one in values:
            if not isinstance(one, str):
                raise ValueError(f"form data: the value of {name!r:.40} is not a string")
            pairs.append((name, one))
    return pairs


def encode_form(pairs: Sequence[tuple[str, str]], encoding: str | None = None) -> str:
    """The urlencoded form of ``pairs`` (``a=1&b=x+y``), characters in ``encoding`` (UTF-8)."""
    return urlencode(list(pairs), encoding=encoding or "utf-8", errors="xmlcharrefreplace")


def with_query(url: str, query: str) -> str:
    """``url`` with its query replaced by ``query`` (a GET form's submission), no fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
