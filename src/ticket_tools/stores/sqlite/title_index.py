"""The title index in SQLite: its tables, its build, its upkeep per batch, and a search's reads.

Three tables beside `tickets` (schema version 6), none of which a reader's page
statement names: `title_grams` (per tenant, gram and bucket, the container of offsets,
`stores/grams.py`), `gram_counts` (per tenant and gram, how many tickets have it) and
`tenant_sizes` (per tenant, its tickets and whether it is indexed). All three are keyed
by the tenant first, so every read of them is bound to one tenant, as a page is.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from ticket_tools.stores import index_writes
from ticket_tools.stores.grams import TenantIndexBuilder, Term, build_rows
from ticket_tools.stores.index_search import Bucket, Look, Row, Start
from ticket_tools.stores.index_writes import IndexEdits, TicketChange, index_edits
from ticket_tools.tickets import Ticket

TITLE_GRAMS = """CREATE TABLE title_grams (
    tenant TEXT NOT NULL,
    gram TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    offsets BLOB NOT NULL,
    PRIMARY KEY (tenant, gram, bucket)
) WITHOUT ROWID"""
GRAM_COUNTS = """CREATE TABLE gram_counts (
    tenant TEXT NOT NULL,
    gram TEXT NOT NULL,
    tickets INTEGER NOT NULL,
    PRIMARY KEY (tenant, gram)
) WITHOUT ROWID"""
TENANT_SIZES = """CREATE TABLE tenant_sizes (
    tenant TEXT NOT NULL PRIMARY KEY,
    tickets INTEGER NOT NULL,
    indexed INTEGER NOT NULL
) WITHOUT ROWID"""
INDEX_SCHEMA = (TITLE_GRAMS, GRAM_COUNTS, TENANT_SIZES)
"""What schema version 6 adds to version 5, in this order."""

IndexProgress = Callable[[int, int], None]
"""Called as progress(done, total) while an index is built: tickets indexed so far, of total."""

# Rows per executemany while an index is built; also how often progress is told.
_BUILD_BATCH = 10_000
# A build's rows come bucket by bucket, and go into the gram-ordered key sorted, in one
# INSERT ... ORDER BY: a B-tree filled in key order is compact and fast to fill.
_UNSORTED_SQL = (
    "CREATE TEMP TABLE unsorted_grams (tenant TEXT, gram TEXT, bucket INTEGER, offsets BLOB)"
)
_SIZES_SQL = (
    "INSERT INTO tenant_sizes SELECT tenant, count(*), count(*) >= ? FROM tickets GROUP BY tenant"
)
# A container holds two bytes an offset: its length says how many tickets have the gram.
_COUNTS_SQL = (
    "INSERT INTO gram_counts SELECT tenant, gram, sum(length(offsets)) / 2 FROM title_grams "
    "GROUP BY tenant, gram"
)
_TENANT_COUNTS_SQL = (
    "INSERT INTO gram_counts SELECT tenant, gram, sum(length(offsets)) / 2 FROM title_grams "
    "WHERE tenant = ? GROUP BY tenant, gram"
)
_TENANT_TICKETS_SQL = "SELECT id, title, status FROM tickets WHERE tenant = ? ORDER BY id"

# A search's reads (SQLiteSession): each bound to one tenant.
_SIZE_SQL = "SELECT tickets, indexed FROM tenant_sizes WHERE tenant = ?"
_COUNTS_OF_SQL = "SELECT gram, tickets FROM gram_counts WHERE tenant = ? AND gram IN ({})"
_RANGE_COUNT_SQL = (
    "SELECT coalesce(sum(tickets), 0) FROM gram_counts WHERE tenant = ? AND gram >= ? AND gram <= ?"
)
_DRIVER_SQL = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = ? AND gram = ? AND bucket >= ? "
    "ORDER BY bucket LIMIT ?"
)
# A range's rows come in key order (by gram, then bucket), sorted by bucket here: an ORDER
# BY would sort the same rows in a temporary B-tree.
_RANGE_DRIVER_SQL = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = ? AND gram >= ? AND gram <= ? "
    "AND bucket >= ?"
)
_IN_BUCKETS_SQL = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = ? AND gram = ? AND bucket IN ({})"
)
_RANGE_IN_BUCKETS_SQL = (
    "SELECT bucket, offsets FROM title_grams WHERE tenant = ? AND gram >= ? AND gram <= ? "
    "AND bucket IN ({})"
)
_TICKETS_SQL = "SELECT id, title, status FROM tickets WHERE tenant = ? AND id IN ({}) ORDER BY id"
_STATUS_TICKETS_SQL = (
    "SELECT id, title, status FROM tickets WHERE tenant = ? AND status = ? AND id IN ({}) "
    "ORDER BY id"
)

# A batch's upkeep (`write_index`): keys looked up up to a thousand a statement, fewer
# where the library's limit on variables is lower (999 before SQLite 3.32).
_KEYS = 1000
_SIZES_OF_SQL = (
    "WITH named(tenant) AS (VALUES {}) "
    "SELECT tenant, tickets, indexed FROM named JOIN tenant_sizes USING (tenant)"
)
_CONTAINERS_OF_SQL = (
    "WITH edited(tenant, gram, bucket) AS (VALUES {}) "
    "SELECT tenant, gram, bucket, offsets FROM edited JOIN title_grams USING (tenant, gram, bucket)"
)
_PUT_CONTAINER_SQL = (
    "INSERT INTO title_grams VALUES (?, ?, ?, ?) ON CONFLICT (tenant, gram, bucket) "
    "DO UPDATE SET offsets = excluded.offsets"
)
_DROP_CONTAINER_SQL = "DELETE FROM title_grams WHERE tenant = ? AND gram = ? AND bucket = ?"
_ADD_COUNT_SQL = (
    "INSERT INTO gram_counts VALUES (?, ?, ?) ON CONFLICT (tenant, gram) "
    "DO UPDATE SET tickets = tickets + excluded.tickets"
)
_DROP_COUNT_SQL = "DELETE FROM gram_counts WHERE tenant = ? AND gram = ? AND tickets = 0"
_ADD_SIZE_SQL = (
    "INSERT INTO tenant_sizes VALUES (?, ?, 0) ON CONFLICT (tenant) "
    "DO UPDATE SET tickets = tickets + excluded.tickets"
)
_INDEXED_NOW_SQL = "UPDATE tenant_sizes SET indexed = 1 WHERE tenant = ?"
_DROP_TENANT_SQL = "DELETE FROM {} WHERE tenant = ?"

T = TypeVar("T")
PageQuery = Callable[
    [str | None, str | None, str | None, int | None], tuple[str, tuple[object, ...]]
]
"""The store's page statement and its parameters for (status, text, after, limit)."""


def create_index_schema(connection: sqlite3.Connection) -> None:
    """Create the title index's tables (inside the caller's transaction)."""
    for statement in INDEX_SCHEMA:
        connection.execute(statement)


def build_index(connection: sqlite3.Connection, on_progress: IndexProgress | None = None) -> int:
    """Build the title index from the tickets, replacing any (inside the caller's transaction).

    Every tenant's size is counted; each tenant of INDEX_MIN_TICKETS or more is indexed.
    Return how many tickets the index covers.
    """
    for table in ("title_grams", "gram_counts", "tenant_sizes"):
        connection.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed names
    connection.execute(_SIZES_SQL, (index_writes.INDEX_MIN_TICKETS,))
    indexed = connection.execute(
        "SELECT tenant, tickets FROM tenant_sizes WHERE indexed ORDER BY tenant"
    ).fetchall()
    total: int = sum(tickets for _, tickets in indexed)
    if not indexed:
        return 0
    connection.execute(_UNSORTED_SQL)
    insert = "INSERT INTO temp.unsorted_grams VALUES (?, ?, ?, ?)"
    done = 0
    for tenant, _ in indexed:
        builder = TenantIndexBuilder(tenant)
        tickets = connection.execute(_TENANT_TICKETS_SQL, (tenant,))
        while chunk := tickets.fetchmany(_BUILD_BATCH):
            connection.executemany(insert, builder.add(chunk))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, total)
        connection.executemany(insert, builder.finish())
    connection.execute(
        "INSERT INTO title_grams SELECT * FROM temp.unsorted_grams ORDER BY tenant, gram, bucket"
    )
    connection.execute("DROP TABLE temp.unsorted_grams")
    connection.execute(_COUNTS_SQL)
    return total


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def _index_tenant(connection: sqlite3.Connection, tenant: str) -> None:
    """Index one tenant now (it has grown to INDEX_MIN_TICKETS): its rows, counts and mark."""
    for table in ("title_grams", "gram_counts"):
        connection.execute(_DROP_TENANT_SQL.format(table), (tenant,))
    tickets = connection.execute(_TENANT_TICKETS_SQL, (tenant,)).fetchall()
    connection.executemany(
        "INSERT INTO title_grams VALUES (?, ?, ?, ?)", build_rows(tenant, tickets)
    )
    connection.execute(_TENANT_COUNTS_SQL, (tenant,))
    connection.execute(_INDEXED_NOW_SQL, (tenant,))


def tenant_sizes(
    connection: sqlite3.Connection, tenants: Iterable[str]
) -> dict[str, tuple[int, bool]]:
    """Return (tickets, indexed) of each of `tenants` that has a size kept."""
    sizes: dict[str, tuple[int, bool]] = {}
    for chunk in _batches(sorted(tenants), _keys(connection, 1)):
        sql = _SIZES_OF_SQL.format(", ".join(["(?)"] * len(chunk)))
        for tenant, tickets, indexed in connection.execute(sql, chunk):
            sizes[tenant] = (tickets, bool(indexed))
    return sizes


def write_index(
    connection: sqlite3.Connection,
    sizes: dict[str, tuple[int, bool]],
    changes: Sequence[TicketChange],
    steps: dict[str, int],
) -> None:
    """Bring the index up to a batch's writes (inside its transaction, after them).

    `sizes` as `tenant_sizes` read them before the batch; `changes` the batch's keys of
    indexed tenants, whose index is edited (`index_writes`); `steps`, per tenant, the
    tickets the batch created less those it removed. A tenant that grows to
    INDEX_MIN_TICKETS is indexed whole.
    """
    edits = index_edits(changes)
    if edits.containers:
        _write_edits(connection, edits)
    moved = sorted(steps.items())
    connection.executemany(_ADD_SIZE_SQL, moved)
    for tenant, step in moved:
        tickets, indexed = sizes.get(tenant, (0, False))
        if not indexed and tickets + step >= index_writes.INDEX_MIN_TICKETS:
            _index_tenant(connection, tenant)


def _keys(connection: sqlite3.Connection, variables: int) -> int:
    """Return how many keys of `variables` variables each one statement may look up."""
    return min(_KEYS, connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // variables)


def _write_edits(connection: sqlite3.Connection, edits: IndexEdits) -> None:
    keys = sorted(edits.containers)
    stored: dict[tuple[str, str, int], bytes] = {}
    for chunk in _batches(keys, _keys(connection, 3)):
        sql = _CONTAINERS_OF_SQL.format(", ".join(["(?, ?, ?)"] * len(chunk)))
        for tenant, gram, bucket, offsets in connection.execute(sql, [p for k in chunk for p in k]):
            stored[(tenant, gram, bucket)] = offsets
    put: list[tuple[str, str, int, bytes]] = []
    drop: list[tuple[str, str, int]] = []
    for key in keys:
        container = edits.containers[key].applied(stored.get(key))
        if container:
            put.append((*key, container))
        else:
            drop.append(key)
    connection.executemany(_PUT_CONTAINER_SQL, put)
    connection.executemany(_DROP_CONTAINER_SQL, drop)
    counts = sorted(edits.counts.items())
    connection.executemany(_ADD_COUNT_SQL, [(*key, step) for key, step in counts if step])
    connection.executemany(_DROP_COUNT_SQL, [key for key, step in counts if step < 0])


class SQLiteSession:
    """One search's reads of one tenant through `connection`, inside the caller's transaction."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        tenant: str,
        *,
        width: int,
        page: PageQuery,
        ticket: Callable[[Row], Ticket],
    ) -> None:
        """`page(status, text, after, limit)` is the store's page statement; `ticket` its row."""
        self._connection = connection
        self._tenant = tenant
        self._page = page
        self._cursors: list[sqlite3.Cursor] = []
        self.width = width
        """How many digits every ticket id of the store has."""
        self.ticket = ticket
        """Make a row the ticket a search returns."""

    def close(self) -> None:
        """Finish every statement still open (a scan stopped early)."""
        for cursor in self._cursors:
            cursor.close()

    def start(self, after: str | None, rows: int, terms: Sequence[Term]) -> Start:
        """Look the terms up; the scan's rows are read as they are taken.

        The small terms' containers are not read with the look: a statement here costs
        microseconds, not a round trip.
        """

        def scan() -> Iterable[Row]:
            sql, params = self._page(None, None, after, rows)
            cursor = self._connection.execute(sql, params)
            self._cursors.append(cursor)
            return cursor

        return Start(self._look(terms), scan)

    def _look(self, terms: Sequence[Term]) -> Look:
        execute = self._connection.execute
        row = execute(_SIZE_SQL, (self._tenant,)).fetchone()
        if row is None or not row[1]:
            return Look(indexed=False)
        grams = sorted({term.low for term in terms if term.low == term.high})
        counts: dict[object, int] = {}
        if grams:  # an empty IN () would read the whole table
            sql = _COUNTS_OF_SQL.format(", ".join(["?"] * len(grams)))
            counts.update(execute(sql, (self._tenant, *grams)).fetchall())
        for term in terms:
            if term.low != term.high:
                [(count,)] = execute(_RANGE_COUNT_SQL, (self._tenant, *term)).fetchall()
                counts[term] = count
        return Look(
            indexed=True,
            tickets=int(row[0]),
            counts=tuple(
                counts.get(term.low if term.low == term.high else term, 0) for term in terms
            ),
        )

    def filtered_scan(
        self, status: str | None, text: str | None, after: str | None, limit: int | None
    ) -> list[Ticket]:
        """Return the first `limit` matching tickets after `after`: the page statement's scan."""
        sql, params = self._page(status, text, after, limit)
        return [self.ticket(row) for row in self._connection.execute(sql, params)]

    def buckets(self, driver: Term, others: Sequence[Term], first: int, count: int) -> list[Bucket]:
        """Return the first `count` buckets from `first` on where `driver` has a gram."""
        execute = self._connection.execute
        found: dict[int, list[bytes]] = {}
        if driver.low == driver.high:
            rows = execute(_DRIVER_SQL, (self._tenant, driver.low, first, count)).fetchall()
        else:
            every = execute(_RANGE_DRIVER_SQL, (self._tenant, *driver, first)).fetchall()
            kept = sorted({bucket for bucket, _ in every})[:count]
            rows = [row for row in every if row[0] in kept]
        for bucket, offsets in sorted(rows, key=lambda row: int(row[0])):
            found.setdefault(bucket, []).append(offsets)
        numbers = list(found)
        if not numbers:  # and no IN (), which would read the whole table
            return []
        marks = ", ".join(["?"] * len(numbers))
        held: list[dict[int, list[bytes]]] = []
        for term in others:
            if term.low == term.high:
                sql, params = _IN_BUCKETS_SQL.format(marks), (self._tenant, term.low, *numbers)
            else:
                sql, params = _RANGE_IN_BUCKETS_SQL.format(marks), (self._tenant, *term, *numbers)
            containers: dict[int, list[bytes]] = {}
            for bucket, offsets in execute(sql, params):
                containers.setdefault(bucket, []).append(offsets)
            held.append(containers)
        return [
            Bucket(number, found[number], [term.get(number, []) for term in held])
            for number in numbers
        ]

    def tickets(self, ids: Sequence[str], status: str | None) -> Sequence[Row]:
        """Return the tickets with these ids and `status`, by id."""
        marks = ", ".join(["?"] * len(ids))
        if status is None:
            sql, params = _TICKETS_SQL.format(marks), (self._tenant, *ids)
        else:
            sql, params = _STATUS_TICKETS_SQL.format(marks), (self._tenant, status, *ids)
        return self._connection.execute(sql, params).fetchall()
