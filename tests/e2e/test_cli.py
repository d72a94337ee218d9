"""The ``crawlq`` command line as a user runs it: exit codes, messages, exports.

Every command runs as a subprocess (``python -m crawlq``) against loopback servers.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq import __version__
from crawlq.testing import RequestLog, ServerThread, make_fault_app, make_static_app
from tests.conftest import REPO, corpus_tarball, run_crawlq
from tests.services import need_service

FAST = ["--delay", "0", "--retry-delay", "0.05", "-q"]

PAGE_COLUMNS = (
    "url,final_url,status,content_type,depth,title,fetched_at,size,elapsed_s,attempt,error,"
    "spider,fingerprint,warc_file,warc_offset,canonical_url,referrer"
)


@pytest.fixture(scope="module")
def fault_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def fault(fault_log: RequestLog) -> Iterator[str]:
    """The fault app on loopback, in a thread (the crawls run in other processes)."""
    with ServerThread(make_fault_app(fault_log)) as server:
        yield server.base_url


def export(store: Path, *args: str) -> str:
    return run_crawlq("export", "--store", str(store), *args).stdout


# -- exit status 2: bad input ----------------------------------------------------------------


@pytest.mark.parametrize("seed", ["ftp://x", "not a url", "http://"])
def test_bad_seed_url_exits_2_naming_it(tmp_path: Path, seed: str) -> None:
    store = tmp_path / "crawl.db"
    proc = run_crawlq("crawl", seed, "--store", str(store), *FAST, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"invalid URL {seed!r}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not store.exists()  # a bad seed never touches the store


def test_one_bad_seed_among_good_ones_exits_2(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "crawl.db"
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "mailto:x@example.org", "--store", str(store), check=False
    )
    assert proc.returncode == 2
    assert "'mailto:x@example.org'" in proc.stderr
    assert not store.exists()


def test_no_seeds_exits_2(tmp_path: Path) -> None:
    store = tmp_path / "crawl.db"
    proc = run_crawlq("crawl", "--store", str(store), *FAST, check=False)
    assert proc.returncode == 2
    assert "no seed URLs" in proc.stderr
    assert not store.exists()


@pytest.mark.parametrize(
    ("spider", "says"),
    [
        ("no_such_module_xyz:MySpider", "module 'no_such_module_xyz' not found"),
        ("crawlq.spider:NoSuchSpider", "has no attribute 'NoSuchSpider'"),
        ("examples/no_such_file.py:Spider", "not found"),
        ("crawlq.spider:Response", "is not a subclass of crawlq.spider.Spider"),
        ("no_colon_here", "has no ':'"),
    ],
)
def test_unknown_spider_exits_2_naming_it(
    tmp_path: Path, fault: str, spider: str, says: str
) -> None:
    store = tmp_path / "crawl.db"
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "--spider", spider, "--store", str(store), check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert repr(spider) in proc.stderr
    assert says in proc.stderr
    assert not store.exists()


def test_bad_option_value_exits_2(tmp_path: Path, fault: str) -> None:
    proc = run_crawlq(
        "crawl",
        f"{fault}/page/1",
        "--store",
        str(tmp_path / "crawl.db"),
        "--concurrency",
        "0",
        check=False,
    )
    assert proc.returncode == 2
    assert "concurrency" in proc.stderr


# -- exit status 1: cannot run ---------------------------------------------------------------


def _wait_for_owner(lock: Path, pid: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not (lock.is_file() and lock.read_text().strip() == str(pid)):
        assert proc.poll() is None, f"the first crawl exited early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the first crawl never took the store"
        time.sleep(0.02)


def test_store_in_use_by_a_running_crawl_exits_1(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "crawl.db"
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crawlq",
            "crawl",
            f"{fault}/delay/30",
            "--store",
            str(store),
            *FAST,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_owner(Path(f"{store}.lock"), first.pid, first)
        proc = run_crawlq("crawl", f"{fault}/page/1", "--store", str(store), *FAST, check=False)
    finally:
        first.kill()
        first.communicate(timeout=10)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0] == (
        f"crawlq: cannot crawl: {store} is in use by another crawlq process (pid {first.pid})"
    )
    assert proc.stdout == ""


# -- a crawl and its exports -----------------------------------------------------------------


def test_crawl_prints_a_summary_and_exports_pages_as_csv(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "crawl.db"
    seeds = [f"{fault}/page/1", f"{fault}/status/404", f"{fault}/status/503", f"{fault}/drop"]
    proc = run_crawlq(
        "crawl", *seeds, "--store", str(store), "--max-depth", "1", "--max-retries", "0", *FAST
    )
    assert "crawl finished: nothing left to crawl" in proc.stdout
    assert "pages stored: 4 this run, 4 in store" in proc.stdout
    assert "dead-lettered: 2 (" in proc.stdout
    assert "links not followed: 4 (max_depth 4)" in proc.stdout

    out = tmp_path / "pages.csv"
    run_crawlq("export", "--store", str(store), "--format", "csv", "-o", str(out))
    raw = out.read_bytes()
    assert raw.startswith(PAGE_COLUMNS.encode() + b"\r\n")  # RFC 4180 line ends
    assert raw.count(b"\r\n") == 5  # the header and 4 pages
    text = export(store, "--format", "csv")
    assert text.splitlines()[0] == PAGE_COLUMNS
    rows = list(csv.DictReader(io.StringIO(text)))
    by_url = {row["url"]: row for row in rows}
    assert set(by_url) == {f"{fault}/page/{n}" for n in (1, 2, 3)} | {f"{fault}/status/404"}
    page1 = by_url[f"{fault}/page/1"]
    assert (page1["status"], page1["depth"], page1["title"]) == ("200", "0", "Page 1")
    assert (page1["content_type"], page1["error"], page1["attempt"]) == ("text/html", "", "1")
    assert page1["fetched_at"].endswith("Z")
    assert len(page1["fingerprint"]) == 40
    assert by_url[f"{fault}/status/404"]["error"] == "http_404"

    dead = list(csv.DictReader(io.StringIO(export(store, "--what", "dead", "--format", "csv"))))
    assert {(d["url"], d["reason"], d["attempts"]) for d in dead} == {
        (f"{fault}/status/503", "http_503", "1"),
        (f"{fault}/drop", "connection_reset", "1"),
    }


def test_export_to_a_file_reports_the_row_count(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "crawl.db"
    run_crawlq("crawl", f"{fault}/page/1", "--store", str(store), "--max-depth", "1", *FAST)
    out = tmp_path / "pages.jsonl"
    proc = run_crawlq("export", "--store", str(store), "-o", str(out))
    assert proc.stderr.strip() == f"wrote 3 pages rows to {out}"
    assert proc.stdout == ""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["url"] for r in rows) == [f"{fault}/page/{n}" for n in (1, 2, 3)]


def test_export_of_a_missing_store_fails_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    proc = run_crawlq("export", "--store", str(missing), check=False)
    assert proc.returncode != 0
    assert str(missing) in proc.stderr
    assert not missing.exists()  # exporting never creates a store


def test_version() -> None:
    proc = run_crawlq("--version")
    assert proc.stdout.strip() == f"crawlq, version {__version__}"


# -- the example spider over the PostgreSQL manual -------------------------------------------


@pytest.fixture(scope="module")
def served_site(site_root: Path) -> Iterator[str]:
    with ServerThread(make_static_app(site_root)) as server:
        yield server.base_url


def test_pg_docs_spider_exports_sql_command_items(tmp_path: Path, served_site: str) -> None:
    if corpus_tarball() is None:
        need_service("needs the PostgreSQL manual corpus (sql-*.html pages)")
    store = tmp_path / "crawl.db"
    spider = str(REPO / "examples" / "pg_docs_spider.py") + ":PgDocsSpider"
    proc = run_crawlq(
        "crawl",
        f"{served_site}/sql-commands.html",
        "--spider",
        spider,
        "--store",
        str(store),
        "--max-pages",
        "20",
        "--host-concurrency",
        "4",
        *FAST,
    )
    assert "pages stored: 20 this run" in proc.stdout
    assert "items: 20 this run" in proc.stdout  # one item per page

    items = [json.loads(line) for line in export(store, "--what", "items").splitlines()]
    assert len(items) == 20
    assert {item["_spider"] for item in items} == {"pg_docs"}
    commands = {item["command"]: item for item in items if "command" in item}
    assert len(commands) >= 10
    for item in commands.values():
        assert item["command"] and item["purpose"], item
        assert item["names"] and item["synopsis"], item
        assert item["_url"].rsplit("/", 1)[1].startswith("sql-")
    abort = commands["ABORT"]
    assert abort["purpose"] == "abort the current transaction"
    assert abort["names"] == ["ABORT"]
    assert abort["synopsis"].startswith("ABORT")
    pages = [item for item in items if "command" not in item]
    assert {p["_url"].rsplit("/", 1)[1] for p in pages} >= {"sql-commands.html", "index.html"}

    table = export(store, "--what", "items", "--format", "csv")
    header = table.splitlines()[0].split(",")
    assert header[-3:] == ["_url", "_spider", "_extra"]
    assert {"command", "purpose", "title", "section"} <= set(header)


def test_python_dash_m_and_console_script_agree() -> None:
    script = Path(sys.executable).with_name("crawlq")
    if not script.is_file():
        need_service("the crawlq console script is not installed next to this Python")
    proc = subprocess.run(
        [str(script), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert proc.stdout == run_crawlq("--version").stdout


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--delay", "nan"], "--delay: must be a finite number"),
        (["--timeout", "inf"], "--timeout: must be a finite number"),
        (["--delay", "-1"], "--delay: must not be negative"),
        (["--warc-max-size", "0"], "--warc-max-size: must be positive"),
        (["--store", "/nonexistent-dir/x/crawl.db"], "/nonexistent-dir/x"),
    ],
)
def test_bad_values_exit_2_naming_them(
    tmp_path: Path, fault: str, args: list[str], names: str
) -> None:
    proc = run_crawlq("crawl", f"{fault}/page/1", *(args or []), check=False)
    assert proc.returncode == 2, proc.stderr
    assert names in proc.stderr
    assert "Traceback" not in proc.stderr


def test_seed_longer_than_the_url_limit_exits_2(tmp_path: Path) -> None:
    proc = run_crawlq(
        "crawl", "http://127.0.0.1:9/" + "x" * 3000, "--store", str(tmp_path / "s.db"),
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "longer than 2083" in proc.stderr


def test_bad_lines_of_seed_stdin_are_named_by_their_line_number(tmp_path: Path) -> None:
    given = "\n\n\nhttp://127.0.0.1:9/ok\n# comment\n\nbad one\n"
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "seed", "-", "--store", str(tmp_path / "s.db")],
        input=given, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "line 5: invalid URL '# comment'" in proc.stderr, proc.stderr
    assert "line 7: invalid URL 'bad one'" in proc.stderr
    assert not (tmp_path / "s.db").exists()  # nothing queued, nothing written


def test_export_to_an_unwritable_place_is_one_line(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "s.db"
    run_crawlq("crawl", f"{fault}/page/1", "--store", str(store), "--max-depth", "0", "-q")
    proc = run_crawlq(
        "export", "--store", str(store), "-o", str(tmp_path / "no" / "x.jsonl"), check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "cannot write" in proc.stderr


def test_a_store_reached_through_a_symlink_is_still_locked(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "real.db"
    link = tmp_path / "link.db"
    link.symlink_to(store)
    slow = subprocess.Popen(
        [sys.executable, "-m", "crawlq", "crawl", f"{fault}/delay/3", "--store", str(store),
         "-q", "--ignore-robots"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_for_owner(Path(f"{store}.lock"), slow.pid, slow)  # type: ignore[arg-type]
        proc = run_crawlq("crawl", f"{fault}/page/1", "--store", str(link), check=False)
        assert proc.returncode == 1
        assert "in use by another crawlq process" in proc.stderr
    finally:
        slow.wait(timeout=30)


def test_retry_dead_requeues_what_failed_before(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text('<a href="a.html">a</a>')
    (root / "a.html").write_text("<title>A</title>")
    down = run_crawlq(
        "crawl", "http://127.0.0.1:9/index.html", "--store", str(store), "--max-retries", "0",
        "--ignore-robots", "-q", check=False,
    )  # fmt: skip
    assert down.returncode == 4, down.stderr  # no page stored: the only seed is dead
    assert "dead-lettered: 1 (connect_error 1); --retry-dead requeues them" in down.stdout
    # The "site" comes up at another address; a fresh crawl of the same seed changes nothing,
    # --retry-dead requeues the dead letter (which still points at the dead address).
    again = run_crawlq(
        "crawl", "http://127.0.0.1:9/index.html", "--store", str(store), "--max-retries", "0",
        "--ignore-robots", "-q", "--retry-dead", check=False,
    )  # fmt: skip
    assert again.returncode == 4, again.stderr
    assert "retries: 0" in again.stdout
    assert "dead letters replayed first (--retry-dead): 1" in again.stdout
    assert "dead-lettered: 1 (connect_error 1)" in again.stdout
    rows = [json.loads(x) for x in export(store, "--what", "dead").splitlines() if x]
    assert len(rows) == 1 and rows[0]["attempts"] == 1  # tried afresh, not a 2nd retry


@pytest.mark.parametrize(
    ("seed", "reason"),
    [("http://127.0.0.1:9/index.html", "connect_error 1"), ("/status/500", "http_500 1")],
)
def test_a_crawl_whose_every_seed_failed_says_so_and_exits_4(
    tmp_path: Path, fault: str, seed: str, reason: str
) -> None:
    """Issue 21: a dead seed printed "crawl finished" and exited 0 with nothing stored."""
    url = seed if seed.startswith("http") else fault + seed
    proc = run_crawlq(
        "crawl", url, "--store", str(tmp_path / "s.db"), "--max-retries", "0",
        "--ignore-robots", *FAST, check=False,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("crawlq: error:")]
    assert errors == [
        f"crawlq: error: no page stored, every seed failed: dead-lettered 1 ({reason}); "
        "`crawlq dead list` shows why each failed"
    ]
    assert proc.stdout.splitlines()[0] == "crawl failed: no page stored"
    assert "crawl finished" not in proc.stdout


def test_a_shared_job_whose_every_seed_failed_exits_4_too(
    tmp_path: Path, fault: str, redis_url: str, job: str
) -> None:
    proc = run_crawlq(
        "crawl", f"{fault}/status/503", "--frontier", redis_url, "--job", job,
        "--store", str(tmp_path / "s.db"), "--max-retries", "0", "--processes", "2",
        "--ignore-robots", *FAST, check=False,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr
    assert "crawlq: error: no page stored, every seed failed: dead-lettered 1 (http_503 1)" in (
        proc.stderr
    )


def test_a_crawl_that_stored_a_page_is_not_failed_by_its_dead_links(
    tmp_path: Path, fault: str
) -> None:
    store = tmp_path / "s.db"
    seeds = [f"{fault}/page/1", f"{fault}/status/500"]
    args = ["--store", str(store), "--max-depth", "0", "--max-retries", "0", *FAST]
    first = run_crawlq("crawl", *seeds, *args)  # one page stored, one seed dead: exit 0
    assert "dead-lettered: 1 (http_500 1)" in first.stdout
    run_crawlq("crawl", *seeds, *args)  # a re-run with nothing left to do: still 0


def test_a_job_name_without_a_shared_frontier_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_crawlq(
        "crawl", "http://127.0.0.1:9/", "--job", "docs", "--store", str(tmp_path / "s.db"),
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "job: a job name needs a shared --frontier" in proc.stderr
    assert not (tmp_path / "s.db").exists()


def test_a_bad_environment_value_is_named_by_its_variable(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "crawlq", "crawl", "http://127.0.0.1:9/",
         "--store", str(tmp_path / "s.db")],
        capture_output=True,
        text=True,
        env={**os.environ, "CRAWLQ_DELAY_S": "-2"},
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "CRAWLQ_DELAY_S: must not be negative" in proc.stderr


# -- issue 12: no credential is fetched, stored, logged or printed ---------------------------

SECRET = "s3cret"
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: refused at once


def _assert_no_secret(proc: subprocess.CompletedProcess[str]) -> None:
    shown = proc.stdout + proc.stderr
    assert SECRET not in shown and "cret@" not in shown, shown
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["worker", "--frontier", f"redis://:{SECRET}@127.0.0.1:6379/x", "--job", "j"], 2),
        (["worker", "--frontier", f"redsi://:{SECRET}@127.0.0.1:6379/0", "--job", "j"], 2),
        (["worker", "--frontier", f"redis:/:{SECRET}@127.0.0.1:6379/0", "--job", "j"], 2),
        (["seed", "http://h.test/", "--frontier", f"redis//:{SECRET}@{UNREACHABLE}/0",
          "--job", "j"], 2),
        (["seed", "http://h.test/", "--frontier", f"redis:{SECRET}@{UNREACHABLE}/0",
          "--job", "j"], 2),
        (["status", "--frontier", f"{SECRET}@{UNREACHABLE}", "--job", "j"], 2),
        (["seed", "http://h.test/", "--frontier", f"redis://:{SECRET}@[::1/0", "--job", "j"], 2),
        (["status", "--frontier", f"redis://:s3@{SECRET}@{UNREACHABLE}/0", "--job", "j"], 1),
        (["status", "--frontier", f"redis://u:{SECRET}@{UNREACHABLE}/0", "--job", "j"], 1),
        (["seed", "http://h.test/", "--frontier", f"rediss://:{SECRET}@{UNREACHABLE}/0",
          "--job", "j"], 1),
        (["crawl", "http://h.test/", "--store", f"host=127.0.0.1 password={SECRET} dbname=x"], 2),
        (["crawl", "http://h.test/", "--store", f"postgresql://u:s3@{SECRET}@{UNREACHABLE}/db",
          "--frontier", f"redis://:{SECRET}@{UNREACHABLE}/0", "--job", "j"], 1),
        (["crawl", "http://h.test/", "--store", f"mysql://u:{SECRET}@{UNREACHABLE}/db"], 2),
        (["export", "--store", f"dbname=x password={SECRET}"], 2),
        (["export", "--store", f"postgresql://u:{SECRET}@{UNREACHABLE}/db"], 1),
        (["export", "--store", f"postgresql://u:s3@{SECRET}@{UNREACHABLE}/db"], 1),
    ],
)  # fmt: skip
def test_no_error_path_prints_a_password(tmp_path: Path, args: list[str], code: int) -> None:
    """Issue 12.10: every error that names a frontier or store URL hides its password."""
    proc = run_crawlq(*args, check=False, cwd=tmp_path, timeout=60)
    assert proc.returncode == code, proc.stdout + proc.stderr
    _assert_no_secret(proc)
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after the password


def test_a_password_from_the_environment_is_not_printed_either(tmp_path: Path) -> None:
    env = {"CRAWLQ_FRONTIER": f"redis://:{SECRET}@127.0.0.1:6379/x"}
    proc = run_crawlq("worker", "--job", "j", check=False, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert "redis://:***@127.0.0.1:6379/x" in proc.stderr
    _assert_no_secret(proc)


def test_credentials_in_a_seed_url_are_never_sent_nor_stored(tmp_path: Path, fault: str) -> None:
    """Issue 12.9: http://user:secret@host/ is fetched without Basic auth, stored without them."""
    store = tmp_path / "crawl.db"
    seed = fault.replace("http://", f"http://user:{SECRET}@") + "/echo"
    proc = run_crawlq(
        "crawl", seed, "--store", str(store), "--store-body", "--ignore-robots", "-v",
        "--delay", "0",
    )  # fmt: skip
    _assert_no_secret(proc)
    (page,) = [json.loads(line) for line in export(store, "--body").splitlines()]
    assert (page["url"], page["final_url"], page["status"]) == (fault + "/echo",) * 2 + (200,)
    echoed = json.loads(base64.b64decode(page["body_b64"]))
    assert "authorization" not in echoed["headers"]
    with sqlite3.connect(store) as db:  # nothing anywhere in the file, frontier included
        dump = "\n".join(db.iterdump())
    assert SECRET not in dump and "user@" not in dump


# -- the private-address guard ---------------------------------------------------------------


def test_allow_private_lets_crawl_reach_a_non_seed_loopback_host(tmp_path: Path) -> None:
    """127.0.0.2 is linked from the seed host 127.0.0.1: refused by default, not with the flag."""
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "b.html").write_text("<title>b</title>")
    log2 = RequestLog()
    with ServerThread(make_static_app(tmp_path / "two", log=log2), host="127.0.0.2") as two:
        (tmp_path / "one").mkdir()
        (tmp_path / "one" / "a.html").write_text(f'<a href="{two.base_url}/b.html">b</a>')
        with ServerThread(make_static_app(tmp_path / "one"), host="127.0.0.1") as one:
            args = [f"{one.base_url}/a.html", "--allow-domain", "127.0.0.1"]
            args += ["--allow-domain", "127.0.0.2", *FAST]
            refused = tmp_path / "refused.db"
            proc = run_crawlq("crawl", *args, "--store", str(refused))
            assert "private_address" in proc.stdout
            assert log2.requests() == []
            filtered = json.loads(export(refused, "--what", "filtered"))
            assert (filtered["url"], filtered["reason"]) == (
                f"{two.base_url}/b.html",
                "private_address",
            )
            run_crawlq("crawl", *args, "--allow-private", "--store", str(tmp_path / "ok.db"))
            assert [r.path for r in log2.requests()] == ["/robots.txt", "/b.html"]
