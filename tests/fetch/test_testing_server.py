"""crawlq.testing: ServerThread, the static site app, unpack_corpus and RequestLog helpers."""

from __future__ import annotations

import http.client
import io
import tarfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from crawlq.testing import (
    RequestLog,
    ServerThread,
    make_fault_app,
    make_static_app,
    unpack_corpus,
)


def _get(url: str, timeout_s: float = 5.0) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def _raw_status(base_url: str, path: str) -> int:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_server_thread_serves_and_stops() -> None:
    with ServerThread(make_fault_app()) as server:
        assert server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        status, content_type, body = _get(server.base_url + "/page/1")
        base_url = server.base_url
    assert status == 200
    assert content_type.startswith("text/html")
    assert b"<title>Page 1</title>" in body
    with pytest.raises(urllib.error.URLError):
        _get(base_url + "/page/1", timeout_s=1)
    with pytest.raises(RuntimeError):
        _ = server.port


def test_server_thread_on_another_loopback_address() -> None:
    with ServerThread(make_fault_app(), host="127.0.0.2") as server:
        assert server.base_url.startswith("http://127.0.0.2:")
        assert _get(server.base_url + "/status/404")[0] == 404


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "example.com", "::"])
def test_server_thread_refuses_non_loopback(host: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        ServerThread(make_fault_app(), host=host)


def test_server_thread_port_in_use() -> None:
    with ServerThread(make_fault_app()) as first:
        second = ServerThread(make_fault_app(), port=first.port)
        with pytest.raises(OSError):
            second.start()


def test_server_thread_stops_despite_a_slow_request() -> None:
    server = ServerThread(make_fault_app(), shutdown_timeout_s=0.2)
    server.start()
    errors: list[BaseException] = []

    def slow_client() -> None:
        try:
            _get(server.base_url + "/delay/30", timeout_s=10)
        except Exception as exc:  # the server goes away mid-request
            errors.append(exc)

    client = threading.Thread(target=slow_client)
    client.start()
    time.sleep(0.1)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 2.0
    client.join(5)
    assert not client.is_alive()
    assert errors


def test_request_log_concurrency_and_gaps() -> None:
    log = RequestLog()
    with ServerThread(make_fault_app(log)) as server:
        host = f"127.0.0.1:{server.port}"
        threads = [
            threading.Thread(target=_get, args=(server.base_url + "/delay/0.3",)) for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert log.max_concurrency(host) == 3
        log.clear()
        assert log.min_gap_s(host) is None
        _get(server.base_url + "/page/1")
        time.sleep(0.15)
        _get(server.base_url + "/page/2")
        assert log.max_concurrency(host) == 1
        gap = log.min_gap_s(host)
        assert gap is not None and gap >= 0.15
        assert log.count("/page/2") == 1
        assert log.count(host="other:1") == 0
        (entry,) = log.requests(path="/page/1")
        assert entry.method == "GET"
        assert entry.end_s is not None and entry.end_s >= entry.start_s


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text("<title>Home</title>")
    (root / "sub" / "index.html").write_text("<title>Sub</title>")
    (root / "style.css").write_text("body { color: red }")
    (root / "data.json").write_text("{}")
    (tmp_path / "secret.txt").write_text("outside the root")
    return root


def test_static_app(site: Path) -> None:
    log = RequestLog()
    with ServerThread(make_static_app(site, log)) as server:
        status, content_type, body = _get(server.base_url + "/")
        assert (status, body) == (200, b"<title>Home</title>")
        assert content_type.startswith("text/html")
        assert _get(server.base_url + "/sub/")[2] == b"<title>Sub</title>"
        assert _raw_status(server.base_url, "/sub") == 301
        assert _get(server.base_url + "/sub")[2] == b"<title>Sub</title>"  # urllib follows
        assert _get(server.base_url + "/style.css")[1].startswith("text/css")
        assert _get(server.base_url + "/data.json")[1].startswith("application/json")
        assert _get(server.base_url + "/missing.html")[0] == 404
        assert _raw_status(server.base_url, "/../secret.txt") == 404
        assert _raw_status(server.base_url, "/%2e%2e/secret.txt") == 404
        assert log.count("/") == 1


def test_static_app_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        make_static_app(tmp_path / "nope")


def _tarball(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_unpack_corpus(tmp_path: Path) -> None:
    tarball = _tarball(
        tmp_path / "docs.tar.gz",
        {"docs/html/index.html": b"<title>Docs</title>", "docs/html/a/index.html": b"a"},
    )
    root = unpack_corpus(tarball, tmp_path / "out")
    assert root == tmp_path / "out" / "docs" / "html"
    assert (root / "index.html").read_bytes() == b"<title>Docs</title>"


def test_unpack_corpus_refuses_escaping_members(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path / "evil.tar.gz", {"../evil.html": b"x", "index.html": b"y"})
    with pytest.raises(tarfile.TarError):
        unpack_corpus(tarball, tmp_path / "out")
    assert not (tmp_path / "evil.html").exists()


def test_unpack_corpus_without_index(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path / "empty.tar.gz", {"readme.txt": b"x"})
    with pytest.raises(FileNotFoundError):
        unpack_corpus(tarball, tmp_path / "out")


def test_pace_violations_allow_one_late_send_but_not_a_faster_pace() -> None:
    from crawlq.testing.request_log import _Entry

    def log_of(starts: list[float]) -> RequestLog:
        log = RequestLog()
        log._entries = [
            _Entry(s, s + 0.01, "GET", f"/{i}", "h:1", None) for i, s in enumerate(starts)
        ]
        return log

    # delay 0.2: the second request was sent 0.08 s late, so one gap is 0.12 s
    assert log_of([0.0, 0.28, 0.4, 0.6, 0.8]).pace_violations("h:1", 0.2, 0.1) == []
    # a delay kept at 0.15 s: every gap is within the room for one late send, the pace is not
    fast = log_of([0.0, 0.15, 0.3, 0.45, 0.6]).pace_violations("h:1", 0.2, 0.1)
    assert (0, 4, 0.6) in [(i, j, round(s, 3)) for i, j, s in fast]
    assert log_of([0.0]).pace_violations("h:1", 0.2, 0.1) == []
