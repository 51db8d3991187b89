"""SQLiteWriter: apply batches of feed changes to a ticket database, one transaction each."""

from __future__ import annotations

import math
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Change, Counts, Key, OnWait, plan
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.index_writes import Indexed, size_steps, ticket_changes
from ticket_tools.stores.records import StoredRow, with_high_water
from ticket_tools.stores.sqlite.importer import Progress, insert_batches
from ticket_tools.stores.sqlite.schema import check_file, check_schema, store_error
from ticket_tools.stores.sqlite.title_index import (
    IndexProgress,
    build_index,
    tenant_sizes,
    write_index,
)

# How long a batch waits for another writer's lock (a second `apply`) before failing.
DEFAULT_BUSY_TIMEOUT = 5.0
# The write lock is waited for in tries of this long each, up to the timeout, not in one
# busy timeout: SQLite's busy wait is a C sleep, and a signal's handler (Ctrl-C, SIGTERM)
# runs only when it returns.
LOCK_TRY_MS = 100

# A key is in at most one of the two tables: a ticket, or the tombstone of its delete.
# The keys of a batch are looked up in one statement (a join along both primary keys)
# of up to VERSION_KEYS keys, a default batch: 2 variables a key, so fewer where the
# library's limit is lower (999 before SQLite 3.32). The fourth column says which table.
VERSION_KEYS = 1000
_VERSIONS_SQL = (
    "WITH keys(tenant, id) AS (VALUES {values}) "
    "SELECT tenant, id, version, 1 FROM keys JOIN tickets USING (tenant, id) "
    "UNION ALL SELECT tenant, id, version, 0 FROM keys JOIN tombstones USING (tenant, id)"
)
# The keys of an indexed tenant: a stored ticket's title and status come too, the index
# drops their grams (`write_index`). Other tenants' keys are not sent their titles.
_INDEXED_VERSIONS_SQL = (
    "WITH keys(tenant, id) AS (VALUES {values}) "
    "SELECT tenant, id, version, 1, title, status FROM keys JOIN tickets USING (tenant, id) "
    "UNION ALL SELECT tenant, id, version, 0, NULL, NULL FROM keys JOIN tombstones "
    "USING (tenant, id)"
)
# The WHERE repeats the version rule `plan` applied under the write lock: a second
# guard, which never skips a row while the lock is held from the read to the commit.
_UPSERT_SQL = (
    "INSERT INTO tickets (tenant, id, title, status, version) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant, id) DO UPDATE SET "
    "title = excluded.title, status = excluded.status, version = excluded.version "
    "WHERE excluded.version > tickets.version"
)
_BURY_SQL = (
    "INSERT INTO tombstones (tenant, id, version) VALUES (?, ?, ?) "
    "ON CONFLICT (tenant, id) DO UPDATE SET version = excluded.version "
    "WHERE excluded.version > tombstones.version"
)
_DROP_TICKET_SQL = "DELETE FROM tickets WHERE tenant = ? AND id = ?"
_DROP_TOMBSTONE_SQL = "DELETE FROM tombstones WHERE tenant = ? AND id = ?"
# The store's floor, read once per batch: NULL for none.
_FLOOR_SQL = "SELECT max(version) FROM high_water"
# A refresh from a versioned snapshot, merged under the version rule (docs/feed.md): the
# file's rows go to a temporary table first; `:n` is its high-water version, `:floor` the
# store's before it (NULL: none). In this order:
_SNAPSHOT_SQL = (
    "CREATE TEMP TABLE snapshot (tenant TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL, "
    "status TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (tenant, id)) WITHOUT ROWID"
)
_MERGE_SQL = (
    # a file ticket newer than its key's ticket, else its tombstone, else the floor, wins;
    "INSERT INTO tickets (tenant, id, title, status, version) "
    "SELECT s.tenant, s.id, s.title, s.status, s.version FROM temp.snapshot s "
    "LEFT JOIN tickets k USING (tenant, id) LEFT JOIN tombstones t USING (tenant, id) "
    "WHERE s.version > coalesce(k.version, t.version, :floor, -1) "
    "ON CONFLICT (tenant, id) DO UPDATE SET "
    "title = excluded.title, status = excluded.status, version = excluded.version",
    # the tombstones of the keys it brought back go (a key is a ticket or a tombstone);
    "DELETE FROM tombstones WHERE EXISTS (SELECT 1 FROM temp.snapshot s WHERE "
    "s.tenant = tombstones.tenant AND s.id = tombstones.id AND s.version > tombstones.version)",
    # a tombstone at or below the high-water goes: the new floor stands for it;
    "DELETE FROM tombstones WHERE version <= :n",
    # a ticket at or below it that the snapshot does not hold was deleted before it.
    "DELETE FROM tickets WHERE version <= :n AND NOT EXISTS (SELECT 1 FROM temp.snapshot s "
    "WHERE s.tenant = tickets.tenant AND s.id = tickets.id)",
    "DELETE FROM high_water",
    "INSERT INTO high_water VALUES (max(coalesce(:floor, :n), :n))",
    "DROP TABLE temp.snapshot",
)


class SQLiteWriter:
    """One read-write connection to a ticket database; `apply` writes a batch atomically.

    The database is switched to WAL (write-ahead logging) if it is not already, so
    the server's readers never wait for a batch and always see the last commit.
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        source: str,
        id_format: IdFormat = ID_FORMAT,
        *,
        on_wait: OnWait | None = None,
        timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        """Wrap an open read-write connection; check its schema and switch it to WAL.

        The database must be made for ticket IDs of `id_format` (else StoreFailure("schema")).
        `on_wait`, if given, is called when a batch finds the write lock taken, before it
        waits for it (up to `timeout` seconds).
        """
        self._connection = connection
        self._source = source
        self.id_format = id_format
        """The ticket-ID width of the database: every change must have ids of it."""
        self._on_wait = on_wait
        self._timeout = timeout
        self._timeout_ms = max(1, math.ceil(timeout * 1000))
        self._close = weakref.finalize(self, connection.close)
        try:
            check_schema(connection, source, id_format)
            connection.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as error:
            self.close()
            raise store_error(error, source, "write") from None
        except StoreFailure:
            self.close()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_BUSY_TIMEOUT,
        id_format: IdFormat = ID_FORMAT,
        on_wait: OnWait | None = None,
    ) -> SQLiteWriter:
        """Open an existing ticket database file for writing (never creates one).

        A batch waits up to `timeout` seconds for the write lock; `on_wait` as in __init__.
        """
        path = Path(path)
        check_file(path, "write")
        try:
            connection = sqlite3.connect(
                path.resolve().as_uri() + "?mode=rw",
                uri=True,
                timeout=timeout,
                isolation_level=None,
            )
        except sqlite3.Error as error:
            raise store_error(error, str(path), "write") from None
        return cls(connection, str(path), id_format, on_wait=on_wait, timeout=timeout)

    def close(self) -> None:
        """Close the connection; later batches raise StoreFailure."""
        self._close()

    def __enter__(self) -> SQLiteWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def check(change: Change) -> None:
        """Accept any change: SQLite stores any text (a NUL included), as import does."""

    def apply(self, changes: Sequence[Change]) -> Counts:
        """Apply `changes` in one transaction: all of them, or none (on any error or interrupt).

        Per key the highest version wins over the stored ticket or tombstone
        (`feed.plan`); the counts say what each change did. The title index follows
        the winners in the same transaction (`title_index.write_index`).
        """
        if not self._close.alive:
            raise StoreFailure("unavailable", f"cannot write {self._source}: the writer is closed")
        connection = self._connection
        try:
            self._begin()
            try:
                keys = {change.key for change in changes}
                sizes = tenant_sizes(connection, {key[0] for key in keys})
                indexed = {tenant for tenant, (_, on) in sizes.items() if on}
                stored, buried, titles = self._stored_versions(keys, indexed)
                [(floor,)] = connection.execute(_FLOOR_SQL).fetchall()
                winners, counts = plan(changes, stored, floor)
                self._write(list(winners.values()), stored, buried)
                titled = ticket_changes(winners.values(), titles, indexed)
                alive = {key for key in stored if key not in buried}
                write_index(connection, sizes, titled, size_steps(winners.values(), alive))
                connection.execute("COMMIT")
            except BaseException:
                # Also on KeyboardInterrupt: the batch is never half applied. SQLite
                # may have rolled back already (a full disk): then there is nothing to undo.
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise store_error(error, self._source, "write") from None
        return counts

    def _begin(self) -> None:
        """Begin a transaction holding the write lock, waiting for it if it is taken.

        IMMEDIATE: the write lock is taken first, so no other writer can change a
        version between a batch's read and its writes. The lock is asked for in tries
        of LOCK_TRY_MS, until the timeout; with `on_wait`, the first try does not wait,
        so that the wait can be announced.
        """
        connection = self._connection
        deadline = time.monotonic() + self._timeout
        announce = self._on_wait
        try:
            while True:
                left_ms = math.ceil((deadline - time.monotonic()) * 1000)
                wait_ms = 0 if announce is not None else max(0, min(LOCK_TRY_MS, left_ms))
                connection.execute(f"PRAGMA busy_timeout = {wait_ms}")
                try:
                    connection.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as error:
                    taken = getattr(error, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
                    if not taken or (announce is None and left_ms <= wait_ms):
                        raise
                else:
                    return
                if announce is not None:
                    announce()
                    announce = None
        finally:
            # The rest of the batch (a checkpoint at commit) as before.
            connection.execute(f"PRAGMA busy_timeout = {self._timeout_ms}")

    def replace(
        self,
        rows: Iterable[StoredRow] | Callable[[], Iterable[StoredRow]],
        on_progress: Progress | None = None,
        *,
        high_water: int | None = None,
        on_index: IndexProgress | None = None,
    ) -> int:
        """Refresh every ticket from `rows`, atomically; return the row count.

        Rows without versions replace every ticket (at version 0), clear the tombstones
        and the floor. Rows with versions need `high_water` (the snapshot holds every
        change up to it) and are merged under the version rule (docs/feed.md): a row
        newer than its key's ticket, tombstone or floor is written; a ticket the rows do
        not hold and tombstones, at or below `high_water`, go; the rest stays; the floor
        becomes the higher of itself and `high_water`.

        One transaction: in WAL mode a reader sees the whole old set until the commit,
        then the whole new set, and never waits for it (docs/stores.md). `rows` may be a
        function that returns them, called once the write lock is held: a batch of
        `apply` then waits and lands on the new set. The rows are written as they are
        taken (a records file streamed, `records_stream`): a row refused by a rule, or a
        key given twice (`insert_batches`), rolls it all back. The title index is then
        built afresh from the new set (`on_index` told how far), in the same transaction.
        Raises RecordsError when `high_water` does not fit the rows (`with_high_water`).
        """
        connection = self._connection
        try:
            self._begin()
            try:
                taken = with_high_water(
                    rows() if callable(rows) else rows, high_water, replace=True
                )
                if high_water is None:
                    for table in ("tickets", "tombstones", "high_water"):
                        connection.execute(f"DELETE FROM {table}")  # noqa: S608
                    count = insert_batches(connection, taken, on_progress)
                else:
                    count = self._merge(taken, on_progress, high_water)
                build_index(connection, on_index)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise store_error(error, self._source, "write") from None
        return count

    def _merge(
        self, rows: Iterable[StoredRow], on_progress: Progress | None, high_water: int
    ) -> int:
        connection = self._connection
        connection.execute(_SNAPSHOT_SQL)
        count = insert_batches(connection, rows, on_progress, table="temp.snapshot")
        [(floor,)] = connection.execute(_FLOOR_SQL).fetchall()
        for statement in _MERGE_SQL:
            connection.execute(statement, {"n": high_water, "floor": floor})
        return count

    def _stored_versions(
        self, keys: set[Key], indexed: set[str]
    ) -> tuple[dict[Key, int], set[Key], dict[Key, Indexed]]:
        """Return the stored version of each of `keys` stored, the keys of tombstones, and
        the title and status of each ticket of an `indexed` tenant.
        """
        limit = self._connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 2
        size = min(VERSION_KEYS, limit)
        stored: dict[Key, int] = {}
        buried: set[Key] = set()
        titles: dict[Key, Indexed] = {}
        plain = sorted(key for key in keys if key[0] not in indexed)
        for start in range(0, len(plain), size):
            chunk = plain[start : start + size]
            sql = _VERSIONS_SQL.format(values=", ".join(["(?, ?)"] * len(chunk)))
            params = [part for key in chunk for part in key]
            for tenant, ticket_id, version, alive in self._connection.execute(sql, params):
                stored[(tenant, ticket_id)] = version
                if not alive:
                    buried.add((tenant, ticket_id))
        kept = sorted(key for key in keys if key[0] in indexed)
        for start in range(0, len(kept), size):
            chunk = kept[start : start + size]
            sql = _INDEXED_VERSIONS_SQL.format(values=", ".join(["(?, ?)"] * len(chunk)))
            params = [part for key in chunk for part in key]
            for tenant, ticket_id, version, alive, title, status in self._connection.execute(
                sql, params
            ):
                stored[(tenant, ticket_id)] = version
                if alive:
                    titles[(tenant, ticket_id)] = Indexed(title, status)
                else:
                    buried.add((tenant, ticket_id))
        return stored, buried, titles

    def _write(self, winners: list[Change], stored: dict[Key, int], buried: set[Key]) -> None:
        """Write the winners; drop only the rows that are there (a tombstone, a ticket)."""
        upserts = [c for c in winners if c.op == "upsert"]
        deletes = [c for c in winners if c.op == "delete"]
        execute = self._connection.executemany
        execute(_DROP_TOMBSTONE_SQL, [c.key for c in upserts if c.key in buried])
        execute(_UPSERT_SQL, [(c.tenant, c.id, c.title, c.status, c.version) for c in upserts])
        alive = [c.key for c in deletes if c.key in stored and c.key not in buried]
        execute(_DROP_TICKET_SQL, alive)
        execute(_BURY_SQL, [(c.tenant, c.id, c.version) for c in deletes])
