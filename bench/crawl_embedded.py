"""Benchmark: crawl the PostgreSQL manual with the embedded engine, several rounds.

Serves the corpus on loopback (nginx when installed, else ``crawlq serve``), then runs
``crawlq crawl`` as a subprocess per round on a fresh store and reports, per round and as
median [min-max]: pages stored, wall seconds, pages/s, CPU seconds (user+sys) and peak RSS of
the crawler process, and the CPU seconds of the server.

    python bench/crawl_embedded.py [--rounds 5] [--corpus PATH.tar.gz] [--concurrency 16]

A round only counts when it stored exactly the expected number of pages (1,169 for the
manual). Run by hand; never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpora" / "postgresql-15-docs.tar.gz"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


class Server:
    """The corpus on loopback: nginx if installed (own config, pid and logs), else aiohttp."""

    def __init__(self, corpus: Path, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.kind = "nginx" if shutil.which("nginx") else "aiohttp (crawlq serve)"
        if shutil.which("nginx"):
            from crawlq.testing.static import unpack_corpus

            root = unpack_corpus(corpus, workdir / "site")
            workdir.chmod(0o755)  # nginx's workers run as another user
            conf = workdir / "nginx.conf"
            conf.write_text(
                f"worker_processes 1; pid {workdir}/nginx.pid; error_log {workdir}/error.log;\n"
                "events { worker_connections 1024; }\n"
                "http { include /etc/nginx/mime.types; access_log off; sendfile on;\n"
                "  keepalive_requests 100000;\n"
                f"  server {{ listen 127.0.0.1:{self.port}; root {root}; }} }}\n"
            )
            cmd = ["nginx", "-c", str(conf), "-p", str(workdir), "-g", "daemon off;"]
        else:
            cmd = [sys.executable, "-m", "crawlq", "serve", str(corpus), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/index.html"

    def cpu_s(self) -> float:
        """CPU seconds (user + sys) of the server and its worker processes so far."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid, ppid = int(stat.parent.name), int(fields[1])
            if self.proc.pid in (pid, ppid):
                total += int(fields[11]) + int(fields[12])
        return total / ticks

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def crawl_once(url: str, store: Path, concurrency: int) -> dict[str, float]:
    cmd = [
        sys.executable, "-m", "crawlq", "crawl", url, "--store", str(store), "-q",
        "--delay", "0", "--concurrency", str(concurrency),
        "--host-concurrency", str(concurrency),
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    out = proc.stdout.read() if proc.stdout else ""
    if status != 0:
        raise RuntimeError(f"crawl failed ({status}):\n{out}")
    pages = int(out.split("pages stored: ", 1)[1].split(" ", 1)[0])
    return {
        "pages": pages,
        "wall_s": wall,
        "pages_per_s": pages / wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
    }


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--expect", type=int, default=1169, help="pages a valid round stores")
    parser.add_argument("--json", action="store_true", help="print the raw rounds as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crawlq-bench-") as tmp:
        work = Path(tmp)
        server = Server(args.corpus, work)
        rounds = []
        try:
            for i in range(args.rounds):
                before = server.cpu_s()
                result = crawl_once(server.url, work / f"round{i}.db", args.concurrency)
                result["server_cpu_s"] = server.cpu_s() - before
                if result["pages"] != args.expect:
                    print(f"round {i}: {result['pages']} pages != {args.expect}; not counted")
                    continue
                rounds.append(result)
                print(
                    f"round {i}: {result['pages']:.0f} pages {result['wall_s']:.2f}s "
                    f"{result['pages_per_s']:.0f} pages/s cpu {result['cpu_s']:.2f}s "
                    f"rss {result['rss_mb']:.0f} MB server cpu {result['server_cpu_s']:.2f}s"
                )
        finally:
            server.stop()
    if not rounds:
        sys.exit("no valid round")
    print(f"\nserver: {server.kind}; concurrency {args.concurrency}; {len(rounds)} rounds")
    print("metric            median [min-max]")
    for key in ("wall_s", "pages_per_s", "cpu_s", "rss_mb", "server_cpu_s"):
        print(f"{key:16} {summary([r[key] for r in rounds])}")
    if args.json:
        print(json.dumps(rounds))


if __name__ == "__main__":
    main()
