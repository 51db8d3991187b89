"""Import: copy checked records into an empty PostgreSQL tickets table, all or nothing."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from ticket_tools.store import Records
from ticket_tools.stores.postgres.schema import (
    check_schema,
    create_schema,
    describe,
    describe_params,
    store_error,
)
from ticket_tools.stores.records import RecordsError, StoredRow, record_rows
from ticket_tools.tickets import ID_FORMAT, IdFormat

# Rows per progress report during an import.
IMPORT_BATCH = 10_000


class TableNotEmptyError(Exception):
    """An import into a tickets table that already holds tickets (imports never merge)."""


def import_records(
    connection: psycopg.Connection,
    records: Records,
    *,
    grant_to: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    id_format: IdFormat = ID_FORMAT,
) -> int:
    """Copy `records` into an empty `tickets` table (created if absent); return the count.

    Run as the table's owner. Everything happens in one transaction (a savepoint if
    one is open): on any failure nothing is written. `grant_to` names the reader role
    to give SELECT on the table. Every id has `id_format`'s width, and so must an
    existing table's. Raises RecordsError, TableNotEmptyError, StoreError ("schema":
    a table of another schema or width), psycopg.Error.
    """
    rows = postgres_rows(records, id_format=id_format)
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
        connection.execute("ALTER TABLE tickets NO FORCE ROW LEVEL SECURITY")
        if connection.execute("SELECT EXISTS (SELECT FROM tickets)").fetchone() == (True,):
            raise TableNotEmptyError("the tickets table already holds tickets")
        with connection.cursor().copy(
            "COPY tickets (tenant, id, title, status, title_lower) FROM STDIN"
        ) as copy:
            for done, (tenant, ticket_id, title, status) in enumerate(rows, start=1):
                copy.write_row((tenant, ticket_id, title, status, title.lower()))
                if on_progress is not None and (done % IMPORT_BATCH == 0 or done == len(rows)):
                    on_progress(done, len(rows))
        connection.execute("ALTER TABLE tickets FORCE ROW LEVEL SECURITY")
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
) -> int:
    """Connect to `dsn` (as the owner) and `import_records`; database failures raise StoreError."""
    source = describe(dsn)
    try:
        with psycopg.connect(dsn) as connection:
            return import_records(
                connection,
                records,
                grant_to=grant_to,
                on_progress=on_progress,
                id_format=id_format,
            )
    except psycopg.Error as error:
        raise store_error(error, source, "import into") from None


def postgres_rows(records: Records, *, id_format: IdFormat = ID_FORMAT) -> list[StoredRow]:
    """Check `records` by the records rules (ids of `id_format`), and refuse NUL.

    Return the rows in key order.
    """
    rows = record_rows(records, id_format=id_format)
    for position, fields in enumerate(rows, start=1):
        if any("\x00" in text for text in fields):
            raise RecordsError(
                f"record {position} (in file order): PostgreSQL text cannot hold a NUL character"
            )
    # Key order makes every row an append to the primary key's B-tree.
    return sorted(rows)
