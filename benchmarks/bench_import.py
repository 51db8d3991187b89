"""10,000 organisations: `ticket-tools import` of 10^6 and 10^7 tickets, time, peak memory, pages.

For each scale (1,000 and 10,000 tenants x 1,000 tickets, TKT-000..TKT-999):

1. a records file is generated a tenant at a time (written as it is made, never held);
2. `ticket-tools import FILE --db X` and `--postgres DSN` (a throwaway PostgreSQL,
   testkit/postgres.py, a database per scale) run as subprocesses, each timed, with the
   child's own peak resident memory (`os.wait4`'s rusage: that child alone, not the
   largest child so far as RUSAGE_CHILDREN would be): flat from 10^6 to 10^7 means the
   import's memory does not grow with the file;
3. page latency through the store `serve` uses (`execute_tool` on SQLiteStore /
   PostgresStore as the reader role): a first page of search_tickets of a random tenant,
   a later page (the cursor of the fourth), and get_ticket; p50 and p99 of PAGE_CALLS
   calls each.

Every file and database is deleted after its scale. At 10^7 it needs about 1 GB for the
records file, 1.3 GB for SQLite and 1.3 GB for PostgreSQL (`df -h` first).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_import.py
    BENCH_IMPORT_TENANTS=10,100 PYTHONPATH=. .venv/bin/python benchmarks/bench_import.py  # quick

Figures go to stdout, each with the load average when it was taken; docs/scale.md quotes one run.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ticket_tools import TicketStore, execute_tool
from ticket_tools.stores.sqlite.store import SQLiteStore

PER_TENANT = 1_000
TENANTS = tuple(int(n) for n in os.environ.get("BENCH_IMPORT_TENANTS", "1000,10000").split(","))
PAGE_CALLS = 2_000
LATER_PAGE = 4  # the cursor of page LATER_PAGE - 1 opens it
OWNER, READER = "ticket_owner", "ticket_reader"
CLI = [sys.executable, "-m", "ticket_tools.cli"]
ROWS: list[str] = []


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _row(line: str) -> None:
    ROWS.append(f"{line} (load {_load()})")
    print(f"  {ROWS[-1]}", flush=True)


def _tenant(number: int) -> str:
    return f"t{number:05d}"


def _write_records(path: Path, tenants: int) -> int:
    """Write tenants x PER_TENANT records, one tenant at a time; return the file's size."""
    with path.open("w", encoding="utf-8") as out:
        out.write("{")
        for tenant_number in range(tenants):
            tenant = _tenant(tenant_number)
            lines = []
            for number in range(PER_TENANT):
                status = "open" if (number + tenant_number) % 3 else "closed"
                lines.append(
                    f'"{tenant}:TKT-{number:03d}": {{"id": "TKT-{number:03d}", '
                    f'"title": "Ticket {number} of {tenant}: printer jammed", '
                    f'"status": "{status}"}}'
                )
            out.write(("," if tenant_number else "") + ",\n".join(lines))
        out.write("}\n")
    return path.stat().st_size


def _import(argv: list[str]) -> tuple[float, int]:
    """Run `ticket-tools import ...`; return its seconds and its peak RSS in MiB."""
    started = time.perf_counter()
    child = subprocess.Popen([*CLI, "import", *argv], stdout=subprocess.DEVNULL)  # noqa: S603
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"import failed: exit {child.returncode}")
    return seconds, usage.ru_maxrss // 1024  # KiB on Linux


def _quantiles(times: list[float]) -> str:
    ordered = sorted(times)

    def at(share: int) -> float:
        return ordered[max(0, -(-share * len(ordered) // 100) - 1)] * 1000

    return f"p50 {at(50):.2f} ms, p99 {at(99):.2f} ms"


def _pages(kind: str, rows: int, tenants: int, store: TicketStore) -> None:
    rng = random.Random(f"pages {rows}")  # noqa: S311 - a workload
    times: dict[str, list[float]] = {"first page": [], "later page": [], "get_ticket": []}

    def timed(
        what: str, name: str, args: dict[str, object], context: dict[str, object]
    ) -> dict[str, object]:
        started = time.perf_counter()
        answer = execute_tool(name, args, context, store)
        times[what].append(time.perf_counter() - started)
        return answer

    for _ in range(PAGE_CALLS):
        context: dict[str, object] = {
            "tenant": _tenant(rng.randrange(tenants)),
            "can_read_tickets": True,
        }
        timed("first page", "search_tickets", {"limit": 10}, context)
        cursor = None
        for _ in range(LATER_PAGE - 1):  # untimed: the cursor of page LATER_PAGE - 1
            args: dict[str, object] = {"limit": 10} if cursor is None else {"cursor": cursor}
            answer = execute_tool("search_tickets", args, context, store)
            cursor = answer["next_cursor"]
        timed("later page", "search_tickets", {"cursor": cursor}, context)
        ticket: dict[str, object] = {"ticket_id": f"TKT-{rng.randrange(PER_TENANT):03d}"}
        answer = timed("get_ticket", "get_ticket", ticket, context)
        if answer.get("ok") is not True:
            raise RuntimeError(f"get_ticket failed: {answer}")
    for what, samples in times.items():
        _row(f"{kind} {rows:,}: {what}: {_quantiles(samples)} of {len(samples)} calls")


@contextmanager
def _postgres() -> Iterator[Callable[[str], tuple[str, str]] | None]:
    """Yield a function making a database per scale (owner DSN, reader DSN), or None."""
    import psycopg  # noqa: PLC0415 - optional here

    from testkit.postgres import ThrowawayCluster, find_binaries  # noqa: PLC0415

    binaries = find_binaries()
    if binaries is None:
        print("postgres: skipped: no PostgreSQL server (dev extra or TICKET_TOOLS_PG_BIN)")
        yield None
        return
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
            superuser.execute(f"CREATE ROLE {OWNER} LOGIN")
            superuser.execute(f"CREATE ROLE {READER} LOGIN")

        def database(name: str) -> tuple[str, str]:
            with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
                superuser.execute(f"DROP DATABASE IF EXISTS {name}")
                superuser.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
            return cluster.dsn(OWNER, name), cluster.dsn(READER, name)

        yield database
    finally:
        cluster.destroy()


def _drop(name: str, owner: str) -> None:
    import psycopg  # noqa: PLC0415 - optional here

    # The database goes with the cluster; its table now, so that the next scale has the disk.
    with psycopg.connect(owner, autocommit=True) as connection:
        connection.execute("DROP TABLE tickets, tombstones, high_water")
    print(f"  dropped the tables of {name}", flush=True)


def _scale(folder: Path, tenants: int, postgres: Callable[[str], tuple[str, str]] | None) -> None:
    rows = tenants * PER_TENANT
    records = folder / f"records-{rows}.json"
    started = time.perf_counter()
    size = _write_records(records, tenants)
    print(
        f"{rows:,} tickets: records file of {size / 2**20:,.0f} MiB written in "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    database = folder / f"tickets-{rows}.sqlite"
    seconds, peak = _import([str(records), "--db", str(database)])
    _row(
        f"sqlite {rows:,}: import {seconds:.1f} s ({rows / seconds:,.0f} tickets/s), peak RSS "
        f"{peak} MiB, database {database.stat().st_size / 2**20:,.0f} MiB"
    )
    with SQLiteStore.open(database) as store:
        _pages("sqlite", rows, tenants, store)
    database.unlink()
    if postgres is not None:
        from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

        name = f"tickets_{rows}"
        owner, reader = postgres(name)
        seconds, peak = _import([str(records), "--postgres", owner, "--grant-to", READER])
        _row(
            f"postgres {rows:,}: import {seconds:.1f} s ({rows / seconds:,.0f} tickets/s), "
            f"peak RSS {peak} MiB"
        )
        with PostgresStore.open(reader) as store:
            _pages("postgres", rows, tenants, store)
        _drop(name, owner)
    records.unlink()


def main() -> None:
    """Each scale in turn: write the file, import it twice, read pages, delete it all."""
    print(f"disk before: {shutil.disk_usage(tempfile.gettempdir()).free / 2**30:.0f} GiB free")
    with tempfile.TemporaryDirectory(prefix="bench-import-") as name, _postgres() as postgres:
        for tenants in TENANTS:
            _scale(Path(name), tenants, postgres)
    print(f"\nimport of {' and '.join(f'{t * PER_TENANT:,}' for t in TENANTS)} tickets")
    for row in ROWS:
        print(f"- {row}")


if __name__ == "__main__":
    main()
