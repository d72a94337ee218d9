"""The gates of CONTRIBUTING.md have no holes: complexity is exempted per function, with a reason,
and an exemption that exempts nothing fails (ruff's RUF100)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
NOQA_C901 = re.compile(r"#\s*noqa:[^#\n]*\bC901\b(?P<rest>[^\n]*)")


def test_no_file_is_exempt_from_the_complexity_gate() -> None:
    ignores = CONFIG["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    whole_files = {glob: codes for glob, codes in ignores.items() if any("C9" in c for c in codes)}
    assert whole_files == {}, "exempt the function (`# noqa: C901  (reason)`), not the file"
    assert "C90" in CONFIG["tool"]["ruff"]["lint"]["select"]
    assert "RUF100" in CONFIG["tool"]["ruff"]["lint"]["select"]


def test_every_complexity_exemption_gives_its_reason() -> None:
    bare = []
    for path in sorted((REPO / "src").rglob("*.py")):
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = NOQA_C901.search(line)
            if found and not re.fullmatch(r"\s+\(\S.*\)\s*", found["rest"]):
                bare.append(f"{path.relative_to(REPO)}:{lineno}")
    assert bare == [], f"say why in parentheses after the code: {bare}"


def _ruff(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``ruff check`` of ``source`` as a module of src/, under the project's own configuration."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is in the test extra: pip install -e '.[test]'")
    target = tmp_path / "src" / "crawlq" / "gate_probe.py"
    target.parent.mkdir(parents=True)
    target.write_text(source, encoding="utf-8")
    config = ["--config", str(REPO / "pyproject.toml"), "--no-cache", "--output-format", "concise"]
    return subprocess.run(
        [ruff, "check", *config, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )


def test_a_stale_complexity_exemption_fails_the_lint(tmp_path: Path) -> None:
    stale = '"""A probe."""\n\n\ndef simple(x: int) -> int:  # noqa: C901  (no longer true)\n'
    stale += '    """Return x."""\n    return x\n'
    proc = _ruff(stale, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "RUF100" in proc.stdout, proc.stdout


def test_a_complex_function_without_exemption_fails_the_lint(tmp_path: Path) -> None:
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(13))
    source = f'"""A probe."""\n\n\ndef tangled(x: int) -> int:\n    """Pick."""\n{branches}'
    proc = _ruff(source + "    return -1\n", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "C901" in proc.stdout, proc.stdout
