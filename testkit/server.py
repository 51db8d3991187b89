"""The one launcher of `ticket-tools serve http`: for the tests, benchmarks and load harness.

The server listens on 127.0.0.1, on a port the OS picks, and names its address in one line
on stderr; `wait_for_address` reads it from the file stderr goes to. `ServerProcess` runs
any such server (the benchmark's SDK baseline prints the same line) and stops it with
SIGTERM, which `serve` handles cleanly, so coverage data is written. The load harness
starts its replicas through its own supervisor, with the same command and the same wait.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from testkit.tokens import AUDIENCE, ISSUER

READY_PREFIX = "ticket-tools: serving MCP on "
START_TIMEOUT_SECONDS = 90.0  # importing the SDK on a loaded 2-core machine takes a while
STOP_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05


# Benchmarks and load runs measure what a replica serves, not what it allows an agent: they
# turn the per-tenant and per-subject rate limits off.
NO_RATE_LIMITS = ("--tenant-rate", "0", "--subject-rate", "0")


def serve_http_command(jwks: Path | str, *extra: str) -> list[str]:
    """Return the command that serves MCP over HTTP, trusting `jwks` and testkit's issuer."""
    return [
        sys.executable, "-m", "ticket_tools.cli", "serve", "http", "127.0.0.1:0",
        "--jwks", str(jwks), "--issuer", ISSUER, "--audience", AUDIENCE, *extra,
    ]  # fmt: skip


def wait_for_address(
    log: Path, process: subprocess.Popen[bytes], timeout: float = START_TIMEOUT_SECONDS
) -> str:
    """Wait until `process` names its address in `log`; return the MCP URL it serves."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(READY_PREFIX):
                return line.removeprefix(READY_PREFIX).strip()
        if process.poll() is not None:
            break
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"the server did not start:\n{log.read_text(errors='replace')[-2000:]}")


class ServerProcess:
    """A server subprocess that names its address on stderr (into `log`), stopped with SIGTERM."""

    def __init__(
        self,
        command: Sequence[str],
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        nofile: int | None = None,
    ) -> None:
        self.log = log
        with log.open("wb") as stderr:
            self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, **(env or {})},
                # `nofile`: the server's open-file limit, lowered between fork and exec.
                preexec_fn=None if nofile is None else lambda: _limit_files(nofile),  # noqa: PLW1509
            )
        try:
            self.url = wait_for_address(log, self.process)
        except RuntimeError:
            self.process.kill()
            self.process.wait()
            raise

    def stderr(self) -> str:
        """Return what the server wrote on stderr so far."""
        return self.log.read_text(encoding="utf-8")

    def cpu_seconds(self) -> float:
        """Return the CPU time the server process has used so far (user + system, Linux)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> int:
        """Stop the server as an operator would (SIGTERM); return its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=STOP_TIMEOUT_SECONDS)


class HttpServer(ServerProcess):
    """`ticket-tools serve http` in a folder of its own: stderr and the audit log are there."""

    def __init__(
        self,
        folder: Path,
        jwks: Path | str,
        *extra: str,
        env: Mapping[str, str] | None = None,
        audit_to_stderr: bool = False,
        nofile: int | None = None,
        plain: bool = False,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "stderr.txt"
        self.audit_path = log if audit_to_stderr else folder / "audit.jsonl"
        audit = [] if audit_to_stderr else ["--audit-log", str(self.audit_path)]
        env = dict(env or {})
        if plain:  # as if uvicorn's `standard` extra were not installed
            env["PYTHONPATH"] = os.pathsep.join([str(hide_standard_extra(folder)), *sys.path])
        command = serve_http_command(jwks, *audit, *extra)
        super().__init__(command, log, env=env, nofile=nofile)

    @property
    def port(self) -> int:
        """Return the port the server listens on."""
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def audit_lines(self) -> list[dict[str, Any]]:
        """Return the audit log so far, one dict per line."""
        text = self.audit_path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


STANDARD_EXTRA = ("uvloop", "httptools")


def hide_standard_extra(folder: Path) -> Path:
    """Return a folder whose packages make `import uvloop` and `import httptools` fail.

    Put first on PYTHONPATH, it runs the server as if uvicorn's `standard` extra were not
    installed: the asyncio loop and the h11 parser.
    """
    hidden = folder / "without-standard-extra"
    for name in STANDARD_EXTRA:
        (hidden / name).mkdir(parents=True, exist_ok=True)
        (hidden / name / "__init__.py").write_text(
            f"raise ImportError('{name} hidden by the test')\n", encoding="utf-8"
        )
    return hidden


def _limit_files(count: int) -> None:
    """Lower the open-file limit of the process about to start (run between fork and exec)."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))
