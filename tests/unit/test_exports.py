"""Where names are imported from, what each package exports, and that docstring references resolve.

Three rules (issue 24):

* **Import a name from the module that defines it; only a package's ``__init__`` re-exports.**
  A module that is not a package ``__init__`` *re-exports* a name when it binds the name by an
  import at module level (``if TYPE_CHECKING:`` and ``try:`` blocks included) and either lists
  it in its ``__all__`` or some file under ``src/``, ``tests/``, ``examples/`` or ``bench/``
  imports it from that module (``from M import N`` anywhere in the file, or ``alias.N`` where
  ``alias`` names module ``M``). Such a module is a forwarding module; there are none.
* **Each package's ``__all__`` is pinned** (as httpx's ``tests/test_exported_members.py`` pins
  its surface): a change to what a package exports is a change to `PUBLIC` too, and the names a
  user imports in README.md, docs/ and examples/ are among those exported.
* **Every backticked ``crawlq.…`` reference resolves**, in ``src/`` (docstrings and comments),
  README.md, CONTRIBUTING.md and docs/*.md: the rule is `resolve`'s docstring.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
USERS = ("src", "tests", "examples", "bench")  # where an import from a crawlq module may be

# Each package's __all__, sorted; a package added or an export changed is written here too.
PUBLIC: dict[str, str] = {
    "crawlq": "__version__",
    "crawlq.celery": "CrawlqTask CrawlqTasks app install make_app scrape scrape_many",
    "crawlq.celery.runtime": "",
    "crawlq.cli": "main",
    "crawlq.dashboard": "Dashboard Lookup lookup make_app serve",
    "crawlq.engine": "Crawl CrawlReport Deps Kind Outcome Progress Worker WorkerCounters process",
    "crawlq.export": (
        "ERROR_COLUMNS PAGE_COLUMNS at_since dead_row error_row export filtered_row iso_utc mapped "
        "neutralise page_row"
    ),
    "crawlq.fetch": (
        "AddressRefused CookieJar Fetcher GuardedResolver MAX_JAR_COOKIES MAX_SET_COOKIE_CHARS "
        "REDIRECT_STATUSES RedirectGuard redirected_method"
    ),
    "crawlq.frontier": (
        "Frontier FrontierStats HostPolicy HostStats JobStatus job_status open_frontier"
    ),
    "crawlq.frontier.redis": "BloomDedup INBOX_MAX_ENTRY_BYTES InboxFilter Keyspace RedisFrontier",
    "crawlq.frontier.sqlite": "SCHEMA_VERSION SqliteFrontier",
    "crawlq.items": "DropItem Pipeline Unserialisable adapt invalid is_item item_key jsonable",
    "crawlq.links": (
        "DEPTH_CHECK_MIN_TAGS IGNORED_EXTENSIONS LinkRules PageLinks PageScan Refresh Screened "
        "cut_at_links document_base extract_links extract_title html_depth_over parse_html "
        "parse_refresh scan_page screen_html"
    ),
    "crawlq.middleware": "Middlewares Retry SpiderOutputRun response",
    "crawlq.request": (
        "CrawlRequest FetchResult Lease MAX_DEPTH MAX_JSON_NESTING MAX_REFERRER_CHARS "
        "MAX_URL_LENGTH PRIORITY_LIMIT RawExchange"
    ),
    "crawlq.robots": "CLAIM_MARGIN_S MAX_TTL_S RobotsCache RobotsVerdict",
    "crawlq.settings": (
        "DEFAULT_SKIP_EXTENSIONS DEFAULT_USER_AGENT JOB_NAME_RULE Settings check_job_name "
        "check_store coerce_settings host_auth_tables parse_bytes suggest"
    ),
    "crawlq.sitemap": (
        "LASTMOD_KEY Listed MAX_BYTES MAX_NESTING MAX_URLS MAX_VALUE_CHARS NESTING_KEY "
        "SITEMAP_CALLBACK Sitemap SitemapEntry SitemapKind SitemapRules is_sitemap listed_priority "
        "parse_sitemap read_sitemap robots_sitemaps sitemap_request"
    ),
    "crawlq.spider": (
        "CLOSE_REASONS CallbackRun CrawlRequest Failure FormRequest Response Spider SpiderError "
        "is_callback load_object load_spider new_spider run_callback sitemap_rules_of "
        "spider_closed spider_file start_callback start_errback start_requests_of"
    ),
    "crawlq.store": "ParseUpdate ResultBatch Store StoreCounts StoredOutcome open_store",
    "crawlq.store.postgres": "PostgresStore",
    "crawlq.store.sql": "Dialect PAGE_COLUMNS POSTGRES SPIDER_ERROR_SQL SQLITE",
    "crawlq.store.sqlite": "SqliteStore",
    "crawlq.store.warc": "WarcLocation WarcWriter",
    "crawlq.testing": (
        "CHARSET_SAMPLES FAULT_STATE FaultState LoggedRequest LoopThread RequestLog ServerThread "
        "SyntheticServer SyntheticSite fault_state generate_site make_fault_app make_static_app "
        "unpack_corpus"
    ),
    "crawlq.ops": "",
    "crawlq.rules": "",
    "crawlq.web": "",
    "crawlq.urls": (
        "UrlKeys UrlRules canonical_host canonicalize decode_location encode_query fingerprint "
        "host_key host_name normalize query_codec request_fingerprint resolve split_host url_keys"
    ),
}

NOT_PYTHON = {
    "crawlq.db": "the default SQLite file's name",
    "crawlq.scrape": "the Celery task's registered name",
    "crawlq.scrape_many": "the Celery task's registered name",
}
"""Backticked names that start with ``crawlq.`` but name no Python object, and what they are."""


# --- a static model of the package --------------------------------------------------------


@dataclass
class Module:
    """One module's top level, read from its source without importing it."""

    name: str
    path: Path
    is_package: bool
    defined: set[str] = field(default_factory=set)  # def, class, assignment, annotation
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)  # alias -> (module, name)
    all: list[str] = field(default_factory=list)
    lazy: bool = False  # a module-level __getattr__


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, those under ``if``/``try``/``with`` at module level included."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)


def _source_of(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module an ``from ... import`` reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _read_module(name: str, path: Path) -> Module:
    module = Module(name, path, path.name == "__init__.py")
    for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module.defined.add(node.name)
            module.lazy |= node.name == "__getattr__"
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                module.defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                module.all = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom):
            source = _source_of(node, name, module.is_package)
            for alias in node.names:
                module.imported[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                module.imported[alias.asname or alias.name.split(".")[0]] = (alias.name, "")
    return module


def read_package(src: Path, package: str) -> dict[str, Module]:
    """Every module of ``package`` under ``src`` (a ``src/`` layout), by dotted name."""
    modules = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = _read_module(".".join(parts), path)
    return modules


def _importer(path: Path, src: Path) -> tuple[str, bool]:
    """The dotted name of a file under ``src`` (empty elsewhere) and whether it is a package."""
    if not path.is_relative_to(src):
        return "", False
    name = ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
    return name, path.name == "__init__.py"


def imports_from(modules: dict[str, Module], files: Iterable[Path], src: Path) -> set[tuple]:
    """``(module, name, file)`` for each name a file takes from one of ``modules``.

    ``from M import N`` anywhere in a file (late imports too) and ``alias.N`` where ``alias``
    was bound to module ``M`` (``import M as alias``, ``from P import M``). Names that are
    themselves modules are not counted.
    """
    found = set()
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        importer, is_package = _importer(path, src)
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _source_of(node, importer, is_package)
                for alias in node.names if source in modules else []:
                    full = f"{source}.{alias.name}"
                    if full in modules:
                        aliases[alias.asname or alias.name] = full
                    else:
                        found.add((source, alias.name, path))
            elif isinstance(node, ast.Import):
                aliases |= {a.asname: a.name for a in node.names if a.name in modules and a.asname}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                target = aliases.get(node.value.id)
                if target and f"{target}.{node.attr}" not in modules:
                    found.add((target, node.attr, path))
    return found


def re_exports(modules: dict[str, Module], files: Iterable[Path], src: Path) -> dict[str, set]:
    """Module -> the names it re-exports (see the module docstring), for non-``__init__`` ones."""
    taken: dict[tuple[str, str], set[Path]] = {}
    for module, name, path in imports_from(modules, files, src):
        taken.setdefault((module, name), set()).add(path)
    found: dict[str, set] = {}
    for module in modules.values():
        if module.is_package:
            continue
        for name in set(module.imported) - module.defined - {"annotations"}:
            if name in module.all or (module.name, name) in taken:
                found.setdefault(module.name, set()).add(name)
    return found


def _user_files(root: Path) -> list[Path]:
    return sorted(p for folder in USERS for p in (root / folder).rglob("*.py"))


# --- no forwarding modules ---------------------------------------------------------------


MODULES = read_package(SRC, "crawlq")


def test_no_module_outside_a_package_init_re_exports_a_name() -> None:
    found = re_exports(MODULES, _user_files(ROOT), SRC)
    where = {m: sorted(names) for m, names in sorted(found.items())}
    assert where == {}, f"import these from the module that defines them: {where}"


def test_no_module_outside_a_package_init_forwards_names_lazily() -> None:
    lazy = [m.name for m in MODULES.values() if m.lazy and not m.is_package]
    assert lazy == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_check_finds_each_kind_of_forwarding(tmp_path: Path) -> None:
    _write(
        tmp_path / "src",
        {
            "pkg/__init__.py": "from pkg.listing import Defined\n",  # an __init__ may
            "pkg/home.py": "X = 1\nY = 2\nZ = 3\nclass Defined: ...\n",
            "pkg/listing.py": "from pkg.home import X\nclass Defined: ...\n__all__ = ['X']\n",
            "pkg/taken.py": "from pkg.home import Y\n",
            "pkg/by_attribute.py": "from pkg.home import Z\n",
            "pkg/quiet.py": "from pkg.home import X\nprint(X)\n",  # uses X, hands it on to none
            "pkg/user.py": (
                "from pkg import by_attribute\n"
                "def f():\n    from pkg.taken import Y\n    return Y, by_attribute.Z\n"
            ),
        },
    )
    modules = read_package(tmp_path / "src", "pkg")
    files = sorted((tmp_path / "src").rglob("*.py"))
    assert re_exports(modules, files, tmp_path / "src") == {
        "pkg.listing": {"X"},
        "pkg.taken": {"Y"},
        "pkg.by_attribute": {"Z"},
    }


# --- the public surface ------------------------------------------------------------------


PACKAGES = sorted(m.name for m in MODULES.values() if m.is_package)


def test_every_package_is_pinned() -> None:
    assert sorted(PUBLIC) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_package_exports_what_is_pinned(package: str) -> None:
    exported = MODULES[package].all
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    assert sorted(exported) == sorted(PUBLIC.get(package, "").split())


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_bound(package: str) -> None:
    # Read statically: crawlq.celery builds its app on the first getattr of ``app``.
    module = MODULES[package]
    unbound = [n for n in module.all if n not in module.defined and n not in module.imported]
    assert unbound == []


def _code_imports(tree: ast.AST) -> Iterator[tuple[str, str]]:
    """``(module, name)`` of each ``from crawlq... import name`` in a parsed text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crawlq"):
            yield from ((node.module or "", alias.name) for alias in node.names)


def _python_blocks(markdown: str) -> Iterator[ast.AST]:
    for block in re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S):
        yield ast.parse(block)


ONE_LINE_IMPORT = re.compile(r"\bfrom (crawlq[\w.]*) import (\w+(?:, \w+)*)")
"""An import written on one line in prose or a shell command (``python -c '...'``)."""


def _documented_imports() -> list[tuple[str, str, str]]:
    """``(file, module, name)`` for each import in README.md, docs/*.md and examples/."""
    found: set[tuple[str, str, str]] = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for tree in _python_blocks(text):
            found |= {(path.name, m, n) for m, n in _code_imports(tree)}
        for module, names in ONE_LINE_IMPORT.findall(text):
            found |= {(path.name, module, n) for n in names.split(", ")}
    for path in sorted((ROOT / "examples").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found |= {(str(path.relative_to(ROOT)), m, n) for m, n in _code_imports(tree)}
    return sorted(found)


def test_the_documented_imports_are_read() -> None:
    found = {(module, name) for _, module, name in _documented_imports()}
    assert {("crawlq.spider", "Spider"), ("crawlq.items", "DropItem")} <= found  # code blocks
    assert ("crawlq.request", "CrawlRequest") in found  # examples/
    assert ("crawlq.celery", "install") in found  # prose


@pytest.mark.parametrize(("where", "module", "name"), _documented_imports())
def test_a_documented_import_is_public(where: str, module: str, name: str) -> None:
    # What README.md, docs/ and examples/ import is exported by a package (or defined by the
    # module it names), so the documented way to import a name is the pinned one.
    assert module in MODULES, f"{where}: no module {module}"
    info = MODULES[module]
    public = info.all if info.is_package else info.defined | set(info.all)
    assert name in public, f"{where}: {module} does not export {name}"


# --- references in docstrings, comments and docs -----------------------------------------

REFERENCE = re.compile(r"(?<![`\w])`(crawlq(?:\.[A-Za-z_]\w*)+)")
"""A single backtick (a reST default role, a Markdown code span) opening on ``crawlq.``."""


def _member(owner: object, name: str) -> object:
    """``owner.name`` found statically along the MRO: attribute, method, property, field."""
    classes = owner.__mro__ if isinstance(owner, type) else type(owner).__mro__
    for cls in classes:
        if name in vars(cls):
            return inspect.getattr_static(cls, name)
        if name in getattr(cls, "__annotations__", {}):
            return None  # an annotated field (dataclass, NamedTuple, Protocol attribute)
    if not isinstance(owner, type) and name in getattr(owner, "__dict__", {}):
        return vars(owner)[name]
    raise LookupError(f"{owner!r} has no {name}")


def resolve(reference: str, modules: dict[str, Module] = MODULES) -> None:
    """Raise LookupError unless ``reference`` names a module, module attribute or class member.

    The rule: the longest prefix of the dotted name that is a module (or package) under
    ``src/crawlq`` is the module. The next part must be a name that module defines at its top
    level (def, class, assignment, annotation; under ``if TYPE_CHECKING:`` too) or lists in its
    ``__all__`` (a package's exports); a name the module merely imports does not resolve, so a
    reference names where the object lives or the package that exports it. Each further part is
    looked up statically on that object along its MRO: a class attribute, method, property or
    annotated field. Nothing is called, so a lazy attribute (``crawlq.celery.app``) is not built.
    """
    parts = reference.split(".")
    cut = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules)
    module, rest = modules[".".join(parts[:cut])], parts[cut:]
    if not rest:
        return
    if rest[0] not in module.defined and rest[0] not in module.all:
        raise LookupError(f"{module.name} does not define or export {rest[0]}")
    owner: object = inspect.getattr_static(importlib.import_module(module.name), rest[0], None)
    for name in rest[1:]:
        owner = _member(owner, name)


def _reference_texts() -> list[Path]:
    texts = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    return texts + sorted((SRC / "crawlq").rglob("*.py"))  # docstrings and comments


def _references() -> dict[str, list[str]]:
    """Each reference -> the ``file:line`` it is written at."""
    found: dict[str, list[str]] = {}
    for path in _reference_texts():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in REFERENCE.finditer(line):
                where = f"{path.relative_to(ROOT)}:{lineno}"
                found.setdefault(match.group(1), []).append(where)
    return found


def test_every_reference_resolves() -> None:
    stale = {}
    for reference, where in sorted(_references().items()):
        if reference in NOT_PYTHON:
            continue
        try:
            resolve(reference)
        except LookupError as error:
            stale[reference] = f"{error} (at {', '.join(where)})"
    assert stale == {}, "\n".join(f"{r}: {why}" for r, why in stale.items())


def test_references_are_found_in_code_and_docs() -> None:
    found = _references()
    assert len(found) > 300
    assert any(w.startswith("docs/") for ws in found.values() for w in ws)
    assert any(w.startswith("src/") for ws in found.values() for w in ws)
    assert "crawlq.db" in found  # README's default store: exempt, named in NOT_PYTHON


@pytest.mark.parametrize(
    "reference",
    [
        "crawlq.store.sql.reads",  # a module
        "crawlq.store",  # a package
        "crawlq.store.sql.reads.Queries",  # a class where it is defined
        "crawlq.store.Store",  # a package's export
        "crawlq.frontier.queue.WorkQueue.lease",  # a method
        "crawlq.records.ResultBatch.job",  # a dataclass field
        "crawlq.request.crawl_request.MAX_URL_LENGTH",  # a constant
        "crawlq.celery.app",  # annotated under TYPE_CHECKING, built on first use
        "crawlq.settings.Settings.lease_hold_s",  # a field of the settings
    ],
)
def test_a_reference_that_resolves(reference: str) -> None:
    resolve(reference)


@pytest.mark.parametrize(
    "reference",
    [
        "crawlq.store.sql.Reads",  # renamed: crawlq.store.sql.reads.Queries
        "crawlq.engine.WorkerService",  # crawlq.engine does not export it
        "crawlq.frontier.contract.QueueBounds",  # not there: defined in crawlq.frontier.queue
        "crawlq.frontier.contract.Frontier.no_such_method",
        "crawlq.nosuchmodule",
    ],
)
def test_a_reference_that_does_not_resolve(reference: str) -> None:
    with pytest.raises(LookupError):
        resolve(reference)
