"""PostgresWriter: apply batches of feed changes to the tickets table, one transaction each.

The writer connects as the tables' owner or a writer role (docs/postgres.md), and
stays under the forced row-level security the readers are held by. The owner is
covered by the tables' writer policy (schema version 4), which lets it see and write
every tenant's rows: a batch is one statement per operation, whatever its tenants. A
writer role is held by the tenant policy alone: for each tenant in a batch it sets
`app.tenant` for the transaction, then reads and writes that tenant's rows only.
Nothing about the readers' policy, grant or statements changes.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import psycopg

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Change, Counts, FeedError, Key, OnWait, has_nul, plan
from ticket_tools.stores.ids import ID_FORMAT, IdFormat

# WRITER_LOCK is held for each batch: a row lock cannot guard a key not yet stored.
from ticket_tools.stores.postgres.schema import WRITER_LOCK, check_schema, describe, store_error

# How long one batch may take, waits for locks included (its statement_timeout).
DEFAULT_TIMEOUT = 30.0

# Two statements: a statement_timeout set within a statement bounds only the ones after it,
# and the lock's wait (behind an import --replace) must be bounded too.
_TIMEOUT_SQL = "SELECT set_config('statement_timeout', %s, true)"
_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"
_TRY_LOCK_SQL = "SELECT pg_try_advisory_xact_lock(%s)"
_SCOPE_SQL = "SELECT set_config('app.tenant', %s, true)"
# A key is in at most one of the two tables: a ticket, or the tombstone of its delete.
_VERSIONS_SQL = (
    "SELECT id, version FROM tickets WHERE tenant = %s AND id = ANY(%s) "
    "UNION ALL SELECT id, version FROM tombstones WHERE tenant = %s AND id = ANY(%s)"
)
# title_lower is Python's title.lower(), recomputed on every upsert, as import computes it.
_UPSERT_SQL = (
    "INSERT INTO tickets (tenant, id, title, status, title_lower, version) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, id) DO UPDATE SET "
    "title = excluded.title, status = excluded.status, title_lower = excluded.title_lower, "
    "version = excluded.version"
)
_BURY_SQL = (
    "INSERT INTO tombstones (tenant, id, version) VALUES (%s, %s, %s) "
    "ON CONFLICT (tenant, id) DO UPDATE SET version = excluded.version"
)
_DROP_TICKET_SQL = "DELETE FROM tickets WHERE tenant = %s AND id = %s"
_DROP_TOMBSTONE_SQL = "DELETE FROM tombstones WHERE tenant = %s AND id = %s"
# The whole batch at once, for a connection the writer policy covers: the keys and
# rows travel as arrays, one per column (`unnest` zips them back into rows). The key
# columns are COLLATE "C", as the tables' are, so the joins run along the primary keys.
_ALL_VERSIONS_SQL = (
    'WITH keys(tenant, id) AS (SELECT tenant COLLATE "C", id COLLATE "C" '
    "FROM unnest(%s::text[], %s::text[]) AS k(tenant, id)) "
    "SELECT tenant, id, version FROM keys JOIN tickets USING (tenant, id) "
    "UNION ALL SELECT tenant, id, version FROM keys JOIN tombstones USING (tenant, id)"
)
# The WHERE repeats the version rule `plan` applied under the writers' lock: a second
# guard, which never skips a row while every writer takes that lock.
_UPSERT_ALL_SQL = (
    "INSERT INTO tickets (tenant, id, title, status, title_lower, version) "
    "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::bigint[]) ON CONFLICT (tenant, id) DO UPDATE SET "
    "title = excluded.title, status = excluded.status, title_lower = excluded.title_lower, "
    "version = excluded.version WHERE excluded.version > tickets.version"
)
_BURY_ALL_SQL = (
    "INSERT INTO tombstones (tenant, id, version) "
    "SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[]) "
    "ON CONFLICT (tenant, id) DO UPDATE SET version = excluded.version "
    "WHERE excluded.version > tombstones.version"
)
_DROP_ALL_TICKETS_SQL = (
    'DELETE FROM tickets WHERE (tenant, id) IN (SELECT tenant COLLATE "C", id COLLATE "C" '
    "FROM unnest(%s::text[], %s::text[]) AS k(tenant, id))"
)
_DROP_ALL_TOMBSTONES_SQL = (
    'DELETE FROM tombstones WHERE (tenant, id) IN (SELECT tenant COLLATE "C", id COLLATE "C" '
    "FROM unnest(%s::text[], %s::text[]) AS k(tenant, id))"
)
# The store's floor, read once per batch in the same pipeline as the versions: NULL for none.
_FLOOR_SQL = "SELECT max(version) FROM high_water"
# Whether the tables' writer policy covers the connection: it names the owner, and
# applies to every role that has the owner's privileges.
_COVERED_SQL = "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = 'tickets'::regclass"
# Whether the connection's role may write both tables: the reader may not.
_WRITER_SQL = """
SELECT has_table_privilege('tickets', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('tombstones', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('high_water', 'SELECT')
"""


class PostgresWriter:
    """One connection to a ticket database, as a role that may write it."""

    def __init__(
        self,
        connection: psycopg.Connection,
        source: str,
        *,
        timeout: float,
        id_format: IdFormat = ID_FORMAT,
        covered: bool = False,
        on_wait: OnWait | None = None,
    ) -> None:
        """Wrap an open autocommit connection that `open` has checked.

        `covered`: whether the tables' writer policy covers the connection's role (the
        owner), so that a batch need not be scoped tenant by tenant. `on_wait`, if
        given, is called when a batch finds the writers' lock taken, before it waits.
        """
        self._on_wait = on_wait
        self._connection = connection
        self._covered = covered
        self._source = source
        self.id_format = id_format
        """The ticket-ID width of the tables: every change must have ids of it."""
        self._timeout_ms = str(max(1, math.ceil(timeout * 1000)))
        self._close = weakref.finalize(self, connection.close)

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        id_format: IdFormat = ID_FORMAT,
        on_wait: OnWait | None = None,
    ) -> PostgresWriter:
        """Connect as the owner (or a writer role); refuse a role that cannot write.

        A batch may take `timeout` seconds, its wait for the writers' lock included;
        `on_wait` as in __init__.

        Raises StoreFailure: "privileged" for a role without write access to both
        tables (the reader), "schema" for a database without this schema version or
        made for another ID width than `id_format`'s, "unavailable" for any other failure.
        """
        source = describe(dsn)
        try:
            connection = psycopg.connect(
                dsn, autocommit=True, connect_timeout=max(2, math.ceil(timeout))
            )
        except psycopg.Error as error:
            raise store_error(error, source, "connect to") from None
        try:
            check_schema(connection, source, id_format)
            if connection.execute(_WRITER_SQL).fetchone() != (True,):
                raise StoreFailure(
                    "privileged",
                    f"{source} connects as a role that cannot write the tickets and "
                    "tombstones tables (and read high_water); connect as their owner or "
                    "the writer role",
                )
            covered = connection.execute(_COVERED_SQL).fetchone() == (True,)
        except psycopg.Error as error:
            connection.close()
            raise store_error(error, source, "connect to") from None
        except StoreFailure:
            connection.close()
            raise
        return cls(
            connection,
            source,
            timeout=timeout,
            id_format=id_format,
            covered=covered,
            on_wait=on_wait,
        )

    def close(self) -> None:
        """Close the connection; later batches raise StoreFailure."""
        self._close()

    def __enter__(self) -> PostgresWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def check(change: Change) -> None:
        """Raise FeedError if PostgreSQL cannot store `change` (text holding NUL)."""
        if has_nul(change):
            raise FeedError("PostgreSQL text cannot hold a NUL character")

    def apply(self, changes: Sequence[Change]) -> Counts:
        """Apply `changes` in one transaction: all of them, or none (on any error or interrupt).

        Per key the highest version wins over the stored ticket or tombstone
        (`feed.plan`); the counts say what each change did. Two round trips per
        batch, pipelined: the stored versions, then the writes.
        """
        if not self._close.alive:
            raise StoreFailure("unavailable", f"cannot write {self._source}: the writer is closed")
        try:
            if self._covered:
                return self._apply_whole(changes)
            return self._apply_scoped(changes)
        except psycopg.Error as error:
            raise store_error(error, self._source, "write") from None

    def _apply_whole(self, changes: Sequence[Change]) -> Counts:
        """Apply a batch in at most five statements, whatever its tenants (the owner)."""
        connection = self._connection
        with connection.transaction():
            with connection.pipeline():
                self._lock()
                keys = sorted({change.key for change in changes})
                cursor: psycopg.Cursor[tuple[str, str, int]] = connection.cursor()
                cursor.execute(
                    _ALL_VERSIONS_SQL, ([key[0] for key in keys], [key[1] for key in keys])
                )
                floor = self._read_floor()
                stored = {(tenant, id_): version for tenant, id_, version in cursor.fetchall()}
                [(high_water,)] = floor.fetchall()
            winners, counts = plan(changes, stored, high_water)
            with connection.pipeline():
                self._write_all(list(winners.values()))
        return counts

    def _lock(self) -> None:
        """Bound the batch's time, then take the writers' lock, waiting for it if taken.

        With `on_wait`, the lock is first asked for without waiting (one more round
        trip), so that the wait can be announced.
        """
        execute = self._connection.execute
        execute(_TIMEOUT_SQL, (self._timeout_ms,))
        if self._on_wait is not None:
            if execute(_TRY_LOCK_SQL, (WRITER_LOCK,)).fetchone() == (True,):
                return
            self._on_wait()
        execute(_LOCK_SQL, (WRITER_LOCK,))

    def _write_all(self, winners: list[Change]) -> None:
        upserts = [c for c in winners if c.op == "upsert"]
        deletes = [c for c in winners if c.op == "delete"]
        execute = self._connection.execute
        if upserts:
            tenants, ids = [c.tenant for c in upserts], [c.id for c in upserts]
            execute(_DROP_ALL_TOMBSTONES_SQL, (tenants, ids))
            titles = [c.title for c in upserts]
            execute(
                _UPSERT_ALL_SQL,
                (
                    tenants,
                    ids,
                    titles,
                    [c.status for c in upserts],
                    [title.lower() for title in titles],
                    [c.version for c in upserts],
                ),
            )
        if deletes:
            tenants, ids = [c.tenant for c in deletes], [c.id for c in deletes]
            execute(_DROP_ALL_TICKETS_SQL, (tenants, ids))
            execute(_BURY_ALL_SQL, (tenants, ids, [c.version for c in deletes]))

    def _apply_scoped(self, changes: Sequence[Change]) -> Counts:
        """Apply a batch tenant by tenant, each scoped by `app.tenant` (a writer role)."""
        # Keys of different tenants never interact, so grouping by tenant (in feed
        # order within each) changes neither the result nor the counts.
        by_tenant: dict[str, list[Change]] = {}
        for change in changes:
            by_tenant.setdefault(change.tenant, []).append(change)
        connection = self._connection
        with connection.transaction():
            with connection.pipeline():
                self._lock()
                reads = [
                    (tenant, self._read_versions(tenant, group))
                    for tenant, group in by_tenant.items()
                ]
                floor = self._read_floor()
                stored: dict[Key, int] = {}
                for tenant, cursor in reads:
                    for ticket_id, version in cursor.fetchall():
                        stored[(tenant, ticket_id)] = version
                [(high_water,)] = floor.fetchall()
            counts = Counts()
            with connection.pipeline():
                for tenant, group in by_tenant.items():
                    winners, tenant_counts = plan(group, stored, high_water)
                    counts += tenant_counts
                    self._write(tenant, list(winners.values()))
        return counts

    def _read_floor(self) -> psycopg.Cursor[tuple[int | None]]:
        cursor: psycopg.Cursor[tuple[int | None]] = self._connection.cursor()
        cursor.execute(_FLOOR_SQL)
        return cursor

    def _read_versions(self, tenant: str, group: list[Change]) -> psycopg.Cursor[tuple[str, int]]:
        ids = sorted({change.id for change in group})
        self._connection.execute(_SCOPE_SQL, (tenant,))
        cursor: psycopg.Cursor[tuple[str, int]] = self._connection.cursor()
        cursor.execute(_VERSIONS_SQL, (tenant, ids, tenant, ids))
        return cursor

    def _write(self, tenant: str, winners: list[Change]) -> None:
        upserts = [c for c in winners if c.op == "upsert"]
        deletes = [c for c in winners if c.op == "delete"]
        connection = self._connection
        connection.execute(_SCOPE_SQL, (tenant,))
        cursor = connection.cursor()
        cursor.executemany(_DROP_TOMBSTONE_SQL, [c.key for c in upserts])
        cursor.executemany(
            _UPSERT_SQL,
            [(c.tenant, c.id, c.title, c.status, c.title.lower(), c.version) for c in upserts],
        )
        cursor.executemany(_DROP_TICKET_SQL, [c.key for c in deletes])
        cursor.executemany(_BURY_SQL, [(c.tenant, c.id, c.version) for c in deletes])
