"""Per-host basic and bearer auth from a worker's own settings file (README "Authentication").

Two loopback servers: 127.0.0.1 answers ``/private*`` only with the right ``Authorization``
(401 otherwise) and redirects ``/go`` to 127.0.0.2, which needs no credentials. Each
server's request log is the evidence of what was sent where; the password is looked for in
everything crawlq wrote or said.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from crawlq.frontier.redis import Keyspace
from crawlq.testing import RequestLog, ServerThread
from tests.conftest import run_crawlq

PASSWORD = "pw-Zq7-s3cret-0xA1"
USER = "alice"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
TOKEN = "tok-Kp9-s3cret-0xB2"
FAST = ["--delay", "0", "--retry-delay", "0.05"]


def _page(*links: str) -> web.Response:
    body = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")


def _protected_app(log: RequestLog, expected: str, other: str) -> web.Application:
    async def private(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != expected:
            return web.Response(
                status=401, text="no", headers={"WWW-Authenticate": 'Basic realm="t"'}
            )
        return _page("/private/2", "/go") if request.path == "/private" else _page()

    async def go(_request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{other}/landing")

    async def robots(_request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/private", private)
    app.router.add_get("/private/2", private)
    app.router.add_get("/go", go)
    app.router.add_get("/robots.txt", robots)
    return app


def _other_app(log: RequestLog) -> web.Application:
    async def landing(_request: web.Request) -> web.Response:
        return _page()

    app = web.Application(middlewares=[log.middleware()])
    app.router.add_get("/landing", landing)
    app.router.add_get("/", landing)
    return app


class Sites:
    """The protected site on 127.0.0.1 and the other one on 127.0.0.2, with their logs."""

    def __init__(self, expected: str) -> None:
        self.log = RequestLog()
        self.other_log = RequestLog()
        self._other = ServerThread(_other_app(self.other_log), host="127.0.0.2")
        self._site: ServerThread | None = None
        self.expected = expected

    def __enter__(self) -> Sites:
        self._other.__enter__()
        self._site = ServerThread(
            _protected_app(self.log, self.expected, self._other.base_url)
        ).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._site is not None:
                self._site.__exit__(None, None, None)
        finally:
            self._other.__exit__(None, None, None)

    @property
    def base(self) -> str:
        assert self._site is not None
        return self._site.base_url

    @property
    def other(self) -> str:
        return self._other.base_url


@pytest.fixture
def sites() -> Iterator[Sites]:
    with Sites(BASIC) as s:
        yield s


def _config(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "crawlq.toml"
    path.write_text(f'[hosts."127.0.0.1"]\n{table}\n')
    return path


BASIC_TABLE = f'auth_user = "{USER}"\nauth_password_env = "SITE_PW"'


def _pages(store: Path) -> dict[str, int]:
    out = run_crawlq("export", "--store", str(store)).stdout
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {r["url"]: r["status"] for r in records if "status" in r}


def _warc_requests(directory: Path) -> list[list[tuple[str, str]]]:
    heads = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "request":
                    heads.append(list(record.http_headers.headers))
    return heads


def _warc_bytes(directory: Path) -> bytes:
    return b"".join(gzip.decompress(p.read_bytes()) for p in sorted(directory.glob("*.warc.gz")))


def test_the_protected_host_answers_200_with_the_config_and_401_without(
    tmp_path: Path, sites: Sites
) -> None:
    seed = f"{sites.base}/private"
    bare = tmp_path / "bare.db"
    run_crawlq("crawl", seed, "--store", str(bare), *FAST, "-q")
    assert _pages(bare) == {seed: 401}  # no credentials: stored as what it is, no links
    assert sites.log.headers("Authorization", "/private") == [None]

    store = tmp_path / "s.db"
    config = _config(tmp_path, BASIC_TABLE)
    cmd = ["crawl", seed, "--store", str(store), "--config", str(config), *FAST, "-q"]
    run_crawlq(*cmd, "--max-depth", "1", env={"SITE_PW": PASSWORD})
    assert _pages(store)[seed] == 200
    assert _pages(store)[f"{sites.base}/private/2"] == 200
    assert sites.log.headers("Authorization", "/private") == [None, BASIC]
    assert sites.log.headers("Authorization", "/private/2") == [BASIC]


def test_a_bearer_token_is_sent_to_its_host(tmp_path: Path) -> None:
    with Sites(f"Bearer {TOKEN}") as s:
        store = tmp_path / "s.db"
        config = _config(tmp_path, 'auth_token_env = "SITE_TOKEN"')
        cmd = ["crawl", f"{s.base}/private", "--store", str(store), "--config", str(config)]
        run_crawlq(*cmd, *FAST, "--max-depth", "0", "-q", env={"SITE_TOKEN": TOKEN})
        assert _pages(store) == {f"{s.base}/private": 200}
        assert s.log.headers("Authorization", "/private") == [f"Bearer {TOKEN}"]


def test_credentials_go_to_their_host_only_not_on_a_redirect_to_another(
    tmp_path: Path, sites: Sites
) -> None:
    store = tmp_path / "s.db"
    config = _config(tmp_path, BASIC_TABLE)
    seeds = [f"{sites.base}/private", f"{sites.other}/"]  # both hosts in scope
    cmd = ["crawl", *seeds, "--store", str(store), "--config", str(config), *FAST, "-q"]
    run_crawlq(*cmd, env={"SITE_PW": PASSWORD})
    pages = _pages(store)
    assert pages[f"{sites.other}/landing"] == 200  # the redirect was followed
    assert sites.log.count("/go") == 1
    assert sites.log.headers("Authorization", "/go") == [BASIC]
    assert sites.log.headers("Authorization", "/robots.txt") == [BASIC]  # the same host
    other = sites.other_log.requests()
    assert {r.path for r in other} == {"/", "/landing", "/robots.txt"}
    assert [r.header("Authorization") for r in other] == [None] * len(other)


def _redis_values(client: Any, job: str) -> bytes:  # redis-py types every reply a union
    """Every key and value of ``job`` in Redis, concatenated."""
    out: list[bytes] = []
    for key in client.scan_iter(match=Keyspace(job).pattern()):
        kind = client.type(key).decode()
        out.append(key)
        if kind == "string":
            out.append(client.get(key) or b"")
        elif kind == "hash":
            out += [b for pair in client.hgetall(key).items() for b in pair]
        elif kind == "list":
            out += client.lrange(key, 0, -1)
        elif kind == "set":
            out += list(client.smembers(key))
        elif kind == "zset":
            out += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            for _id, fields in client.xrange(key):
                out += [b for pair in fields.items() for b in pair]
        else:
            raise AssertionError(f"key {key!r} of type {kind} not read")
    return b"\n".join(out)


def test_the_password_appears_in_no_output_store_redis_key_or_warc_record(
    tmp_path: Path, sites: Sites, redis_url: str, job: str
) -> None:
    secrets = [PASSWORD.encode(), BASIC.split()[1].encode()]
    config = _config(tmp_path, BASIC_TABLE)
    env = {"SITE_PW": PASSWORD}
    said = []
    # embedded: crawl with WARC, verbose, then status and export
    store, warc = tmp_path / "s.db", tmp_path / "warc"
    cmd = ["crawl", f"{sites.base}/private", "--store", str(store), "--warc", str(warc)]
    proc = run_crawlq(*cmd, "--config", str(config), *FAST, "-vv", env=env)
    said += [proc.stdout, proc.stderr]
    said.append(run_crawlq("export", "--store", str(store)).stdout)
    assert _pages(store)[f"{sites.base}/private/2"] == 200
    heads = _warc_requests(warc)
    auth = [v for head in heads for k, v in head if k.lower() == "authorization"]
    assert auth and set(auth) == {"[redacted]"}, heads  # pages of 127.0.0.1 were sent one
    # shared: seed and worker of a Redis job, both with the config; then status
    shared_store = tmp_path / "shared.db"
    shared = ["--frontier", redis_url, "--job", job, "--store", str(shared_store)]
    shared += ["--warc", str(warc)]  # a job setting: the worker gives the same
    seed = ["seed", f"{sites.base}/private", *shared, "--config", str(config), *FAST]
    said.append(run_crawlq(*seed, env=env).stderr)
    worker = ["worker", *shared, "--config", str(config), "--exit-when-done", "-vv"]
    proc = run_crawlq(*worker, env=env)
    said += [proc.stdout, proc.stderr]
    status = run_crawlq("status", "--frontier", redis_url, "--job", job, "--json")
    said += [status.stdout, status.stderr]
    assert _pages(shared_store)[f"{sites.base}/private/2"] == 200  # the worker had them
    client = redis.Redis.from_url(redis_url)
    try:
        in_redis = _redis_values(client, job)
    finally:
        client.close()
    assert b"SITE_PW" not in in_redis and b"auth_" not in in_redis  # not even the names
    everything = [
        ("output", "\n".join(said).encode()),
        ("embedded store", store.read_bytes()),
        ("shared store", shared_store.read_bytes()),
        ("redis", in_redis),
        ("warc", _warc_bytes(warc)),
        ("warc files", b"".join(p.read_bytes() for p in warc.iterdir())),
    ]
    for where, data in everything:
        for secret in secrets:
            assert secret not in data, f"{secret!r} found in {where}"


def test_warc_keep_auth_keeps_the_header_in_the_request_record(
    tmp_path: Path, sites: Sites
) -> None:
    store, warc = tmp_path / "s.db", tmp_path / "warc"
    config = _config(tmp_path, BASIC_TABLE)
    cmd = ["crawl", f"{sites.base}/private", "--store", str(store), "--warc", str(warc)]
    cmd += ["--config", str(config), "--max-depth", "0", "--warc-keep-auth", *FAST, "-q"]
    run_crawlq(*cmd, env={"SITE_PW": PASSWORD})
    heads = _warc_requests(warc)
    assert [v for head in heads for k, v in head if k.lower() == "authorization"] == [BASIC]
    assert PASSWORD.encode() not in store.read_bytes()  # the store never holds it


def test_a_missing_password_variable_exits_2_naming_host_and_variable(
    tmp_path: Path, sites: Sites
) -> None:
    store = tmp_path / "s.db"
    config = _config(tmp_path, f'auth_user = "{USER}"\nauth_password_env = "NO_SUCH_PW_VAR"')
    cmd = ["crawl", f"{sites.base}/private", "--store", str(store), "--config", str(config)]
    proc = run_crawlq(*cmd, *FAST, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "hosts.127.0.0.1.auth_password_env" in proc.stderr, proc.stderr
    assert "environment variable NO_SUCH_PW_VAR, which is not set" in proc.stderr
    assert sites.log.count() == 0 and not store.exists()


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('auth_user = "a"', "basic auth needs auth_user and auth_password_env"),
        ('auth_token_env = "T"\nauth_user = "a"', "auth_token_env (bearer) goes alone"),
        ('auth_password_env = "CRAWLQ_PW"\nauth_user = "a"', "must name an environment"),
        ('auth_password_env = "PW"\nauth_user = "a:b"', "may not hold a colon"),
        ('auth_pasword_env = "PW"', "unknown key 'auth_pasword_env'"),
    ],
)
def test_a_bad_auth_table_exits_2_naming_it(
    tmp_path: Path, sites: Sites, table: str, says: str
) -> None:
    config = _config(tmp_path, table)
    cmd = ["crawl", f"{sites.base}/private", "--store", str(tmp_path / "s.db")]
    proc = run_crawlq(*cmd, "--config", str(config), *FAST, check=False, env={"PW": "x"})
    assert proc.returncode == 2, proc.stderr
    assert "hosts.127.0.0.1" in proc.stderr and says in proc.stderr, proc.stderr
    assert sites.log.count() == 0


def test_credentials_are_refused_from_the_command_line_environment_name(
    tmp_path: Path, sites: Sites
) -> None:
    env = {"CRAWLQ_HOST_AUTH": '[["127.0.0.1", "a", "PW", null]]', "PW": "x"}
    cmd = ["crawl", f"{sites.base}/private", "--store", str(tmp_path / "s.db"), *FAST]
    proc = run_crawlq(*cmd, check=False, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "CRAWLQ_HOST_AUTH: unknown setting" in proc.stderr, proc.stderr


def test_the_worker_processes_of_crawl_get_the_credentials_and_keep_auth(
    tmp_path: Path, sites: Sites, redis_url: str, job: str
) -> None:
    store, warc = tmp_path / "s.db", tmp_path / "warc"
    config = _config(tmp_path, BASIC_TABLE)
    cmd = ["crawl", f"{sites.base}/private", "--frontier", redis_url, "--job", job]
    cmd += ["--store", str(store), "--config", str(config), "--processes", "2"]
    cmd += ["--warc", str(warc), "--warc-keep-auth", "--max-depth", "1", *FAST, "-q"]
    run_crawlq(*cmd, env={"SITE_PW": PASSWORD})
    assert _pages(store)[f"{sites.base}/private/2"] == 200  # fetched by a child
    assert sites.log.headers("Authorization", "/private/2") == [BASIC]
    heads = _warc_requests(warc)
    assert BASIC in [v for head in heads for k, v in head if k.lower() == "authorization"]
