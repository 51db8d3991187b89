"""A throwaway PostgreSQL 15 cluster: unix socket only, fsync off, in the run's folder.

As root, initdb refuses to run: the cluster's folder is given to the `postgres` user and
the server binaries run through `runuser -u postgres --`. The cluster listens on no TCP
address at all (`listen_addresses=''`); clients reach it through a socket in its folder.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

from load.supervise import Supervisor, children, cpu_seconds

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
PORT = 5432  # names the socket file only; the socket folder is private to this run
SERVER_USER = "postgres"
PG_CTL_TIMEOUT_SECONDS = 60
MAX_CONNECTIONS = 200


class Cluster:
    """One PostgreSQL server and its data folder, stopped and removed by the supervisor."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor
        self.root = supervisor.folder / "pg"
        self.data = self.root / "data"
        self.socket = self.root / "socket"
        self.log = self.root / "server.log"
        self.pid: int | None = None
        self._retired_cpu = 0.0
        """CPU seconds of the server processes before its last stop."""

    def create(self) -> None:
        """Make the folder and run initdb (trust authentication, on the socket only)."""
        self.root.mkdir()
        self.socket.mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam(SERVER_USER)
            # The run's folder is private; the server user only needs to pass through it.
            self._supervisor.folder.chmod(0o711)
            for path in (self.root, self.socket):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._supervisor.on_cleanup(self.stop_now)
        self._server_command(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", SERVER_USER, "--no-sync",
            "-E", "UTF8", "--locale", "C.UTF-8",
        )  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-c listen_addresses='' -k {self.socket} -p {PORT} -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off "
            f"-c max_connections={MAX_CONNECTIONS}"
        )
        self._server_command(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
            "-t", str(PG_CTL_TIMEOUT_SECONDS), "start",
        )  # fmt: skip
        pid_line = (self.data / "postmaster.pid").read_text().splitlines()[0]
        self.pid = int(pid_line)
        self._supervisor.adopt(self.pid)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (fast: end sessions, then shut down cleanly) and wait."""
        self._retired_cpu = self.cpu_seconds()
        self._server_command(
            "pg_ctl", "-D", str(self.data), "-m", mode, "-w",
            "-t", str(PG_CTL_TIMEOUT_SECONDS), "stop",
        )  # fmt: skip
        self.pid = None

    def stop_now(self) -> None:
        """Stop the server immediately if it runs (the supervisor's cleanup)."""
        if self.pid is not None and (self.data / "postmaster.pid").exists():
            self.stop("immediate")

    def sql(self, statement: str, *, database: str = "postgres") -> str:
        """Run SQL as the superuser through psql; return its unaligned output."""
        psql = shutil.which("psql") or str(PG_BIN / "psql")
        done = subprocess.run(  # noqa: S603 - our own fixed arguments
            [psql, "-h", str(self.socket), "-p", str(PORT), "-U", SERVER_USER, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-c", statement],
            capture_output=True, text=True, check=False, timeout=PG_CTL_TIMEOUT_SECONDS,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def dsn(self, user: str, database: str) -> str:
        """Return a libpq connection string for `user` on `database`, over the socket."""
        return f"host={self.socket} port={PORT} dbname={database} user={user}"

    def cpu_seconds(self) -> float:
        """Return the CPU seconds of the server and all its backends so far, over restarts.

        The postmaster waits for every backend that exits, so its reaped-children time
        holds the ended ones; the live ones are read one by one.
        """
        if self.pid is None:
            return self._retired_cpu
        live = sum(cpu_seconds(pid) for pid in children(self.pid))
        return self._retired_cpu + cpu_seconds(self.pid, reaped=True) + live

    def _server_command(self, program: str, *args: str) -> None:
        command = [str(PG_BIN / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        started = time.monotonic()
        done = subprocess.run(  # noqa: S603 - our own fixed arguments
            command, capture_output=True, text=True, check=False,
            timeout=PG_CTL_TIMEOUT_SECONDS + 10,
        )  # fmt: skip
        if done.returncode != 0:
            seconds = time.monotonic() - started
            raise RuntimeError(f"{program} failed after {seconds:.1f} s: {done.stderr.strip()}")
