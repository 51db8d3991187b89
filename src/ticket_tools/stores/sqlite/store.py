"""SQLiteStore: the ticket store as an SQLite table, read through its primary-key index."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

from ticket_tools.filters import TicketFilter, title_contains
from ticket_tools.store import Records, TicketStore
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.index_search import find_with_index
from ticket_tools.stores.keyset_sql import PageStatements
from ticket_tools.stores.records import is_text, record_rows
from ticket_tools.stores.sqlite.importer import insert_rows, write_database
from ticket_tools.stores.sqlite.schema import check_file, check_schema, store_error
from ticket_tools.stores.sqlite.title_index import SQLiteSession
from ticket_tools.tickets import Ticket

# write_database is also importable from here, where it lived before the import split out.
__all__ = ["DEFAULT_BUSY_TIMEOUT", "SQLiteStore", "write_database"]

# sqlite3's own default: how long a read waits for another process's write lock.
DEFAULT_BUSY_TIMEOUT = 5.0
# SQLite's largest integer: any LIMIT above it means every row, as -1 does.
_MAX_LIMIT = 2**63 - 1

# The contract's text filter, registered on every connection: Python's str.lower()
# and a literal substring test. SQLite's lower() and LIKE fold ASCII only, and LIKE
# reads % and _ as wildcards, so neither may stand in for it.
_MATCH_FUNCTION = "ticket_title_contains"

_GET_SQL = "SELECT id, title, status FROM tickets WHERE tenant = ? AND id = ?"


# One fixed statement per filter combination, so each keeps a simple, index-only plan.
# The cursor is bound as its UTF-8 bytes, surrogates kept ("surrogatepass"), and read
# back as TEXT: any str, even one with no UTF-8 form, then compares with the stored ids
# byte by byte, which is Python's code-point order.
_PAGE = PageStatements(
    tenant="tenant = ?",
    after="id > CAST(? AS TEXT)",
    status="status = ?",
    text=f"{_MATCH_FUNCTION}(title, ?)",
    limit="?",
)


class SQLiteStore(TicketStore):
    """Tickets in an SQLite database: one read-only connection, safe to share across threads.

    Each call runs one SELECT under a lock, so a store may be shared by threads
    (queries are serialised); each page is one statement, hence one consistent
    snapshot. Close it with `close()` or a `with` block; it also closes when collected.

    Any tenant and filter get the dict store's answer or a StoreFailure, never another
    exception: a value with no UTF-8 form (a lone surrogate) equals and is part of no
    stored text, so it matches nothing, as in a dict of importable records.
    """

    def __init__(
        self, connection: sqlite3.Connection, source: str, *, id_format: IdFormat = ID_FORMAT
    ) -> None:
        """Wrap an open connection to a ticket database; check its schema, then forbid writes.

        The schema must be the one made for ticket IDs of `id_format`.
        """
        self._source = source
        self._id_format = id_format
        self._lock = threading.Lock()
        self._connection = connection
        self._close = weakref.finalize(self, _close_unless_in_use, self._lock, connection)
        try:
            check_schema(connection, source, id_format)
            connection.create_function(_MATCH_FUNCTION, 2, _title_matches, deterministic=True)
            connection.execute("PRAGMA query_only = ON")
        except sqlite3.Error as error:
            self.close()
            raise store_error(error, source) from None
        except StoreFailure:
            self.close()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        timeout: float | None = None,
        id_format: IdFormat = ID_FORMAT,
    ) -> SQLiteStore:
        """Open an existing ticket database file, read-only.

        `timeout` is how long a read waits for another connection's write lock
        before failing as "locked" (default DEFAULT_BUSY_TIMEOUT seconds). A file
        made for another ID width than `id_format` is refused (StoreFailure "schema").
        """
        path = Path(path)
        timeout = DEFAULT_BUSY_TIMEOUT if timeout is None else timeout
        check_file(path, "read")
        try:
            connection = sqlite3.connect(
                path.resolve().as_uri() + "?mode=ro",
                uri=True,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise store_error(error, str(path)) from None
        return cls(connection, str(path), id_format=id_format)

    @classmethod
    def from_records(
        cls,
        records: Records,
        path: str | os.PathLike[str] = ":memory:",
        *,
        id_format: IdFormat = ID_FORMAT,
    ) -> SQLiteStore:
        """Build a store from a contract records dict: in memory, or as a new database file.

        The records must follow the import rules (`records.record_rows`) for `id_format`.
        """
        if str(path) != ":memory:":
            write_database(path, records, id_format=id_format)
            return cls.open(path, id_format=id_format)
        connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        rows = record_rows(records, id_format=id_format)
        insert_rows(connection, rows, on_progress=None, id_format=id_format)
        return cls(connection, ":memory:", id_format=id_format)

    def close(self) -> None:
        """Close the connection; later calls raise StoreFailure.

        A call running on another thread keeps the connection open (`_close_unless_in_use`);
        it is closed with the store once collected.
        """
        self._close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get(self, tenant: str, ticket_id: str) -> Ticket | None:
        """Return the public view of one of `tenant`'s tickets, or None."""
        if not (is_text(tenant) and is_text(ticket_id)):
            return None
        rows = self._select(_GET_SQL, (tenant, ticket_id))
        return self._ticket(rows[0]) if rows else None

    def find(self, tenant: str, where: TicketFilter, *, limit: int | None) -> list[Ticket]:
        """Return the first `limit` (None: all) of `tenant`'s tickets matching `where`, by id.

        Without a text or a status, one range read of the primary key from (tenant,
        after) onwards, stopped after `limit` rows. With either, the plan of
        `index_search` in one read transaction: the title index (which holds statuses
        too), or a short scan first where the terms are common. Either way the cost
        follows the rows read, not the size of the table.
        """
        if limit is not None and limit <= 0:  # SQLite reads a negative LIMIT as "no limit".
            return []
        if not all(
            is_text(text) for text in (tenant, where.status, where.text) if text is not None
        ):
            return []
        if where.text is None and where.status is None:
            sql, params = _page_query(tenant, where, limit)
            return [self._ticket(row) for row in self._select(sql, params)]
        with self._session(tenant) as session:
            return find_with_index(session, where, limit)

    def query_plan(self, where: TicketFilter) -> list[str]:
        """Return SQLite's EXPLAIN QUERY PLAN lines for the page query of `where`."""
        sql, params = _page_query("tenant", where, 1)
        rows = self._select(f"EXPLAIN QUERY PLAN {sql}", params)
        return [str(row[3]) for row in rows]

    def search_plans(
        self, tenant: str, where: TicketFilter, *, limit: int | None
    ) -> list[list[str]]:
        """Run `find` and return the EXPLAIN QUERY PLAN lines of each statement it ran."""
        statements: list[str] = []
        self._connection.set_trace_callback(statements.append)
        try:
            self.find(tenant, where, limit=limit)
        finally:
            self._connection.set_trace_callback(None)
        reads = [sql for sql in statements if sql.startswith("SELECT")]
        return [
            [str(row[3]) for row in self._select(f"EXPLAIN QUERY PLAN {sql}", ())] for sql in reads
        ]

    @contextlib.contextmanager
    def _session(self, tenant: str) -> Iterator[SQLiteSession]:
        """Hold the lock and one read transaction (one snapshot) for a search's reads."""
        connection = self._connection
        with self._lock:
            self._check_open()
            session = SQLiteSession(
                connection,
                tenant,
                width=self._id_format.digits,
                page=lambda status, text, after, limit: _page_query(
                    tenant, TicketFilter(status, text, after), limit
                ),
                ticket=self._ticket,
            )
            try:
                connection.execute("BEGIN")
                yield session
            except sqlite3.Error as error:
                raise store_error(error, self._source) from None
            finally:
                session.close()
                end_read(connection)

    def _select(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        try:
            with self._lock:
                self._check_open()
                return self._connection.execute(sql, params).fetchall()
        except sqlite3.Error as error:
            raise store_error(error, self._source) from None

    def _check_open(self) -> None:
        """Raise StoreFailure once the store is closed (called holding the lock)."""
        if not self._close.alive:
            raise StoreFailure("unavailable", f"cannot read {self._source}: the store is closed")

    def _ticket(self, row: Sequence[object]) -> Ticket:
        # The schema's CHECKs keep every value text; only a file edited around SQLite
        # gets here with a BLOB, which would otherwise print as "b'...'".
        if not all(type(value) is str for value in row):
            raise StoreFailure("schema", f"{self._source} holds a ticket field that is not text")
        ticket_id, title, status = (str(value) for value in row)
        return {"id": ticket_id, "title": title, "status": status}


def end_read(connection: sqlite3.Connection) -> None:
    """End a read transaction, unless SQLite has already ended it (it may, on an error)."""
    if connection.in_transaction:
        connection.execute("ROLLBACK")


def _close_unless_in_use(lock: threading.Lock, connection: sqlite3.Connection) -> None:
    """Close `connection` unless a call holds `lock`, never waiting for it.

    Closed while another thread's statement runs on it, the connection crashed the process
    (SIGSEGV): `serve stdio` ended by a signal during a call's busy wait, whose exit ran this
    finalizer. Left open, it is closed when collected: a call in flight holds its store, so
    only an explicit close or the exit can get here first, and a read-only connection loses
    nothing by waiting.
    """
    if lock.acquire(blocking=False):
        try:
            connection.close()
        finally:
            lock.release()


def _page_query(
    tenant: str, where: TicketFilter, limit: int | None
) -> tuple[str, tuple[object, ...]]:
    return _PAGE.query(
        tenant,
        after=None if where.after is None else where.after.encode("utf-8", "surrogatepass"),
        status=where.status,
        text=where.text,
        limit=-1 if limit is None or limit > _MAX_LIMIT else limit,
    )


def _title_matches(title: object, text: object) -> bool:
    """Apply the contract's text filter (`title_contains`) inside SQLite."""
    return isinstance(title, str) and isinstance(text, str) and title_contains(title, text)
