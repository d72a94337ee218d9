"""``--header`` and ``--referer-policy`` as a user gives them: bad values exit 2 naming the
header; good ones reach the server from ``crawl``, and from a shared job's ``seed`` through a
``worker`` that only names the job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.testing import RequestLog, ServerThread, make_fault_app
from tests.conftest import run_crawlq

FAST = ["--delay", "0", "--retry-delay", "0.05", "-q"]


@pytest.fixture
def fault_log() -> RequestLog:
    return RequestLog()


@pytest.fixture
def fault(fault_log: RequestLog) -> Iterator[str]:
    with ServerThread(make_fault_app(fault_log)) as server:
        yield server.base_url


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("X-No-Colon", "header 'X-No-Colon' is not 'Name: value' (no colon)"),
        ("Bad Name: v", "header name 'Bad Name' is not an RFC 9110 token"),
        ("X-Evil: a\r\nInjected: 1", "the value of header X-Evil holds a character"),
        ("X-Nul: a\x01b", "the value of header X-Nul holds a character"),
        ("Host: other.test", "header Host may not be set: the HTTP client sets it"),
        ("Content-Length: 5", "header Content-Length may not be set"),
        ("Transfer-Encoding: chunked", "header Transfer-Encoding may not be set"),
        ("Connection: close", "header Connection may not be set"),
        ("Cookie: sid=1", "header Cookie may not be set: cookies come from the worker's jar"),
        ("Authorization: Bearer s3cret", "header Authorization may not be set: credentials"),
        ("User-Agent: x", "header User-Agent: set user_agent (--user-agent) instead"),
    ],
)
def test_a_bad_header_exits_2_naming_it(
    tmp_path: Path, fault: str, fault_log: RequestLog, header: str, says: str
) -> None:
    store = tmp_path / "s.db"
    cmd = ["crawl", f"{fault}/page/1", "--store", str(store), "--header", "X-Ok: 1"]
    proc = run_crawlq(*cmd, "--header", header, *FAST, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"--header: {says}" in proc.stderr, proc.stderr
    assert "(setting default_headers)" in proc.stderr
    assert "s3cret" not in proc.stderr + proc.stdout
    assert fault_log.count() == 0 and not store.exists()


def test_a_bad_header_variable_exits_2_naming_it(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "s.db"
    env = {"CRAWLQ_DEFAULT_HEADERS": "X-Ok: a, b\nHost: h"}  # one header per line
    proc = run_crawlq(
        "crawl", f"{fault}/page/1", "--store", str(store), *FAST, env=env, check=False
    )
    assert proc.returncode == 2
    assert "CRAWLQ_DEFAULT_HEADERS: header Host may not be set" in proc.stderr


def test_an_unknown_referer_policy_exits_2(tmp_path: Path, fault: str) -> None:
    store = tmp_path / "s.db"
    cmd = ["crawl", f"{fault}/page/1", "--store", str(store), "--referer-policy", "sometimes"]
    proc = run_crawlq(*cmd, *FAST, check=False)
    assert proc.returncode == 2
    assert "--referer-policy" in proc.stderr and "sometimes" in proc.stderr


def test_header_options_reach_the_server_from_crawl(
    tmp_path: Path, fault: str, fault_log: RequestLog
) -> None:
    store = tmp_path / "s.db"
    cmd = ["crawl", f"{fault}/page/1", "--store", str(store), "--max-depth", "1"]
    cmd += ["--header", "X-One: 1", "--header", "Accept-Language: fr, en;q=0.5"]
    run_crawlq(*cmd, *FAST, env={"CRAWLQ_DEFAULT_HEADERS": "X-Env: ignored"})
    assert fault_log.count() == 4  # robots.txt and pages 1-3
    for entry in fault_log.requests():
        assert (entry.header("X-One"), entry.header("X-Env")) == ("1", None)  # flags win
        assert entry.header("Accept-Language") == "fr, en;q=0.5"
    assert fault_log.headers("Referer", "/page/2") == [f"{fault}/page/1"]


def test_header_options_travel_with_a_shared_job_from_seed_to_worker(
    tmp_path: Path, fault: str, fault_log: RequestLog, redis_url: str, job: str
) -> None:
    store = tmp_path / "s.db"
    shared = ["--frontier", redis_url, "--job", job, "--store", str(store)]
    seed = ["seed", f"{fault}/page/1", *shared, "--max-depth", "1", "--delay", "0"]
    run_crawlq(*seed, "--header", "X-Job: seeded", "--referer-policy", "origin")
    run_crawlq("worker", *shared, "--exit-when-done", "-q")  # takes the job's headers
    assert fault_log.count() == 4
    assert fault_log.headers("X-Job") == ["seeded"] * 4
    assert fault_log.headers("Referer", "/page/2") == [f"{fault}/"]  # the job's policy
    assert fault_log.headers("Referer", "/page/1") == [None]
    # a worker whose own --header differs from the job's is refused, naming the setting
    proc = run_crawlq(
        "worker", *shared, "--header", "X-Job: other", "--exit-when-done", check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "the job was started with default_headers=" in proc.stderr, proc.stderr
