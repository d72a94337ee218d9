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
    "celery": 5,  # the package re-exports the app
    "celery.tasks": 5,
    "celery.crawl": 5,
    "celery.broker": 5,
    "celery.local_worker": 5,
    "celery.runtime": 4,
    "celery.wire": 4,
    "celery.host_slots": 4,
    "celery.results": 4,
    "celery.task_results": 4,
    "celery.refused": 4,
    "celery.state": 4,
    "celery.config": 4,
    "engine": 4,
    "testing": 4,  # loopback servers: `crawlq serve` and the tests use them
    "spider": 3,
    "links": 3,
    "middleware": 3,
    "sitemap": 0,
    "decode": 0,
    "codings": 0,
    "cookies": 0,
    "headers": 0,
    "items": 0,  # item values, validation, pipeline contract, declared fields (stores read them)
    "export": 3,
    "fetch": 2,
    "robots": 2,
    "frontier": 1,
    "store": 1,
    "request": 0,
    "urls": 0,
    "settings": 0,
    "errors": 0,
    "records": 0,
    "scope": 0,
    "retry": 0,
    "politeness": 0,
    "proxies": 0,
    "addresses": 0,
    "secrecy": 0,
    "clock": 0,
    "robots_record": 0,
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
    ("fetch", "robots"),
    ("robots", "fetch"),  # robots.txt is fetched through the fetcher
    ("spider", "links"),
    ("middleware", "spider"),  # middlewares are loaded as spiders are, and see its Response
    ("spider", "decode"),
    ("links", "decode"),
    ("frontier", "store"),
    ("store", "frontier"),
}


@pytest.mark.parametrize("module", ["crawlq.scope", "crawlq.cli.app"])
def test_layer_of_a_module_is_known(module: str) -> None:
    assert _layer(module.removeprefix("crawlq.")) is not None
