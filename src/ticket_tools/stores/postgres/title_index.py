"""The title index in PostgreSQL: its build, its upkeep per batch, and a search's reads.

The tables (`schema.INDEX_TABLES`: title_grams, gram_counts, tenant_sizes) are the
SQLite store's (`stores/sqlite/title_index.py`), each under its own forced tenant policy.
Every statement a reader runs on them, and on the tickets, compares columns by equality
or by range (`=`, `= ANY`, `>=`, `<=` on text and integers): operators whose functions
are LEAKPROOF, so the planner may use their index under the policy, where it must scan
for a condition whose function is not (`strpos`, `LIKE`, pg_trgm's `%`, `@@`, `@>`;
docs/postgres.md). No function is marked LEAKPROOF and nothing runs SECURITY DEFINER.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import psycopg

from ticket_tools.stores import index_writes
from ticket_tools.stores.grams import (
    GramRow,
    TenantIndexBuilder,
    Term,
    build_rows,
)
from ticket_tools.stores.index_search import PROBE_TICKETS, Bucket, Look, Row, Start
from ticket_tools.stores.index_writes import IndexEdits, TicketChange, index_edits
from ticket_tools.stores.postgres.schema import force_index
from ticket_tools.tickets import Ticket

PageQuery = Callable[
    [str | None, str | None, str | None, int | None], tuple[str, tuple[object, ...]]
]
"""The store's page statement and its parameters for (status, text, after, limit)."""
IndexProgress = Callable[[int, int], None]
"""Called as progress(done, total) while an index is built: tickets indexed so far, of total."""

Fill = Literal["copy", "insert"]
"""How a build writes its rows: COPY, into tables not yet forced; INSERT, into served ones."""
# Tickets read per fetch while an index is built; also how often progress is told.
_BUILD_BATCH = 10_000
_SCOPE_SQL = "SELECT set_config('app.tenant', %s, true)"
# Each round trip of a search bounds its statements by what is left of the call, and sets
# how they are planned: a search's statements are the same few each time, prepared by
# psycopg after a few calls, and PostgreSQL's generic plan of each is the custom one less
# the planning (a millisecond for the look, on every call).
GENERIC = "force_generic_plan"
_BOUNDS_SQL = (
    "SELECT set_config('statement_timeout', %s, true), "
    f"set_config('plan_cache_mode', '{GENERIC}', true)"
)
BOUNDS_PREFIX = _BOUNDS_SQL[:40]
"""How a round trip's bounds statement begins (`PostgresStore.search_plans` leaves it out)."""

# A search's reads (PostgresSession), each bound to one tenant and run as the reader.
# Every statement of a search is a few index reads whose plan has no choice to make: by
# the primary key, with = or = ANY (an array, or an array a subquery makes first), or a
# range of one gram column. No join or unnest: a generic plan (below) cannot tell how many
# rows those bring, and may read a whole table for them (a seq scan under the policy).
# The look, in one statement, its rows told apart by their first column: 0, the tenant's
# size (no row: not indexed); 1, a gram's count; 2, a container of a gram at most
# %(small)s tickets have (`index_search.Look.small`).
_LOOK_SQL = """
SELECT 0, NULL::text, NULL::bigint, tickets, NULL::bytea
FROM tenant_sizes WHERE tenant = %(tenant)s AND indexed
UNION ALL
SELECT 1, gram, NULL, tickets, NULL
FROM gram_counts WHERE tenant = %(tenant)s AND gram = ANY(%(grams)s)
UNION ALL
SELECT 2, gram, bucket, NULL, offsets
FROM title_grams WHERE tenant = %(tenant)s AND gram = ANY(ARRAY(
    SELECT gram FROM gram_counts
    WHERE tenant = %(tenant)s AND gram = ANY(%(grams)s) AND tickets <= %(small)s
))
"""
# A range term's look (a query of one or two characters): 3, its count (summed over its
# grams); 4, its containers, if that count is at most %(small)s.
_RANGE_LOOK_SQL = """
WITH counted AS (
    SELECT coalesce(sum(tickets), 0)::bigint AS n FROM gram_counts
    WHERE tenant = %(tenant)s AND gram >= %(low)s AND gram <= %(high)s
)
SELECT 3, NULL::text, NULL::bigint, (SELECT n FROM counted), NULL::bytea
UNION ALL
SELECT 4, NULL, bucket, NULL, offsets FROM title_grams
WHERE tenant = %(tenant)s AND gram >= %(low)s AND gram <= %(high)s
    AND (SELECT n FROM counted) <= %(small)s
"""
# The rarest term's first %(count)s buckets from %(first)s on: by its gram (equality, so
# the bucket bounds the index read too), or its range of grams.
_CHOSEN_ONE = (
    "SELECT bucket FROM title_grams WHERE tenant = %(tenant)s AND gram = %(low)s "
    "AND bucket >= %(first)s ORDER BY bucket LIMIT %(count)s"
)
_CHOSEN_RANGE = (
    "SELECT DISTINCT bucket FROM title_grams WHERE tenant = %(tenant)s AND gram >= %(low)s "
    "AND gram <= %(high)s AND bucket >= %(first)s ORDER BY bucket LIMIT %(count)s"
)
# A term's containers in those buckets: one statement a term, the same round trip.
_TERM_IN = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = %(tenant)s AND gram = %(term_low)s "
    "AND bucket = ANY(ARRAY({chosen}))"
)
_RANGE_TERM_IN = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = %(tenant)s "
    "AND gram >= %(term_low)s AND gram <= %(term_high)s AND bucket = ANY(ARRAY({chosen}))"
)
_TICKETS_SQL = (
    "SELECT id, title, status FROM tickets WHERE tenant = %s AND id = ANY(%s) ORDER BY id"
)
_STATUS_TICKETS_SQL = (
    "SELECT id, title, status FROM tickets WHERE tenant = %s AND id = ANY(%s) AND status = %s "
    "ORDER BY id"
)

# A batch's upkeep: every key travels as arrays, one per column (`unnest`), "C" as the
# tables' columns are, so the joins run along the primary keys.
SIZES_OF_SQL = (
    'SELECT tenant, tickets, indexed FROM tenant_sizes WHERE tenant = ANY(%s::text[] COLLATE "C")'
)
# Their arrays go in binary (%b): as text, each title's grams would be escaped one by one.
_CONTAINERS_OF_SQL = (
    "SELECT g.tenant, g.gram, g.bucket, g.offsets FROM title_grams g JOIN "
    '(SELECT tenant COLLATE "C" AS tenant, gram COLLATE "C" AS gram, bucket '
    "FROM unnest(%b::text[], %b::text[], %b::bigint[]) AS k(tenant, gram, bucket)) k "
    "USING (tenant, gram, bucket)"
)
_PUT_CONTAINERS_SQL = (
    "INSERT INTO title_grams SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[], "
    "%b::bytea[]) ON CONFLICT (tenant, gram, bucket) DO UPDATE SET offsets = excluded.offsets"
)
_DROP_CONTAINERS_SQL = (
    "DELETE FROM title_grams WHERE (tenant, gram, bucket) IN "
    '(SELECT tenant COLLATE "C", gram COLLATE "C", bucket '
    "FROM unnest(%b::text[], %b::text[], %b::bigint[]) AS k(tenant, gram, bucket))"
)
_ADD_COUNTS_SQL = (
    "INSERT INTO gram_counts SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[]) "
    "ON CONFLICT (tenant, gram) DO UPDATE SET tickets = gram_counts.tickets + excluded.tickets"
)
_DROP_COUNTS_SQL = (
    "DELETE FROM gram_counts WHERE tickets = 0 AND (tenant, gram) IN "
    '(SELECT tenant COLLATE "C", gram COLLATE "C" FROM unnest(%b::text[], %b::text[]) '
    "AS k(tenant, gram))"
)
_ADD_SIZES_SQL = (
    "INSERT INTO tenant_sizes SELECT tenant, tickets, false "
    "FROM unnest(%s::text[], %s::bigint[]) AS k(tenant, tickets) "
    "ON CONFLICT (tenant) DO UPDATE SET tickets = tenant_sizes.tickets + excluded.tickets"
)


def build_index(
    connection: psycopg.Connection,
    *,
    tickets: str = "tickets",
    suffix: str = "",
    on_progress: IndexProgress | None = None,
    fill: Fill = "copy",
) -> int:
    """Build the title index from the table `tickets`, replacing any (in the caller's transaction).

    The index's tables are named with `suffix` (`import --replace` builds "_next" ones
    beside the served ones). Every tenant's size is counted; each tenant of
    INDEX_MIN_TICKETS or more is indexed. Run as the owner. Rows go in by COPY into
    tables whose policies are not yet forced, then forced (`schema.force_index`); by
    INSERT ("insert") into served ones, which stay forced. Return the tickets indexed.
    """
    grams, counts, sizes = (f"{table}{suffix}" for table in _INDEX)
    write = _copy_rows if fill == "copy" else _insert_rows
    for table in (grams, counts, sizes):
        connection.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed names
    connection.execute(
        f"INSERT INTO {sizes} SELECT tenant, count(*), count(*) >= %s "  # noqa: S608
        f"FROM {tickets} GROUP BY tenant",
        (index_writes.INDEX_MIN_TICKETS,),
    )
    indexed = connection.execute(
        f"SELECT tenant, tickets FROM {sizes} WHERE indexed ORDER BY tenant"  # noqa: S608
    ).fetchall()
    total: int = sum(count for _, count in indexed)
    done = 0
    for tenant, _ in indexed:
        builder = TenantIndexBuilder(tenant)
        with connection.cursor(name="ticket_tools_index") as rows:
            rows.execute(
                f"SELECT id, title, status FROM {tickets} WHERE tenant = %s ORDER BY id",  # noqa: S608
                (tenant,),
            )
            while chunk := rows.fetchmany(_BUILD_BATCH):
                write(connection, grams, builder.add(chunk))
                done += len(chunk)
                if on_progress is not None:
                    on_progress(done, total)
        write(connection, grams, builder.finish())
    connection.execute(
        f"INSERT INTO {counts} SELECT tenant, gram, sum(octet_length(offsets) / 2) "  # noqa: S608
        f"FROM {grams} GROUP BY tenant, gram"
    )
    if fill == "copy":
        for statement in force_index(suffix):
            connection.execute(statement)
    for table in (grams, counts, sizes):
        connection.execute(f"ANALYZE {table}")
    return total


_INDEX = ("title_grams", "gram_counts", "tenant_sizes")


def _copy_rows(connection: psycopg.Connection, table: str, rows: Sequence[GramRow]) -> None:
    with connection.cursor().copy(
        f"COPY {table} (tenant, gram, bucket, offsets) FROM STDIN"
    ) as copy:
        for row in rows:
            copy.write_row(row)


def _insert_rows(connection: psycopg.Connection, table: str, rows: Sequence[GramRow]) -> None:
    if rows:
        connection.execute(
            f"INSERT INTO {table} SELECT * FROM unnest(%s::text[], %s::text[], "  # noqa: S608
            "%s::bigint[], %s::bytea[])",
            _columns(rows, 4),
        )


def index_tenant(connection: psycopg.Connection, tenant: str) -> None:
    """Index one tenant now (it has grown to INDEX_MIN_TICKETS): its rows, counts and mark.

    In the caller's transaction, scoped to `tenant` (or as the owner), not in a pipeline.
    """
    for table in ("title_grams", "gram_counts"):
        connection.execute(f"DELETE FROM {table} WHERE tenant = %s", (tenant,))  # noqa: S608
    tickets = connection.execute(
        "SELECT id, title, status FROM tickets WHERE tenant = %s ORDER BY id", (tenant,)
    ).fetchall()
    _insert_rows(connection, "title_grams", build_rows(tenant, tickets))
    connection.execute(
        "INSERT INTO gram_counts SELECT tenant, gram, sum(octet_length(offsets) / 2) "
        "FROM title_grams WHERE tenant = %s GROUP BY tenant, gram",
        (tenant,),
    )
    connection.execute("UPDATE tenant_sizes SET indexed = true WHERE tenant = %s", (tenant,))


class IndexUpkeep:
    """A batch's upkeep of the index: sizes read with the versions, then edits, then writes.

    `sizes` holds, per tenant of the batch that has a row, (tickets, indexed).
    """

    def __init__(
        self,
        sizes: dict[str, tuple[int, bool]],
        changes: Sequence[TicketChange],
        moved: dict[str, int],
    ) -> None:
        """`changes`: the batch's keys of indexed tenants; `moved`: `index_writes.size_steps`."""
        self._sizes = sizes
        self.edits: IndexEdits = index_edits(changes)
        """The container and count edits of the batch's indexed tenants."""
        self.moved = moved
        """Per tenant whose size the batch changes, the tickets it created less those removed."""

    def read(
        self, connection: psycopg.Connection, tenants: Iterable[str] | None = None
    ) -> psycopg.Cursor[tuple[str, str, int, bytes]]:
        """Send the read of the edited containers (of `tenants` only, if given)."""
        keys = [
            key for key in sorted(self.edits.containers) if tenants is None or key[0] in tenants
        ]
        cursor: psycopg.Cursor[tuple[str, str, int, bytes]] = connection.cursor()
        cursor.execute(_CONTAINERS_OF_SQL, _columns(keys, 3))
        return cursor

    def write(
        self,
        connection: psycopg.Connection,
        stored: dict[tuple[str, str, int], bytes],
        tenants: Iterable[str] | None = None,
    ) -> None:
        """Send the writes of the edited containers, counts and sizes (of `tenants` only)."""
        chosen = None if tenants is None else set(tenants)

        def mine(tenant: str) -> bool:
            return chosen is None or tenant in chosen

        put: list[tuple[str, str, int, bytes]] = []
        drop: list[tuple[str, str, int]] = []
        for key in sorted(self.edits.containers):
            if mine(key[0]):
                container = self.edits.containers[key].applied(stored.get(key))
                (put.append((*key, container)) if container else drop.append(key))
        execute = connection.execute
        if put:
            execute(_PUT_CONTAINERS_SQL, _columns(put, 4))
        if drop:
            execute(_DROP_CONTAINERS_SQL, _columns(drop, 3))
        counts = [
            (*key, step) for key, step in sorted(self.edits.counts.items()) if step and mine(key[0])
        ]
        if counts:
            execute(_ADD_COUNTS_SQL, _columns(counts, 3))
            execute(_DROP_COUNTS_SQL, _columns([c[:2] for c in counts if c[2] < 0], 2))
        moved = [(tenant, step) for tenant, step in sorted(self.moved.items()) if mine(tenant)]
        if moved:
            execute(_ADD_SIZES_SQL, _columns(moved, 2))

    def promoted(self) -> list[str]:
        """Return the tenants the batch has grown to INDEX_MIN_TICKETS, not yet indexed."""
        grown = []
        for tenant, step in sorted(self.moved.items()):
            tickets, indexed = self._sizes.get(tenant, (0, False))
            if not indexed and tickets + step >= index_writes.INDEX_MIN_TICKETS:
                grown.append(tenant)
        return grown


def _columns(rows: Sequence[tuple[object, ...]], width: int) -> tuple[list[object], ...]:
    return tuple([row[column] for row in rows] for column in range(width))


class PostgresSession:
    """One search's reads of one tenant on a connection whose transaction is scoped to it.

    Each method is one round trip (its statements pipelined), its statement_timeout what
    is left of the call's `deadline` (time.monotonic()).
    """

    def __init__(
        self,
        connection: psycopg.Connection,
        tenant: str,
        *,
        width: int,
        deadline: float,
        page: PageQuery,
        ticket: Callable[[Row], Ticket],
    ) -> None:
        """`page(status, text, after, limit)` is the store's page statement; `ticket` its row."""
        self._connection = connection
        self._tenant = tenant
        self._deadline = deadline
        self._page = page
        self.width = width
        """How many digits every ticket id of the store has."""
        self.ticket = ticket
        """Make a row the ticket a search returns."""
        self.statements: list[tuple[str, Sequence[object] | Mapping[str, object]]] | None = None
        """Where the statements run are recorded, if a list (`PostgresStore.search_plans`)."""

    def _bounded(self) -> None:
        left = max(1, math.ceil((self._deadline - time.monotonic()) * 1000))
        self._run(_BOUNDS_SQL, (str(left),))

    def _run(
        self, sql: str, params: Sequence[object] | Mapping[str, object]
    ) -> psycopg.Cursor[Any]:
        """Execute one statement (within the caller's pipeline); record it if asked to."""
        if self.statements is not None:
            self.statements.append((sql, params))
        return self._connection.execute(sql, params)

    def start(self, after: str | None, rows: int, terms: Sequence[Term]) -> Start:
        """Look the terms up and read the scan's rows (any status), in one round trip."""
        grams = sorted({term.low for term in terms if term.low == term.high})
        ranges = [term for term in terms if term.low != term.high]
        tenant = self._tenant
        with self._connection.pipeline():
            looks: list[tuple[Term | None, psycopg.Cursor[Any]]] = [
                (
                    None,
                    self._run(
                        _LOOK_SQL, {"tenant": tenant, "grams": grams, "small": PROBE_TICKETS}
                    ),
                )
            ]
            for term in ranges:
                values = {
                    "tenant": tenant,
                    "low": term.low,
                    "high": term.high,
                    "small": PROBE_TICKETS,
                }
                looks.append((term, self._run(_RANGE_LOOK_SQL, values)))
            sql, params = self._page(None, None, after, rows)
            scan = self._run(sql, params)
            found = [(term, cursor.fetchall()) for term, cursor in looks]
            scanned = scan.fetchall()
        size: int | None = None
        counted: dict[Term, int] = {}
        small: dict[Term, list[tuple[int, bytes]]] = {}
        for ranged, rows_of in found:
            for kind, gram, bucket, count, offsets in rows_of:
                term = ranged if ranged is not None else Term(gram, gram)
                if kind == 0:
                    size = int(count)
                elif kind in (1, 3):
                    counted[term] = int(count)
                else:
                    small.setdefault(term, []).append((int(bucket), bytes(offsets)))
        if size is None:
            return Start(Look(indexed=False), lambda: scanned)
        return Start(
            Look(
                indexed=True,
                tickets=size,
                counts=tuple(counted.get(term, 0) for term in terms),
                small=small,
            ),
            lambda: scanned,
        )

    def filtered_scan(
        self, status: str | None, text: str | None, after: str | None, limit: int | None
    ) -> list[Ticket]:
        """Return the first `limit` matching tickets after `after`: the page statement's scan."""
        sql, params = self._page(status, text, after, limit)
        with self._connection.pipeline():
            self._bounded()
            rows = self._run(sql, params).fetchall()
        return [self.ticket(row) for row in rows]

    def buckets(self, driver: Term, others: Sequence[Term], first: int, count: int) -> list[Bucket]:
        """Return the first `count` buckets from `first` on where `driver` has a gram."""
        chosen = _CHOSEN_ONE if driver.low == driver.high else _CHOSEN_RANGE
        values: dict[str, object] = {
            "tenant": self._tenant,
            "low": driver.low,
            "high": driver.high,
            "first": first,
            "count": count,
        }
        with self._connection.pipeline():
            self._bounded()
            cursors = [
                self._run(
                    (_TERM_IN if term.low == term.high else _RANGE_TERM_IN).format(chosen=chosen),
                    {**values, "term_low": term.low, "term_high": term.high},
                )
                for term in (driver, *others)
            ]
            held: list[dict[int, list[bytes]]] = []
            for cursor in cursors:
                containers: dict[int, list[bytes]] = {}
                for bucket, offsets in cursor.fetchall():
                    containers.setdefault(int(bucket), []).append(bytes(offsets))
                held.append(containers)
        driven, rest = held[0], held[1:]
        return [
            Bucket(number, driven[number], [term.get(number, []) for term in rest])
            for number in sorted(driven)
        ]

    def tickets(self, ids: Sequence[str], status: str | None) -> Sequence[Row]:
        """Return the tickets with these ids and `status`, by id."""
        with self._connection.pipeline():
            self._bounded()
            if status is None:
                cursor = self._run(_TICKETS_SQL, (self._tenant, list(ids)))
            else:
                cursor = self._run(_STATUS_TICKETS_SQL, (self._tenant, list(ids), status))
            return cursor.fetchall()
