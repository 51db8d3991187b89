"""Import: write checked records into a new ticket database file, all or nothing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from ticket_tools.store import Records
from ticket_tools.stores.records import StoredRow, check_high_water, first_row, record_rows
from ticket_tools.stores.sqlite.schema import create_schema, store_error
from ticket_tools.tickets import ID_FORMAT, IdFormat

# Rows per executemany call during an import; also how often progress is reported.
IMPORT_BATCH = 10_000
# The mode `open()` and `touch` create files with, before the umask takes its bits.
FILE_MODE = 0o666

Progress = Callable[[int, int], None]
"""Called as progress(done, total) after each batch of rows."""


def write_database(
    path: str | os.PathLike[str],
    records: Records,
    *,
    on_progress: Progress | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> int:
    """Write `records` into a new ticket database file; return the ticket count.

    Every record is checked first (`record_rows`, ids of `id_format`), so a refused
    file writes nothing; the file is made for that ID width and opens with it only.
    Each ticket is stored at its `"version"` (0 without one); `high_water`, for records
    with versions, is the store's floor (docs/feed.md).
    The database is built beside `path` in a hidden temporary folder and linked into
    place when complete: a failure or an interrupt leaves nothing behind, a reader
    never sees a half-built database, and an existing `path` is never overwritten.
    The file's mode is 0666 less the umask, as for any file the user creates.

    Raises RecordsError (a record breaks a rule), FileExistsError, OSError, and
    StoreFailure("unavailable") when SQLite cannot write (a full disk, `ulimit -f`).
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} already exists")
    rows = record_rows(records, id_format=id_format)
    check_high_water(first_row(rows), high_water, replace=False)
    # Beside the target, so that the final link stays on one filesystem.
    folder = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    temporary = folder / path.name
    try:
        # Created here, not by SQLite (0644) nor by mkstemp (0600): the umask decides.
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        _fill(temporary, rows, on_progress, str(path), id_format, high_water=high_water)
        # A hard link puts the complete file in place, and fails if `path` appeared
        # meanwhile: unlike a rename, it never replaces a file.
        os.link(temporary, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return len(rows)


def _fill(
    file: Path,
    rows: list[StoredRow],
    on_progress: Progress | None,
    target: str,
    id_format: IdFormat,
    *,
    high_water: int | None,
) -> None:
    try:
        connection = sqlite3.connect(file, isolation_level=None)
        try:
            # The file is discarded on any failure, so it needs no journal.
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")
            insert_rows(connection, rows, on_progress, id_format=id_format, high_water=high_water)
            # Persistent in the file: readers then never wait for `apply`'s writes
            # (docs/feed.md), and a reader's snapshot never blocks a writer.
            connection.execute("PRAGMA journal_mode = WAL")
        finally:
            connection.close()
    except sqlite3.Error as error:
        raise store_error(error, target, "write") from None


def insert_rows(
    connection: sqlite3.Connection,
    rows: list[StoredRow],
    on_progress: Progress | None,
    *,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
) -> None:
    """Create the schema for ids of `id_format`, insert every row: one transaction.

    Each row at its version (0 without one); `high_water` is stored as the floor.
    """
    connection.execute("BEGIN")
    create_schema(connection, id_format)
    insert_batches(connection, rows, on_progress)
    if high_water is not None:
        connection.execute("INSERT INTO high_water VALUES (?)", (high_water,))
    connection.execute("COMMIT")


def insert_batches(
    connection: sqlite3.Connection,
    rows: list[StoredRow],
    on_progress: Progress | None,
    table: str = "tickets",
) -> None:
    """Insert `rows` (at their versions, 0 without), in key order, in the caller's transaction."""
    # Key order makes every insert an append to the B-tree.
    rows.sort()
    for start in range(0, len(rows), IMPORT_BATCH):
        batch = rows[start : start + IMPORT_BATCH]
        # `table` is one of the two this module's callers name, never input.
        insert = f"INSERT INTO {table} VALUES (?, ?, ?, ?, coalesce(?, 0))"  # noqa: S608
        connection.executemany(insert, batch)
        if on_progress is not None:
            on_progress(start + len(batch), len(rows))
