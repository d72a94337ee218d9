"""`crawlq.spider.load_spider`: the class a path names, and a `ConfigError` for every bad path."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from crawlq.errors import ConfigError
from crawlq.spider import Spider, load_spider


class ModuleSpider(Spider):
    name = "module"


def test_load_spider_none_is_default() -> None:
    assert load_spider(None) is Spider


def test_load_spider_from_module() -> None:
    assert load_spider("crawlq.spider:Spider") is Spider
    assert load_spider(f"{__name__}:ModuleSpider") is ModuleSpider


def test_load_spider_from_file(tmp_path: Path) -> None:
    path = tmp_path / "my-spider.py"
    path.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from crawlq.spider import Spider

            @dataclass
            class Thing:
                x: int = 1

            class Outer:
                class Inner(Spider):
                    name = "inner"

            class FileSpider(Spider):
                name = "file"
            """
        )
    )
    cls = load_spider(f"{path}:FileSpider")
    assert issubclass(cls, Spider) and cls.name == "file"
    assert load_spider(f"{path}:FileSpider") is cls  # loaded once
    assert load_spider(f"{path}:Outer.Inner").name == "inner"
    sys.modules.pop(cls.__module__, None)


def _error(path: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_spider(path)
    assert info.value.name == "spider"
    message = str(info.value)
    assert repr(path) in message, message
    return message


def test_load_spider_missing_colon() -> None:
    assert "':'" in _error("crawlq.spider.Spider")


@pytest.mark.parametrize("path", [":Spider", "crawlq.spider:"])
def test_load_spider_empty_part(path: str) -> None:
    _error(path)


def test_load_spider_module_not_found() -> None:
    assert "not found" in _error("crawlq_no_such_module.sub:Spider")


def test_load_spider_module_import_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crawlq_test_broken_dep.py").write_text("import crawlq_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = _error("crawlq_test_broken_dep:Spider")
    assert "crawlq_missing_dependency" in message and "not found" not in message


def test_load_spider_file_not_found(tmp_path: Path) -> None:
    assert "not found" in _error(f"{tmp_path}/missing.py:Spider")


def test_load_spider_file_that_fails_to_execute(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def broken(:\n")
    assert "SyntaxError" in _error(f"{path}:Spider")


def test_load_spider_attribute_missing() -> None:
    assert "NoSuchSpider" in _error("crawlq.spider:NoSuchSpider")


@pytest.mark.parametrize("name", ["Response", "load_spider", "SpiderError"])
def test_load_spider_not_a_spider_subclass(name: str) -> None:
    assert "not a subclass" in _error(f"crawlq.spider:{name}")


def test_load_spider_a_method_is_not_a_spider() -> None:
    assert "not a subclass" in _error("crawlq.spider:Spider.parse")


def test_load_spider_file_that_failed_can_be_fixed_and_loaded(tmp_path: Path) -> None:
    path = tmp_path / "fixme.py"
    path.write_text("raise RuntimeError('not yet')\n")
    assert "RuntimeError: not yet" in _error(f"{path}:Fixed")
    path.write_text("from crawlq.spider import Spider\nclass Fixed(Spider):\n    name = 'fixed'\n")
    cls = load_spider(f"{path}:Fixed")  # the failed module was not left in sys.modules
    assert cls.name == "fixed"
    sys.modules.pop(cls.__module__, None)
