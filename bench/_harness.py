"""Shared pieces of the benchmarks: loopback servers, measured runs, Redis probes, summaries.

Run by hand through the bench scripts; never part of the test suite. Every server and process
started here binds loopback only and is stopped by its PID. How runs are measured (CPU s,
peak RSS, other load, Redis CPU s) is in `_measure`, whose names are re-exported here.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _corpus import prepare_corpus

# re-exported: the bench scripts import these from here
from _measure import Run as Run
from _measure import loadavg as loadavg
from _measure import machine_busy_s as machine_busy_s
from _measure import machine_line as machine_line
from _measure import machine_speed_ms as machine_speed_ms
from _measure import run_measured as run_measured
from _measure import run_measured_group as run_measured_group
from _measure import tree_cpu_s as tree_cpu_s

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "postgresql-15-docs.tar.gz"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"


def crawlq_command(python: str | None = None) -> list[str]:
    """The ``crawlq`` console script next to ``python`` (default: this Python), else ``-m``."""
    python = python or sys.executable
    script = Path(python).parent / "crawlq"
    return [str(script)] if script.exists() else [python, "-m", "crawlq"]


def crawlq_package(python: str | None = None) -> Path:
    """The directory of the crawlq package that ``python`` imports (default: this Python)."""
    if python is None:
        import crawlq

        return Path(crawlq.__file__).parent
    out = subprocess.run(
        [python, "-c", "import crawlq; print(crawlq.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return Path(out).parent


def precompile_crawlq(python: str | None = None) -> None:
    """Byte-compile the crawlq package, as ``pip install`` does for every other package here.

    An editable install of crawlq is never compiled by pip, and where
    ``PYTHONDONTWRITEBYTECODE`` is set (as on the benchmark machine) Python does not cache
    the ``.pyc`` files either: each crawlq run would then compile ~60 modules at start-up
    (~50 ms) while Scrapy and aiohttp load theirs precompiled. Writes ``__pycache__`` next to
    the sources (git-ignored).
    """
    subprocess.run(
        [python or sys.executable, "-m", "compileall", "-q", str(crawlq_package(python))],
        check=True,
    )


_port_window: tuple[int, int] | None = None


def port_range(text: str) -> tuple[int, int]:
    """An argparse type: ``LO-HI``, the ports (both included) the bench's servers may listen on.

    Raises:
        ValueError: Not two ports in order within 1024-65535.
    """
    lo, sep, hi = text.partition("-")
    if not sep or not lo.isdigit() or not hi.isdigit() or not 1024 <= int(lo) <= int(hi) <= 65535:
        raise ValueError(f"not a port range: {text!r} (LO-HI, 1024-65535)")
    return int(lo), int(hi)


def set_port_window(window: tuple[int, int] | None) -> None:
    """Make `free_port` pick from ``window`` (``--port-range``); None: any port the OS gives."""
    global _port_window
    _port_window = window


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now, inside the port window when one is set.

    Raises:
        RuntimeError: Every port of the window is taken.
    """
    if _port_window is None:
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    lo, hi = _port_window
    for port in range(lo, hi + 1):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {lo}-{hi} on {host}")


def wait_for_port(port: int, host: str = "127.0.0.1", timeout_s: float = 15.0) -> None:
    """Block until ``host:port`` accepts connections.

    Raises:
        RuntimeError: Nothing listens there after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"server on {host}:{port} did not start within {timeout_s} s")


class ServerProcess:
    """A server subprocess on loopback, stopped with SIGTERM by its PID."""

    kind = "server"

    def __init__(self, cmd: Sequence[str], port: int, log: Path, url: str) -> None:
        self.url = url
        with log.open("w") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_for_port(port)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"{cmd[0]} did not start: {log.read_text()[-2000:]}") from None
        self.port = port

    def cpu_s(self) -> float:
        """CPU seconds used so far by the server and its worker processes."""
        return tree_cpu_s(self.proc.pid)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class CorpusServer(ServerProcess):
    """The corpus on 127.0.0.1: nginx if installed (own config, pid and logs), else aiohttp.

    ``corpus``: a directory or a tarball (see `_corpus`); the seed is its ``index.html``.
    """

    def __init__(self, corpus: Path, workdir: Path, force_aiohttp: bool = False) -> None:
        port = free_port()
        nginx = None if force_aiohttp else nginx_binary()
        self.corpus = prepare_corpus(corpus, workdir)
        if nginx:
            workdir.chmod(0o755)  # nginx's workers may run as another user
            conf = _nginx_conf(workdir, [(f"127.0.0.1:{port}", self.corpus.root)])
            cmd = [nginx, "-c", str(conf), "-p", str(workdir), "-g", "daemon off;"]
            self.kind = f"nginx ({nginx})"
        else:
            cmd = [*crawlq_command(), "serve", str(self.corpus.root), "--port", str(port)]
            cmd += ["--host", "127.0.0.1"]
            self.kind = "aiohttp (crawlq serve)"
        super().__init__(cmd, port, workdir / "server.log", f"http://127.0.0.1:{port}/index.html")


def _nginx_conf(workdir: Path, servers: Sequence[tuple[str, Path]]) -> Path:
    """An nginx config with one ``server`` per (``listen`` address, root) in ``workdir``."""
    blocks = "".join(f"  server {{ listen {listen}; root {root}; }}\n" for listen, root in servers)
    conf = workdir / "nginx.conf"
    conf.write_text(
        f"worker_processes 1; pid {workdir}/nginx.pid; error_log {workdir}/error.log;\n"
        "events { worker_connections 1024; }\n"
        "http { include /etc/nginx/mime.types; access_log off; sendfile on;\n"
        "  keepalive_requests 100000;\n"
        f"  client_body_temp_path {workdir}/tmp; proxy_temp_path {workdir}/tmp;\n"
        f"  fastcgi_temp_path {workdir}/tmp; uwsgi_temp_path {workdir}/tmp;\n"
        f"  scgi_temp_path {workdir}/tmp;\n{blocks}}}\n"
    )
    return conf


def nginx_binary() -> str | None:
    """The nginx executable, if installed."""
    return shutil.which("nginx") or _sbin("nginx")


class SyntheticNginxServer(ServerProcess):
    """`crawlq.testing.synthetic.SyntheticSite` written to files once and served by nginx.

    The same pages as `SyntheticServerProcess` (same seed, hosts and port scheme), each
    host's pages in its own root, one nginx ``server`` per loopback address: the server's CPU
    per request drops from ~0.1 ms (the asyncio server) to nginx's, which matters on a small
    machine where the server shares the cores with the crawler under test. Writing the files
    takes about 2 s per 10,000 pages (~0.24 GB); `stop` deletes them.
    """

    def __init__(self, n_pages: int, hosts: int, workdir: Path, seed: int = 1) -> None:
        from crawlq.testing.synthetic import SyntheticSite

        nginx = nginx_binary()
        if nginx is None:
            raise RuntimeError("nginx is not installed")
        port = free_port()
        self.hosts = [f"127.0.0.{k + 1}" for k in range(hosts)]
        self.n_pages = n_pages
        site = SyntheticSite(n_pages, [f"http://{h}:{port}" for h in self.hosts], seed)
        workdir.chmod(0o755)  # nginx's workers may run as another user
        site_dir = self.site_dir = workdir / f"synthetic-{n_pages}-{hosts}"
        roots = [site_dir / f"h{k}" for k in range(hosts)]
        for page_id in range(n_pages):
            path = site.path_of(page_id)
            target = roots[site.host_of(page_id)] / (path.lstrip("/") or "index.html")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(site.page(page_id))
        for root in roots:
            root.mkdir(parents=True, exist_ok=True)
            for folder in [root, *root.rglob("*")]:
                if folder.is_dir():
                    folder.chmod(0o755)
        site_dir.chmod(0o755)
        (workdir / "tmp").mkdir(exist_ok=True)
        conf = _nginx_conf(
            workdir, [(f"{h}:{port}", r) for h, r in zip(self.hosts, roots, strict=True)]
        )
        cmd = [nginx, "-c", str(conf), "-p", str(workdir), "-g", "daemon off;"]
        super().__init__(cmd, port, workdir / "nginx-synthetic.log", f"http://127.0.0.1:{port}/")
        self.kind = f"nginx ({n_pages} pages on {hosts} host(s), files written once)"

    def stop(self) -> None:
        """Stop nginx and delete the page files."""
        super().stop()
        shutil.rmtree(self.site_dir, ignore_errors=True)


class SyntheticServerProcess(ServerProcess):
    """`crawlq.testing.SyntheticServer` run by ``bench/serve_synthetic.py`` in its own process."""

    def __init__(self, n_pages: int, hosts: int, workdir: Path, seed: int = 1) -> None:
        port = free_port()
        cmd = [sys.executable, str(REPO / "bench" / "serve_synthetic.py"), str(n_pages)]
        cmd += ["--hosts", str(hosts), "--port", str(port), "--seed", str(seed)]
        log = workdir / f"synthetic-{n_pages}-{hosts}.log"
        super().__init__(cmd, port, log, f"http://127.0.0.1:{port}/")
        self.kind = f"synthetic server ({n_pages} pages, {hosts} host(s), asyncio)"
        self.n_pages = n_pages
        self.hosts = [f"127.0.0.{k + 1}" for k in range(hosts)]


def _sbin(name: str) -> str | None:
    path = Path("/usr/sbin") / name
    return str(path) if path.exists() else None


class RedisProbe:
    """CPU and command counters of one Redis server, and clean-up of crawlq job keys."""

    def __init__(self, url: str) -> None:
        import redis  # the bench's own dependency; crawlq confines redis to its frontier

        self.url = url
        self.client = redis.Redis.from_url(url)
        self.version = str(self.client.info("server")["redis_version"])

    def counters(self) -> tuple[float, int]:
        """(CPU seconds, commands processed) of the server so far."""
        cpu = self.client.info("cpu")
        stats = self.client.info("stats")
        used = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
        return used, int(stats["total_commands_processed"])

    def delete_job(self, job: str) -> int:
        """Delete every key of ``job`` (``crawlq:{job}:*``); returns how many."""
        keys = list(self.client.scan_iter(match=f"crawlq:{{{job}}}:*", count=1000))
        if keys:
            self.client.unlink(*keys)
        return len(keys)

    def delete_queue(self, broker_url: str, queue: str) -> int:
        """Delete a Celery queue's keys (every priority step, its bindings) on a Redis broker.

        Also deletes kombu's shared ``_kombu.binding_deadlines`` (the broadcast queues' expiry
        times), so only call it on a broker DB that the benchmark owns.
        """
        import redis

        client = redis.Redis.from_url(broker_url)
        try:
            keys = [*client.scan_iter(match=f"{queue}*", count=1000)]
            keys += client.scan_iter(match=f"_kombu.binding*.{queue}", count=1000)
            keys += client.scan_iter(match="_kombu.binding_deadlines")
            return int(client.unlink(*keys)) if keys else 0
        finally:
            client.close()

    def close(self) -> None:
        """Close the connection."""
        self.client.close()


def exported_pages(store: Path, workdir: Path, python: str | None = None) -> tuple[int, int]:
    """(page records, distinct URLs) in a crawlq store, via ``crawlq export --what pages``.

    ``python``: the install whose ``crawlq`` wrote the store (default: this Python's).
    """
    out = workdir / f"{store.name}.pages.jsonl"
    cmd = [*crawlq_command(python), "export", "--store", str(store), "--what", "pages"]
    cmd += ["-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return jsonl_counts(out, "url")


def jsonl_counts(path: Path, key: str) -> tuple[int, int]:
    """(lines, distinct values of ``key``) in a JSON Lines file (0, 0 if it does not exist)."""
    if not path.exists():
        return 0, 0
    lines = 0
    seen = set()
    with path.open() as f:
        for line in f:
            if line.strip():
                lines += 1
                seen.add(json.loads(line)[key])
    return lines, len(seen)


def summary(values: Sequence[float], fmt: str = ".2f") -> str:
    """``median [min-max]`` of ``values`` (``-`` when empty)."""
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


def install_state(python: str) -> str:
    """Where ``python`` imports crawlq from, with that tree's git state (`git_state`)."""
    package = crawlq_package(python)
    tree = package.parent.parent if package.parent.name == "src" else package
    return f"{tree} at {git_state(package)}"


def versions() -> dict[str, str]:
    """Versions of Python and the packages the benchmark compares."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for dist in ("crawlq", "scrapy", "aiohttp", "selectolax", "redis"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def git_state(tree: Path = REPO) -> str:
    """``<commit>`` of the git work tree holding ``tree`` (default: this bench's), plus
    ``+ uncommitted changes`` when it is dirty; ``not a git tree`` for an installed package."""
    head = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h"], capture_output=True, text=True
    ).stdout.strip()
    if not head:
        return "not a git tree"
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + (" + uncommitted changes" if dirty else " (clean tree)")


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a Markdown table."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
