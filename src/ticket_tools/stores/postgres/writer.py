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
from collections.abc import Iterable, Sequence

import psycopg

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Change, Counts, FeedError, Key, OnWait, has_nul, plan
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.index_writes import Indexed, size_steps, ticket_changes

# WRITER_LOCK is held for each batch: a row lock cannot guard a key not yet stored.
from ticket_tools.stores.postgres.schema import WRITER_LOCK, check_schema, describe, store_error
from ticket_tools.stores.postgres.title_index import SIZES_OF_SQL, IndexUpkeep, index_tenant

# How long one batch may take, waits for locks included (its statement_timeout).
DEFAULT_TIMEOUT = 30.0

# Two statements: a statement_timeout set within a statement bounds only the ones after it,
# and the lock's wait (behind an import --replace) must be bounded too.
_TIMEOUT_SQL = "SELECT set_config('statement_timeout', %s, true)"
_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"
_TRY_LOCK_SQL = "SELECT pg_try_advisory_xact_lock(%s)"
_SCOPE_SQL = "SELECT set_config('app.tenant', %s, true)"
# A key is in at most one of the two tables: a ticket, or the tombstone of its delete.
# The third column says which. An indexed tenant's ticket's title and status come too:
# the index drops their grams (`IndexUpkeep`); other tenants' titles are not sent.
_VERSIONS_SQL = (
    "SELECT id, version, true, "
    "CASE WHEN (SELECT indexed FROM tenant_sizes WHERE tenant = %(tenant)s) THEN title END, "
    "CASE WHEN (SELECT indexed FROM tenant_sizes WHERE tenant = %(tenant)s) THEN status END "
    "FROM tickets WHERE tenant = %(tenant)s AND id = ANY(%(ids)s) "
    "UNION ALL SELECT id, version, false, NULL, NULL FROM tombstones "
    "WHERE tenant = %(tenant)s AND id = ANY(%(ids)s)"
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
    "SELECT tenant, id, version, true, CASE WHEN indexed THEN title END, "
    "CASE WHEN indexed THEN status END "
    "FROM keys JOIN tickets USING (tenant, id) LEFT JOIN tenant_sizes USING (tenant) "
    "UNION ALL SELECT tenant, id, version, false, NULL, NULL FROM keys JOIN tombstones "
    "USING (tenant, id)"
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
# Whether the connection's role may write the tables: the reader may not.
_WRITER_SQL = """
SELECT has_table_privilege('tickets', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('tombstones', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('high_water', 'SELECT')
    AND has_table_privilege('title_grams', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('gram_counts', 'SELECT, INSERT, UPDATE, DELETE')
    AND has_table_privilege('tenant_sizes', 'SELECT, INSERT, UPDATE, DELETE')
"""
_TENANT_SIZE_SQL = "SELECT tenant, tickets, indexed FROM tenant_sizes WHERE tenant = %s"


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
                    f"{source} connects as a role that cannot write the tickets, tombstones "
                    "and title index tables (and read high_water); connect as their owner or "
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
        """Apply a batch in a few set-based statements, whatever its tenants (the owner).

        Three round trips: the versions, titles, floor and tenant sizes; the edited
        containers of the title index (only if an indexed tenant's title changed); the writes.
        """
        connection = self._connection
        with connection.transaction():
            with connection.pipeline():
                self._lock()
                keys = sorted({change.key for change in changes})
                tenants = sorted({key[0] for key in keys})
                cursor: psycopg.Cursor[tuple[str, str, int, bool, str | None, str | None]] = (
                    connection.cursor()
                )
                cursor.execute(
                    _ALL_VERSIONS_SQL, ([key[0] for key in keys], [key[1] for key in keys])
                )
                floor = self._read_floor()
                sizes = connection.execute(SIZES_OF_SQL, (tenants,))
                stored = _Stored()
                stored.take(cursor.fetchall())
                [(high_water,)] = floor.fetchall()
                held = {tenant: (tickets, indexed) for tenant, tickets, indexed in sizes.fetchall()}
            winners, counts = plan(changes, stored.versions, high_water)
            upkeep = stored.upkeep(held, winners.values())
            containers: dict[tuple[str, str, int], bytes] = {}
            if upkeep.edits.containers:
                containers = {
                    (tenant, gram, bucket): offsets
                    for tenant, gram, bucket, offsets in upkeep.read(connection).fetchall()
                }
            with connection.pipeline():
                self._write_all(list(winners.values()))
                upkeep.write(connection, containers)
            for tenant in upkeep.promoted():
                index_tenant(connection, tenant)
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
                    (tenant, self._read_versions(tenant, group), self._read_size(tenant))
                    for tenant, group in by_tenant.items()
                ]
                floor = self._read_floor()
                stored = _Stored()
                held: dict[str, tuple[int, bool]] = {}
                for tenant, cursor, size in reads:
                    stored.take((tenant, *row) for row in cursor.fetchall())
                    for _, tickets, indexed in size.fetchall():
                        held[tenant] = (tickets, indexed)
                [(high_water,)] = floor.fetchall()
            counts = Counts()
            planned = {}
            for tenant, group in by_tenant.items():
                winners, tenant_counts = plan(group, stored.versions, high_water)
                counts += tenant_counts
                planned[tenant] = winners
            changed = [change for winners in planned.values() for change in winners.values()]
            upkeep = stored.upkeep(held, changed)
            containers: dict[tuple[str, str, int], bytes] = {}
            edited = sorted({key[0] for key in upkeep.edits.containers})
            if edited:
                with connection.pipeline():
                    cursors = []
                    for tenant in edited:
                        connection.execute(_SCOPE_SQL, (tenant,))
                        cursors.append(upkeep.read(connection, [tenant]))
                    for read in cursors:
                        for tenant, gram, bucket, offsets in read.fetchall():
                            containers[(tenant, gram, bucket)] = offsets
            with connection.pipeline():
                for tenant, winners in planned.items():
                    self._write(tenant, list(winners.values()))
                    upkeep.write(connection, containers, [tenant])
            for tenant in upkeep.promoted():
                connection.execute(_SCOPE_SQL, (tenant,))
                index_tenant(connection, tenant)
        return counts

    def _read_size(self, tenant: str) -> psycopg.Cursor[tuple[str, int, bool]]:
        cursor: psycopg.Cursor[tuple[str, int, bool]] = self._connection.cursor()
        cursor.execute(_TENANT_SIZE_SQL, (tenant,))
        return cursor

    def _read_floor(self) -> psycopg.Cursor[tuple[int | None]]:
        cursor: psycopg.Cursor[tuple[int | None]] = self._connection.cursor()
        cursor.execute(_FLOOR_SQL)
        return cursor

    def _read_versions(
        self, tenant: str, group: list[Change]
    ) -> psycopg.Cursor[tuple[str, int, bool, str | None, str | None]]:
        ids = sorted({change.id for change in group})
        self._connection.execute(_SCOPE_SQL, (tenant,))
        cursor: psycopg.Cursor[tuple[str, int, bool, str | None, str | None]] = (
            self._connection.cursor()
        )
        cursor.execute(_VERSIONS_SQL, {"tenant": tenant, "ids": ids})
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


class _Stored:
    """What a batch's keys hold before it: versions, the keys of tickets, indexed titles."""

    def __init__(self) -> None:
        self.versions: dict[Key, int] = {}
        self._alive: set[Key] = set()
        self._titles: dict[Key, Indexed] = {}

    def take(self, rows: Iterable[tuple[str, str, int, bool, str | None, str | None]]) -> None:
        """Take (tenant, id, version, is a ticket, title, status) rows of the versions' read."""
        for tenant, ticket_id, version, ticket, title, status in rows:
            key = (tenant, ticket_id)
            self.versions[key] = version
            if ticket:
                self._alive.add(key)
            if title is not None and status is not None:
                self._titles[key] = Indexed(title, status)

    def upkeep(self, sizes: dict[str, tuple[int, bool]], winners: Iterable[Change]) -> IndexUpkeep:
        """Return the index's upkeep of the batch whose `winners` these are."""
        chosen = list(winners)
        indexed = {tenant for tenant, (_, on) in sizes.items() if on}
        return IndexUpkeep(
            sizes,
            ticket_changes(chosen, self._titles, indexed),
            size_steps(chosen, self._alive),
        )
