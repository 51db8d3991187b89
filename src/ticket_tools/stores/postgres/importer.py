"""Import: copy checked records into an empty PostgreSQL tickets table, all or nothing."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from ticket_tools.store import Records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.postgres.schema import (
    WRITER_LOCK,
    check_schema,
    create_schema,
    describe,
    describe_params,
    store_error,
    tickets_table,
)
from ticket_tools.stores.records import (
    RecordsError,
    StoredRow,
    check_high_water,
    first_row,
    record_rows,
)
from ticket_tools.tickets import ID_FORMAT, IdFormat

# Rows per progress report during an import.
IMPORT_BATCH = 10_000
# `import --replace` builds the new set in this table, then renames it to tickets.
NEXT_TABLE = "tickets_next"
# How long the swap waits for the readers' and writers' locks before trying again: a
# reader queued behind the swap waits this long at most per attempt (a call takes ~1 ms).
SWAP_LOCK_TIMEOUT_MS = 20
SWAP_ATTEMPTS = 100
# The privileges a grant on tickets may carry, copied to the new table as they are.
_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_GRANTS_SQL = """
SELECT r.rolname, a.privilege_type
FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = 'tickets'::regclass AND a.grantee <> c.relowner
ORDER BY r.rolname, a.privilege_type
"""
_SWAP = (
    "DROP TABLE tickets",
    f"ALTER TABLE {NEXT_TABLE} RENAME TO tickets",
    f"ALTER INDEX {NEXT_TABLE}_pkey RENAME TO tickets_pkey",
    f"ALTER TABLE tickets RENAME CONSTRAINT {NEXT_TABLE}_id_check TO tickets_id_check",
    f"ALTER TABLE tickets RENAME CONSTRAINT {NEXT_TABLE}_version_check TO tickets_version_check",
    "TRUNCATE tombstones",
)
# A refresh from a versioned snapshot, merged in place under the version rule in one
# transaction (docs/feed.md): readers keep reading the old rows (MVCC) until the commit
# and never wait, since nothing takes more than row locks. The file's rows are copied
# into a temporary table first; %(n)s is its high-water version, %(floor)s the store's
# before it (NULL: none).
_SNAPSHOT_SQL = (
    'CREATE TEMP TABLE snapshot (tenant text COLLATE "C" NOT NULL, '
    'id text COLLATE "C" NOT NULL, title text COLLATE "C" NOT NULL, '
    'status text COLLATE "C" NOT NULL, title_lower text COLLATE "C" NOT NULL, '
    "version bigint NOT NULL, PRIMARY KEY (tenant, id)) ON COMMIT DROP"
)
_FLOOR_SQL = "SELECT max(version) FROM high_water"
_MERGE_SQL = (
    # a file ticket newer than its key's ticket, else its tombstone, else the floor, wins;
    "INSERT INTO tickets (tenant, id, title, status, title_lower, version) "
    "SELECT s.tenant, s.id, s.title, s.status, s.title_lower, s.version FROM snapshot s "
    "LEFT JOIN tickets k USING (tenant, id) LEFT JOIN tombstones t USING (tenant, id) "
    "WHERE s.version > coalesce(k.version, t.version, %(floor)s::bigint, -1) "
    "ON CONFLICT (tenant, id) DO UPDATE SET title = excluded.title, "
    "status = excluded.status, title_lower = excluded.title_lower, version = excluded.version",
    # the tombstones of the keys it brought back go (a key is a ticket or a tombstone);
    "DELETE FROM tombstones t USING snapshot s "
    "WHERE s.tenant = t.tenant AND s.id = t.id AND s.version > t.version",
    # a tombstone at or below the high-water goes: the new floor stands for it;
    "DELETE FROM tombstones WHERE version <= %(n)s",
    # a ticket at or below it that the snapshot does not hold was deleted before it.
    "DELETE FROM tickets k WHERE k.version <= %(n)s "
    "AND NOT EXISTS (SELECT FROM snapshot s WHERE s.tenant = k.tenant AND s.id = k.id)",
    "DELETE FROM high_water",
    "INSERT INTO high_water VALUES (greatest(%(floor)s::bigint, %(n)s))",
)


class TableNotEmptyError(Exception):
    """An import into a table that holds tickets or tombstones (imports never merge)."""


def import_records(
    connection: psycopg.Connection,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> int:
    """Copy `records` into an empty `tickets` table (created if absent); return the count.

    Each ticket at its `"version"` (0 without one); `high_water`, for records with
    versions, is stored as the floor (docs/feed.md).

    Run as the table's owner. Everything happens in one transaction (a savepoint if
    one is open): on any failure nothing is written. `grant_to` names the reader role
    to give SELECT on the table. Every id has `id_format`'s width, and so must an
    existing table's. Raises RecordsError, TableNotEmptyError, StoreFailure ("schema":
    a table of another schema or width), psycopg.Error.
    """
    rows = postgres_rows(records, id_format=id_format)
    check_high_water(first_row(rows), high_water, replace=False)
    with connection.transaction():
        if connection.execute("SELECT to_regclass('tickets') IS NULL").fetchone() == (True,):
            for statement in create_schema(id_format):
                connection.execute(statement)
        else:
            source = describe_params(connection.info.get_parameters())
            check_schema(connection, source, id_format)
        # Under FORCE the owner, too, sees only app.tenant's rows and may insert no
        # other: lift it for this transaction only. ALTER TABLE holds an ACCESS
        # EXCLUSIVE lock until commit, so no other session ever sees the table unforced.
        # Tombstones too: a version-0 ticket beside a key's tombstone would break the
        # rule that a key is a ticket or a tombstone, never both.
        for table in ("tickets", "tombstones"):
            connection.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        held = (
            "SELECT EXISTS (SELECT FROM tickets) OR EXISTS (SELECT FROM tombstones) "
            "OR EXISTS (SELECT FROM high_water)"
        )
        if connection.execute(held).fetchone() == (True,):
            raise TableNotEmptyError(
                "the tickets table already holds tickets, tombstones or a high-water version"
            )
        _copy(connection, "tickets", rows, on_progress)
        if high_water is not None:
            connection.execute("INSERT INTO high_water VALUES (%s)", (high_water,))
        for table in ("tickets", "tombstones"):
            connection.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        connection.execute("ANALYZE tickets")
        if grant_to is not None:
            grant = sql.SQL("GRANT SELECT ON tickets TO {}").format(sql.Identifier(grant_to))
            connection.execute(grant)
    return len(rows)


def import_dsn(
    dsn: str,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> int:
    """Connect to `dsn` (as the owner) and `import_records`; its failures raise StoreFailure."""
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection:
            return import_records(
                connection,
                records,
                grant_to=grant_to,
                on_progress=on_progress,
                id_format=id_format,
                high_water=high_water,
            )
    except psycopg.Error as error:
        raise store_error(error, source, "import into") from None


def replace_records(
    connection: psycopg.Connection,
    records: Records | Callable[[], Records],
    *,
    on_progress: Callable[[int, int], None] | None = None,
    attempts: int = SWAP_ATTEMPTS,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> int:
    """Refresh every ticket from `records`; return the count.

    Records with versions need `high_water` and are merged in place under the version
    rule, in one transaction holding the writers' lock (`_MERGE_SQL`, docs/feed.md).
    Records without versions replace every ticket (at version 0), built beside and
    swapped atomically, and clear the tombstones and the floor:

    Run as the table's owner on an idle connection. One transaction holds the writers'
    lock (WRITER_LOCK, as `apply` takes for each batch) throughout, so no change is
    committed to the old table meanwhile: first the new set is copied into a new table
    beside `tickets`, with the same policy, comment and grants, which no reader waits
    for; then a short savepoint takes the tables' locks (waiting SWAP_LOCK_TIMEOUT_MS at
    a time, up to `attempts` times), drops the old table, renames the new one into its
    place and clears the tombstones. `records` may be a function that returns them: it
    is called once the writers' lock is held, so that a file read by it is the state
    every change committed after it is applied on top of.
    A reader's call sees the whole old set or the whole new set. Every id has
    `id_format`'s width, and so must the tables'. Raises RecordsError,
    StoreFailure("locked") when the locks never came (nothing changed), psycopg.Error.
    """
    source = describe_params(connection.info.get_parameters())
    with connection.transaction():
        # The writers' lock for the whole read, copy and swap: a batch of `apply` waits
        # for the refresh, then lands on the new set, rather than being committed to the
        # old table meanwhile and dropped with it at the swap. Readers never take it.
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        check_schema(connection, source, id_format)
        loaded = records() if callable(records) else records
        rows = postgres_rows(loaded, id_format=id_format)
        check_high_water(first_row(rows), high_water, replace=True)
        if high_water is not None:
            _merge(connection, rows, on_progress, high_water)
            return len(rows)
        connection.execute("DELETE FROM high_water")
        connection.execute(f"DROP TABLE IF EXISTS {NEXT_TABLE}")
        for statement in tickets_table(NEXT_TABLE, id_format):
            connection.execute(statement)
        _copy(connection, NEXT_TABLE, rows, on_progress)
        connection.execute(f"ALTER TABLE {NEXT_TABLE} FORCE ROW LEVEL SECURITY")
        for role, privilege in connection.execute(_GRANTS_SQL).fetchall():
            if privilege in _PRIVILEGES:
                grant = sql.SQL("GRANT {} ON {} TO {}").format(
                    sql.SQL(privilege), sql.Identifier(NEXT_TABLE), sql.Identifier(role)
                )
                connection.execute(grant)
        connection.execute(f"ANALYZE {NEXT_TABLE}")
        for _ in range(attempts):
            try:
                # A savepoint: a lock that timed out is released, the writers' lock kept.
                with connection.transaction():
                    connection.execute(
                        "SELECT set_config('lock_timeout', %s, true)",
                        (str(SWAP_LOCK_TIMEOUT_MS),),
                    )
                    connection.execute("LOCK TABLE tickets, tombstones IN ACCESS EXCLUSIVE MODE")
                    for statement in _SWAP:
                        connection.execute(statement)
            except psycopg.errors.LockNotAvailable:
                continue
            return len(rows)
        raise StoreFailure(
            "locked",
            f"{source}: the swap never got the tables' locks; nothing was replaced, try again",
        )


def replace_dsn(
    dsn: str,
    records: Records | Callable[[], Records],
    *,
    on_progress: Callable[[int, int], None] | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> int:
    """Connect to `dsn` (as the owner) and `replace_records`; its failures raise StoreFailure."""
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection:
            return replace_records(
                connection,
                records,
                on_progress=on_progress,
                id_format=id_format,
                high_water=high_water,
            )
    except psycopg.Error as error:
        raise store_error(error, source, "replace the tickets of") from None


def _merge(
    connection: psycopg.Connection,
    rows: list[StoredRow],
    on_progress: Callable[[int, int], None] | None,
    high_water: int,
) -> None:
    connection.execute(_SNAPSHOT_SQL)
    _copy(connection, "snapshot", rows, on_progress)
    connection.execute("ANALYZE snapshot")
    [(floor,)] = connection.execute(_FLOOR_SQL).fetchall()
    for statement in _MERGE_SQL:
        connection.execute(statement, {"n": high_water, "floor": floor})
    connection.execute("DROP TABLE snapshot")


def _copy(
    connection: psycopg.Connection,
    table: str,
    rows: list[StoredRow],
    on_progress: Callable[[int, int], None] | None,
) -> None:
    columns = "(tenant, id, title, status, title_lower, version)"
    with connection.cursor().copy(f"COPY {table} {columns} FROM STDIN") as copy:
        for done, (tenant, ticket_id, title, status, version) in enumerate(rows, start=1):
            stored = 0 if version is None else version
            copy.write_row((tenant, ticket_id, title, status, title.lower(), stored))
            if on_progress is not None and (done % IMPORT_BATCH == 0 or done == len(rows)):
                on_progress(done, len(rows))


def postgres_rows(records: Records, *, id_format: IdFormat = ID_FORMAT) -> list[StoredRow]:
    """Check `records` by the records rules (ids of `id_format`), and refuse NUL.

    Return the rows in key order.
    """
    rows = record_rows(records, id_format=id_format)
    for position, fields in enumerate(rows, start=1):
        if any("\x00" in text for text in fields[:4]):
            raise RecordsError(
                f"record {position} (in file order): PostgreSQL text cannot hold a NUL character"
            )
    # Key order makes every row an append to the primary key's B-tree.
    return sorted(rows)
