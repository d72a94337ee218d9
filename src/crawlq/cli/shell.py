"""``crawlq shell [URL]``: an interactive Python with a fetched page, to try selectors on.

The page is fetched by `crawlq.ops.try_url.fetch_one`, as ``crawlq fetch`` fetches it (the
crawl's own step: robots.txt, the private-address guard, redirects), and handed over as the
spider's `crawlq.spider.Response`, the object a callback gets. Names in the shell:
``response``, ``request``, ``spider``, ``fetch(url)`` or ``fetch(request)`` (fetch another
page, a URL or a `crawlq.request.CrawlRequest` such as ``FormRequest.from_response(…)``: it
rebinds ``response`` and ``request``) and ``view(response)`` (write the body to a temporary file,
print its path and open it in a browser when `webbrowser` finds one).

IPython runs when it is installed, else `code.interact`. When standard input is not a
terminal (a pipe, a file), the code read from it runs once and the shell exits: status 1 when
it raised (its traceback on stderr), else 0.
"""

from __future__ import annotations

import asyncio
import code
import importlib
import sys
import tempfile
import traceback
import webbrowser
from typing import Any

import click

from crawlq.cli.try_url import try_options, try_settings, try_spider
from crawlq.errors import ConfigError, CrawlqError, InvalidURL
from crawlq.links import LinkRules
from crawlq.ops.try_url import fetch_one
from crawlq.request import CrawlRequest
from crawlq.secrecy import redact
from crawlq.settings import Settings
from crawlq.spider import Response, Spider, load_spider

__all__ = ["Shell", "shell"]

BANNER = "crawlq shell: response, request, spider, fetch(url or request), view(response)"


class Shell:
    """The names of a shell session and the `fetch` and `view` they call."""

    def __init__(self, settings: Settings, spider: Spider) -> None:
        self.settings = settings
        self.names: dict[str, Any] = {
            "response": None,
            "request": None,
            "spider": spider,
            "fetch": self.fetch,
            "view": self.view,
        }

    def fetch(self, url: str | CrawlRequest) -> Response | None:
        """Fetch ``url`` and make it ``response``; print why not and return None on failure.

        ``url`` is a URL string or a `CrawlRequest` (Scrapy's ``fetch(request)``: its
        method, body, headers and cookies are sent, as ``FormRequest.from_response(…)``
        makes them).

        Raises:
            TypeError: ``url`` is neither (the message says what is accepted).
        """
        if not isinstance(url, (str, CrawlRequest)):
            raise TypeError(
                f"fetch() takes a URL or a CrawlRequest, got {type(url).__name__}: {url!r:.60}"
            )
        spider = self.names["spider"]
        shown = url if isinstance(url, str) else url.url
        try:
            tried = asyncio.run(fetch_one(self.settings, url, spider))
        except (InvalidURL, CrawlqError) as exc:
            print(redact(f"cannot fetch {shown}: {exc}"), file=sys.stderr)
            return None
        if tried.failure is not None or tried.response is None:
            print(redact(f"cannot fetch {tried.request.url}: {tried.failure}"), file=sys.stderr)
            return None
        rules = LinkRules.from_settings(self.settings)
        response = Response(tried.request, tried.response, rules=rules)
        self.names["response"], self.names["request"] = response, tried.request
        return response

    def view(self, response: Response | None = None) -> str:
        """Write ``response``'s body to a temporary file, print its path, try a browser."""
        response = response or self.names["response"]
        if response is None:
            raise ValueError("no response to view: fetch(url) first")
        suffix = ".html" if response.text else ".bin"
        with tempfile.NamedTemporaryFile(
            "wb", prefix="crawlq-view-", suffix=suffix, delete=False
        ) as f:
            f.write(response.body)
        print(f.name)
        try:
            webbrowser.get()
        except webbrowser.Error:
            return f.name  # headless: the path is the answer
        webbrowser.open(f"file://{f.name}")
        return f.name


@click.command()
@click.argument("url", required=False)
@click.option("--spider", default=None, help="Spider: module:Class or file.py:Class [Spider].")
@try_options
def shell(url: str | None, **options: Any) -> None:
    """Start a Python shell with URL fetched as a crawl would fetch it (nothing is stored).

    Names: response (the spider's Response: response.css('title::text').get()), request,
    spider, fetch(url) to fetch another page, view(response) to look at its body in a
    browser (or print the path of a file holding it). IPython when installed, else the
    standard Python shell. Piped code (crawlq shell URL < script.py) runs once, then the
    shell exits: status 1 when it raised, else 0.
    """
    try:
        spider_cls = load_spider(options["spider"])
        settings = try_settings(options, spider_cls)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    session = Shell(settings, try_spider(options, settings, spider_cls))
    if url is not None and session.fetch(url) is None and not sys.stdin.isatty():
        sys.exit(1)
    if not sys.stdin.isatty():
        _run_piped(session.names)
        return
    _interact(session.names)


def _run_piped(names: dict[str, Any]) -> None:
    """Run the code on standard input in the shell's names; exit 1 when it raises."""
    source = sys.stdin.read()
    try:
        exec(compile(source, "<stdin>", "exec"), names)  # the user's own code, as a shell runs it
    except SystemExit:
        raise
    except BaseException as exc:
        # The user's frames only: the first is this function's exec, crawlq's own.
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)


def _interact(names: dict[str, Any]) -> None:
    """IPython when installed, else `code.interact`.

    The standard shell starts outside the ``except`` that found IPython missing: started
    inside it, every error typed at the prompt would show the ImportError as its context
    ("During handling of the above exception…") before the user's own traceback.
    """
    try:
        ipython = importlib.import_module("IPython")  # optional: not a dependency
    except ImportError:
        ipython = None
    if ipython is None:
        code.interact(banner=BANNER, local=names, exitmsg="")
        return
    print(BANNER)
    ipython.start_ipython(argv=[], user_ns=names)
