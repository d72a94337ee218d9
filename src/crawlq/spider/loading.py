"""`load_spider`: the spider class a ``"module:Class"`` or ``"file.py:Class"`` path names.

The path comes from the worker's own configuration (its settings file, environment or
command line): a job's stored spider path is used only with ``--trust-job-code``
(`crawlq.engine.job`), so shared state never chooses the code a worker loads. Every failure is
a `crawlq.errors.ConfigError` named ``spider`` whose message quotes the path.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from crawlq.errors import ConfigError
from crawlq.spider.spider import Spider

__all__ = ["load_object", "load_spider", "spider_file"]

_NON_WORD = re.compile(r"\W")


def load_spider(path: str | None) -> type[Spider]:
    """Find a spider class by path.

    Args:
        path: ``"package.module:ClassName"`` (imported from ``sys.path``) or
            ``"path/to/file.py:ClassName"`` (loaded from the file; it is not added to
            ``sys.path``). ``ClassName`` may be dotted for a nested class. None means
            the base `Spider`.

    Returns:
        The spider class.

    Raises:
        ConfigError: Named ``spider``, with a message naming ``path``: no colon, an empty
            part, a module that cannot be found or imported, a missing file, a missing
            attribute, or an attribute that is not a `Spider` subclass.
    """
    if path is None:
        return Spider
    found = load_object(path, "spider")
    if not (isinstance(found, type) and issubclass(found, Spider)):
        raise ConfigError(
            "spider",
            f"{path!r}: {path.rpartition(':')[2]!r} is not a subclass of crawlq.spider.Spider",
        )
    return found


def load_object(path: str, setting: str) -> Any:
    """The object a ``"module:Name"`` or ``"path/to/file.py:Name"`` path names.

    Loaded as `load_spider` loads a spider (a file is not added to ``sys.path``; ``Name``
    may be dotted), for any code a setting names: a spider, a downloader or spider
    middleware (`crawlq.middleware`), an item pipeline.

    Args:
        path: The path, from this process's own configuration (never a shared job's).
        setting: The setting that gave it, the name of the `ConfigError` raised.

    Raises:
        ConfigError: Named ``setting``, with a message naming ``path``: no colon, an empty
            part, a module that cannot be found or imported, a missing file or attribute.
    """
    if not isinstance(path, str):
        raise ConfigError(setting, f"{path!r:.80} is not a 'module:Name' path")
    target, colon, qualname = path.rpartition(":")
    if not colon:
        raise ConfigError(
            setting,
            f"{path!r} has no ':'; expected 'package.module:ClassName' "
            "or 'path/to/file.py:ClassName'",
        )
    if not target or not qualname:
        raise ConfigError(setting, f"{path!r}: both the module and the class name are needed")
    if spider_file(path) is not None:
        module = _load_file(target, path, setting)
    else:
        module = _import_module(target, path, setting)
    found: Any = module
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(
                setting, f"{path!r}: {target!r} has no attribute {qualname!r}"
            ) from None
    return found


def spider_file(path: str) -> str | None:
    """The file a ``"path/to/file.py:ClassName"`` spider path loads, as written.

    None when ``path`` names a module (``"package.module:ClassName"``) or has no ``:``.
    `load_spider` loads such a file relative to the working directory (``~`` expanded);
    `crawlq.engine.job` compares two spider paths by the file they name.
    """
    target, colon, _ = path.rpartition(":")
    if colon and (target.endswith(".py") or "/" in target or "\\" in target):
        return target
    return None


def _load_file(file: str, path: str, setting: str) -> Any:
    """Execute a spider file as a fresh module; ``path`` is the user's input, for messages."""
    source = Path(file).expanduser().resolve()
    if not source.is_file():
        raise ConfigError(setting, f"{path!r}: file {file!r} not found")
    digest = hashlib.sha1(str(source).encode(), usedforsecurity=False).hexdigest()[:8]
    module_name = f"crawlq_spider_{_NON_WORD.sub('_', source.stem)}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise ConfigError(setting, f"{path!r}: {file!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ConfigError(
            setting, f"{path!r}: loading {file!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _import_module(target: str, path: str, setting: str) -> Any:
    """Import ``target`` by name; ``path`` is the user's input, for messages."""
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(exc.name + ".")):
            raise ConfigError(setting, f"{path!r}: module {target!r} not found") from exc
        raise ConfigError(
            setting, f"{path!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    except Exception as exc:
        raise ConfigError(
            setting, f"{path!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
