"""PostgresWriter: apply batches of feed changes to the tickets table, one transaction each.

The writer connects as the table's owner (or a writer role, docs/postgres.md) and
stays under the forced row-level security the readers are held by: for each tenant
in a batch it sets `app.tenant` for the transaction, then reads and writes that
tenant's rows only. Nothing about the readers' policy, grant or statements changes.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import psycopg

from ticket_tools.store import StoreError
from ticket_tools.stores.feed import Change, Counts, FeedError, Key, has_nul, plan

# WRITER_LOCK is held for each batch: a row lock cannot guard a key not yet stored.
from ticket_tools.stores.postgres.schema import WRITER_LOCK, check_schema, describe, store_error
from ticket_tools.tickets import ID_FORMAT, IdFormat

# How long one batch may take, waits for locks included (its statement_timeout).
DEFAULT_TIMEOUT = 30.0

_BEGIN_SQL = "SELECT set_config('statement_timeout', %s, true), pg_advisory_xact_lock(%s)"
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
# Whether the connection's role may write both tables: the reader may not.
_WRITER_SQL = """
SELECT has_table_privilege('tickets', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('tombstones', 'SELECT, INSERT, UPDATE, DELETE')
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
    ) -> None:
        """Wrap an open autocommit connection that `open` has checked."""
        self._connection = connection
        self._source = source
        self.id_format = id_format
        """The ticket-ID width of the tables: every change must have ids of it."""
        self._timeout_ms = str(max(1, math.ceil(timeout * 1000)))
        self._close = weakref.finalize(self, connection.close)

    @classmethod
    def open(
        cls, dsn: str, *, timeout: float = DEFAULT_TIMEOUT, id_format: IdFormat = ID_FORMAT
    ) -> PostgresWriter:
        """Connect as the owner (or a writer role); refuse a role that cannot write.

        Raises StoreError: "privileged" for a role without write access to both
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
                raise StoreError(
                    "privileged",
                    f"{source} connects as a role that cannot write the tickets and "
                    "tombstones tables; connect as their owner or the writer role",
                )
        except psycopg.Error as error:
            connection.close()
            raise store_error(error, source, "connect to") from None
        except StoreError:
            connection.close()
            raise
        return cls(connection, source, timeout=timeout, id_format=id_format)

    def close(self) -> None:
        """Close the connection; later batches raise StoreError."""
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
            raise StoreError("unavailable", f"cannot write {self._source}: the writer is closed")
        # Keys of different tenants never interact, so grouping by tenant (in feed
        # order within each) changes neither the result nor the counts.
        by_tenant: dict[str, list[Change]] = {}
        for change in changes:
            by_tenant.setdefault(change.tenant, []).append(change)
        connection = self._connection
        try:
            with connection.transaction():
                with connection.pipeline():
                    connection.execute(_BEGIN_SQL, (self._timeout_ms, WRITER_LOCK))
                    reads = [
                        (tenant, self._read_versions(tenant, group))
                        for tenant, group in by_tenant.items()
                    ]
                    stored: dict[Key, int] = {}
                    for tenant, cursor in reads:
                        for ticket_id, version in cursor.fetchall():
                            stored[(tenant, ticket_id)] = version
                counts = Counts()
                with connection.pipeline():
                    for tenant, group in by_tenant.items():
                        winners, tenant_counts = plan(group, stored)
                        counts += tenant_counts
                        self._write(tenant, list(winners.values()))
        except psycopg.Error as error:
            raise store_error(error, self._source, "write") from None
        return counts

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
