"""SQLiteStore: the ticket store as an SQLite table, read through its primary-key index."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path

from ticket_tools.filters import TicketFilter, title_contains
from ticket_tools.store import Records, StoreError, TicketStore, tenant_of
from ticket_tools.tickets import Ticket

# Written into the file header so `open` can tell a ticket database of this schema
# from any other SQLite file without guessing from table names.
APPLICATION_ID = 0x544B5431  # "TKT1"
SCHEMA_VERSION = 1
# sqlite3's own default: how long a read waits for another process's write lock.
DEFAULT_BUSY_TIMEOUT = 5.0
# Rows per executemany call during an import; also how often progress is reported.
IMPORT_BATCH = 10_000

# Only the three public fields are stored: internal fields are dropped at import,
# so no query, bug or future column list can ever return them. WITHOUT ROWID makes
# the (tenant, id) primary key the table itself: a page is one contiguous range.
_SCHEMA = """
CREATE TABLE tickets (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    title TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID
"""
# PRAGMA table_info rows as (name, type, notnull, position in the primary key).
_COLUMNS = (
    ("tenant", "TEXT", 1, 1),
    ("id", "TEXT", 1, 2),
    ("title", "TEXT", 1, 0),
    ("status", "TEXT", 1, 0),
)
# The contract's text filter, registered on every connection: Python's str.lower()
# and a literal substring test. SQLite's lower() and LIKE fold ASCII only, and LIKE
# reads % and _ as wildcards, so neither may stand in for it.
_MATCH_FUNCTION = "ticket_title_contains"

_GET_SQL = "SELECT id, title, status FROM tickets WHERE tenant = ? AND id = ?"


def _page_sql(*, status: bool, query: bool, after: bool) -> str:
    """Build the page query for one combination of filters, from constant fragments only."""
    where = ["tenant = ?"]
    if after:
        where.append("id > ?")
    if status:
        where.append("status = ?")
    if query:
        where.append(f"{_MATCH_FUNCTION}(title, ?)")
    # Every value is a bound parameter; the text varies only by which filters are on.
    return (
        "SELECT id, title, status FROM tickets WHERE "  # noqa: S608
        + " AND ".join(where)
        + " ORDER BY id LIMIT ?"
    )


# One fixed statement per filter combination, so each keeps a simple, index-only plan.
_PAGE_SQL = {
    (status, query, after): _page_sql(status=status, query=query, after=after)
    for status in (False, True)
    for query in (False, True)
    for after in (False, True)
}


class RecordsError(ValueError):
    """A records mapping that cannot become a ticket table (a malformed store)."""


class SQLiteStore(TicketStore):
    """Tickets in an SQLite database: one read-only connection, safe to share across threads.

    Each call runs one SELECT under a lock, so a store may be shared by threads
    (queries are serialised); each page is one statement, hence one consistent
    snapshot. Close it with `close()` or a `with` block; it also closes when collected.
    """

    def __init__(self, connection: sqlite3.Connection, source: str) -> None:
        """Wrap an open connection to a ticket database; check its schema, then forbid writes."""
        self._source = source
        self._lock = threading.Lock()
        self._connection = connection
        self._close = weakref.finalize(self, connection.close)
        try:
            _check_schema(connection, source)
            connection.create_function(_MATCH_FUNCTION, 2, _title_matches, deterministic=True)
            connection.execute("PRAGMA query_only = ON")
        except sqlite3.Error as error:
            self.close()
            raise _store_error(error, source) from None
        except StoreError:
            self.close()
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, timeout: float | None = None) -> SQLiteStore:
        """Open an existing ticket database file, read-only.

        `timeout` is how long a read waits for another connection's write lock
        before failing as "locked" (default DEFAULT_BUSY_TIMEOUT seconds).
        """
        path = Path(path)
        timeout = DEFAULT_BUSY_TIMEOUT if timeout is None else timeout
        if not path.exists():
            raise StoreError("missing", f"no database at {path}")
        try:
            connection = sqlite3.connect(
                path.resolve().as_uri() + "?mode=ro",
                uri=True,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise _store_error(error, str(path)) from None
        return cls(connection, str(path))

    @classmethod
    def from_records(
        cls, records: Records, path: str | os.PathLike[str] = ":memory:"
    ) -> SQLiteStore:
        """Build a store from a contract records dict: in memory, or as a new database file."""
        if str(path) != ":memory:":
            write_database(path, records)
            return cls.open(path)
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        _insert(connection, _rows(records), on_progress=None)
        return cls(connection, ":memory:")

    def close(self) -> None:
        """Close the connection; later calls raise StoreError."""
        self._close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of one of `tenant`'s tickets, or None."""
        rows = self._select(_GET_SQL, (tenant, ticket_id))
        return _ticket(rows[0]) if rows else None

    def find(self, tenant: str, where: TicketFilter, *, limit: int | None) -> list[Ticket]:
        """Return the first `limit` (None: all) of `tenant`'s tickets matching `where`, by id.

        One range read of the primary key from (tenant, after) onwards, filtered as
        it goes and stopped after `limit` rows: the cost follows the rows read in
        this tenant's range, not the size of the table.
        """
        if limit is not None and limit <= 0:  # SQLite reads a negative LIMIT as "no limit".
            return []
        sql, params = _page_query(tenant, where, limit)
        return [_ticket(row) for row in self._select(sql, params)]

    def query_plan(self, where: TicketFilter) -> list[str]:
        """Return SQLite's EXPLAIN QUERY PLAN lines for the page query of `where`."""
        sql, params = _page_query("tenant", where, 1)
        rows = self._select(f"EXPLAIN QUERY PLAN {sql}", params)
        return [str(row[3]) for row in rows]

    def _select(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        try:
            with self._lock:
                return self._connection.execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise _store_error(error, self._source) from None


def write_database(
    path: str | os.PathLike[str],
    records: Records,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write `records` into a new ticket database file; return the ticket count.

    The file is built beside `path` under a temporary name and linked into place
    when complete, so a failed import leaves nothing behind and a reader never sees
    a half-built database. An existing `path` is never overwritten.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    rows = _rows(records)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        connection = sqlite3.connect(temporary, isolation_level=None)
        try:
            # The temporary file is discarded on any failure, so it needs no journal.
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")
            _insert(connection, rows, on_progress)
        finally:
            connection.close()
        # A hard link puts the complete file in place, and fails if `path` appeared
        # meanwhile: unlike a rename, it never replaces a file.
        os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return len(rows)


def _insert(
    connection: sqlite3.Connection,
    rows: list[tuple[str, str, str, str]],
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Create the schema and insert every row in one transaction."""
    connection.execute("BEGIN")
    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.execute(_SCHEMA)
    # Key order makes every insert an append to the B-tree.
    rows.sort()
    for start in range(0, len(rows), IMPORT_BATCH):
        batch = rows[start : start + IMPORT_BATCH]
        connection.executemany("INSERT INTO tickets VALUES (?, ?, ?, ?)", batch)
        if on_progress is not None:
            on_progress(start + len(batch), len(rows))
    connection.execute("COMMIT")


def _rows(records: Records) -> list[tuple[str, str, str, str]]:
    """Split each "tenant:TKT-123" key; keep id, title, status; reject what cannot round-trip."""
    return [
        _row(position, key, stored)
        for position, (key, stored) in enumerate(records.items(), start=1)
    ]


def _row(position: int, key: object, stored: object) -> tuple[str, str, str, str]:
    # Errors name the record's position, never its contents.
    where = f"record {position} (in file order)"
    if not isinstance(stored, Mapping) or not all(
        type(stored.get(field)) is str for field in ("id", "title", "status")
    ):
        raise RecordsError(f"{where}: id, title and status must be strings")
    ticket_id, title, status = str(stored["id"]), str(stored["title"]), str(stored["status"])
    if type(key) is not str:
        raise RecordsError(f"{where}: the key is not a string")
    # Any id without a ":" round-trips: SQLite compares TEXT as UTF-8 bytes, which
    # orders exactly as Python orders str (by code point).
    tenant = tenant_of(key)
    key_id = key[len(tenant) + 1 :]
    # A tenant with a ":" would make "a:b:TKT-101" mean two things; the dict store
    # would show it to tenant "a" by prefix, a table only to tenant "a:b".
    if not tenant or ":" in tenant or key_id != ticket_id:
        raise RecordsError(f'{where}: the key is not "tenant:" followed by the ticket\'s own id')
    if not all(_encodable(text) for text in (tenant, ticket_id, title, status)):
        raise RecordsError(f"{where}: the text is not valid Unicode (a lone surrogate)")
    return (tenant, ticket_id, title, status)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_schema(connection: sqlite3.Connection, source: str) -> None:
    application_id = connection.execute("PRAGMA application_id").fetchone()[0]
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    columns = tuple(
        (name, kind, notnull, key)
        for _, name, kind, notnull, _, key in connection.execute("PRAGMA table_info(tickets)")
    )
    if application_id != APPLICATION_ID or version != SCHEMA_VERSION or columns != _COLUMNS:
        raise StoreError(
            "schema", f"{source} is not a ticket-tools database (schema version {SCHEMA_VERSION})"
        )


def _page_query(
    tenant: str, where: TicketFilter, limit: int | None
) -> tuple[str, tuple[object, ...]]:
    params: list[object] = [tenant]
    if where.after is not None:
        params.append(where.after)
    if where.status is not None:
        params.append(where.status)
    if where.text is not None:
        params.append(where.text)
    params.append(-1 if limit is None else limit)
    sql = _PAGE_SQL[(where.status is not None, where.text is not None, where.after is not None)]
    return sql, tuple(params)


def _title_matches(title: object, text: object) -> bool:
    """Apply the contract's text filter (`title_contains`) inside SQLite."""
    return isinstance(title, str) and isinstance(text, str) and title_contains(title, text)


def _ticket(row: tuple[object, ...]) -> Ticket:
    return {"id": str(row[0]), "title": str(row[1]), "status": str(row[2])}


def _store_error(error: sqlite3.Error, source: str) -> StoreError:
    """Classify an sqlite3 error by its result code, never by its message."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreError("locked", f"{source} is locked by another connection; try again")
    if primary == sqlite3.SQLITE_NOTADB:
        return StoreError("schema", f"{source} is not an SQLite database")
    return StoreError("unavailable", f"cannot read {source} ({type(error).__name__})")
