"""A throwaway PostgreSQL cluster for the tests and the benchmark: unix socket only, no fsync.

As root, initdb refuses to run, so the cluster's folder is given to the `postgres` user
and the server binaries run through `runuser -u postgres --`; as any other user they run
as that user. The cluster listens on no TCP port: only on a socket inside its own folder.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# The server binaries are not on PATH on Debian; the highest installed version is used.
BINARY_GLOB = "/usr/lib/postgresql/*/bin"
SUPERUSER = "postgres"
# Settings for a cluster whose data may be lost: never wait for the disk.
SERVER_OPTIONS = "-c listen_addresses='' -c fsync=off -c synchronous_commit=off"
SERVER_OPTIONS += " -c full_page_writes=off"


def find_binaries() -> Path | None:
    """Return the folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    on_path = shutil.which("pg_ctl")
    candidates = [Path(on_path).parent] if on_path else []
    candidates += sorted(
        (Path(folder) for folder in glob.glob(BINARY_GLOB)),
        key=lambda folder: [int(part) for part in folder.parent.name.split(".") if part.isdigit()],
        reverse=True,
    )
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


class ThrowawayCluster:
    """A PostgreSQL cluster in a new temporary folder: `start()` it, then `destroy()` it."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        # Under /tmp itself, not pytest's private folder: the postgres user must reach it.
        self.root = Path(tempfile.mkdtemp(prefix="ticket-tools-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        # Root may not run the server: the postgres user owns the folder and runs it.
        self._as_owner = ["runuser", "-u", SUPERUSER, "--"] if os.geteuid() == 0 else []
        if self._as_owner:
            shutil.chown(self.root, user=SUPERUSER)

    def dsn(self, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        """Return a connection string for `user` to `dbname`, over the cluster's socket."""
        return f"host={self.root} dbname={dbname} user={user}"

    def start(self) -> None:
        """Create the cluster on first use, start the server, and wait until it is ready."""
        if not self.data.exists():
            self._initdb()
        self._pg_ctl("start", "--log", str(self.log), "-o", f"{SERVER_OPTIONS} -k {self.root}")

    def _initdb(self) -> None:
        self._run(
            "initdb",
            "--pgdata",
            str(self.data),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C.UTF-8",
            "--no-sync",
        )

    def stop(self) -> None:
        """Stop the server at once (its data is throwaway), and wait until it is down."""
        self._pg_ctl("stop", "--mode", "immediate")

    def destroy(self) -> None:
        """Stop the server if it runs, then remove the folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, action: str, *options: str) -> None:
        self._run("pg_ctl", action, "--pgdata", str(self.data), "--wait", "--silent", *options)

    def _run(self, program: str, *args: str) -> None:
        command = [*self._as_owner, str(self.binaries / program), *args]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)
