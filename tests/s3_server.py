"""A real local S3-compatible server for tests: moto's server mode, on a free loopback port.

`MotoServer` runs ``python -m moto.server`` (``moto[server]``, in the ``test`` extra) as a
subprocess with its output to a log file (an open pipe could block it), waits until it
answers, and is stopped by PID. `s3_env` is the environment that points boto3 at it: the
standard AWS variables, fake credentials, no shared config files, and no instance metadata
lookup (boto3 must never try an address off this machine).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.services import free_port, need_service

ACCESS_KEY = "AKIACRAWLQTEST000001"
SECRET_KEY = "crawlq-test-secret-never-shown-0123456789"
"""The fake credentials; a test checks that this secret appears in no output."""


class MotoServer:
    """``moto.server`` on 127.0.0.1, stopped by PID (`stop`)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlq-moto-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The variables a process needs to use this server (`s3_env`)."""
        return s3_env(self.endpoint, self.dir)

    def start(self) -> None:
        try:
            import moto.server  # noqa: F401  (present: moto[server] is installed)
        except ImportError as exc:
            need_service(f"moto[server] is not installed ({exc}): pip install 'moto[server]'")
        log = open(self.dir / "moto.log", "wb")  # noqa: SIM115  (the child holds it)
        cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self._env()
        )
        log.close()
        deadline = time.monotonic() + 60
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                text = (self.dir / "moto.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"moto server on port {self.port} did not start:\n{text}")
            time.sleep(0.1)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return env

    def _answers(self) -> bool:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.endpoint + "/moto-api/data.json", timeout=1):
                return True
        except (urllib.error.URLError, OSError):
            return False

    def client(self):
        """A boto3 S3 client of this server (for the test's own checks)."""
        import boto3

        return boto3.session.Session(
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, region_name="us-east-1"
        ).client("s3", endpoint_url=self.endpoint)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


def s3_env(endpoint: str, home: Path) -> dict[str, str]:
    """The standard AWS variables for ``endpoint``, with fake credentials (module docstring)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
