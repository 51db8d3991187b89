"""PostgreSQL beside SQLite on the same tickets: page latency, its growth, throughput, RLS cost.

A throwaway cluster (tests/postgres_cluster.py: unix socket, fsync off) holds 10^3 and then
10^6 tickets over 1,000 tenants, imported with COPY by `import_records`; SQLite gets the
same records. Latency is the best of ROUNDS interleaved runs (as in bench_store), in
microseconds per search_tickets call through execute_tool. Throughput is pages per second
over THROUGHPUT_SECONDS with 1 and 16 threads sharing one store, each thread on its own
tenant. The second wall's cost is the store's own two statements run on a bare
connection, as the reader (policy applied) and as a superuser (policy skipped).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from bench_store import LIMIT, ROUNDS, TENANTS, _best_microseconds, _deep_cursor, _records

from ticket_tools import TicketStore, execute_tool
from ticket_tools.postgres_store import _PAGE_SQL, _SCOPE_SQL, PostgresStore, import_records
from ticket_tools.sqlite_store import SQLiteStore, write_database

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from postgres_cluster import ThrowawayCluster, find_binaries

SIZES = (10**3, 10**6)
THREADS = (1, 16)
# Each throughput figure counts pages for this long; short, so the whole run stays bounded.
THROUGHPUT_SECONDS = 2.0


def _throughput(store: TicketStore, threads: int) -> float:
    """Return search_tickets pages per second with `threads` threads sharing `store`."""
    counts = [0] * threads
    stop = time.perf_counter() + THROUGHPUT_SECONDS

    def work(slot: int) -> None:
        context = {"tenant": f"t{slot * 37 % TENANTS:03d}", "can_read_tickets": True}
        while time.perf_counter() < stop:
            execute_tool("search_tickets", {"limit": LIMIT}, context, store)
            counts[slot] += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - started)


def _raw_page(dsn: str, tenant: str) -> Callable[[], object]:
    """One page as the store reads it (scope, then the keyset query), on a bare connection."""
    connection = psycopg.connect(dsn)
    connection.read_only = True
    sql = _PAGE_SQL[(False, False, False)]

    def page() -> object:
        connection.execute(_SCOPE_SQL, (tenant, "5000"))
        rows = connection.execute(sql, (tenant, LIMIT + 1)).fetchall()
        connection.commit()
        return rows

    return page


def _plan(dsn: str, tenant: str, cursor: str) -> list[str]:
    """Return PostgreSQL's plan for the store's page query after `cursor`, as the reader."""
    with psycopg.connect(dsn) as connection:
        connection.execute(_SCOPE_SQL, (tenant, "5000"))
        sql = "EXPLAIN (COSTS OFF) " + _PAGE_SQL[(False, False, True)]
        rows = connection.execute(sql, (tenant, cursor, LIMIT + 1)).fetchall()
    return [str(row[0]) for row in rows]


def _measure(cluster: ThrowawayCluster, size: int, folder: Path) -> dict[str, float]:
    records = _records(size)
    tenant = f"t{TENANTS // 2:03d}"
    context = {"tenant": tenant, "can_read_tickets": True}
    first: dict[str, object] = {"limit": LIMIT}
    cursor = _deep_cursor(records, tenant)
    deep: dict[str, object] = first if cursor is None else {"limit": LIMIT, "cursor": cursor}
    dbname = f"tickets_{size}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
        superuser.execute(f"CREATE DATABASE {dbname} OWNER ticket_owner")
    started = time.perf_counter()
    with psycopg.connect(cluster.dsn("ticket_owner", dbname)) as owner:
        import_records(owner, records, grant_to="ticket_reader")
    row = {"pg import s": time.perf_counter() - started}
    path = folder / f"tickets-{size}.sqlite"
    write_database(path, records)
    records.clear()
    reader = cluster.dsn("ticket_reader", dbname)
    with (
        PostgresStore.open(reader, max_connections=max(THREADS)) as pg,
        SQLiteStore.open(path) as sqlite,
    ):
        for store in (pg, sqlite):
            if execute_tool("search_tickets", deep, context, store)["ok"] is not True:
                raise RuntimeError("the benchmark's page call failed")
        row |= _best_microseconds(
            {
                "pg first": lambda: execute_tool("search_tickets", first, context, pg),
                "pg deep": lambda: execute_tool("search_tickets", deep, context, pg),
                "sqlite first": lambda: execute_tool("search_tickets", first, context, sqlite),
                "sqlite deep": lambda: execute_tool("search_tickets", deep, context, sqlite),
                "raw rls": _raw_page(reader, tenant),
                "raw no rls": _raw_page(cluster.dsn("postgres", dbname), tenant),
            }
        )
        if size == SIZES[-1]:
            print(f"plan of a page after a cursor at {size:,} tickets, as the reader:")
            for line in _plan(reader, tenant, str(cursor)):
                print(f"  {line}")
            _throughput(pg, max(THREADS))  # warm: let the pool grow to its size first
            for threads in THREADS:
                row[f"pg {threads}t"] = _throughput(pg, threads)
                row[f"sqlite {threads}t"] = _throughput(sqlite, threads)
    return row


def main() -> None:
    """Print the latency table, the growth target, throughput and the second wall's cost."""
    binaries = find_binaries()
    if binaries is None:
        print("skipped: PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        return
    cluster = ThrowawayCluster(binaries)
    rows: dict[int, dict[str, float]] = {}
    try:
        cluster.start()
        with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
            superuser.execute("CREATE ROLE ticket_owner LOGIN")
            superuser.execute("CREATE ROLE ticket_reader LOGIN")
        with tempfile.TemporaryDirectory() as folder:
            for size in SIZES:
                rows[size] = _measure(cluster, size, Path(folder))
    finally:
        cluster.destroy()
    columns = ("pg first", "pg deep", "sqlite first", "sqlite deep", "raw rls", "raw no rls")
    print(f"page latency, microseconds per call (best of {ROUNDS}); limit {LIMIT}")
    print(f"{'tickets':>9} | {'pg import s':>11} | " + " | ".join(f"{c:>12}" for c in columns))
    for size, row in rows.items():
        cells = " | ".join(f"{row[c]:>12.1f}" for c in columns)
        print(f"{size:>9,} | {row['pg import s']:>11.1f} | {cells}")
    low, high = rows[SIZES[0]], rows[SIZES[-1]]
    growth = {c: high[c] / low[c] for c in columns}
    print(f"{'growth':>9} | {'':>11} | " + " | ".join(f"{growth[c]:>11.2f}x" for c in columns))
    pg_growth = max(growth["pg first"], growth["pg deep"])
    print(
        f"target: PostgreSQL page latency grows <= 2x from 10^3 to 10^6: "
        f"{pg_growth:.2f}x, {'met' if pg_growth <= 2 else 'NOT met'}"
    )
    cost = high["raw rls"] - high["raw no rls"]
    print(
        f"second wall at 10^6: {high['raw rls']:.1f} us with the policy, "
        f"{high['raw no rls']:.1f} us without ({cost:+.1f} us per page)"
    )
    print(f"pages per second at 10^6, {THROUGHPUT_SECONDS:.0f} s each, one shared store")
    print(f"{'threads':>7} | {'postgres':>10} | {'sqlite':>10}")
    for threads in THREADS:
        pg, sqlite = high[f"pg {threads}t"], high[f"sqlite {threads}t"]
        print(f"{threads:>7} | {pg:>10,.0f} | {sqlite:>10,.0f}")


if __name__ == "__main__":
    main()
