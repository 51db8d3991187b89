"""`ticket-tools migrate --db FILE`: a schema version 4 or 5 file made this version, in place."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.sqlite.schema import (
    MIGRATE_FROM_4,
    MIGRATES_FROM,
    SCHEMA_VERSION,
    check_file,
    check_schema,
    store_error,
)
from ticket_tools.stores.sqlite.title_index import (
    IndexProgress,
    build_index,
    create_index_schema,
)

# How long the migration waits for another writer (an `apply`) to finish its batch.
BUSY_TIMEOUT = 5.0


def migrate_database(
    path: str | os.PathLike[str],
    *,
    id_format: IdFormat = ID_FORMAT,
    on_progress: IndexProgress | None = None,
) -> int | None:
    """Migrate the file at `path` to this schema version; return the tickets indexed.

    None: it already has this version, and nothing was done. One transaction holding the
    write lock: the title index's tables and their rows (built from the tickets,
    `on_progress` told how far), the version stamp; on any failure or interrupt, nothing.
    Readers in WAL mode keep reading the old file meanwhile. The file must be exactly
    what version 4 or 5 made (else StoreFailure "schema", as `open` says).
    """
    path = Path(path)
    check_file(path, "write")
    source = str(path)
    try:
        connection = sqlite3.connect(
            path.resolve().as_uri() + "?mode=rw",
            uri=True,
            timeout=BUSY_TIMEOUT,
            isolation_level=None,
        )
    except sqlite3.Error as error:
        raise store_error(error, source, "write") from None
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            found = connection.execute("PRAGMA user_version").fetchone()[0]
            if found not in MIGRATES_FROM:
                check_schema(connection, source, id_format)  # refused, or already done
                return None
            check_schema(connection, source, id_format, version=found)
            if found == 4:
                for statement in MIGRATE_FROM_4:
                    connection.execute(statement)
            create_index_schema(connection)
            indexed = build_index(connection, on_progress)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            connection.execute("COMMIT")
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
    except sqlite3.Error as error:
        raise store_error(error, source, "write") from None
    finally:
        connection.close()
    return indexed
