"""Import: copy checked records into an empty PostgreSQL tickets table, all or nothing."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from ticket_tools.store import Records
from ticket_tools.stores.postgres.schema import (
    CREATE_SCHEMA,
    check_schema,
    describe,
    describe_params,
    store_error,
)
from ticket_tools.stores.records import RecordsError, StoredRow, record_rows

# Rows per progress report during an import.
IMPORT_BATCH = 10_000


class TableNotEmptyError(Exception):
    """An import into a table that holds tickets or tombstones (imports never merge)."""


def import_records(
    connection: psycopg.Connection,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Copy `records` into an empty `tickets` table (created if absent) at version 0.

    Returns the count.

    Run as the table's owner. Everything happens in one transaction (a savepoint if
    one is open): on any failure nothing is written. `grant_to` names the reader role
    to give SELECT on the table. Raises RecordsError, TableNotEmptyError, psycopg.Error.
    """
    rows = postgres_rows(records)
    with connection.transaction():
        if connection.execute("SELECT to_regclass('tickets') IS NULL").fetchone() == (True,):
            for statement in CREATE_SCHEMA:
                connection.execute(statement)
        else:
            check_schema(connection, describe_params(connection.info.get_parameters()))
        # Under FORCE the owner, too, sees only app.tenant's rows and may insert no
        # other: lift it for this transaction only. ALTER TABLE holds an ACCESS
        # EXCLUSIVE lock until commit, so no other session ever sees the table unforced.
        # Tombstones too: a version-0 ticket beside a key's tombstone would break the
        # rule that a key is a ticket or a tombstone, never both.
        for table in ("tickets", "tombstones"):
            connection.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        held = "SELECT EXISTS (SELECT FROM tickets) OR EXISTS (SELECT FROM tombstones)"
        if connection.execute(held).fetchone() == (True,):
            raise TableNotEmptyError("the tickets table already holds tickets or tombstones")
        with connection.cursor().copy(
            "COPY tickets (tenant, id, title, status, title_lower, version) FROM STDIN"
        ) as copy:
            for done, (tenant, ticket_id, title, status) in enumerate(rows, start=1):
                copy.write_row((tenant, ticket_id, title, status, title.lower(), 0))
                if on_progress is not None and (done % IMPORT_BATCH == 0 or done == len(rows)):
                    on_progress(done, len(rows))
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
) -> int:
    """Connect to `dsn` (as the owner) and `import_records`; database failures raise StoreError."""
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection:
            return import_records(connection, records, grant_to=grant_to, on_progress=on_progress)
    except psycopg.Error as error:
        raise store_error(error, source, "import into") from None


def postgres_rows(records: Records) -> list[StoredRow]:
    """Check `records` by the records rules, and refuse NUL; return rows in key order."""
    rows = record_rows(records)
    for position, fields in enumerate(rows, start=1):
        if any("\x00" in text for text in fields):
            raise RecordsError(
                f"record {position} (in file order): PostgreSQL text cannot hold a NUL character"
            )
    # Key order makes every row an append to the primary key's B-tree.
    return sorted(rows)
