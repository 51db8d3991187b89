"""Readers on a hot standby under a change feed applied to the primary (docs/postgres.md).

A throwaway primary holding bench_feed's 10^6 tickets (1,000 tenants x 1,000) and one hot
standby copied from it (testkit/postgres.py, `replicated`); a reader store on the standby, as
the reader role; `ticket-tools apply -` writing to the primary, fed at bench_feed.FEED_RATE
changes/s. Measured with bench_feed's own loops, so the figures compare with its primary-only
ones:

1. **readers under a feed**: ROUNDS paired rounds of a window with no feed and a window with
   the feed, in alternating order; the standby readers' p99 in each and their ratio;
2. **commit-to-visible**: an upsert written to the primary's feed, polled on the standby
   reader until its title shows (the feed's default batching, then replication);
3. **primary commit to standby visible**: with the feed running, PROBES single-row UPDATEs
   committed on the primary (a session with `synchronous_commit = on`, PostgreSQL's default;
   the throwaway cluster's own default is off), each polled on the standby reader until it
   shows: replication alone, without the feed's batching;
4. **staleness under the feed**: `PostgresStore.staleness_seconds()` on the standby, every
   0.1 s for a window of the feed: what the gauge and `/readyz` would have read.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_standby.py

Figures go to stdout, each with the load average when it was taken; docs/postgres.md quotes
one run.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import bench_feed
from bench_feed import (
    FEED_RATE,
    OWNER,
    PER_TENANT,
    PROBE_GIVE_UP_SECONDS,
    PROBE_TENANT,
    PROBES,
    READER,
    VISIBLE_TARGET_MS,
    WINDOW_SECONDS,
    Feeder,
    Versions,
    load_average,
)

from ticket_tools import execute_tool

if TYPE_CHECKING:
    from ticket_tools.stores.postgres.store import PostgresStore

KIND = "standby"
STALENESS_SAMPLE_SECONDS = 0.1
SUMMARY = (
    ("primary-commit-to-visible", "a commit on the primary to visible on the standby"),
    ("commit-to-visible", "a feed line to visible on the standby (apply's batching too)"),
    ("readers", "the standby readers' p99, feed / no feed"),
)


def _replication(store: PostgresStore, feeder: Feeder, primary_dsn: str) -> None:
    import psycopg  # noqa: PLC0415 - optional here

    rng = random.Random("replication")  # noqa: S311 - a workload
    context = {"tenant": PROBE_TENANT, "can_read_tickets": True}
    waits = []
    feeder.on.set()
    with psycopg.connect(primary_dsn, autocommit=True) as primary:
        primary.execute("SET synchronous_commit = on")
        for probe in range(PROBES):
            ticket_id = f"TKT-{rng.randrange(PER_TENANT):03d}"
            title = f"replicated {probe}"
            primary.execute(
                "UPDATE tickets SET title = %s, title_lower = lower(%s) "
                "WHERE tenant = %s AND id = %s",
                (title, title, PROBE_TENANT, ticket_id),
            )
            committed = time.perf_counter()
            while time.perf_counter() - committed < PROBE_GIVE_UP_SECONDS:
                result = execute_tool("get_ticket", {"ticket_id": ticket_id}, context, store)
                shown = result.get("ticket")
                if isinstance(shown, dict) and shown.get("title") == title:
                    break
                time.sleep(0.002)
            waits.append(time.perf_counter() - committed)  # a probe given up counts as its wait
            time.sleep(rng.uniform(0, 0.2))
    feeder.on.clear()
    waits.sort()
    p99_ms = bench_feed.p99(waits)
    met = "met" if p99_ms <= VISIBLE_TARGET_MS else "NOT met"
    bench_feed.VERDICTS[(KIND, "primary-commit-to-visible")] = (
        f"p99 {p99_ms:.0f} ms <= {VISIBLE_TARGET_MS:.0f}: {met}"
    )
    print(
        f"  {KIND}: a commit on the primary to visible on the standby, {len(waits)} probes "
        f"in a {FEED_RATE:,}/s feed: p50 {waits[len(waits) // 2] * 1000:.0f} ms, "
        f"p99 {p99_ms:.0f} ms, max {waits[-1] * 1000:.0f} ms "
        f"(target p99 <= {VISIBLE_TARGET_MS:.0f} ms: {met}; load {load_average()})",
        flush=True,
    )


def _staleness_under_feed(store: PostgresStore, feeder: Feeder) -> None:
    feeder.on.set()
    samples = []
    until = time.perf_counter() + 2 * WINDOW_SECONDS
    while time.perf_counter() < until:
        samples.append(store.staleness_seconds())
        time.sleep(STALENESS_SAMPLE_SECONDS)
    feeder.on.clear()
    samples.sort()
    zero = sum(1 for sample in samples if sample == 0.0)
    print(
        f"  {KIND}: staleness_seconds() every {STALENESS_SAMPLE_SECONDS:g} s for "
        f"{2 * WINDOW_SECONDS:g} s of a {FEED_RATE:,}/s feed: {len(samples)} samples, "
        f"{zero} at 0, p99 {bench_feed.p99(samples) / 1000:.3f} s, max {samples[-1]:.3f} s "
        f"(load {load_average()})",
        flush=True,
    )


def main() -> None:
    """Start a primary and a standby, feed the primary, measure the standby's readers."""

    from testkit.postgres import (  # noqa: PLC0415
        ThrowawayCluster,
        create_tickets,
        find_binaries,
        replicated,
    )
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

    if find_binaries() is None:
        print("standby: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        return

    def setup(primary: ThrowawayCluster) -> None:
        create_tickets(primary, bench_feed.stored_records(), owner=OWNER, reader=READER)

    stored = bench_feed.TENANTS * bench_feed.PER_TENANT
    with tempfile.TemporaryDirectory(prefix="bench-standby-") as name, replicated(1, setup) as pair:
        folder = Path(name)
        print(
            f"{KIND}: a primary and a hot standby, {stored:,} tickets (load {load_average()})",
            flush=True,
        )
        versions = Versions()
        target = ["--postgres", pair.primary.dsn(OWNER, "tickets")]
        with PostgresStore.open(pair.standbys[0].dsn(READER, "tickets")) as store:
            feeder = Feeder(target, versions, folder / "feeder.log")
            try:
                bench_feed.readers_under_feed(KIND, store, feeder)
                bench_feed.commit_to_visible(KIND, store, feeder, versions)
                _replication(store, feeder, pair.primary.dsn(dbname="tickets"))
                _staleness_under_feed(store, feeder)
            finally:
                summary = feeder.close()
        print(f"  the feeder's apply (to the primary): {summary}")
    cores = os.cpu_count() or 1
    print(
        f"\nreaders on a hot standby, feed on the primary (load {load_average()} on {cores} cores):"
    )
    for measured, label in SUMMARY:
        print(f"  {label}: {bench_feed.VERDICTS.get((KIND, measured), 'not measured')}")
    if float(load_average().split()[0]) > cores:
        print("  (the load average is above the cores: a figure may be noise, not the code)")


if __name__ == "__main__":
    main()
