"""The layers of docs/architecture.md: every crawlq import points down (or sideways in L0)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "crawlq"

# module (dotted, under crawlq) or package prefix -> layer; the longest match wins.
LAYERS: dict[str, int] = {
    "cli": 5,
    "dashboard": 5,
    "celery": 5,  # the package re-exports the app; its entry points (tasks, crawl, workers)
    "celery.runtime": 4,  # what a task does in a worker, with no Celery in it
    "ops": 5,  # operator tools over a job: inspect, dead letters, reports, reparse, try a URL
    "engine": 4,
    "testing": 4,  # loopback servers: `crawlq serve` and the tests use them
    "spider": 3,
    "links": 3,
    "middleware": 3,
    "sitemap": 0,
    "items": 0,  # item values, validation, pipeline contract, declared fields (stores read them)
    "export": 3,
    "fetch": 2,
    "robots": 2,
    "frontier": 1,
    "store": 1,
    "request": 0,
    "web": 0,  # what web standards say: codings, cookies, decoding, headers, IANA addresses
    "rules": 0,  # the crawl rules both engines call: politeness, scope, retry, proxies
    "urls": 0,
    "settings": 0,
    "errors": 0,
    "records": 0,
    "secrecy": 0,
    "clock": 0,
}
OUTSIDE = ("", "__main__")  # the package root (its version) and `python -m`


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int | None:
    matches = [
        (len(prefix), layer)
        for prefix, layer in LAYERS.items()
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1] if matches else None


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("crawlq")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(["crawlq", *base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name.startswith("crawlq"):
                if name == "crawlq" or (node.level and not node.module):
                    for a in node.names:
                        sub = name.removeprefix("crawlq").lstrip(".").replace(".", "/")
                        pkg = SRC / sub / a.name
                        is_module = pkg.is_dir() or pkg.with_suffix(".py").exists()
                        found.append((node.lineno, f"{name}.{a.name}" if is_module else name))
                else:
                    found.append((node.lineno, name))
    return found


def test_every_module_has_a_layer() -> None:
    missing = [
        _module_name(p)
        for p in SRC.rglob("*.py")
        if _module_name(p).split(".")[0] not in OUTSIDE and _layer(_module_name(p)) is None
    ]
    assert missing == [], f"add these modules to LAYERS and docs/architecture.md: {missing}"


def test_every_entry_of_the_map_names_a_module() -> None:
    # A renamed or removed module must leave the map too, or its new name would inherit nothing.
    modules = {_module_name(p) for p in SRC.rglob("*.py")}
    stale = [
        prefix
        for prefix in LAYERS
        if not any(m == prefix or m.startswith(prefix + ".") for m in modules)
    ]
    assert stale == [], f"remove these from LAYERS (no such module or package): {stale}"


def test_a_module_missing_from_the_map_has_no_layer() -> None:
    # What makes test_every_module_has_a_layer fail for a new top-level module.
    assert _layer("brand_new_module") is None
    assert _layer("spiderling") is None  # a prefix counts only up to a dot


def test_imports_point_down() -> None:
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        layer = _layer(module)
        if layer is None:
            continue
        for lineno, imported in _imports(path):
            target = imported.removeprefix("crawlq").lstrip(".")
            if target.split(".")[0] in OUTSIDE:
                continue
            target_layer = _layer(target)
            where = f"{module} (L{layer}):{lineno} imports {imported} (L{target_layer})"
            if target_layer is None or target_layer > layer:
                violations.append(where)
            elif _sideways(module, target, layer, target_layer):
                violations.append(where + " sideways")
    assert not violations, "\n".join(violations)


def _sideways(module: str, target: str, layer: int, target_layer: int) -> bool:
    """A same-layer import between packages that the table below does not allow.

    L0 modules are plain values and pure rules and may use each other; L5 entry points may
    call each other's commands.
    """
    if layer != target_layer or layer in (0, 5):
        return False
    pair = (module.split(".")[0], target.split(".")[0])
    return pair[0] != pair[1] and pair not in SIDEWAYS


SIDEWAYS = {
    ("celery", "engine"),  # the Celery runtime runs the engines' shared step
    ("robots", "fetch"),  # robots.txt is fetched through the fetcher
    ("spider", "links"),
    ("middleware", "spider"),  # middlewares are loaded as spiders are, and see its Response
}
"""Same-layer imports between packages that are allowed; each entry is used by some import.

frontier and store (L1) never import each other: the design keeps the two contracts apart.
"""


def _sideways_pairs_used() -> set[tuple[str, str]]:
    """The ``(package, package)`` pairs of every same-layer import between L1-L4 packages."""
    used = set()
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        layer = _layer(module)
        for _, imported in _imports(path):
            target = imported.removeprefix("crawlq").lstrip(".")
            if layer is None or target.split(".")[0] in OUTSIDE or layer in (0, 5):
                continue
            pair = (module.split(".")[0], target.split(".")[0])
            if _layer(target) == layer and pair[0] != pair[1]:
                used.add(pair)
    return used


def test_every_sideways_entry_is_used_by_an_import() -> None:
    # An allowed edge that no import uses hides the next import that should not be there.
    unused = sorted(SIDEWAYS - _sideways_pairs_used())
    assert unused == [], f"remove these from SIDEWAYS (no import uses them): {unused}"


@pytest.mark.parametrize("module", ["crawlq.rules.scope", "crawlq.cli.app"])
def test_layer_of_a_module_is_known(module: str) -> None:
    assert _layer(module.removeprefix("crawlq.")) is not None


# -- import cycles ------------------------------------------------------------------------------


def _module_edges(path: Path, modules: set[str]) -> set[str]:
    """The crawlq modules (dotted, without ``crawlq.``) that the module at ``path`` imports.

    Every import counts: at the top, inside a function (an import on use) and under
    ``TYPE_CHECKING`` (the two modules still need each other's names). ``from P import N``
    is an edge to the module ``P.N`` when there is one, else to ``P``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    named: list[tuple[str, list[str]]] = []  # (module, the names imported from it)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named += [(a.name.removeprefix("crawlq").lstrip("."), []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            elif (node.module or "").split(".")[0] == "crawlq":
                name = (node.module or "").removeprefix("crawlq").lstrip(".")
            else:
                continue
            named.append((name, [a.name for a in node.names]))
    edges = set()
    for name, names in named:
        subs = {f"{name}.{n}".lstrip(".") for n in names} & modules
        edges |= subs or ({name} & modules)
    return edges - {_module_name(path)}


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycles_are_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == {frozenset("abc")}
    assert _cycles({"a": {"b"}, "b": set()}) == set()


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or round a loop, even on use or under
    ``TYPE_CHECKING``: a concept split across a cycle is one module (issue 24)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    modules = set(paths)
    graph = {m: _module_edges(p, modules) for m, p in paths.items()}
    cycles = _cycles(graph)
    found = sorted(sorted(c) for c in cycles)
    assert found == [], f"import cycles between modules (merge them, or point one way): {found}"
