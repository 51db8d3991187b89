"""Import: copy checked records into an empty PostgreSQL tickets table, all or nothing."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import psycopg
from psycopg import sql

from ticket_tools.store import Records
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.postgres.schema import (
    INDEX_TABLES,
    WRITER_LOCK,
    check_schema,
    create_schema,
    describe,
    describe_params,
    index_schema,
    store_error,
    tickets_table,
)
from ticket_tools.stores.postgres.title_index import IndexProgress, build_index
from ticket_tools.stores.records import (
    RecordsError,
    StoredRow,
    duplicate_key,
    source_rows,
    with_high_water,
)

# Rows per progress report during an import.
IMPORT_BATCH = 10_000
# `import --replace` builds the new set in this table, then renames it to tickets; and
# the title index's tables beside theirs, each name with this suffix.
NEXT_TABLE = "tickets_next"
NEXT = "_next"
# How long the swap waits for the readers' and writers' locks before trying again: a
# reader queued behind the swap waits this long at most per attempt (a call takes ~1 ms).
SWAP_LOCK_TIMEOUT_MS = 20
SWAP_ATTEMPTS = 100
# The privileges a grant on tickets may carry, copied to the new table as they are.
_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
_GRANTS_SQL = """
SELECT r.rolname, a.privilege_type
FROM pg_class c, aclexplode(c.relacl) a JOIN pg_roles r ON r.oid = a.grantee
WHERE c.oid = %s::regclass AND a.grantee <> c.relowner
ORDER BY r.rolname, a.privilege_type
"""
_SWAPPED = ("tickets", *INDEX_TABLES)
_SWAP = (
    f"DROP TABLE {', '.join(_SWAPPED)}",
    f"ALTER TABLE {NEXT_TABLE} RENAME TO tickets",
    f"ALTER INDEX {NEXT_TABLE}_pkey RENAME TO tickets_pkey",
    f"ALTER TABLE tickets RENAME CONSTRAINT {NEXT_TABLE}_id_check TO tickets_id_check",
    f"ALTER TABLE tickets RENAME CONSTRAINT {NEXT_TABLE}_version_check TO tickets_version_check",
    *(
        statement
        for table in INDEX_TABLES
        for statement in (
            f"ALTER TABLE {table}{NEXT} RENAME TO {table}",
            f"ALTER INDEX {table}{NEXT}_pkey RENAME TO {table}_pkey",
        )
    ),
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


Source = Records | Iterator[StoredRow]
"""A records mapping, or rows checked as they are read (`records_stream.RecordsReader`)."""
Progress = Callable[[int], None]
"""Called as progress(done) every IMPORT_BATCH rows and at the end: the rows copied so far."""
# Where a COPY's error context names the line (the row, from 1) that broke a constraint.
_COPY_LINE = re.compile(r"^COPY \w+, line ([0-9]+)")


class TableNotEmptyError(Exception):
    """An import into a table that holds tickets or tombstones (imports never merge)."""


def import_records(
    connection: psycopg.Connection,
    records: Source,
    *,
    grant_to: str | None = None,
    on_progress: Progress | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
) -> int:
    """Copy `records` into an empty `tickets` table (created if absent); return the count.

    Each ticket at its `"version"` (0 without one); `high_water`, for records with
    versions, is stored as the floor (docs/feed.md). Then the title index is built from
    the tickets copied (`title_index.build_index`), `on_index` told its progress.

    The rows are checked and copied as they come (one COPY streaming them), never held
    whole: a record refused, even the last, or a key given twice, writes nothing.
    Run as the table's owner. Everything happens in one transaction (a savepoint if
    one is open): on any failure nothing is written. `grant_to` names the reader role
    to give SELECT on the table and the index's. Every id has `id_format`'s width, and so must an
    existing table's. Raises RecordsError, TableNotEmptyError, StoreFailure ("schema":
    a table of another schema or width), psycopg.Error.
    """
    rows = with_high_water(
        nul_free(source_rows(records, id_format=id_format)), high_water, replace=False
    )
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
        # The title index's tables too: built by COPY, then forced again (`build_index`).
        for table in ("tickets", "tombstones", *INDEX_TABLES):
            connection.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        held = (
            "SELECT EXISTS (SELECT FROM tickets) OR EXISTS (SELECT FROM tombstones) "
            "OR EXISTS (SELECT FROM high_water)"
        )
        if connection.execute(held).fetchone() == (True,):
            raise TableNotEmptyError(
                "the tickets table already holds tickets, tombstones or a high-water version"
            )
        count = _copy(connection, "tickets", rows, on_progress)
        if high_water is not None:
            connection.execute("INSERT INTO high_water VALUES (%s)", (high_water,))
        build_index(connection, on_progress=on_index)
        for table in ("tickets", "tombstones"):
            connection.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        connection.execute("ANALYZE tickets")
        if grant_to is not None:
            grant = sql.SQL("GRANT SELECT ON {} TO {}").format(
                sql.SQL(", ").join(map(sql.Identifier, READER_TABLES)), sql.Identifier(grant_to)
            )
            connection.execute(grant)
    return count


READER_TABLES = ("tickets", *INDEX_TABLES)
"""The tables a reader reads, and is granted SELECT on (`import --grant-to`)."""


def import_dsn(
    dsn: str,
    records: Source,
    *,
    grant_to: str | None = None,
    on_progress: Progress | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
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
                on_index=on_index,
            )
    except psycopg.Error as error:
        raise store_error(error, source, "import into") from None


def replace_records(
    connection: psycopg.Connection,
    records: Source | Callable[[], Source],
    *,
    on_progress: Progress | None = None,
    attempts: int = SWAP_ATTEMPTS,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
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
    every change committed after it is applied on top of. Its rows are checked and
    copied as they come: a record refused, or a key given twice, changes nothing.
    The title index is built afresh beside its served tables and swapped with them
    (`on_index` told how far); after a merge, rebuilt in place in the same transaction.
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
        rows = with_high_water(
            nul_free(source_rows(loaded, id_format=id_format)), high_water, replace=True
        )
        if high_water is not None:
            count = _merge(connection, rows, on_progress, high_water)
            # In place, under the served tables' forced policies: readers keep the old
            # index (MVCC) until the commit, as they keep the old tickets.
            build_index(connection, on_progress=on_index, fill="insert")
            return count
        connection.execute("DELETE FROM high_water")
        connection.execute(f"DROP TABLE IF EXISTS {', '.join(table + NEXT for table in _SWAPPED)}")
        for statement in (*tickets_table(NEXT_TABLE, id_format), *index_schema(NEXT)):
            connection.execute(statement)
        count = _copy(connection, NEXT_TABLE, rows, on_progress)
        connection.execute(f"ALTER TABLE {NEXT_TABLE} FORCE ROW LEVEL SECURITY")
        build_index(connection, tickets=NEXT_TABLE, suffix=NEXT, on_progress=on_index)
        for table in _SWAPPED:
            for role, privilege in connection.execute(_GRANTS_SQL, (table,)).fetchall():
                if privilege in _PRIVILEGES:
                    grant = sql.SQL("GRANT {} ON {} TO {}").format(
                        sql.SQL(privilege), sql.Identifier(table + NEXT), sql.Identifier(role)
                    )
                    connection.execute(grant)
        connection.execute(f"ANALYZE {NEXT_TABLE}")
        locked = ", ".join(("tombstones", *_SWAPPED))
        for _ in range(attempts):
            try:
                # A savepoint: a lock that timed out is released, the writers' lock kept.
                with connection.transaction():
                    connection.execute(
                        "SELECT set_config('lock_timeout', %s, true)",
                        (str(SWAP_LOCK_TIMEOUT_MS),),
                    )
                    connection.execute(f"LOCK TABLE {locked} IN ACCESS EXCLUSIVE MODE")
                    for statement in _SWAP:
                        connection.execute(statement)
            except psycopg.errors.LockNotAvailable:
                continue
            return count
        raise StoreFailure(
            "locked",
            f"{source}: the swap never got the tables' locks; nothing was replaced, try again",
        )


def replace_dsn(
    dsn: str,
    records: Source | Callable[[], Source],
    *,
    on_progress: Progress | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
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
                on_index=on_index,
            )
    except psycopg.Error as error:
        raise store_error(error, source, "replace the tickets of") from None


def _merge(
    connection: psycopg.Connection,
    rows: Iterable[StoredRow],
    on_progress: Progress | None,
    high_water: int,
) -> int:
    connection.execute(_SNAPSHOT_SQL)
    count = _copy(connection, "snapshot", rows, on_progress)
    connection.execute("ANALYZE snapshot")
    [(floor,)] = connection.execute(_FLOOR_SQL).fetchall()
    for statement in _MERGE_SQL:
        connection.execute(statement, {"n": high_water, "floor": floor})
    connection.execute("DROP TABLE snapshot")
    return count


def _copy(
    connection: psycopg.Connection,
    table: str,
    rows: Iterable[StoredRow],
    on_progress: Progress | None,
) -> int:
    """COPY `rows` into `table` as they come; return the count. A key twice: duplicate_key."""
    columns = "(tenant, id, title, status, title_lower, version)"
    done = 0
    try:
        with connection.cursor().copy(f"COPY {table} {columns} FROM STDIN") as copy:
            for tenant, ticket_id, title, status, version in rows:
                stored = 0 if version is None else version
                copy.write_row((tenant, ticket_id, title, status, title.lower(), stored))
                done += 1
                if on_progress is not None and done % IMPORT_BATCH == 0:
                    on_progress(done)
    except psycopg.errors.UniqueViolation as error:
        line = copy_line(error.diag.context)
        if line is None:
            raise
        raise duplicate_key(line) from None
    if on_progress is not None and done % IMPORT_BATCH != 0:
        on_progress(done)
    return done


def copy_line(context: str | None) -> int | None:
    """Return the line (the row, from 1) a COPY error's context names, or None.

    Example: "COPY tickets, line 7" -> 7 (the server's words, in its `lc_messages`).
    """
    found = _COPY_LINE.match(context or "")
    return None if found is None else int(found.group(1))


def nul_free(rows: Iterable[StoredRow]) -> Iterator[StoredRow]:
    """Yield `rows` in order, refusing the first holding a NUL (PostgreSQL text cannot)."""
    for position, row in enumerate(rows, start=1):
        if any("\x00" in text for text in row[:4]):
            raise RecordsError(
                f"record {position} (in file order): PostgreSQL text cannot hold a NUL character"
            )
        yield row
