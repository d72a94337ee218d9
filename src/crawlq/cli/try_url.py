"""``crawlq fetch`` and ``crawlq parse``: one URL through a crawl's step, nothing stored.

Both call `crawlq.ops.try_url.fetch_one`, which runs the crawl's own step
(`crawlq.engine.step.process`) on the URL and on each redirect hop. The options they share
(`try_options`) are the crawl's fetch settings; the output is on stdout, a failure is one
line on stderr and exit status 1.
"""

from __future__ import annotations

import asyncio
import base64
import http
import json
import sys
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

import click

from crawlq.cli.option_settings import build_settings, option_error
from crawlq.cli.terminal import configure_logging
from crawlq.engine.plan import check_process_code
from crawlq.errors import ConfigError, CrawlqError, InvalidURL
from crawlq.ops.try_url import Tried, fetch_one
from crawlq.request import CrawlRequest, FetchResult
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.spider import Spider, load_spider, new_spider

__all__ = [
    "fetch",
    "parse",
    "response_json",
    "tried_or_exit",
    "try_options",
    "try_settings",
    "try_spider",
]

F = TypeVar("F", bound=Callable[..., Any])


def try_options(f: F) -> F:
    """The crawl options that decide how one URL is fetched (``fetch``, ``parse``, ``shell``)."""
    decorators = [
        click.option("--user-agent", default=None, help="User-Agent header [crawlq/0.1]."),
        click.option(
            "--header",
            multiple=True,
            metavar="'NAME: VALUE'",
            help="Send this request header (repeatable; replaces default_headers; no Host, "
            "Cookie, Authorization...), as crawl's --header.",
        ),
        click.option("--timeout", type=float, default=None, help="Seconds per fetch [30]."),
        click.option(
            "--ignore-robots", is_flag=True, help="Fetch even when robots.txt forbids it."
        ),
        click.option(
            "--allow-private",
            is_flag=True,
            help="Allow redirects to loopback, private and link-local addresses on other "
            "hosts (the URL's own host is allowed, as a crawl's seed host is).",
        ),
        click.option(
            "--allow-domain", multiple=True, help="Follow redirects only to DOMAIN (repeatable)."
        ),
        click.option("--no-cookies", is_flag=True, help="Keep no cookies and send none."),
        click.option(
            "--proxy", "proxies", multiple=True, metavar="URL", help="Fetch through this proxy."
        ),
        click.option(
            "--proxy-trust-env", is_flag=True, default=None, help="Use HTTP(S)_PROXY, NO_PROXY."
        ),
        click.option("--no-meta-refresh", is_flag=True, help="Do not follow <meta> refreshes."),
        click.option("--config", type=click.Path(dir_okay=False), default=None, help="TOML."),
        click.option(
            "--downloader-middleware",
            multiple=True,
            metavar="SPEC",
            help="A downloader middleware, module:Class or file.py:Class (repeatable).",
        ),
        click.option(
            "--spider-middleware",
            multiple=True,
            metavar="SPEC",
            help="A spider middleware, module:Class or file.py:Class (repeatable).",
        ),
        click.option("-v", "--verbose", count=True, help="-v: log warnings; -vv: a line per URL."),
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def try_settings(options: dict[str, Any], spider_cls: type[Spider] | None) -> Settings:
    """The settings of a try command (its log level set from ``--verbose``)."""
    configure_logging(options.pop("verbose") - 1, None)
    return build_settings(options, spider_cls)


def try_spider(options: dict[str, Any], settings: Settings, spider_cls: type[Spider]) -> Spider:
    """The spider of a try command, and the code its settings name loaded, or exit 2.

    A spider whose ``__init__`` raises, or a middleware that cannot be loaded, is a bad
    option (one line naming the option, `crawlq.cli.option_settings.option_error`), found
    before anything is fetched.
    """
    try:
        spider = new_spider(spider_cls)
        check_process_code(settings, spider)
    except ConfigError as exc:
        raise option_error(exc, options) from None
    return spider


def tried_or_exit(
    settings: Settings,
    url: str,
    spider: Spider | None = None,
    *,
    callback: str | None = None,
    meta: dict[str, Any] | None = None,
    spider_scope: bool = False,
) -> Tried:
    """`fetch_one`, or exit: 2 naming a bad URL, 1 with one line when it cannot be fetched."""
    try:
        tried = asyncio.run(
            fetch_one(
                settings, url, spider, callback=callback, meta=meta, spider_scope=spider_scope
            )
        )
    except InvalidURL as exc:
        raise click.BadParameter(str(exc), param_hint="URL") from None
    except CrawlqError as exc:
        click.echo(redact(f"crawlq: cannot fetch {url}: {exc}"), err=True)
        sys.exit(1)
    if tried.failure is not None:
        click.echo(redact(f"crawlq: cannot fetch {tried.request.url}: {tried.failure}"), err=True)
        sys.exit(1)
    return tried


@click.command()
@click.argument("url")
@click.option(
    "-i", "--include", "include", is_flag=True, help="Print each response's status and headers."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (see below).")
@try_options
def fetch(url: str, include: bool, as_json: bool, **options: Any) -> None:
    """Fetch URL as a crawl would and print its body (nothing is stored or queued).

    The request goes through the crawl's own step: robots.txt (a URL it forbids is refused;
    --ignore-robots fetches it anyway), the private-address guard (URL's host is exempt, as
    a crawl's seed host is; a redirect to another host on a private address is refused
    unless --allow-private), the user agent, content decoding and the body size cap.
    Redirects are followed, each hop checked as a crawl checks it; -i prints every
    response of the chain, its status line and headers, before the body.

    --json prints one object: url, final_url, status, headers, encoding, redirects (the
    URLs that redirected), and text (a text body) or body_base64 (any other).

    Exit status: 0 when a response was printed (whatever its HTTP status); 1 when there is
    none, with one line naming the reason as a dead letter would (robots_txt,
    private_address, connect_error, http_503, too_many_redirects…); 2 for bad options.
    """
    try:
        settings = try_settings(options, None)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    tried = tried_or_exit(settings, url, try_spider(options, settings, Spider))
    last = tried.response
    assert last is not None  # no failure: the last request was answered
    out = sys.stdout.buffer
    if as_json:
        doc = response_json(url, tried.responses)
        out.write(json.dumps(doc, ensure_ascii=False).encode() + b"\n")
        return
    if include:
        for answer in tried.responses:
            _write_head(out, answer)
    out.write(last.body)
    out.flush()


def _write_head(out: BinaryIO, answer: FetchResult) -> None:
    """The status line and headers of one response, then a blank line."""
    try:
        phrase = http.HTTPStatus(answer.status).phrase
    except ValueError:
        phrase = ""
    lines = [f"GET {answer.final_url}", f"HTTP {answer.status} {phrase}".rstrip()]
    lines += [f"{name}: {value}" for name, value in answer.headers.items()]
    out.write(("\n".join(lines) + "\n\n").encode("utf-8", "replace"))


def response_json(url: str, responses: list[FetchResult]) -> dict[str, Any]:
    """The ``--json`` object of a fetch whose answers are ``responses`` (the last one shown)."""
    last = responses[-1]
    doc: dict[str, Any] = {
        "url": url,
        "final_url": last.final_url,
        "status": last.status,
        "headers": dict(last.headers),
        "encoding": last.encoding,
        "redirects": [r.final_url for r in responses[:-1]],
    }
    if last.encoding is not None and last.binary is None:
        doc["text"] = last.text
    else:
        doc["body_base64"] = base64.b64encode(last.body).decode("ascii")
    return doc


@click.command()
@click.argument("url")
@click.option("--spider", default=None, help="Spider: module:Class or file.py:Class [Spider].")
@click.option("--callback", default=None, help="The spider method to run [parse].")
@click.option("--meta", default=None, help="The request's meta, a JSON object.")
@try_options
def parse(url: str, callback: str | None, meta: str | None, **options: Any) -> None:
    """Fetch URL as a crawl would, run one spider callback on it and print what it yields.

    One JSON object per line on stdout: {"item": {...}} for each item, then {"request":
    {"url", "callback", "priority"}} (with "method" when not GET, "body_bytes" and the
    "headers" names when set) for each request a crawl seeded with URL would follow
    (its allowed domains: --allow-domain, else the spider's, else URL's host; the others
    are counted on stderr). Nothing is stored, queued or followed. Fetching works as in
    `crawlq fetch` (robots.txt, the private-address guard, redirects).

    Exit status: 0 when the callback ran; 1 when the page could not be fetched or the
    callback raised (one line naming the error, then its traceback, on stderr); 2 for bad
    options.
    """
    meta_value = _meta(meta)
    try:
        spider_cls = load_spider(options["spider"])
        settings = try_settings(options, spider_cls)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    if callback is not None and not callable(getattr(spider_cls, callback, None)):
        raise click.BadParameter(
            f"{spider_cls.__name__} has no method {callback!r}", param_hint="--callback"
        )
    spider = try_spider(options, settings, spider_cls)
    tried = tried_or_exit(
        settings, url, spider, callback=callback, meta=meta_value, spider_scope=True
    )
    out = sys.stdout
    for item in tried.items:
        out.write(json.dumps({"item": item.data}, ensure_ascii=False) + "\n")
    for request in tried.requests:
        out.write(json.dumps({"request": request_json(request)}, ensure_ascii=False) + "\n")
    out.flush()
    if tried.skipped:
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(tried.skipped.items()))
        click.echo(f"requests not followed by a crawl: {counts}", err=True)
    page = None if tried.outcome is None else tried.outcome.page
    if page is not None and page.error is not None and page.error.startswith("spider_error"):
        click.echo(f"crawlq: {page.error} (on {tried.request.url})", err=True)
        sys.exit(1)


def request_json(request: CrawlRequest) -> dict[str, Any]:
    """The ``{"request": …}`` object of a yielded request.

    Always ``url``, ``callback`` and ``priority``; ``method`` when it is not GET,
    ``body_bytes`` (the body's length) when there is a body, and ``headers`` (the names of
    the request's own headers, values left out: they may be secrets) when it has any.
    """
    doc: dict[str, Any] = {
        "url": request.url,
        "callback": request.callback,
        "priority": request.priority,
    }
    if request.method != "GET":
        doc["method"] = request.method
    if request.body:
        doc["body_bytes"] = len(request.body)
    if request.headers:
        doc["headers"] = sorted(request.headers)
    return doc


def _meta(meta: str | None) -> dict[str, Any] | None:
    """``--meta`` as a dict (None when not given)."""
    if meta is None:
        return None
    try:
        value = json.loads(meta)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--meta") from None
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--meta")
    return value
