"""The failover phase of `make load` (PostgreSQL only): the primary lost mid-feed, promotion.

On a primary and one hot standby of their own (testkit's `pg_basebackup -R`, through
load/cluster.py) holding TENANTS generated tenants, two `serve http` replicas read through
libpq multi-host DSNs: replica 0 `host=STANDBY,PRIMARY target_session_attrs=prefer-standby`
(it reads the standby), replica 1 `host=PRIMARY,STANDBY target_session_attrs=any` (it reads
the primary until it goes). `ticket-tools apply` writes the churn feed (load/churn.py: one
versioned change per churned key of every tenant, shuffled) from a FIFO, paced over
FEED_SHARE of the phase, through `host=PRIMARY,STANDBY target_session_attrs=read-write`.
At KILL_AT_SECONDS the primary's postmaster and every process it has get SIGKILL (the host
lost); the harness, as an orchestrator would, then promotes the standby (`pg_ctl promote`)
and starts `apply` again with the whole feed from its first line through the same DSN, which
now reaches the new primary: the versions make every change already there stale, so the
replay is exact.

Every call is checked by the churn checker (each key before or after its one change); only
`unavailable` may be an error (report.problems). The figures: the seconds from the kill to
the first good read of replica 1's clients and to the slowest client's, to the promotion,
and to the first good write (the first of the replay's changes committed on the new primary,
polled every POLL_SECONDS); the changes fed before the kill and those the standby held when
promoted (their difference: the open batch and what asynchronous replication had not yet
sent); what the first `apply` did when its primary died; the replay's summary; and whether
the new primary's rows equal the oracle's. Before the phase, `apply` of the same feed is
timed on the pair with asynchronous and with synchronous replication
(`synchronous_standby_names='*'`, `synchronous_commit=remote_apply`).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import psycopg

from load.churn import after_records, check_phase, feed_lines, write_paced
from load.client import Client
from load.cluster import Cluster
from load.records import write_records_file
from load.replica import Replica
from load.report import first_pages_ms
from load.stage import DATABASE, OWNER, READER, Phase, Stage
from load.supervise import Supervisor, say

CLIENTS = 16
DEFAULT_SECONDS = 40.0
KILL_AT_SECONDS = 12.0
FEED_SHARE = 0.6  # the feed would take 24 s of 40: the kill lands halfway through it
TENANTS = 40  # x 250 churned keys: a feed of 10,000 changes
POLL_SECONDS = 0.05
APPLY_EXIT_SECONDS = 30.0
THROUGHPUT_ROUNDS = 2
THROUGHPUT_COPIES = 3  # the feed three times over, at rising versions: 30,000 changes a run
# Two clusters, a base backup, three imports and the throughput runs, on a busy machine.
SETUP_ALLOWANCE_SECONDS = 150.0
CHECK_ALLOWANCE_SECONDS = 10.0
# "local": a commit waits for its own WAL, not for the standby (asynchronous replication).
COMMIT_MODES = {"async": "local", "sync": "remote_apply"}
FEED_DATABASES = {"async": "feed_async", "sync": "feed_sync"}
_CHANGED_SQL = (
    "SELECT (SELECT count(*) FROM tickets WHERE version > 0) + (SELECT count(*) FROM tombstones)"
)
_READERS_SQL = f"SELECT count(*) FROM pg_stat_activity WHERE usename = '{READER}'"  # noqa: S608
_ROWS_SQL = "SELECT tenant, id, title, status FROM tickets ORDER BY tenant, id"

_SUMMARY = re.compile(r": ([0-9]+) upserted, ([0-9]+) deleted, ([0-9]+) stale\Z")

Row = tuple[str, str, str, str]


def budget_seconds(seconds: float) -> float:
    """Return what the phase may take: its setup, `seconds` of clients, and the check."""
    return SETUP_ALLOWANCE_SECONDS + seconds + CHECK_ALLOWANCE_SECONDS


def run(stage: Stage, seconds: float) -> None:
    """Set up the pair, time `apply` both ways, then run the phase and stop its services."""
    say(f"failover: a primary and a standby of their own, {TENANTS} tenants")
    pair = Pair(stage.supervisor)
    pair.setup(stage)
    lines = feed_lines(range(TENANTS), stage.per_tenant, str(stage.seed))
    throughput = measure_apply(stage.supervisor, pair, lines)
    say("failover: apply " + ", ".join(f"{key} {value}" for key, value in throughput.items()))
    replicas = [
        Replica(number, stage.supervisor, stage.jwks, ["--postgres", dsn], label="failover")
        for number, dsn in enumerate(pair.reader_dsns())
    ]
    for replica in replicas:
        replica.start()
    for replica in replicas:
        replica.wait_ready()
    try:
        result = stage.phase(
            "failover",
            CLIENTS,
            seconds,
            fault=Failover(pair, lines, stage.per_tenant),
            check=check_phase,
            replicas=replicas,
            clusters=[pair.primary, pair.standby],
            tenants=TENANTS,
        )
    finally:
        for replica in replicas:
            replica.stop()
    result.fault |= throughput
    pair.standby.stop_now()


class Pair:
    """The phase's primary and hot standby, in the run's folder, owned by the supervisor."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.primary = Cluster(supervisor, "failover-primary")
        self.standby = Cluster(supervisor, "failover-standby")

    def setup(self, stage: Stage) -> None:
        """Start the primary, import the tenants into each database, copy it into the standby."""
        primary = self.primary
        primary.create()
        primary.start()
        primary.create_database(OWNER, READER, DATABASE)
        records = self.supervisor.folder / "failover-records.json"
        write_records_file(records, TENANTS, stage.per_tenant)
        for mode, database in [("async", DATABASE), *FEED_DATABASES.items()]:
            if database != DATABASE:
                primary.sql(f"CREATE DATABASE {database} OWNER {OWNER}")
            target = ["--postgres", primary.dsn(OWNER, database), "--grant-to", READER]
            stage.import_file(records, target, f"failover-import-{database}.log")
            primary.sql(f"ALTER DATABASE {database} SET synchronous_commit = {COMMIT_MODES[mode]}")
        records.unlink()
        self.standby.start_standby_of(primary)

    def reader_dsns(self) -> list[str]:
        """Return replica 0's DSN (the standby first) and replica 1's (the primary first)."""
        p, s = self.primary.root, self.standby.root
        common = f"dbname={DATABASE} user={READER}"
        return [
            f"host={s},{p} {common} target_session_attrs=prefer-standby",
            f"host={p},{s} {common} target_session_attrs=any",
        ]

    def writer_dsn(self, database: str = DATABASE) -> str:
        """Return the writers' DSN: both hosts, whichever accepts writes."""
        hosts = f"{self.primary.root},{self.standby.root}"
        return f"host={hosts} dbname={database} user={OWNER} target_session_attrs=read-write"


def measure_apply(supervisor: Supervisor, pair: Pair, lines: Sequence[bytes]) -> dict[str, Any]:
    """Time `apply` of THROUGHPUT_COPIES x `lines` with asynchronous and synchronous replication.

    Each round applies, to each of two databases imported alike, the feed at versions above
    the last round's, so every line is applied, never stale. Synchronous: the primary's
    `synchronous_standby_names='*'` and that database's `synchronous_commit=remote_apply`
    (a commit returns once the standby has replayed it). The figure is changes per second of
    the apply process's wall time, its interpreter's start included; the median of the rounds.
    """
    primary = pair.primary
    primary.sql("ALTER SYSTEM SET synchronous_standby_names = '*'")
    primary.sql("SELECT pg_reload_conf()")
    state = _wait_for_sync(primary)
    rates: dict[str, list[float]] = {mode: [] for mode in FEED_DATABASES}
    try:
        for number in range(THROUGHPUT_ROUNDS):
            feed = supervisor.folder / f"failover-throughput-{number}.jsonl"
            first = number * THROUGHPUT_COPIES + 1
            feed.write_bytes(b"".join(versioned(lines, range(first, first + THROUGHPUT_COPIES))))
            for mode, database in FEED_DATABASES.items():
                seconds = _timed_apply(supervisor, feed, pair.writer_dsn(database), mode)
                rates[mode].append(THROUGHPUT_COPIES * len(lines) / seconds)
            feed.unlink()
    finally:
        primary.sql("ALTER SYSTEM RESET synchronous_standby_names")
        primary.sql("SELECT pg_reload_conf()")
    return {
        "replication_sync_state": state,
        "apply_async_per_s": round(statistics.median(rates["async"])),
        "apply_sync_per_s": round(statistics.median(rates["sync"])),
    }


def versioned(lines: Sequence[bytes], versions: range) -> list[bytes]:
    """Return the churn feed once per version of `versions`, each copy at that version.

    >>> versioned([b'{"op": "delete", "key": "t000:TKT-001", "version": 1}\\n'], range(2, 4))
    [b'{"op": "delete", "key": "t000:TKT-001", "version": 2}\\n', b'{"op": "delete", "key": "t000:TKT-001", "version": 3}\\n']
    """  # noqa: E501 - a doctest line
    return [
        line.replace(b'"version": 1', b'"version": %d' % version, 1)
        for version in versions
        for line in lines
    ]


def _wait_for_sync(primary: Cluster) -> str:
    """Wait until the standby is the primary's synchronous one; return its sync_state."""
    deadline = time.monotonic() + 30.0
    state = ""
    while time.monotonic() < deadline:
        state = primary.sql("SELECT string_agg(sync_state, ',') FROM pg_stat_replication")
        if state == "sync":
            break
        time.sleep(POLL_SECONDS)
    return state


def _timed_apply(supervisor: Supervisor, feed: Path, dsn: str, mode: str) -> float:
    log = supervisor.folder / f"failover-throughput-{mode}.log"
    started = time.monotonic()
    process = supervisor.start(_apply_command(feed, dsn), log=log)
    status = process.wait(timeout=max(1.0, supervisor.remaining()))
    seconds = time.monotonic() - started
    if status != 0:
        raise RuntimeError(f"apply ({mode}) exited {status}:\n{log.read_text()[-2000:]}")
    return seconds


def _apply_command(feed: Path, dsn: str) -> list[str]:
    return [sys.executable, "-m", "ticket_tools.cli", "apply", str(feed), "--postgres", dsn]


class Failover:
    """The phase's fault: the feed, the kill, the promotion, the replay, and the end state."""

    def __init__(self, pair: Pair, lines: Sequence[bytes], per_tenant: int) -> None:
        self._pair = pair
        self._lines = lines
        self._per_tenant = per_tenant

    async def __call__(self, phase: Phase) -> None:
        """Feed, kill, promote, replay; after the phase, compare the end state."""
        supervisor, pair, lines = phase.supervisor, self._pair, self._lines
        folder = supervisor.folder
        fifo = folder / "failover.fifo"
        os.mkfifo(fifo)
        replay = folder / "failover-feed.jsonl"
        replay.write_bytes(b"".join(lines))
        first_log = folder / "failover-apply-1.log"
        first = supervisor.start(_apply_command(fifo, pair.writer_dsn()), log=first_log)
        stop = threading.Event()
        fed: list[int] = []

        async def feed() -> None:
            spread = phase.seconds * FEED_SHARE
            written = await anyio.to_thread.run_sync(
                write_paced, fifo, lines, spread, stop, abandon_on_cancel=True
            )
            fed.append(written)

        async with anyio.create_task_group() as group:
            group.start_soon(feed)
            await phase.sleep_until(KILL_AT_SECONDS)
            # Proof that replica 1 read from the primary: its readers' sessions there.
            on_primary = await anyio.to_thread.run_sync(pair.primary.sql, _READERS_SQL)
            killed = time.monotonic()
            pair.primary.kill()
            stop.set()
        await anyio.to_thread.run_sync(pair.standby.promote)
        promoted = time.monotonic()
        held = await anyio.to_thread.run_sync(self._changed)
        second_log = folder / "failover-apply-2.log"
        second = supervisor.start(_apply_command(replay, pair.writer_dsn()), log=second_log)
        samples = await self._poll_writes(second, held)
        first_status = await anyio.to_thread.run_sync(_exit_status, supervisor, first)
        second_status = await anyio.to_thread.run_sync(_exit_status, supervisor, second)
        await phase.ended.wait()
        rows = await anyio.to_thread.run_sync(self._rows)
        phase.figures["killed_at_s"] = round(killed - phase.started, 1)
        phase.figures["reader_sessions_on_primary"] = int(on_primary)
        phase.figures |= recovery_figures(phase.clients, killed, promoted, held, samples)
        replay_summary = _last_line(second_log)
        phase.figures |= {
            "fed_before_kill": fed[0],
            "lost_at_failover": fed[0] - held,
            "first_apply": f"exit {first_status}: {_last_line(first_log)}",
            "replay_status": second_status,
            "replay_summary": replay_summary.rpartition(": ")[2],
            "replay_as_expected": second_status == 0
            and replay_exact(replay_summary, len(lines), held),
            "end_state_as_oracle": rows == expected_rows(TENANTS, self._per_tenant),
        }

    async def _poll_writes(
        self, replay: subprocess.Popen[bytes], held: int
    ) -> list[tuple[float, int]]:
        """Sample the changes on the new primary until one more than `held` is there."""
        samples: list[tuple[float, int]] = []
        while True:
            done = replay.poll() is not None
            count = await anyio.to_thread.run_sync(self._changed)
            samples.append((time.monotonic(), count))
            if count > held or done:
                return samples
            await anyio.sleep(POLL_SECONDS)

    def _superuser(self) -> str:
        return self._pair.standby.dsn("postgres", DATABASE)

    def _changed(self) -> int:
        """Return how many keys the new primary holds at their changed version."""
        with psycopg.connect(self._superuser()) as connection:
            row = connection.execute(_CHANGED_SQL).fetchone()
        return 0 if row is None else int(row[0])

    def _rows(self) -> list[Row]:
        with psycopg.connect(self._superuser()) as connection:
            return [(r[0], r[1], r[2], r[3]) for r in connection.execute(_ROWS_SQL).fetchall()]


def recovery_figures(
    clients: Sequence[Client],
    killed: float,
    promoted: float,
    held: int,
    samples: Sequence[tuple[float, int]],
) -> dict[str, Any]:
    """Return the seconds from the kill to the promotion, the first good read and write.

    A good read: an "ok" answer to a call sent after the kill; replica 1's clients read the
    primary until then. A good write: the first poll `samples` (time, changed keys) counts
    more changed keys than the standby `held` when it was promoted. None: never seen.
    """
    readers = [client for client in clients if client.can_read]
    on_primary = [client for client in readers if client.replica == 1]
    first, _ = first_pages_ms(on_primary, killed, sent_after=True)
    _, slowest = first_pages_ms(readers, killed, sent_after=True)
    written = next((at for at, count in samples if count > held), None)
    return {
        "promoted_after_s": round(promoted - killed, 2),
        "first_good_read_s": _seconds(first),
        "all_clients_read_after_s": _seconds(slowest),
        "first_good_write_s": None if written is None else round(written - killed, 2),
        "held_at_promotion": held,
    }


def expected_rows(tenants: int, per_tenant: int) -> list[Row]:
    """Return the oracle's end state: every ticket of `tenants` tenants after the churn feed."""
    rows = []
    for index in range(tenants):
        for key, ticket in after_records(index, per_tenant).items():
            rows.append((key.partition(":")[0], ticket["id"], ticket["title"], ticket["status"]))
    return sorted(rows)


def _seconds(milliseconds: float | None) -> float | None:
    return None if milliseconds is None else round(milliseconds / 1000, 2)


def replay_exact(summary: str, lines: int, held: int) -> bool:
    """Say whether a replay's summary line counts every line once and as stale exactly the
    `held` changes the new primary had: "...: 4000 upserted, 1000 deleted, 5000 stale"."""
    found = _SUMMARY.search(summary)
    if found is None:
        return False
    upserted, deleted, stale = (int(group) for group in found.groups())
    return upserted + deleted + stale == lines and stale == held


def _exit_status(supervisor: Supervisor, process: subprocess.Popen[bytes]) -> int | str:
    """Wait up to APPLY_EXIT_SECONDS for `process`; its status, or "killed" (it never ended)."""
    try:
        return process.wait(timeout=APPLY_EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        supervisor.stop(process, kill=True)
        return "killed"


def _last_line(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""
