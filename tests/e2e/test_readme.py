"""The README's commands, run as a user runs them: documented commands cannot drift.

Every fenced ``sh`` and ``python`` block of README.md carries a marker on the line before it:
``<!-- test: NAME -->`` names the scenario below that runs it (a scenario may run several
blocks of one name, in order), ``<!-- test: none (why) -->`` says why it cannot run (a
placeholder, a synopsis, the test command itself). A block without a marker fails
`test_every_block_names_a_scenario`, so new documentation comes with its test.

Each scenario runs the block's commands with ``bash -c``, in a temporary directory of its own,
with this venv's ``bin`` first on PATH (so ``crawlq``, ``celery``, ``python`` and ``warcio``
are the installed ones), after the substitutions of `SUBSTITUTIONS` and with the environment
of `ENVIRONMENT`: nothing else of a command is changed. The site is the PostgreSQL manual
served by ``crawlq serve`` on a free port (a generated site of 600 pages without the
corpus); Redis is a private ``redis-server`` of the scenario's own; PostgreSQL a database of
its own, dropped afterwards. Every process a scenario starts runs in a process group of its
own and is stopped by its PID (the group's id) in teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tarfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from crawlq.testing import ServerThread, fault_state, make_fault_app
from crawlq.testing.static import generate_site
from tests.conftest import REPO, corpus_tarball
from tests.services import RedisServer, free_port, need_service

pytestmark = pytest.mark.e2e

README = REPO / "README.md"
BIN = Path(sys.executable).parent  # this venv's bin: crawlq, celery, python, warcio
MANUAL_PAGES = 1169  # HTML pages of the PostgreSQL 15 manual, every one linked from index.html
GENERATED_PAGES = 600  # the site `crawlq serve --generate 600` serves without the corpus
BLOCK_LANGUAGES = ("sh", "python")  # the blocks that must carry a marker


# -- what is changed in the README's commands before they run: this table, nothing else ------


@dataclass
class Places:
    """Where this scenario's services are."""

    site: str  # http://127.0.0.1:PORT
    redis: str | None = None
    postgres: str | None = None
    fault_host: str = "127.0.0.1"

    @property
    def site_port(self) -> int:
        return int(self.site.rsplit(":", 1)[1])

    def need(self, value: str | None, what: str) -> str:
        if value is None:
            raise AssertionError(f"this scenario has no {what}, but its commands name one")
        return value


SUBSTITUTIONS: dict[str, Callable[[Places], str]] = {
    # the site the README serves on port 8000: ours, on a free port
    "http://127.0.0.1:8000": lambda p: p.site,
    "--port 8000": lambda p: f"--port {p.site_port}",
    # the quick tour's example host: the same loopback site
    "https://docs.example.test": lambda p: p.site,
    # the README's Redis: a private redis-server of the scenario
    "redis://127.0.0.1:6379/0": lambda p: p.need(p.redis, "Redis"),
    # the README's PostgreSQL database: one of the scenario's own, dropped afterwards
    "postgresql://postgres@127.0.0.1:5432/crawl": lambda p: p.need(p.postgres, "PostgreSQL"),
    # the dead-letter example's host: the loopback fault server
    "fragile.example.org": lambda p: p.fault_host,
    # the Redis quick start's gentle politeness (5 requests/s: 4 minutes for the manual)
    "--delay 0.2 --host-concurrency 2": lambda p: "--delay 0 --host-concurrency 16",
}

# Commands that give no --delay (the quick tour, the dead-letter crawl) would wait 1 s between
# requests to our own loopback servers: politeness off, through crawlq's documented variable.
ENVIRONMENT = {"CRAWLQ_DELAY_S": "0"}


def substitute(text: str, places: Places) -> str:
    for old, new in SUBSTITUTIONS.items():
        if old in text:
            text = text.replace(old, new(places))
    return text


# -- the README's blocks ---------------------------------------------------------------------

FENCE = re.compile(r"^\s*```(?P<lang>[\w+-]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<name>[a-z0-9-]+)\s*(?:\((?P<why>.*)\))?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    text: str
    scenario: str | None  # None: no marker
    why: str = ""

    def commands(self) -> list[str]:
        """The block's commands: its lines, less blank ones and comments."""
        joined = self.text.replace("\\\n", " ")
        return [ln.strip() for ln in joined.splitlines() if ln.strip() and ln[:1] != "#"]


def parse_blocks(markdown: str) -> list[Block]:
    """Every fenced block of ``markdown``, with the marker of the line before it."""
    blocks: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and FENCE.match(lines[end]) is None:
            end += 1
        before = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
        marker = MARKER.match(before)
        indent = len(lines[i]) - len(lines[i].lstrip())
        body = "\n".join(ln[indent:] for ln in lines[i + 1 : end])
        blocks.append(
            Block(
                lang=opening["lang"],
                line=i + 1,
                text=body + "\n",
                scenario=marker["name"] if marker else None,
                why=(marker["why"] or "").strip() if marker else "",
            )
        )
        i = end + 1
    return blocks


def marker_problems(blocks: list[Block]) -> list[str]:
    """Why these blocks' markers are not in order: one line per problem."""
    problems = []
    for block in blocks:
        if block.lang not in BLOCK_LANGUAGES:
            continue
        where = f"README.md:{block.line} (```{block.lang})"
        if block.scenario is None:
            problems.append(f"{where}: no <!-- test: NAME --> or <!-- test: none (why) --> marker")
        elif block.scenario == "none" and not block.why:
            problems.append(f"{where}: <!-- test: none --> needs the reason in parentheses")
    return problems


def readme_blocks() -> list[Block]:
    return parse_blocks(README.read_text(encoding="utf-8"))


def scenario_commands(name: str, places: Places, lang: str = "sh") -> list[str]:
    blocks = [b for b in readme_blocks() if b.scenario == name and b.lang == lang]
    assert blocks, f"README.md has no ```{lang} block marked <!-- test: {name} -->"
    return [substitute(cmd, places) for b in blocks for cmd in b.commands()]


# Every scenario this module runs; the README's markers must name exactly these.
SCENARIOS = {
    "setup",
    "quick-tour",
    "inspect",
    "export",
    "dead-letters",
    "docs-spider",
    "spider-example",
    "quickstart-redis",
    "celery",
    "postgres-warc",
}


def test_every_block_names_a_scenario() -> None:
    assert marker_problems(readme_blocks()) == []


def test_the_markers_name_exactly_the_scenarios_of_this_module() -> None:
    named = {b.scenario for b in readme_blocks() if b.scenario not in (None, "none")}
    assert named - SCENARIOS == set(), "README markers with no scenario in test_readme.py"
    assert SCENARIOS - named == set(), "scenarios whose README block is gone"


def test_a_block_without_a_marker_is_reported() -> None:
    text = (
        "Intro.\n\n<!-- test: quick-tour -->\n```sh\ncrawlq crawl X\n```\n\n"
        "Then:\n\n```sh\ncrawlq export\n```\n\n<!-- test: none -->\n```python\nx = 1\n```\n\n"
        "  ```toml\n  a = 1\n  ```\n"
    )
    blocks = parse_blocks(text)
    assert [(b.lang, b.scenario) for b in blocks] == [
        ("sh", "quick-tour"),
        ("sh", None),
        ("python", "none"),
        ("toml", None),
    ]
    assert blocks[0].commands() == ["crawlq crawl X"]
    assert marker_problems(blocks) == [
        "README.md:10 (```sh): no <!-- test: NAME --> or <!-- test: none (why) --> marker",
        "README.md:15 (```python): <!-- test: none --> needs the reason in parentheses",
    ]


def test_ci_runs_the_readme_test_command() -> None:
    (block,) = [b for b in readme_blocks() if b.scenario == "none" and "pytest" in b.text]
    found = re.search(r"\.venv/bin/(python -m pytest -q\b[^&;|\n]*)", block.text)
    assert found, block.text
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert found[1].strip() in ci  # the same command, in the venv .ci/run activates


# -- running commands as a shell does ----------------------------------------------------------


@dataclass
class Ran:
    command: str
    code: int
    out: str
    err: str

    def ok(self) -> Ran:
        assert self.code == 0, self.report()
        return self

    def report(self) -> str:
        return f"{self.command}\nexit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


@dataclass
class Started:
    """A command running in the background, in a process group of its own."""

    command: str
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> Ran:
        """Send ``sig`` to the command's process group (as Ctrl-C does) and wait for it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.command!r} did not stop {timeout}s after {sig!r}"
            ) from None
        return Ran(self.command, code, self.out.read_text(), self.err.read_text())

    def kill(self) -> None:
        """SIGKILL whatever is left of the process group (teardown)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@dataclass
class Shell:
    """``bash -c`` in ``cwd`` with this venv first on PATH and no CRAWLQ_* of the test's own."""

    cwd: Path
    logs: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env.pop("PYTHONPATH", None)
        return {**env, **ENVIRONMENT, **self.extra_env}

    def start(self, command: str) -> Started:
        n = len(self.started)
        out, err = self.logs / f"{n}.out", self.logs / f"{n}.err"
        with out.open("wb") as fout, err.open("wb") as ferr:
            proc = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.cwd,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=fout,
                stderr=ferr,
                start_new_session=True,  # its own process group: stopped by its PID
            )
        started = Started(command, proc, out, err)
        self.started.append(started)
        return started

    def run(self, command: str, timeout: float = 300) -> Ran:
        started = self.start(command)
        try:
            code = started.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            started.kill()
            raise AssertionError(
                f"{command!r} did not end within {timeout}s\n{started.output()[-4000:]}"
            ) from None
        return Ran(command, code, started.out.read_text(), started.err.read_text())

    def close(self) -> None:
        for started in self.started:
            started.kill()


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    cwd, logs = tmp_path / "cwd", tmp_path / "logs"
    cwd.mkdir()
    logs.mkdir()
    sh = Shell(cwd, logs)
    try:
        yield sh
    finally:
        sh.close()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def refuses(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


# -- the services ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    base: str
    pages: int  # HTML pages reachable from index.html
    manual: bool  # the PostgreSQL manual (else a generated site)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``crawlq serve`` of the corpus (or of a generated site), on a free loopback port."""
    tarball = corpus_tarball()
    if tarball is None and os.environ.get("CI") == "true":
        raise RuntimeError("CI must crawl the real corpus (CRAWLQ_TEST_CORPUS)")
    what = [str(tarball)] if tarball else ["--generate", str(GENERATED_PAGES)]
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "crawlq"), "serve", *what, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers(f"{base}/index.html") or proc.poll() is not None, "crawlq serve")
        assert proc.poll() is None, log.read_text()
        pages = MANUAL_PAGES if tarball else GENERATED_PAGES
        yield Site(base, pages, tarball is not None)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def redis_server() -> Iterator[str]:
    """A private redis-server: the README's job names (``docs``) and DB 0 are its own."""
    if shutil.which("redis-server") is None:
        need_service("no redis-server binary for a private Redis")
    server = RedisServer(appendonly=False)
    server.start()
    try:
        yield server.url
    finally:
        server.cleanup()


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[str]:
    """A database of the test's own on the test PostgreSQL, dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"crawlq_readme_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urllib.parse.urlsplit(postgres_url)
    try:
        yield urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


def sqlite_count(db: Path, table: str = "pages") -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def crawl_the_site(shell: Shell, site: Site) -> None:
    """What the scenarios that start "after the crawl of Set-up" need in their directory."""
    shell.run(f"crawlq crawl {site.base}/index.html --delay 0 --host-concurrency 16 -q").ok()
    assert sqlite_count(shell.cwd / "crawlq.db") == site.pages


def stored_line(pages: int, total: int | None = None) -> str:
    return f"pages stored: {pages} this run, {pages if total is None else total} in store"


# -- the scenarios -------------------------------------------------------------------------------


def fresh_checkout(dest: Path) -> Path:
    """A copy of the repository's tracked files (as a clone has them), and ../shared/corpora."""
    repo = dest / "crawlq"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True, timeout=60
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    corpora = dest / "shared" / "corpora"
    corpora.mkdir(parents=True)
    tarball = corpus_tarball()
    if tarball is not None:
        (corpora / "postgresql-15-docs.tar.gz").symlink_to(tarball.resolve())
    else:  # the same shape without the corpus: a generated site in a postgresql-15/ folder
        generate_site(dest / "postgresql-15", n_pages=GENERATED_PAGES)
        with tarfile.open(corpora / "postgresql-15-docs.tar.gz", "w:gz") as tar:
            tar.add(dest / "postgresql-15", arcname="postgresql-15")
    return repo


@pytest.mark.timeout(900)
def test_setup(tmp_path: Path) -> None:
    """The first block of "Set-up", verbatim but for the port, in a fresh copy of the repo."""
    repo = fresh_checkout(tmp_path)
    port = free_port()
    (command,) = scenario_commands("setup", Places(site=f"http://127.0.0.1:{port}"))
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -q .")
    logs = tmp_path / "logs"
    logs.mkdir()
    sh = Shell(repo, logs)
    try:
        ran = sh.run(command, timeout=800).ok()
    finally:
        sh.close()
    pages = MANUAL_PAGES if corpus_tarball() else GENERATED_PAGES
    assert stored_line(pages) in ran.out, ran.report()
    assert sqlite_count(repo / "crawlq.db") == pages
    exported = [json.loads(line) for line in (repo / "pages.jsonl").read_text().splitlines()]
    assert len(exported) == len({p["url"] for p in exported}) == pages
    assert {p["status"] for p in exported} == {200}
    wait_for(lambda: refuses(port), "the server stopped by `kill $server`", timeout=30)


@pytest.mark.timeout(300)
def test_quick_tour(shell: Shell, site: Site) -> None:
    cmds = scenario_commands("quick-tour", Places(site=site.base))
    assert [c.split("#")[0].split()[:3] for c in cmds] == [
        ["crawlq", "crawl", f"{site.base}/"],
        ["crawlq", "crawl", f"{site.base}/"],
        ["crawlq", "export", "--what"],
        ["crawlq", "export", "--what"],
        ["crawlq", "export", "--what"],
    ]
    pages = site.pages + 1  # "/" and "/index.html" are two URLs of the same page
    assert stored_line(pages) in shell.run(cmds[0]).ok().out
    assert sqlite_count(shell.cwd / "crawlq.db") == pages
    assert stored_line(0, pages) in shell.run(cmds[1]).ok().out  # resumed: nothing fetched again
    shell.run(cmds[2]).ok()
    rows = (shell.cwd / "pages.csv").read_text().splitlines()
    assert len(rows) == pages + 1
    assert {"url", "status", "title"} <= set(rows[0].split(","))
    dead, errors = shell.run(cmds[3]).ok(), shell.run(cmds[4]).ok()
    assert dead.out == errors.out == ""  # nothing failed, no spider raised


@pytest.mark.timeout(300)
def test_inspect(shell: Shell, site: Site) -> None:
    crawl_the_site(shell, site)
    stored, as_json, unknown = (
        shell.run(c).ok() for c in scenario_commands("inspect", Places(site=site.base))
    )
    assert re.search(r"state\s+stored", stored.out), stored.report()
    assert re.search(r"status\s+200", stored.out), stored.report()
    if site.manual:
        assert re.search(r"title\s+PostgreSQL 15\.\d+ Documentation", stored.out)
    story = json.loads(as_json.out)
    assert story["url"] == f"{site.base}/a/../index.html"
    assert story["canonical_url"] == f"{site.base}/index.html"
    assert (story["state"], story["details"]["status"]) == ("stored", 200)
    assert re.search(r"state\s+never seen", unknown.out), unknown.report()


@pytest.mark.timeout(300)
def test_export(shell: Shell, site: Site) -> None:
    import pyarrow.parquet as pq

    crawl_the_site(shell, site)
    to_parquet, to_head = scenario_commands("export", Places(site=site.base))
    ran = shell.run(to_parquet).ok()
    assert f"wrote {site.pages} pages rows to pages.parquet" in ran.err
    assert pq.read_table(shell.cwd / "pages.parquet").num_rows == site.pages
    ran = shell.run(to_head).ok()
    lines = ran.out.splitlines()
    assert len(lines) == 3 and all(json.loads(line)["url"] for line in lines), ran.report()
    assert ran.err == ""  # stopped by head without a message


@pytest.mark.timeout(300)
def test_dead_letters(shell: Shell) -> None:
    app = make_fault_app()
    state = fault_state(app)
    state.switch_down = True  # /switch/NAME answers 503
    with ServerThread(app) as fault:
        listed, dry_run, replay = scenario_commands("dead-letters", Places(site=fault.base_url))
        # a crawl in which the host was down: two dead letters (http_503), one page
        seeds = f"{fault.base_url}/page/1 {fault.base_url}/switch/a {fault.base_url}/switch/b"
        crawl = f"crawlq crawl {seeds} --max-depth 0 --max-retries 0"
        ran = shell.run(crawl)
        assert "dead-lettered: 2 (http_503 2)" in ran.out, ran.report()
        db = shell.cwd / "crawlq.db"
        ran = shell.run(listed).ok()
        assert "2 dead letters" in ran.out and "http_503" in ran.out, ran.report()
        ran = shell.run(dry_run).ok()
        assert "would replay 2 dead letters (http_503 2); nothing changed" in ran.out, ran.report()
        assert sqlite_count(db, "dead_letters") == 2
        state.switch_down = False  # "it is back up: retry"
        ran = shell.run(replay).ok()
        assert "replayed 2 dead letters (http_503 2)" in ran.out, ran.report()
        # "for an embedded crawl, the next `crawlq crawl` on the store does"
        assert stored_line(2, 3) in shell.run(crawl).ok().out
        assert sqlite_count(db, "dead_letters") == 0
        assert sqlite_count(db) == 3


def items_of(ran: Ran) -> list[dict[str, object]]:
    return [json.loads(line) for line in ran.out.splitlines()]


@pytest.mark.timeout(300)
def test_docs_spider(shell: Shell, site: Site) -> None:
    """The spider of "Spiders", saved as the README says and crawled with its command."""
    (spider,) = [b for b in readme_blocks() if b.scenario == "docs-spider"]
    assert spider.lang == "python"
    (shell.cwd / "docs_spider.py").write_text(substitute(spider.text, Places(site=site.base)))
    command = "crawlq crawl --spider docs_spider.py:DocsSpider --delay 0 --host-concurrency 16"
    assert f"`{command}`" in README.read_text(encoding="utf-8")
    ran = shell.run(command).ok()
    pages = sqlite_count(shell.cwd / "crawlq.db")
    # every HTML page, and what else its <a> tags name (follow() does not skip extensions)
    assert pages >= site.pages and stored_line(pages) in ran.out, ran.report()
    items = items_of(shell.run("crawlq export --what items").ok())
    assert len(items) == len({i["url"] for i in items}) == pages  # one item per page
    assert sum(1 for i in items if i["title"]) == site.pages  # the HTML pages have a title


@pytest.mark.timeout(300)
def test_spider_example(shell: Shell, site: Site) -> None:
    (shell.cwd / "examples").symlink_to(REPO / "examples")  # the repository's root as cwd
    crawl, export = scenario_commands("spider-example", Places(site=site.base))
    assert stored_line(site.pages) in shell.run(crawl).ok().out
    items = items_of(shell.run(export).ok())
    assert len(items) == site.pages and {i["_spider"] for i in items} == {"pg_docs"}
    if site.manual:
        commands = {i["command"]: i for i in items if "command" in i}
        assert commands["ABORT"]["purpose"] == "abort the current transaction"


def status_json(shell: Shell, redis: str, job: str) -> dict[str, object]:
    ran = shell.run(f"crawlq status --frontier {redis} --job {job} --json").ok()
    return dict(json.loads(ran.out))


@pytest.mark.timeout(600)
def test_quickstart_redis(shell: Shell, site: Site, redis_server: str) -> None:
    """Seed, workers, status: the job is crawled once, the watch ends with Ctrl-C (exit 0)."""
    places = Places(site=site.base, redis=redis_server)
    seed, worker, watch = scenario_commands("quickstart-redis", places)
    assert (seed.split()[:2], worker.split()[:2]) == (["crawlq", "seed"], ["crawlq", "worker"])
    ran = shell.run(seed).ok()
    assert "queued 1 new of 1 in job docs" in ran.out + ran.err, ran.report()
    db = shell.cwd / "crawlq.db"
    workers = shell.start(worker)
    wait_for(
        lambda: sqlite_count(db) == site.pages or workers.proc.poll() is not None,
        "the workers store the site",
        timeout=400,
    )
    assert workers.proc.poll() is None or workers.proc.returncode == 0, workers.output()
    wait_for(
        lambda: status_json(shell, redis_server, "docs")["queued"] == 0,
        "nothing left queued",
    )
    watching = shell.start(watch)
    wait_for(
        lambda: re.search(rf"stored pages\s+{site.pages}\b", watching.output()) is not None,
        "status --watch shows the stored pages",
        timeout=60,
    )
    assert watching.stop(signal.SIGINT).code == 0, watching.output()
    if workers.proc.poll() is None:  # workers wait for more work until stopped
        stopped = workers.stop(signal.SIGINT, timeout=120)
        assert stopped.code == 0, stopped.report()
        assert "worker stopped" in stopped.out + stopped.err
    assert sqlite_count(db) == site.pages


@pytest.mark.timeout(600)
def test_celery(shell: Shell, site: Site, redis_server: str) -> None:
    """A Celery worker as the README starts it, `crawl --engine celery`, then scrape.apply_async."""
    places = Places(site=site.base, redis=redis_server)
    worker, crawl, send = scenario_commands("celery", places)
    assert "celery -A crawlq.celery worker" in worker and "--engine celery" in crawl
    assert "scrape" in send
    workers = shell.start(worker)
    try:
        ran = shell.run(crawl, timeout=300)
        assert ran.code == 0, ran.report() + "\nworker:\n" + workers.output()[-3000:]
        db = shell.cwd / "crawlq.db"
        assert sqlite_count(db) == site.pages
        shell.run(send).ok()
        wait_for(lambda: sqlite_count(db) == site.pages + 1, "the page sent with apply_async")
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = conn.execute(
                "SELECT status FROM pages WHERE url = ?", (f"{site.base}/index.html?from=celery",)
            ).fetchone()
        finally:
            conn.close()
        assert row == (200,)
    finally:
        workers.stop(signal.SIGTERM, timeout=60)


@pytest.mark.timeout(600)
def test_postgres_warc(shell: Shell, site: Site, redis_server: str, postgres_db: str) -> None:
    import psycopg
    from warcio.archiveiterator import ArchiveIterator

    places = Places(site=site.base, redis=redis_server, postgres=postgres_db)
    crawl, export, check = scenario_commands("postgres-warc", places)
    ran = shell.run(crawl, timeout=400).ok()
    assert f"pages stored: {site.pages} this run" in ran.out, ran.report()
    with psycopg.connect(postgres_db) as conn:
        row = conn.execute("SELECT count(*) FROM crawlq.pages").fetchone()
    assert row is not None and row[0] == site.pages
    shell.run(export).ok()
    pages = [json.loads(line) for line in (shell.cwd / "pages.jsonl").read_text().splitlines()]
    assert len(pages) == site.pages
    warc = shell.cwd / "warc"
    assert not list(warc.glob("*.open"))  # every file closed and renamed
    for page in pages[:: max(1, len(pages) // 20)]:  # a record at each page's offset
        with (warc / str(page["warc_file"])).open("rb") as f:
            f.seek(int(page["warc_offset"]))
            record = next(iter(ArchiveIterator(f)))
            assert record.rec_type == "response"
            assert record.rec_headers.get_header("WARC-Target-URI") == page["url"]
    shell.run(check).ok()
