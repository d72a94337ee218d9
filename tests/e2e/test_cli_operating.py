"""Operating a crawl from the command line: what it says (and does not say) at its edges.

Each test reproduces a finding of a trial run: an export whose file extension and format
disagree, ``--bloom`` silently ignored, a Ctrl-C line nobody typed, two summaries for one
worker command, ``Aborted!`` after ``status --watch``, a mistyped setting without a hint.
Every command runs as a subprocess (``python -m crawlq``) against loopback servers; Redis
tests use a job of their own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.settings import Settings
from crawlq.testing import RequestLog, ServerThread, make_fault_app
from tests.conftest import run_crawlq

FAST = ["--delay", "0", "--retry-delay", "0.05", "-q"]


@pytest.fixture(scope="module")
def fault() -> Iterator[str]:
    with ServerThread(make_fault_app(RequestLog())) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, fault: str) -> Path:
    store = tmp_path_factory.mktemp("crawled") / "crawl.db"
    run_crawlq("crawl", f"{fault}/page/1", "--store", str(store), "--max-depth", "1", *FAST)
    return store


def crawlq_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "crawlq", *args]


# -- export: the format of -o FILE -----------------------------------------------------------


def test_export_to_a_csv_file_writes_csv(tmp_path: Path, crawled: Path) -> None:
    out = tmp_path / "pages.csv"
    proc = run_crawlq("export", "--store", str(crawled), "-o", str(out))
    assert proc.stderr.strip() == f"wrote 3 pages rows to {out}"
    rows = out.read_text().splitlines()
    assert rows[0].startswith("url,final_url,status,")
    assert len(rows) == 4 and not rows[1].startswith("{")


def test_export_to_a_parquet_file_writes_parquet(tmp_path: Path, crawled: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "pages.parquet"
    run_crawlq("export", "--store", str(crawled), "-o", str(out))
    assert pq.read_table(out).num_rows == 3


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-o", "pages.txt"], "cannot tell the format of 'pages.txt' from its extension"),
        (["-o", "pages"], "cannot tell the format of 'pages' from its extension"),
        (["--format", "jsonl", "-o", "pages.csv"], "--format jsonl but 'pages.csv' is named"),
        (["--format", "csv", "-o", "pages.parquet"], "named like a parquet file"),
    ],
)
def test_export_refuses_a_file_whose_format_it_cannot_tell_or_that_disagrees(
    tmp_path: Path, crawled: Path, args: list[str], says: str
) -> None:
    proc = run_crawlq("export", "--store", str(crawled), *args, check=False, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_export_with_a_format_and_an_unknown_extension_is_fine(
    tmp_path: Path, crawled: Path
) -> None:
    out = tmp_path / "pages.txt"
    run_crawlq("export", "--store", str(crawled), "--format", "jsonl", "-o", str(out))
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == [200] * 3


# -- --since: the same forms on every command ------------------------------------------------


@pytest.mark.parametrize("since", ["2h", "1d", "90m", "2000-01-01", "2000-01-01T00:00:00Z"])
def test_export_since_takes_an_age_or_a_time_as_dead_list_does(crawled: Path, since: str) -> None:
    out = run_crawlq("export", "--store", str(crawled), "--since", since).stdout
    assert len(out.splitlines()) == 3  # crawled just now: all three pages are younger
    dead = run_crawlq("dead", "list", "--store", str(crawled), "--since", since, "--json")
    assert dead.returncode == 0  # none dead, but the value is accepted


@pytest.mark.parametrize("command", [["export"], ["dead", "list"], ["dead", "replay"]])
def test_a_bad_since_gets_one_message_naming_the_option(crawled: Path, command: list[str]) -> None:
    proc = run_crawlq(*command, "--store", str(crawled), "--since", "2 hours", check=False)
    assert proc.returncode == 2, proc.stderr
    assert (
        "Invalid value for --since: '2 hours': not a time (2026-12-01T10:00:00Z) nor an age "
        "(30m, 2h, 7d)"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_export_since_a_future_time_or_an_age_of_0s_selects_nothing(crawled: Path) -> None:
    assert run_crawlq("export", "--store", str(crawled), "--since", "2999-01-01").stdout == ""
    assert run_crawlq("export", "--store", str(crawled), "--since", "0s").stdout == ""


# -- --bloom needs a shared frontier ---------------------------------------------------------


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_bloom_without_a_frontier_is_a_usage_error(
    tmp_path: Path, fault: str, command: str
) -> None:
    store = tmp_path / "crawl.db"
    proc = run_crawlq(
        command, f"{fault}/page/1", "--store", str(store), "--bloom", "1000", check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "--bloom needs a shared --frontier" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the store was not even created


# -- settings: did you mean, and the list ----------------------------------------------------


def test_a_setting_without_its_unit_suggests_the_right_name(tmp_path: Path, fault: str) -> None:
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "--store", str(tmp_path / "c.db"), "-q",
        env={"CRAWLQ_DELAY": "0"}, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "CRAWLQ_DELAY: unknown setting" in proc.stderr
    assert "did you mean CRAWLQ_DELAY_S?" in proc.stderr
    config = tmp_path / "c.toml"
    config.write_text("dealy_s = 0\n")
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "--store", str(tmp_path / "c.db"), "--config", str(config),
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "dealy_s: unknown setting" in proc.stderr
    assert "did you mean delay_s or " in proc.stderr  # the closest first


def test_settings_lists_every_setting_with_option_environment_default_and_unit() -> None:
    rows = json.loads(run_crawlq("settings", "--json").stdout)
    assert [r["setting"] for r in rows] == list(Settings.field_names())
    by_name = {r["setting"]: r for r in rows}
    assert by_name["delay_s"] == {
        "setting": "delay_s",
        "option": "--delay",
        "environment": "CRAWLQ_DELAY_S",
        "default": 1.0,
        "unit": "seconds",
        "description": "Seconds between the starts of two requests to one host, across all "
        "workers.",
    }
    assert by_name["max_body_bytes"]["option"] is None  # file and environment only
    assert by_name["max_body_bytes"]["unit"] == "bytes"
    assert by_name["broker_url"]["option"] == "--broker"
    assert by_name["warc_dir"]["option"] == "--warc"
    assert by_name["inbox_methods"]["default"] == ["GET", "HEAD"]
    assert all(r["environment"] == f"CRAWLQ_{r['setting'].upper()}" for r in rows)
    assert all(r["description"] for r in rows)

    table = run_crawlq("settings").stdout.splitlines()
    assert table[0].split() == ["setting", "option", "environment", "default", "unit"]
    assert len(table) == 1 + len(rows)
    assert table[[line.split()[0] for line in table].index("delay_s")].split() == [
        "delay_s", "--delay", "CRAWLQ_DELAY_S", "1.0", "seconds",
    ]  # fmt: skip


def test_settings_fits_200_columns_on_a_pipe_and_wide_prints_every_default_whole() -> None:
    """Issue 21: ``crawlq settings`` printed 614-column lines (the default extension list)."""
    rows = {r["setting"]: r for r in json.loads(run_crawlq("settings", "--json").stdout)}
    full = ",".join(rows["skip_extensions"]["default"])
    assert len(full) > 200  # the cell that made the table too wide
    for env in ({}, {"COLUMNS": "120"}):  # a narrower COLUMNS does not narrow a pipe's table
        table = run_crawlq("settings", env=env).stdout.splitlines()
        assert max(len(line) for line in table) <= 200
        assert len(table) == 1 + len(rows)  # a row per line still (grep-able)
        [line] = [x for x in table if x.startswith("skip_extensions ")]
        cut = line.split()[3]
        assert cut.endswith("…") and full.startswith(cut[:-1])
    wide = run_crawlq("settings", "--wide").stdout.splitlines()
    [line] = [x for x in wide if x.startswith("skip_extensions ")]
    assert line.split()[3] == full
    assert len(wide) == 1 + len(rows)


def test_every_table_command_takes_wide(crawled: Path) -> None:
    for args in (["dead", "list"], ["inspect", "http://127.0.0.1:1/x"]):
        proc = run_crawlq(*args, "--store", str(crawled), "--wide")
        assert "Usage" not in proc.stderr
    for command in (["status"], ["jobs"], ["dead", "list"], ["inspect"], ["settings"]):
        assert "--wide" in run_crawlq(*command, "--help").stdout, command


def test_settings_of_one_name_shows_its_description_or_suggests() -> None:
    out = run_crawlq("settings", "delay").stdout.splitlines()
    assert out[1].split() == ["delay_s", "--delay", "CRAWLQ_DELAY_S", "1.0", "seconds"]
    assert "Seconds between the starts of two requests" in out[2]
    proc = run_crawlq("settings", "dealy", check=False)
    assert proc.returncode == 2
    assert "no setting 'dealy'; did you mean delay_s?" in proc.stderr


# -- signals: one stop, said once ------------------------------------------------------------


def test_max_pages_with_processes_prints_no_ctrl_c_line(
    tmp_path: Path, fault: str, redis_url: str, job: str
) -> None:
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "--store", str(tmp_path / "c.db"), "--frontier", redis_url,
        "--job", job, "--processes", "4", "--max-pages", "5", "--delay", "0.5", "-v",
    )  # fmt: skip
    assert "stopping the worker processes" in proc.stderr  # the parent did stop them
    assert "Ctrl-C" not in proc.stderr and "stopping: finishing" not in proc.stderr
    assert proc.stdout.splitlines()[0] == "crawl stopped at --max-pages"


def _seeded_drained_job(redis_url: str, job: str, store: Path) -> None:
    """A job with no URLs at all: seeded, and drained from the start."""
    run_crawlq(
        "seed", "--frontier", redis_url, "--job", job, "--store", str(store),
        "--allow-domain", "example.test",
    )  # fmt: skip


def _live_workers(redis_url: str, job: str) -> int:
    report = json.loads(
        run_crawlq("status", "--frontier", redis_url, "--job", job, "--json").stdout
    )
    return len(report["workers"])


def test_worker_processes_report_once_and_a_drained_job_is_not_interrupted(
    tmp_path: Path, redis_url: str, job: str
) -> None:
    store = tmp_path / "s.db"
    _seeded_drained_job(redis_url, job, store)
    proc = subprocess.Popen(
        crawlq_cmd(
            "worker", "--frontier", redis_url, "--job", job, "--store", str(store),
            "--processes", "2",
        ),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _live_workers(redis_url, job) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the two workers never showed up"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, stderr
    summaries = [line for line in stdout.splitlines() if line.startswith("worker ")]
    assert summaries == ["worker stopped: the job has nothing left to crawl"]
    assert "interrupted" not in stdout
    assert stdout.count("pages stored:") == 1
    stops = [line.split(": ", 1)[1] for line in stderr.splitlines() if "stopping:" in line]
    assert stops == ["stopping: finishing in-flight requests (Ctrl-C again to abandon them)"]
    assert "Traceback" not in stderr


def test_status_watch_ends_quietly_on_ctrl_c(tmp_path: Path, redis_url: str, job: str) -> None:
    _seeded_drained_job(redis_url, job, tmp_path / "s.db")
    # under load a SIGINT could land while the watch closed its Redis connection, which
    # swallowed the cancellation: the watch went on (tests/frontier: ..._still_raises_...)
    with subprocess.Popen(
        crawlq_cmd("status", "--frontier", redis_url, "--job", job, "--watch", "--interval", "0.2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # a table is out: the watch loop runs
            assert first.strip(), proc.communicate()
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:  # never leave a running watch, nor its pipes, to the next test
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr
