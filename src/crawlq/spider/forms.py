"""`FormRequest.from_response`: submit a page's form as a browser would, as Scrapy's does.

The form is found on the response's parsel tree (``formid``, ``formname``, ``formxpath``,
``formcss``, else ``formnumber``); its own fields are the submission's (WHATWG HTML
§4.10.21.4, "constructing the entry list"): every named ``<input>`` but the buttons
(``submit``, ``image``, ``reset``, ``button``) and ``file``, checkboxes and radio buttons only
when ``checked`` (value ``on`` when they have none), each ``<select>``'s selected options
(the first option of a single select with none selected), ``<textarea>`` text; disabled
fields are left out. ``formdata`` replaces the fields it names (None removes one) and adds
the others. The clicked submit button (``clickdata``, else the form's first) adds its
name and value unless ``dont_click``. The method and action come from the form, resolved
against the page's base URL; a GET form's data is the action URL's query
(`crawlq.request.CrawlRequest.form`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawlq.request import CrawlRequest
from crawlq.request.crawl_request import FormData, form_pairs
from crawlq.spider.response import Response

if TYPE_CHECKING:  # parsel (~80 ms of imports) loads with the first response.selector
    from parsel import Selector

__all__ = ["FormRequest"]

_FIELDS = "descendant::input | descendant::select | descendant::textarea"
_BUTTONS = (
    "descendant::input[translate(@type, 'SUBMITAGE', 'submitage') = 'submit'"
    " or translate(@type, 'SUBMITAGE', 'submitage') = 'image']"
    " | descendant::button[not(@type) or translate(@type, 'SUBMIT', 'submit') = 'submit']"
)
_NOT_FIELDS = frozenset({"submit", "image", "reset", "button", "file"})


class FormRequest:
    """Requests that submit a form (as Scrapy's ``FormRequest``); every one is a `CrawlRequest`.

    ``FormRequest(url, formdata={...})`` is a form written by hand, as in Scrapy: a POST of
    ``formdata`` urlencoded (a GET with ``method="GET"``, or when there is no ``formdata``),
    made by `CrawlRequest.form`; `from_response` submits a form of a page.
    """

    def __new__(  # type: ignore[misc]  # a CrawlRequest, as Scrapy's FormRequest is a Request
        cls,
        url: str,
        formdata: FormData | None = None,
        *,
        method: str | None = None,
        **kwargs: Any,
    ) -> CrawlRequest:
        """The request that submits ``formdata`` to ``url`` (`CrawlRequest.form`).

        Args:
            url: The form's action URL.
            formdata: The fields (a mapping, a list for a repeated name, or pairs).
            method: ``POST`` when ``formdata`` is given, else ``GET`` (Scrapy's default).
            **kwargs: Other `CrawlRequest` fields (``callback``, ``headers``, ``meta``...).

        Raises:
            ValueError: A field, or another `CrawlRequest` field, is invalid.
            InvalidURL: ``url`` cannot be crawled.
        """
        if method is None:
            method = "POST" if formdata else "GET"
        if not formdata and method.upper() == "GET":
            return CrawlRequest(url, **kwargs)  # nothing to submit: the URL as it is
        return CrawlRequest.form(url, formdata or (), method, **kwargs)

    @staticmethod
    def from_response(
        response: Response,
        formdata: FormData | None = None,
        *,
        formid: str | None = None,
        formname: str | None = None,
        formnumber: int = 0,
        formxpath: str | None = None,
        formcss: str | None = None,
        clickdata: Mapping[str, Any] | None = None,
        dont_click: bool = False,
        method: str | None = None,
        **kwargs: Any,
    ) -> CrawlRequest:
        """The request that submits a form of ``response`` (module docstring).

        Args:
            response: The page that holds the form.
            formdata: Fields to set (a mapping: None removes a field; or pairs).
            formid: The form's ``id``.
            formname: The form's ``name``.
            formnumber: Which form (0-based) among those the other arguments leave (default
                the first).
            formxpath: An XPath to the form or to an element inside it.
            formcss: A CSS selector of the form or of an element inside it.
            clickdata: Attributes of the submit button to click (``{"name": "save"}``), or
                ``{"nr": N}`` for the N-th (0-based); default the first.
            dont_click: Add no submit button's name and value.
            method: Overrides the form's method.
            **kwargs: Other `CrawlRequest` fields (``callback``, ``headers``, ``meta``...).

        Raises:
            ValueError: No form matches, ``clickdata`` matches no button, or a field is
                invalid; the message says which.
        """
        form = _find_form(response, formid, formname, formnumber, formxpath, formcss)
        url = response.urljoin(form.attrib.get("action", "").strip() or response.url)
        verb = (method or form.attrib.get("method") or "GET").upper()
        replaced = form_pairs(formdata)
        given = set(formdata) if isinstance(formdata, Mapping) else {n for n, _ in replaced}
        pairs = [(n, v) for n, v in _fields(form) if n not in given]
        if not dont_click:
            pairs += _clicked(form, clickdata, given)
        pairs += replaced
        if verb not in ("GET", "POST"):
            verb = "GET"  # an HTML form submits GET or POST only (dialog does not submit)
        return CrawlRequest.form(url, pairs, verb, encoding=response.encoding, **kwargs)


def _find_form(
    response: Response,
    formid: str | None,
    formname: str | None,
    formnumber: int,
    formxpath: str | None,
    formcss: str | None,
) -> Selector:
    """The form the arguments name (see `FormRequest.from_response`)."""
    root = response.selector
    if formid is not None:
        found = root.xpath("//form[@id=$v]", v=formid)
        if found:
            return found[0]
    if formname is not None:
        found = root.xpath("//form[@name=$v]", v=formname)
        if found:
            return found[0]
    for query, kind in ((formxpath, "xpath"), (formcss, "css")):
        if query is None:
            continue
        for node in root.xpath(query) if kind == "xpath" else root.css(query):
            form = node.xpath("ancestor-or-self::form")
            if form:
                return form[-1]
        raise ValueError(f"no form holds an element matching {kind} {query!r} on {response.url}")
    forms = root.xpath("//form")
    if not forms:
        raise ValueError(f"no <form> on {response.url}")
    if not 0 <= formnumber < len(forms):
        raise ValueError(f"form number {formnumber} not found on {response.url}")
    return forms[formnumber]


def _fields(form: Selector) -> list[tuple[str, str]]:
    """The form's own entries, in document order (module docstring)."""
    pairs: list[tuple[str, str]] = []
    for field in form.xpath(_FIELDS):
        attrs = field.attrib
        name = attrs.get("name")
        if not name or "disabled" in attrs:
            continue
        tag = field.xpath("name()").get("").lower()
        if tag == "textarea":
            pairs.append((name, "".join(field.xpath("text()").getall())))
        elif tag == "select":
            pairs += [(name, value) for value in _selected(field)]
        else:
            kind = attrs.get("type", "text").lower()
            if kind in _NOT_FIELDS:
                continue
            if kind in ("checkbox", "radio"):
                if "checked" in attrs:
                    pairs.append((name, attrs.get("value", "on")))
            else:
                pairs.append((name, attrs.get("value", "")))
    return pairs


def _selected(select: Selector) -> list[str]:
    """The values of a ``<select>``'s selected options (the first one when none is)."""
    options = [o for o in select.xpath("descendant::option") if "disabled" not in o.attrib]
    chosen = [o for o in options if "selected" in o.attrib]
    if not chosen and options and "multiple" not in select.attrib:
        chosen = options[:1]
    return [_option_value(o) for o in chosen]


def _option_value(option: Selector) -> str:
    value = option.attrib.get("value")
    if value is not None:
        return value
    return " ".join("".join(option.xpath("text()").getall()).split())


def _clicked(
    form: Selector, clickdata: Mapping[str, Any] | None, given: set[str]
) -> list[tuple[str, str]]:
    """The clicked submit button's entry (none when it has no name or ``formdata`` names it)."""
    buttons = [b for b in form.xpath(_BUTTONS) if "disabled" not in b.attrib]
    if clickdata is None:
        chosen = buttons[:1]
    elif "nr" in clickdata:
        number = clickdata["nr"]
        chosen = buttons[number : number + 1] if isinstance(number, int) else []
        if not chosen:
            raise ValueError(f"clickdata {dict(clickdata)!r}: no such submit button")
    else:
        chosen = [
            b for b in buttons if all(b.attrib.get(str(k)) == str(v) for k, v in clickdata.items())
        ][:1]
        if not chosen:
            raise ValueError(f"clickdata {dict(clickdata)!r}: no such submit button")
    if not chosen:
        return []
    name = chosen[0].attrib.get("name")
    if not name or name in given:
        return []
    return [(name, chosen[0].attrib.get("value", ""))]
