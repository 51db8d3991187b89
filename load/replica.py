"""One `ticket-tools serve http --stateless` process on 127.0.0.1, on a port the OS picks."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from load.supervise import Supervisor, cpu_seconds, rss_kib
from testkit.server import NO_RATE_LIMITS, serve_http_command, wait_for_address


class Replica:
    """A server replica: started, found on its port, killed or stopped by the supervisor."""

    def __init__(
        self,
        number: int,
        supervisor: Supervisor,
        jwks: Path,
        store_args: Sequence[str],
        *,
        label: str = "replica",
    ) -> None:
        self.number = number
        self._supervisor = supervisor
        self._jwks = jwks
        self._store_args = tuple(store_args)
        self._generation = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._retired_cpu = 0.0
        """CPU seconds of this replica's earlier (killed) processes."""
        self.url = ""
        self._label = label
        self.log = supervisor.folder / f"{label}-{number}.log"

    def start(self) -> None:
        """Start the server process; `wait_ready` finds its address."""
        self._generation += 1
        folder = self._supervisor.folder
        audit = folder / f"{self._label}-audit-{self.number}-{self._generation}.jsonl"
        args = serve_http_command(
            self._jwks, "--stateless", "--audit-log", str(audit), *NO_RATE_LIMITS, *self._store_args
        )
        self.log.write_text("")
        self.process = self._supervisor.start(args, log=self.log)

    def wait_ready(self) -> str:
        """Wait for the line naming the address; return the MCP URL."""
        if self.process is None:
            raise RuntimeError(f"replica {self.number} was not started")
        self.url = wait_for_address(self.log, self.process)
        return self.url

    def kill(self) -> None:
        """Kill the replica at once (SIGKILL): the fault a crashed host causes."""
        if self.process is not None:
            self._retired_cpu += cpu_seconds(self.process.pid)
            self._supervisor.stop(self.process, kill=True)

    def stop(self) -> None:
        """Stop the replica (SIGTERM, then SIGKILL) once its phase is over."""
        if self.process is not None:
            self._retired_cpu += cpu_seconds(self.process.pid)
            self._supervisor.stop(self.process)

    def running(self) -> bool:
        """Return whether the process is alive."""
        return self.process is not None and self.process.poll() is None

    def cpu_seconds(self) -> float:
        """Return the CPU seconds all this replica's processes have used (a running total)."""
        if self.process is None or not self.running():
            return self._retired_cpu
        return self._retired_cpu + cpu_seconds(self.process.pid)

    def rss_kib(self) -> int | None:
        """Return the current process's resident set size in KiB."""
        return None if self.process is None else rss_kib(self.process.pid)
