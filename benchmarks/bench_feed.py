"""The change feed at 10^6 stored tickets: apply throughput, readers under a feed, visibility, swap.

The store: 1,000 tenants x 1,000 tickets (TKT-000..TKT-999, the default ID width), in an
SQLite file (`write_database`) and in a throwaway PostgreSQL (testkit/postgres.py,
`import_records`, COPY). For each store:

1. **throughput**: a generated feed of THROUGHPUT_CHANGES changes (90% upserts with a new
   title, 10% deletes, keys drawn over every tenant) applied by `apply_feed` with the
   store's writer: the very loop `ticket-tools apply` runs (its reading thread,
   `parse_change`, batches of 1,000), in this process, so that the figure is per change
   and not the interpreter's start-up; then a fresh feed of the same size through the CLI
   in a subprocess, start-up included, as a cross-check;
2. **readers under a feed**: `ticket-tools apply -` runs in a subprocess for the whole
   section, its stdin a pipe; a reader thread calls `execute_tool` (a first page of a
   random tenant, or a `get_ticket`) on the store, as `serve` does per call, without the
   HTTP stack (which on 2 cores would measure itself). ROUNDS rounds of WINDOW_SECONDS
   with no feed and WINDOW_SECONDS with FEED_RATE changes/s written to the pipe, in
   alternating order; the p99 of each condition and their ratio, from one run;
3. **commit-to-visible**: with the same feed running, PROBES times: an upsert of a key of a
   tenant the feed never touches is written to the pipe, and a thread polls `get_ticket`
   until the new title is there; default batching (1,000 changes or 0.5 s);
4. **import --replace**: `ticket-tools import FILE --replace` of 10^6 tickets (new titles)
   in a subprocess, while a client thread calls search_tickets in a loop: the longest call,
   and every answer is the whole old page or the whole new page.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_feed.py

Figures go to stdout, each with the load average when it was taken; docs/feed.md quotes one run.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from ticket_tools import TicketStore, execute_tool
from ticket_tools.cli.apply import BATCH_SECONDS, FeedWriter, apply_feed
from ticket_tools.stores.sqlite.store import SQLiteStore, write_database
from ticket_tools.stores.sqlite.writer import SQLiteWriter

TENANTS = 1_000
PER_TENANT = 1_000
THROUGHPUT_CHANGES = 30_000
FEED_RATE = 1_000  # changes per second while the feed runs
ROUNDS = 5
WINDOW_SECONDS = 3.0
PROBES = 50
# A probe not seen by then counts as this long (the feed outran the writer): the run stays bounded.
PROBE_GIVE_UP_SECONDS = 10.0
VISIBILITY_SECONDS = 45.0  # and no probe starts after this long
PROBE_TENANT = f"t{TENANTS - 1:03d}"  # the background feed never touches it
REPLACE_TENANT = "t500"
TARGETS = {"sqlite": 20_000, "postgres": 10_000}  # changes per second
READER_TARGET = 1.5
VISIBLE_TARGET_MS = 1_000.0
OWNER, READER = "ticket_owner", "ticket_reader"
CLI = [sys.executable, "-m", "ticket_tools.cli"]
ROWS: list[tuple[str, str, str, str]] = []  # (store, measured, figure, target/verdict)
# The issue's four targets: PostgreSQL's throughput, commit-to-visible and readers' p99
# under a feed, and SQLite's throughput; each is printed again at the end, met or missed.
FOUR_TARGETS = (
    ("postgres", "throughput"),
    ("postgres", "commit-to-visible"),
    ("postgres", "readers"),
    ("sqlite", "throughput"),
)
VERDICTS: dict[tuple[str, str], str] = {}


def load_average() -> str:
    """Return the 1, 5 and 15 minute load averages, as /proc/loadavg says them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _row(store: str, measured: str, figure: str, verdict: str) -> None:
    ROWS.append((store, measured, figure, f"{verdict}; load {load_average()}"))
    print(f"  {store}: {measured}: {figure} ({verdict}; load {load_average()})", flush=True)


def stored_records(suffix: str = "") -> dict[str, dict[str, str]]:
    """Return the TENANTS x PER_TENANT records every store of a run starts from."""
    records = {}
    for tenant in range(TENANTS):
        for number in range(PER_TENANT):
            ticket_id = f"TKT-{number:03d}"
            records[f"t{tenant:03d}:{ticket_id}"] = {
                "id": ticket_id,
                "title": f"Ticket {number} of t{tenant:03d}{suffix}",
                "status": "open" if (number + tenant) % 3 else "closed",
            }
    return records


class Versions:
    """Versions above every stored one, shared by every feed of a run."""

    def __init__(self) -> None:
        self._next = 1
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            self._next += 1
            return self._next


def _change(rng: random.Random, version: int, tenants: int = TENANTS) -> bytes:
    tenant = f"t{rng.randrange(tenants):03d}"
    ticket_id = f"TKT-{rng.randrange(PER_TENANT):03d}"
    key = f"{tenant}:{ticket_id}"
    if rng.random() < 0.1:
        line: dict[str, object] = {"op": "delete", "key": key, "version": version}
    else:
        ticket = {"id": ticket_id, "title": f"Changed at {version}", "status": "open"}
        line = {"op": "upsert", "key": key, "version": version, "ticket": ticket}
    return json.dumps(line).encode() + b"\n"


def _feed_file(path: Path, versions: Versions, rng: random.Random) -> Path:
    with path.open("wb") as out:
        for _ in range(THROUGHPUT_CHANGES):
            out.write(_change(rng, versions.take()))
    return path


def _throughput(
    kind: str,
    folder: Path,
    versions: Versions,
    writer: Callable[[], FeedWriter],
    target: list[str],
) -> None:
    rng = random.Random(f"{kind}-throughput")  # noqa: S311 - a workload
    feed = _feed_file(folder / f"{kind}-feed.jsonl", versions, rng)
    opened = writer()
    try:
        with feed.open("rb") as stream:
            started = time.perf_counter()
            applied = apply_feed(stream, opened)
            seconds = time.perf_counter() - started
    finally:
        opened.close()
    rate = applied.changes / seconds
    met = "met" if rate >= TARGETS[kind] else "NOT met"
    VERDICTS[(kind, "throughput")] = f"{rate:,.0f} changes/s >= {TARGETS[kind]:,}: {met}"
    _row(
        kind,
        f"apply {applied.changes:,} changes in batches (in process)",
        f"{rate:,.0f} changes/s ({applied.counts})",
        f"target >= {TARGETS[kind]:,}: {met}",
    )
    feed = _feed_file(folder / f"{kind}-feed2.jsonl", versions, rng)
    started = time.perf_counter()
    subprocess.run([*CLI, "apply", str(feed), *target], check=True, capture_output=True)  # noqa: S603
    seconds = time.perf_counter() - started
    _row(
        kind,
        f"`ticket-tools apply FILE` of {THROUGHPUT_CHANGES:,} (subprocess, start-up incl.)",
        f"{THROUGHPUT_CHANGES / seconds:,.0f} changes/s ({seconds:.2f} s)",
        "cross-check",
    )


class Feeder:
    """`ticket-tools apply -` with a pipe for stdin, fed at FEED_RATE while `on` is set."""

    def __init__(self, target: list[str], versions: Versions, log: Path) -> None:
        self._log = log.open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - our own command
            [*CLI, "apply", "-", *target],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=self._log,
        )
        self._pipe: IO[bytes] = self.process.stdin  # type: ignore[assignment]
        self._versions = versions
        self._lock = threading.Lock()
        self.on = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def write(self, line: bytes) -> None:
        with self._lock:
            self._pipe.write(line)
            self._pipe.flush()

    def _run(self) -> None:
        rng = random.Random("feeder")  # noqa: S311 - a workload
        step = 0.01
        while not self._stop.is_set():
            if not self.on.wait(0.05):
                continue
            started, sent = time.perf_counter(), 0
            while self.on.is_set() and not self._stop.is_set():
                due = int((time.perf_counter() - started) * FEED_RATE)
                if due > sent:
                    lines = b"".join(
                        _change(rng, self._versions.take(), TENANTS - 1) for _ in range(due - sent)
                    )
                    self.write(lines)
                    sent = due
                time.sleep(step)

    def close(self) -> str:
        self._stop.set()
        self._thread.join()
        self._pipe.close()
        self.process.wait(timeout=60)
        self._log.close()
        return Path(self._log.name).read_text().strip()


def p99(times: list[float]) -> float:
    """Return the 99th percentile of `times` (seconds), in milliseconds."""
    ordered = sorted(times)
    return ordered[max(0, -(-99 * len(ordered) // 100) - 1)] * 1000


def readers_under_feed(kind: str, store: TicketStore, feeder: Feeder) -> None:
    """Time readers on `store` in paired rounds without and with `feeder` on; print the p99s."""
    rng = random.Random("reader")  # noqa: S311 - a workload
    times: dict[bool, list[float]] = {False: [], True: []}
    per_round: list[float] = []
    for round_number in range(ROUNDS):
        order = (False, True) if round_number % 2 == 0 else (True, False)
        this_round: dict[bool, list[float]] = {}
        for feeding in order:
            if feeding:
                feeder.on.set()
            else:
                feeder.on.clear()
            until = time.perf_counter() + WINDOW_SECONDS
            samples = this_round[feeding] = []
            while time.perf_counter() < until:
                context = {"tenant": f"t{rng.randrange(TENANTS):03d}", "can_read_tickets": True}
                args: dict[str, object]
                if rng.random() < 0.5:
                    name, args = "search_tickets", {"limit": 10}
                else:  # a ticket of a random tenant: found or not_found
                    name, args = "get_ticket", {"ticket_id": f"TKT-{rng.randrange(1000):03d}"}
                started = time.perf_counter()
                execute_tool(name, args, context, store)
                samples.append(time.perf_counter() - started)
            times[feeding] += samples
        per_round.append(p99(this_round[True]) / p99(this_round[False]))
    feeder.on.clear()
    ratio = p99(times[True]) / p99(times[False])
    per_round.sort()
    VERDICTS[(kind, "readers")] = (
        f"{ratio:.2f}x <= {READER_TARGET}x: {'met' if ratio <= READER_TARGET else 'NOT met'}"
    )
    _row(
        kind,
        f"readers' p99 with a {FEED_RATE:,}/s feed / without "
        f"({ROUNDS} x {WINDOW_SECONDS:g} s each)",
        f"{p99(times[True]):.2f} / {p99(times[False]):.2f} ms = {ratio:.2f}x "
        f"(per round {per_round[0]:.2f}..{per_round[-1]:.2f}; {len(times[True])} / "
        f"{len(times[False])} calls)",
        f"target <= {READER_TARGET}x: {'met' if ratio <= READER_TARGET else 'NOT met'}",
    )


def commit_to_visible(kind: str, store: TicketStore, feeder: Feeder, versions: Versions) -> None:
    """Write probes to `feeder` and poll `store` until each shows; print the waits' p99."""
    rng = random.Random("probe")  # noqa: S311 - a workload
    context = {"tenant": PROBE_TENANT, "can_read_tickets": True}
    feeder.on.set()
    waits = []
    ends = time.perf_counter() + VISIBILITY_SECONDS
    for probe in range(PROBES):
        if time.perf_counter() > ends:
            break  # the feed outran the writer: what was measured so far is the figure
        ticket_id = f"TKT-{rng.randrange(PER_TENANT):03d}"
        title = f"probe {probe}"
        version = versions.take()
        ticket = {"id": ticket_id, "title": title, "status": "open"}
        line = {
            "op": "upsert",
            "key": f"{PROBE_TENANT}:{ticket_id}",
            "version": version,
            "ticket": ticket,
        }
        written = time.perf_counter()
        feeder.write(json.dumps(line).encode() + b"\n")
        while time.perf_counter() - written < PROBE_GIVE_UP_SECONDS:
            result = execute_tool("get_ticket", {"ticket_id": ticket_id}, context, store)
            shown = result.get("ticket")
            if isinstance(shown, dict) and shown.get("title") == title:
                break
            time.sleep(0.002)
        waits.append(time.perf_counter() - written)  # a probe given up counts as its wait
        time.sleep(rng.uniform(0, BATCH_SECONDS / 2))
    feeder.on.clear()
    waits.sort()
    p99_ms = p99(waits)
    met = "met" if p99_ms <= VISIBLE_TARGET_MS else "NOT met"
    VERDICTS[(kind, "commit-to-visible")] = f"p99 {p99_ms:.0f} ms <= {VISIBLE_TARGET_MS:.0f}: {met}"
    _row(
        kind,
        f"commit-to-visible, default batching, {len(waits)} probes in a {FEED_RATE:,}/s feed",
        f"p50 {waits[len(waits) // 2] * 1000:.0f} ms, p99 {p99_ms:.0f} ms, "
        f"max {waits[-1] * 1000:.0f} ms",
        f"target p99 <= {VISIBLE_TARGET_MS:.0f} ms: {met}",
    )


def _replace(kind: str, store: TicketStore, target: list[str], records_file: Path) -> None:
    context = {"tenant": REPLACE_TENANT, "can_read_tickets": True}
    args: dict[str, object] = {"limit": 10}
    old = execute_tool("search_tickets", args, context, store)
    new_records = {
        k: v for k, v in stored_records(" (v2)").items() if k.startswith(REPLACE_TENANT + ":")
    }
    new = execute_tool("search_tickets", args, context, new_records)
    process = subprocess.Popen(  # noqa: S603 - our own command
        [*CLI, "import", str(records_file), "--replace", *target],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    counts = {"old": 0, "new": 0, "other": 0}
    longest = 0.0
    normal: list[float] = []
    while process.poll() is None:
        started = time.perf_counter()
        result = execute_tool("search_tickets", args, context, store)
        seconds = time.perf_counter() - started
        longest = max(longest, seconds)
        normal.append(seconds)
        counts["old" if result == old else "new" if result == new else "other"] += 1
    output = process.stdout.read().decode().strip() if process.stdout else ""
    if process.returncode != 0:
        raise RuntimeError(f"import --replace failed: {output}")
    after = execute_tool("search_tickets", args, context, store)
    whole = counts["other"] == 0 and after == new
    _row(
        kind,
        f"`import --replace` of {TENANTS * PER_TENANT:,} while a client searches in a loop",
        f"longest call {longest * 1000:.1f} ms "
        f"(p50 {sorted(normal)[len(normal) // 2] * 1000:.2f} ms) "
        f"over {sum(counts.values())} calls: {counts['old']} old, {counts['new']} new, "
        f"{counts['other']} other",
        "every answer whole old or whole new" if whole else "MIXED OR WRONG ANSWERS",
    )


def _section(  # noqa: PLR0917 - one call per store, every argument its own
    kind: str,
    folder: Path,
    versions: Versions,
    store: TicketStore,
    writer: Callable[[], FeedWriter],
    target: list[str],
    records_file: Path,
) -> None:
    print(f"{kind}: {TENANTS * PER_TENANT:,} tickets stored (load {load_average()})", flush=True)
    _throughput(kind, folder, versions, writer, target)
    feeder = Feeder(target, versions, folder / f"{kind}-feeder.log")
    try:
        readers_under_feed(kind, store, feeder)
        commit_to_visible(kind, store, feeder, versions)
    finally:
        summary = feeder.close()
    print(f"  the feeder's apply: {summary}")
    _replace(kind, store, target, records_file)


def _postgres(folder: Path, versions: Versions, records_file: Path) -> Generator[None]:

    from testkit.postgres import ThrowawayCluster, create_tickets, find_binaries  # noqa: PLC0415
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415
    from ticket_tools.stores.postgres.writer import PostgresWriter  # noqa: PLC0415

    binaries = find_binaries()
    if binaries is None:
        print("postgres: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        return
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        owner = create_tickets(cluster, stored_records(), owner=OWNER, reader=READER)
        yield
        with PostgresStore.open(cluster.dsn(READER, "tickets")) as store:
            _section(
                "postgres",
                folder,
                versions,
                store,
                lambda: PostgresWriter.open(owner),
                ["--postgres", owner],
                records_file,
            )
    finally:
        cluster.destroy()


def main() -> None:
    """Build both stores, measure each, print the table."""
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as name, ExitStack() as stack:
        folder = Path(name)
        versions = Versions()
        records_file = folder / "records-v2.json"
        records_file.write_text(json.dumps(stored_records(" (v2)")))
        database = folder / "tickets.sqlite"
        write_database(database, stored_records())
        postgres = _postgres(folder, versions, records_file)
        stack.callback(postgres.close)  # the cluster is removed whatever happens
        next(postgres, None)  # the cluster is started and loaded before the timing starts
        store = stack.enter_context(SQLiteStore.open(database))
        _section(
            "sqlite",
            folder,
            versions,
            store,
            lambda: SQLiteWriter.open(database),
            ["--db", str(database)],
            records_file,
        )
        store.close()
        next(postgres, None)
    print(f"\nchange feed at {TENANTS * PER_TENANT:,} stored tickets, {os.cpu_count()} cores")
    print("| store | measured | figure | target; load average (1, 5, 15 min) |")
    print("|---|---|---|---|")
    for row in ROWS:
        print("| " + " | ".join(row) + " |")
    cores = os.cpu_count() or 1
    print(f"\nthe four targets (load {load_average()} on {cores} cores):")
    for kind, target in FOUR_TARGETS:
        print(f"  {kind} {target}: {VERDICTS.get((kind, target), 'not measured')}")
    if float(load_average().split()[0]) > cores:
        print("  (the load average is above the cores: a figure may be noise, not the code)")


if __name__ == "__main__":
    main()
