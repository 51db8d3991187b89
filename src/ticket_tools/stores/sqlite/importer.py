"""Import: write checked records into a new ticket database file, all or nothing."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ticket_tools.store import Records
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.records import (
    StoredRow,
    duplicate_key,
    source_rows,
    with_high_water,
)
from ticket_tools.stores.sqlite.schema import create_schema, store_error
from ticket_tools.stores.sqlite.title_index import IndexProgress, build_index

# Rows per executemany call during an import; also how often progress is reported.
IMPORT_BATCH = 10_000
# The mode `open()` and `touch` create files with, before the umask takes its bits.
FILE_MODE = 0o666

# Rows out of key order go here, then into the table in key order (`insert_batches`).
UNSORTED_TABLE = "temp.unsorted"

_UNSORTED_SQL = (
    "CREATE TEMP TABLE unsorted (tenant TEXT, id TEXT, title TEXT, status TEXT, version INTEGER)"
)
# The position (its rowid: every row is there in file order) of the first row whose key
# came before.
_SECOND_KEY_SQL = (
    "SELECT min(position) FROM (SELECT rowid AS position, row_number() OVER "
    "(PARTITION BY tenant, id ORDER BY rowid) AS nth FROM temp.unsorted) WHERE nth > 1"
)

Progress = Callable[[int], None]
"""Called as progress(done) after each batch of rows: how many were written so far."""


def write_database(
    path: str | os.PathLike[str],
    records: Records | Iterator[StoredRow],
    *,
    on_progress: Progress | None = None,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
) -> int:
    """Write `records` into a new ticket database file; return the ticket count.

    `records` is a records mapping, or an iterator of rows checked as they are read (a
    records file streamed, `records_stream.RecordsReader`): each row is checked
    (`record_rows`' rules, ids of `id_format`) and written as it comes, a batch at a
    time, so a large file is never held whole; a record refused, even the last, writes
    nothing. A key given twice is refused (`duplicate_key`). The file is made for that
    ID width and opens with it only.
    Each ticket is stored at its `"version"` (0 without one); `high_water`, for records
    with versions, is the store's floor (docs/feed.md). Then the title index is built
    from the tickets written (`title_index.build_index`), `on_index` told its progress.
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
    rows = with_high_water(source_rows(records, id_format=id_format), high_water, replace=False)
    # Beside the target, so that the final link stays on one filesystem.
    folder = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    temporary = folder / path.name
    try:
        # Created here, not by SQLite (0644) nor by mkstemp (0600): the umask decides.
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        count = _fill(
            temporary,
            rows,
            on_progress,
            str(path),
            id_format,
            high_water=high_water,
            on_index=on_index,
        )
        # A hard link puts the complete file in place, and fails if `path` appeared
        # meanwhile: unlike a rename, it never replaces a file.
        os.link(temporary, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return count


def _fill(
    file: Path,
    rows: Iterable[StoredRow],
    on_progress: Progress | None,
    target: str,
    id_format: IdFormat,
    *,
    high_water: int | None,
    on_index: IndexProgress | None,
) -> int:
    try:
        connection = sqlite3.connect(file, isolation_level=None)
        try:
            # The file is discarded on any failure, so it needs no journal.
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")
            count = insert_rows(
                connection,
                rows,
                on_progress,
                id_format=id_format,
                high_water=high_water,
                on_index=on_index,
            )
            # Persistent in the file: readers then never wait for `apply`'s writes
            # (docs/feed.md), and a reader's snapshot never blocks a writer.
            connection.execute("PRAGMA journal_mode = WAL")
        finally:
            connection.close()
    except sqlite3.Error as error:
        raise store_error(error, target, "write") from None
    return count


def insert_rows(
    connection: sqlite3.Connection,
    rows: Iterable[StoredRow],
    on_progress: Progress | None,
    *,
    id_format: IdFormat = ID_FORMAT,
    high_water: int | None = None,
    on_index: IndexProgress | None = None,
) -> int:
    """Create the schema for ids of `id_format`, insert every row, build the index: one transaction.

    Each row at its version (0 without one); `high_water` is stored as the floor.
    Return the row count.
    """
    connection.execute("BEGIN")
    create_schema(connection, id_format)
    count = insert_batches(connection, rows, on_progress)
    if high_water is not None:
        connection.execute("INSERT INTO high_water VALUES (?)", (high_water,))
    build_index(connection, on_index)
    connection.execute("COMMIT")
    return count


def insert_batches(
    connection: sqlite3.Connection,
    rows: Iterable[StoredRow],
    on_progress: Progress | None,
    table: str = "tickets",
) -> int:
    """Insert `rows` (at their versions, 0 without) into the empty `table`, as they come.

    In the caller's transaction, IMPORT_BATCH rows per executemany; return the count.
    Rows in key order are appended to the table's B-tree as they come. At the first row
    out of key order, the rows so far move to a temporary table without a key, the rest
    follow them there (an append too, in file order), and all go into `table` in key
    order at the end, sorted by SQLite on disk: a file in random order would otherwise
    write each row to a random page (4.6 times as slow at 10^6 rows, docs/scale.md). A
    key given twice raises `duplicate_key` with the position of its second record.
    """
    # `table` is one of the two this module's callers name, never input.
    insert = "INSERT INTO {} VALUES (?, ?, ?, ?, coalesce(?, 0))"
    into = table
    done = 0
    previous: tuple[str, str] | None = None
    batch: list[StoredRow] = []
    for row in rows:
        key = (row.tenant, row.id)
        if into == table and previous is not None and key <= previous:
            connection.executemany(insert.format(table), batch)
            batch, into = [], UNSORTED_TABLE
            # Rows in key order are in file order: their rowids are their positions.
            connection.execute(_UNSORTED_SQL)
            connection.execute(f"INSERT INTO {into} SELECT * FROM {table} ORDER BY tenant, id")  # noqa: S608
            connection.execute(f"DELETE FROM {table}")  # noqa: S608
        previous = key
        batch.append(row)
        done += 1
        if done % IMPORT_BATCH == 0:
            connection.executemany(insert.format(into), batch)
            batch = []
            if on_progress is not None:
                on_progress(done)
    if batch:
        connection.executemany(insert.format(into), batch)
        if on_progress is not None:
            on_progress(done)
    if into != table:
        _insert_sorted(connection, table)
    return done


def _insert_sorted(connection: sqlite3.Connection, table: str) -> None:
    """Move the unsorted rows into the empty `table` in key order; refuse a key given twice."""
    try:
        connection.execute(
            f"INSERT INTO {table} SELECT * FROM {UNSORTED_TABLE} ORDER BY tenant, id"  # noqa: S608
        )
    except sqlite3.IntegrityError:
        # Whatever the failed statement left in `table` (no journal: it may stay) is
        # discarded with the transaction; the unsorted rows alone say where the key was.
        [(position,)] = connection.execute(_SECOND_KEY_SQL).fetchall()
        if position is None:  # not a key given twice: a CHECK the rows were not checked by
            raise
        raise duplicate_key(position) from None
    connection.execute(f"DROP TABLE {UNSORTED_TABLE}")
