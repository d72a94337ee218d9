"""Worker processes started by ``crawl --processes P`` or ``worker --processes P`` stop
gracefully by themselves when their parent is killed with SIGKILL (it cannot forward a signal).

Linux only: the children are found through ``/proc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crawlq.testing.static import generate_site, make_static_app
from crawlq.testing.thread import ServerThread
from tests.conftest import run_crawlq
from tests.e2e.sitemap import reachable
from tests.e2e.test_distributed import stored_count, stored_urls

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]

PAGES = 80
DELAY = "0.25"  # 80 pages 0.25 s apart: the crawl still runs when the parent is killed
STOP_BOUND_S = 15.0
"""Generous: the children notice within 0.5 s and finish a fetch of a few milliseconds."""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1])


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[1] == pid:
                out.append(int(entry.name))
    return sorted(out)


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")  # a zombie has exited


def _status(frontier: str, job: str) -> dict[str, object]:
    out = run_crawlq("status", "--frontier", frontier, "--job", job, "--json").stdout
    return dict(json.loads(out))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("command", ["crawl", "worker"])
def test_children_of_a_sigkilled_parent_stop_gracefully_and_nothing_is_lost(
    command: str, redis_url: str, job: str, tmp_path: Path
) -> None:
    root = generate_site(tmp_path / "site", n_pages=PAGES)
    store = tmp_path / "store.db"
    log = tmp_path / "parent.log"
    with ServerThread(make_static_app(root)) as server:
        seed = server.base_url + "/index.html"
        expected, missing = reachable(root, server.base_url + "/")
        job_args = ["--frontier", redis_url, "--job", job]
        if command == "crawl":
            cmd = ["crawl", seed, *job_args, "--store", str(store), "--delay", DELAY, "-v"]
        else:
            run_crawlq("seed", seed, *job_args, "--store", str(store), "--delay", DELAY)
            cmd = [
                "worker",
                *job_args,
                "--store",
                str(store),
                "-v",
            ]  # no --exit-when-done: it would wait forever
        with log.open("wb") as out:
            parent = subprocess.Popen(
                [sys.executable, "-m", "crawlq", *cmd, "--processes", "2"],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the cleanup kills it all
            )
        children: list[int] = []
        try:
            deadline = time.monotonic() + 60
            while stored_count(store) < 5:
                assert parent.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "no page stored"
                time.sleep(0.05)
            children = _children(parent.pid)
            assert len(children) == 2, children
            parent.send_signal(signal.SIGKILL)
            parent.wait()
            killed = time.monotonic()
            while any(_alive(pid) for pid in children):
                assert time.monotonic() - killed < STOP_BOUND_S, "the children outlived the parent"
                time.sleep(0.05)
        finally:  # whatever is left, even after a failure: the group holds the children
            with contextlib.suppress(ProcessLookupError):
                os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
        text = log.read_text()
        assert text.count(f"parent process {parent.pid} is gone: stopping") == 2, text
        # Graceful, as on SIGTERM: finished results flushed, held leases released (after a
        # SIGKILL they would stay in flight until their visibility timeout).
        stopped = _status(redis_url, job)
        assert stopped["in_flight"] == 0, stopped
        assert stopped["queued"] != 0, "the crawl finished before the parent was killed"
        assert stopped["done"] == stored_count(store)
        run_crawlq(
            "worker", *job_args, "--store", str(store), "--exit-when-done", "-q", timeout=120
        )
    urls = stored_urls(store)
    assert set(urls) == expected | missing
    assert len(urls) == PAGES
    assert [u for u, n in urls.items() if n > 1] == []
    final = _status(redis_url, job)
    assert (final["queued"], final["in_flight"], final["delayed"]) == (0, 0, 0)
    assert final["done"] == final["seen"] == PAGES


@pytest.mark.timeout(180)
def test_a_sigkilled_child_is_a_warning_when_the_others_finish_the_job(
    redis_url: str, job: str, tmp_path: Path
) -> None:
    # The killed child's leases expire (visibility timeout 2 s) and the other child fetches
    # them: the crawl is complete, so the command reports it (exit 0, summary) and warns,
    # instead of "cannot crawl".
    root = generate_site(tmp_path / "site", n_pages=40)
    store = tmp_path / "store.db"
    config = tmp_path / "crawlq.toml"
    config.write_text("visibility_timeout_s = 2.0\n")
    with ServerThread(make_static_app(root)) as server:
        seed = server.base_url + "/index.html"
        cmd = [sys.executable, "-m", "crawlq", "crawl", seed, "--frontier", redis_url]
        cmd += ["--job", job, "--store", str(store), "--delay", "0.05", "--config", str(config)]
        parent = subprocess.Popen(
            [*cmd, "--processes", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while stored_count(store) < 3:
                assert parent.poll() is None
                assert time.monotonic() < deadline, "no page stored"
                time.sleep(0.05)
            victim = _children(parent.pid)[0]
            os.kill(victim, signal.SIGKILL)
            out, err = parent.communicate(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
    assert parent.returncode == 0, err
    assert "crawl finished" in out
    assert "worker processes exited with" in err and "the others finished the job" in err
    urls = stored_urls(store)
    assert len(urls) == 40
    assert [u for u, n in urls.items() if n > 1] == []
