"""Peers in venvs of their own: the crawlers the benchmarks compare crawlq with.

A peer's dependencies (Crawlee pins pydantic, httpx and its own HTTP client; Scrapy brings
Twisted) must not change the packages crawlq's rows run with, so each peer gets a venv of its
own, made once with ``python -m venv`` and ``pip install`` of `PEERS`' requirement from the
package index pip is configured with, then reused. Where: ``$CRAWLQ_BENCH_VENVS``, else
``~/.cache/crawlq-bench/venvs/<name>`` (outside the repo: never committed, shared by work
trees). ``--crawlee-python`` / ``--scrapy-python`` in the bench scripts point at any other
venv's Python instead. Delete the folder to upgrade a peer.

Scrapy keeps its old home first: when the bench's own Python has the ``scrapy`` script beside
it (the dev venv of earlier results), that one runs, so numbers stay comparable; else its
own venv is made like Crawlee's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["PEERS", "peer_python", "peer_version"]

PEERS = {
    "crawlee": ("crawlee[parsel]", "crawlee"),  # ParselCrawler; its default HTTP client
    "scrapy": ("scrapy", "scrapy"),
}
_overrides: dict[str, str] = {}


def venv_root() -> Path:
    """Where the peers' venvs live (``$CRAWLQ_BENCH_VENVS`` or the user's cache)."""
    env = os.environ.get("CRAWLQ_BENCH_VENVS")
    return Path(env) if env else Path.home() / ".cache" / "crawlq-bench" / "venvs"


def use_python(name: str, python: str | None) -> None:
    """Run peer ``name`` with this Python (a venv that has it) instead of its own venv."""
    if python:
        _overrides[name] = python


def peer_python(name: str) -> str:
    """The Python of a venv with peer ``name`` installed; made (a minute or less) if missing.

    Raises:
        subprocess.CalledProcessError: ``venv`` or ``pip install`` failed (its output shows).
    """
    if name in _overrides:
        return _overrides[name]
    if name == "scrapy" and (Path(sys.executable).parent / "scrapy").exists():
        return sys.executable
    requirement, _ = PEERS[name]
    venv = venv_root() / name
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        print(f"making {venv} for the {name} row: pip install {requirement!r}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", requirement]
        done = subprocess.run(pip, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-3000:] + done.stderr[-3000:], flush=True)
            done.check_returncode()
        (venv / ".installed").write_text(requirement + "\n")
    return str(python)


def peer_version(name: str) -> str:
    """Peer ``name``'s installed version and the Python it runs with, for the header line."""
    _, dist = PEERS[name]
    python = peer_python(name)
    code = f"from importlib.metadata import version; print(version({dist!r}))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    where = "the bench's venv" if python == sys.executable else python
    return f"{out.stdout.strip() or '-'} ({where})"
