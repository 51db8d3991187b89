"""The feed's targets with and without the title index, in one run (issue 31, point 6).

bench_feed's store and feed: 1,000 tenants x 1,000 tickets (TKT-000..TKT-999), then
THROUGHPUT_CHANGES changes (90% upserts of a new title, 10% deletes, keys drawn over every
tenant) applied by `apply_feed` with the store's writer in batches of 1,000, in process:
the loop `ticket-tools apply` runs. Each build applies the same feed file to a store of its
own, made fresh by its own code, in a child process; builds alternate over ROUNDS rounds
(the order rotated) so that a burst of load on the shared cores falls on each; per build,
the median rate and each round's:

- *without the index*: INDEX_MIN_TICKETS past every tenant (no tenant indexed);
- *as shipped*: INDEX_MIN_TICKETS 1,024, so bench_feed's tenants of 1,000 have no index
  and a batch only keeps `tenant_sizes`;
- *every tenant indexed*: INDEX_MIN_TICKETS 0, so each change edits its grams' containers
  (what a feed to an indexed tenant costs);
- with BENCH_FEED_INDEX_BASELINE=DIR (another tree's `src`, e.g. a `git archive` of the
  commit before schema version 6): that tree's code, as the build before the index.

Targets (the feed's, issue 24): PostgreSQL >= 10,000 changes/s, SQLite >= 20,000/s.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_feed_index.py
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_feed import (
    PER_TENANT,
    READER,
    TARGETS,
    TENANTS,
    THROUGHPUT_CHANGES,
    Versions,
    _feed_file,
    load_average,
)

ROUNDS = int(os.environ.get("BENCH_FEED_INDEX_ROUNDS", "3"))
BASELINE = os.environ.get("BENCH_FEED_INDEX_BASELINE")
OWNER = "ticket_owner"
SRC = str(Path(__file__).resolve().parent.parent / "src")
# Build name: (INDEX_MIN_TICKETS or None for the tree's own, the tree's src folder).
BUILDS: dict[str, tuple[int | None, str]] = {
    "without the index": (2**62, SRC),
    "as shipped": (None, SRC),
    "every tenant indexed": (0, SRC),
}
if BASELINE:
    BUILDS[f"baseline {BASELINE}"] = (None, BASELINE)

# The child: make the store with this tree's code, then time apply_feed of the feed.
_CHILD = """
import json, sys, time
kind, threshold, where, feed, superuser, owner_role, reader_role = sys.argv[1:8]
if threshold != "none":
    from ticket_tools.stores import index_writes
    index_writes.INDEX_MIN_TICKETS = int(threshold)
from ticket_tools.cli.apply import apply_feed
records = {}
for tenant in range(int(sys.argv[8])):
    for number in range(int(sys.argv[9])):
        ticket_id = f"TKT-{number:03d}"
        records[f"t{tenant:03d}:{ticket_id}"] = {
            "id": ticket_id,
            "title": f"Ticket {number} of t{tenant:03d}",
            "status": "open" if (number + tenant) % 3 else "closed",
        }
if kind == "sqlite":
    from ticket_tools.stores.sqlite.importer import write_database
    from ticket_tools.stores.sqlite.writer import SQLiteWriter
    write_database(where, records)
    open_writer = lambda: SQLiteWriter.open(where)
else:
    import psycopg
    from psycopg.conninfo import make_conninfo
    from ticket_tools.stores.postgres.importer import import_records
    from ticket_tools.stores.postgres.writer import PostgresWriter
    name = where
    with psycopg.connect(superuser, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {name} OWNER {owner_role}")
    owner = make_conninfo(superuser, user=owner_role, dbname=name)
    with psycopg.connect(owner) as connection:
        import_records(connection, records, grant_to=reader_role)
    open_writer = lambda: PostgresWriter.open(owner)
del records
writer = open_writer()
try:
    with open(feed, "rb") as stream:
        started = time.perf_counter()
        applied = apply_feed(stream, writer)
        seconds = time.perf_counter() - started
finally:
    writer.close()
print(json.dumps({"changes": applied.changes, "seconds": seconds}))
"""


def _run(kind: str, build: str, folder: Path, feed: Path, superuser: str) -> float:
    threshold, src = BUILDS[build]
    where = str(folder / "feed.sqlite") if kind == "sqlite" else "feed_index"
    env = {**os.environ, "PYTHONPATH": src}
    child = subprocess.run(  # noqa: S603 - our own fixed arguments
        [
            sys.executable,
            "-c",
            _CHILD,
            kind,
            "none" if threshold is None else str(threshold),
            where,
            str(feed),
            superuser,
            OWNER,
            READER,
            str(TENANTS),
            str(PER_TENANT),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    if kind == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(where + suffix).unlink(missing_ok=True)
    measured = json.loads(child.stdout.splitlines()[-1])
    return float(measured["changes"]) / float(measured["seconds"])


def _store(kind: str, folder: Path, feed: Path, superuser: str) -> list[str]:
    rates: dict[str, list[float]] = {build: [] for build in BUILDS}
    names = list(BUILDS)
    for round_number in range(ROUNDS):
        turn = round_number % len(names)
        for build in names[turn:] + names[:turn]:
            rate = _run(kind, build, folder, feed, superuser)
            rates[build].append(rate)
            print(
                f"  {kind} round {round_number + 1}: {build}: {rate:,.0f} changes/s "
                f"(load {load_average()})",
                flush=True,
            )
    lines = []
    for build, samples in rates.items():
        median = statistics.median(samples)
        met = "met" if median >= TARGETS[kind] else "NOT met"
        each = ", ".join(f"{rate:,.0f}" for rate in samples)
        lines.append(f"| {kind} | {build} | {median:,.0f} | {each} | >= {TARGETS[kind]:,}: {met} |")
    return lines


def main() -> None:
    """Each store: every build's rounds; then the table."""
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-feed-index-") as name:
        folder = Path(name)
        feed = _feed_file(folder / "feed.jsonl", Versions(), random.Random("feed-index"))  # noqa: S311
        rows += _store("sqlite", folder, feed, "")
        from testkit.postgres import ThrowawayCluster, find_binaries  # noqa: PLC0415

        binaries = find_binaries()
        if binaries is None:
            print("postgres: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        else:
            import psycopg  # noqa: PLC0415 - the postgres extra

            cluster = ThrowawayCluster(binaries)
            try:
                cluster.start()
                with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
                    superuser.execute(f"CREATE ROLE {OWNER} LOGIN")
                    superuser.execute(f"CREATE ROLE {READER} LOGIN")
                rows += _store("postgres", folder, feed, cluster.dsn())
            finally:
                cluster.destroy()
    print(
        f"\nfeed of {THROUGHPUT_CHANGES:,} changes over {TENANTS:,} tenants of {PER_TENANT:,} "
        f"tickets, {ROUNDS} rounds, {os.cpu_count()} cores (load {load_average()})"
    )
    print("| store | build | median changes/s | each round | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
