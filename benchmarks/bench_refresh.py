"""`import --replace` of 10^6 tickets, without versions (the swap) and with them (the merge).

The store: 1,000 tenants x 1,000 tickets, imported without versions (every ticket at 0),
in an SQLite file and in a throwaway PostgreSQL (testkit/postgres.py, fsync off). For
each store, `ticket-tools import FILE --replace` in a subprocess, first from a file
without versions (every title changed: PostgreSQL builds the new table beside and swaps
it), then from a snapshot with versions (every title changed again, at version 1, with
`--high-water 1`: the merge in place under the version rule), while this process calls
search_tickets on one tenant's first page in a loop: the refresh's seconds, the longest
call and the p50 during it, and whether every answer was the whole old or the whole new
page.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_refresh.py

docs/feed.md quotes one run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ticket_tools import TicketStore, execute_tool
from ticket_tools.stores.sqlite.store import SQLiteStore, write_database

TENANTS = 1_000
PER_TENANT = 1_000
TENANT = "t500"
CLI = [sys.executable, "-m", "ticket_tools.cli"]
OWNER, READER = "ticket_owner", "ticket_reader"


def _records(title: str, version: int | None = None) -> dict[str, dict[str, object]]:
    extra = {} if version is None else {"version": version}
    return {
        f"t{tenant:03d}:TKT-{number:03d}": {
            "id": f"TKT-{number:03d}",
            "title": f"{title} {number}",
            "status": "open",
            **extra,
        }
        for tenant in range(TENANTS)
        for number in range(PER_TENANT)
    }


def _load() -> str:
    return (
        " ".join(Path("/proc/loadavg").read_text().split()[:3])
        if os.path.exists("/proc/loadavg")
        else "n/a"
    )


def _page(records: TicketStore | dict[str, dict[str, object]]) -> object:
    context = {"tenant": TENANT, "can_read_tickets": True}
    return execute_tool("search_tickets", {"limit": 10}, context, records)


def _refresh(kind: str, store: TicketStore, argv: list[str], old: object, new: object) -> None:
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603 - our own command
        [*CLI, "import", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    calls: list[float] = []
    counts = {"old": 0, "new": 0, "other": 0}
    while process.poll() is None:
        begun = time.perf_counter()
        answer = _page(store)
        calls.append(time.perf_counter() - begun)
        counts["old" if answer == old else "new" if answer == new else "other"] += 1
    seconds = time.perf_counter() - started
    output = process.stdout.read().decode().strip() if process.stdout else ""
    if process.returncode != 0:
        raise RuntimeError(f"import --replace failed: {output}")
    whole = counts["other"] == 0 and _page(store) == new
    calls.sort()
    print(
        f"  {kind}: {output}: {seconds:.1f} s; longest call {calls[-1] * 1000:.1f} ms "
        f"(p50 {calls[len(calls) // 2] * 1000:.2f} ms) over {len(calls)} calls: "
        f"{counts['old']} old, {counts['new']} new, {counts['other']} other "
        f"({'every answer whole' if whole else 'MIXED OR WRONG'}; load {_load()})",
        flush=True,
    )


def _both(kind: str, store: TicketStore, target: list[str], folder: Path) -> None:
    plain, versioned = folder / "plain.json", folder / "versioned.json"
    tenant = {k: v for k, v in _records("v1").items() if k.startswith(f"{TENANT}:")}
    again = {k: v for k, v in _records("v2").items() if k.startswith(f"{TENANT}:")}
    before = _page(store)
    _refresh(
        f"{kind} without versions (swap)",
        store,
        [str(plain), "--replace", *target],
        before,
        _page(tenant),
    )
    _refresh(
        f"{kind} with versions (merge)",
        store,
        [str(versioned), "--replace", "--high-water", "1", *target],
        _page(tenant),
        _page(again),
    )


def main() -> None:
    """Build both stores, refresh each twice, print one line per refresh."""
    with tempfile.TemporaryDirectory(prefix="bench-refresh-") as name:
        folder = Path(name)
        (folder / "plain.json").write_text(json.dumps(_records("v1")))
        (folder / "versioned.json").write_text(json.dumps(_records("v2", 1)))
        print(f"refresh of {TENANTS * PER_TENANT:,} tickets (load {_load()})", flush=True)
        database = folder / "tickets.sqlite"
        write_database(database, _records("v0"))
        with SQLiteStore.open(database) as store:
            _both("sqlite", store, ["--db", str(database)], folder)
        _postgres(folder)


def _postgres(folder: Path) -> None:

    from testkit.postgres import ThrowawayCluster, create_tickets, find_binaries  # noqa: PLC0415
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

    binaries = find_binaries()
    if binaries is None:
        print("postgres: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        return
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        owner = create_tickets(cluster, _records("v0"), owner=OWNER, reader=READER)
        with PostgresStore.open(cluster.dsn(READER, "tickets")) as store:
            _both("postgres", store, ["--postgres", owner], folder)
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
