"""PostgreSQL beside SQLite on the same tickets: page latency, its growth, throughput, RLS cost.

A throwaway cluster (testkit/postgres.py: unix socket, fsync off) holds 10^3 and
10^6 tickets over 1,000 tenants, imported with COPY by `import_records`; SQLite gets the
same records. Latency is timed as in bench_store: every call once per round, paired, the
median of ROUNDS rounds, in microseconds per search_tickets call through execute_tool;
each ratio is taken round by round. Throughput is pages per second over
THROUGHPUT_SECONDS with 1 and 16 threads sharing one store, each thread on its own
tenant. The second wall's cost is the store's own statements run on a bare connection,
as the reader (policy applied) and as a superuser (policy skipped).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import psycopg
from bench_store import (
    CONTEXT,
    FIRST,
    LIMIT,
    ROUNDS,
    TENANT,
    TENANTS,
    _deep,
    _paired_rounds,
    _per_round,
    _records,
)

from testkit.postgres import ThrowawayCluster, find_binaries
from ticket_tools import TicketStore, execute_tool
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.store import _PAGE, _SCOPE_SQL, PostgresStore
from ticket_tools.stores.sqlite.store import SQLiteStore, write_database

SIZES = (10**3, 10**6)
THREADS = (1, 16)
# Each throughput figure counts pages for this long; short, so the whole run stays bounded.
THROUGHPUT_SECONDS = 2.0
GROWTH_TARGET = 2.0  # PostgreSQL page latency at 10^6 / at 10^3
OWNER, READER = "ticket_owner", "ticket_reader"


def _throughput(store: TicketStore, threads: int) -> float:
    """Return search_tickets pages per second with `threads` threads sharing `store`."""
    counts = [0] * threads
    stop = time.perf_counter() + THROUGHPUT_SECONDS

    def work(slot: int) -> None:
        context = {"tenant": f"t{slot * 37 % TENANTS:03d}", "can_read_tickets": True}
        while time.perf_counter() < stop:
            execute_tool("search_tickets", FIRST, context, store)
            counts[slot] += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.perf_counter() - started)


def _page_call(args: dict[str, object], store: TicketStore) -> Callable[[], object]:
    return lambda: execute_tool("search_tickets", args, CONTEXT, store)


def _raw_page(connection: psycopg.Connection) -> Callable[[], object]:
    """One first page as the store reads it (scope, then the keyset query), on a bare connection."""
    connection.read_only = True
    sql, params = _PAGE.query(TENANT, after=None, status=None, text=None, limit=LIMIT + 1)

    def page() -> object:
        connection.execute(_SCOPE_SQL, (TENANT, "5000"))
        rows = connection.execute(sql, params).fetchall()
        connection.commit()
        return rows

    return page


def _plan(dsn: str, cursor: str) -> list[str]:
    """Return PostgreSQL's plan for the store's page query after `cursor`, as the reader."""
    with psycopg.connect(dsn) as connection:
        connection.execute(_SCOPE_SQL, (TENANT, "5000"))
        sql, params = _PAGE.query(TENANT, after=cursor, status=None, text=None, limit=LIMIT + 1)
        rows = connection.execute("EXPLAIN (COSTS OFF) " + sql, params).fetchall()
    return [str(row[0]) for row in rows]


def _load(cluster: ThrowawayCluster, size: int, sqlite: Path) -> tuple[dict[str, object], float]:
    """Put `size` tickets in a new PostgreSQL database and in `sqlite`; return deep args, COPY s."""
    records = _records(size)
    deep = _deep(records)
    dbname = f"tickets_{size}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
        superuser.execute(f"CREATE DATABASE {dbname} OWNER {OWNER}")
    started = time.perf_counter()
    with psycopg.connect(cluster.dsn(OWNER, dbname)) as owner:
        import_records(owner, records, grant_to=READER)
    seconds = time.perf_counter() - started
    write_database(sqlite, records)
    return deep, seconds


def _run(cluster: ThrowawayCluster, folder: Path) -> None:
    with psycopg.connect(cluster.dsn(), autocommit=True) as superuser:
        superuser.execute(f"CREATE ROLE {OWNER} LOGIN")
        superuser.execute(f"CREATE ROLE {READER} LOGIN")
    loaded = {size: _load(cluster, size, folder / f"{size}.sqlite") for size in SIZES}
    big = SIZES[-1]
    calls: dict[str, Callable[[], object]] = {}
    stores: dict[str, TicketStore] = {}
    with ExitStack() as stack:
        for size in SIZES:
            deep = loaded[size][0]
            reader = cluster.dsn(READER, f"tickets_{size}")
            stores[f"pg {size}"] = stack.enter_context(
                PostgresStore.open(reader, max_connections=max(THREADS))
            )
            stores[f"sqlite {size}"] = stack.enter_context(
                SQLiteStore.open(folder / f"{size}.sqlite")
            )
            for kind in ("pg", "sqlite"):
                store = stores[f"{kind} {size}"]
                if execute_tool("search_tickets", deep, CONTEXT, store)["ok"] is not True:
                    raise RuntimeError("the benchmark's page call failed")
                calls[f"{kind} first {size}"] = _page_call(FIRST, store)
                calls[f"{kind} deep {size}"] = _page_call(deep, store)
        for label, user in (("raw rls", READER), ("raw no rls", "postgres")):
            connection = stack.enter_context(psycopg.connect(cluster.dsn(user, f"tickets_{big}")))
            calls[label] = _raw_page(connection)
        seconds = _paired_rounds(calls)
        cursor = str(loaded[big][0].get("cursor"))
        print(f"plan of a page after a cursor at {big:,} tickets, as the reader:")
        for line in _plan(cluster.dsn(READER, f"tickets_{big}"), cursor):
            print(f"  {line}")
        _throughput(stores[f"pg {big}"], max(THREADS))  # warm: let the pool grow first
        pages = {
            (kind, threads): _throughput(stores[f"{kind} {big}"], threads)
            for threads in THREADS
            for kind in ("pg", "sqlite")
        }
    _report(seconds, {size: loaded[size][1] for size in SIZES}, pages)


def _report(
    seconds: dict[str, list[float]],
    copy_seconds: dict[int, float],
    pages: dict[tuple[str, int], float],
) -> None:
    columns = ("pg first", "pg deep", "sqlite first", "sqlite deep")
    print(f"page latency, microseconds per call, median of {ROUNDS} rounds; limit {LIMIT}")
    print(f"{'tickets':>9} | {'COPY s':>7} | " + " | ".join(f"{c:>12}" for c in columns))
    for size in SIZES:
        cells = " | ".join(
            f"{statistics.median(seconds[f'{c} {size}']) * 1e6:>12.1f}" for c in columns
        )
        print(f"{size:>9,} | {copy_seconds[size]:>7.1f} | {cells}")
    low, high = SIZES
    growth = [
        _per_round(seconds[f"pg {page} {high}"], seconds[f"pg {page} {low}"])
        for page in ("first", "deep")
    ]
    worst = max(growth, key=lambda spread: spread.median)
    print(
        f"target: PostgreSQL page latency grows <= {GROWTH_TARGET:g}x from 10^3 to 10^6: "
        f"first {growth[0].ratio()}, deep {growth[1].ratio()}, "
        f"{'met' if worst.median <= GROWTH_TARGET else 'NOT met'}"
    )
    rls = _per_round(seconds["raw rls"], seconds["raw no rls"])
    with_rls, without = (statistics.median(seconds[c]) * 1e6 for c in ("raw rls", "raw no rls"))
    print(
        f"second wall at {high:,}: the store's statements take {with_rls:.1f} us as the reader, "
        f"{without:.1f} us as a superuser (policy skipped): paired ratio {rls.ratio()}"
    )
    print(f"pages per second at {high:,}, {THROUGHPUT_SECONDS:g} s each, one shared store")
    print(f"{'threads':>7} | {'postgres':>10} | {'sqlite':>10}")
    for threads in THREADS:
        print(f"{threads:>7} | {pages['pg', threads]:>10,.0f} | {pages['sqlite', threads]:>10,.0f}")


def main() -> None:
    """Start a throwaway cluster, measure, print, and remove the cluster even on failure."""
    binaries = find_binaries()
    if binaries is None:
        print("skipped: no PostgreSQL server: install the dev extra or set TICKET_TOOLS_PG_BIN")
        return
    cluster = ThrowawayCluster(binaries)
    try:
        cluster.start()
        with tempfile.TemporaryDirectory() as folder:
            _run(cluster, Path(folder))
    finally:
        cluster.destroy()


if __name__ == "__main__":
    main()
