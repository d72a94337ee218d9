"""Serve the synthetic site (`crawlq.testing.synthetic.SyntheticServer`) until Ctrl-C or SIGTERM.

    python bench/serve_synthetic.py 20000 --hosts 8 --port 8100

Prints the root URL and the exact number of reachable pages on stderr. Pages are generated
per request from (seed, page id); nothing is written to disk. Loopback addresses only
(127.0.0.1 .. 127.0.0.H).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from crawlq.testing.synthetic import SyntheticServer


async def _serve(server: SyntheticServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server.bind()
    print(
        f"serving {server.site.reachable_pages} reachable pages on {server.hosts} host(s); "
        f"root {server.site.root_url}",
        file=sys.stderr,
        flush=True,
    )
    await server.serve(stop)
    print(f"answered {server.requests} requests", file=sys.stderr)


def main() -> None:
    """Parse the command line and serve."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", type=int, help="number of pages (all reachable from /)")
    parser.add_argument("--hosts", type=int, default=1, help="loopback hosts 127.0.0.1..H")
    parser.add_argument("--port", type=int, default=8100, help="TCP port on every host")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(_serve(SyntheticServer(args.pages, args.hosts, args.port, args.seed)))


if __name__ == "__main__":
    main()
