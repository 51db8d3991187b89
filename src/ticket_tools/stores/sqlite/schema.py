"""What a ticket database is: its exact schema, the check that a file holds it, its errors."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from pathlib import Path

from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, ID_PREFIX, MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat
from ticket_tools.stores.records import IdWidthError
from ticket_tools.stores.sqlite.title_index import (
    GRAM_COUNTS,
    TENANT_SIZES,
    TITLE_GRAMS,
    create_index_schema,
)

# Written into the file header so `open` can tell a ticket database of this schema
# from any other SQLite file without guessing from table names.
APPLICATION_ID = 0x544B5431  # "TKT1"
# 2: the CHECK constraints, so that SQLite itself refuses a value that is not text.
# 3: the id's CHECK holds the deployment's ID width (`--id-digits`), so SQLite refuses
# an id of another width and `open` can tell which width a file was made for.
# 4: a version per ticket and the tombstones table, for `apply` (docs/feed.md).
# 5: the high_water table, the floor a refresh from a versioned snapshot leaves.
# 6: the title index's tables (`title_index.py`), which index statuses too.
SCHEMA_VERSION = 6
MIGRATES_FROM = (4, 5)
"""The schema versions `ticket-tools migrate` turns into this one, in place."""

# Only the three public fields are stored: internal fields are dropped at import,
# so no query, bug or future column list can ever return them. WITHOUT ROWID makes
# the (tenant, id) primary key the table itself: a page is one contiguous range.
# Every column compares with SQLite's default BINARY collation (bytes): a tenant
# declared COLLATE NOCASE would let session "ALPHA" read alpha's tickets.
# `version` is the source's version of the ticket (0 from import, docs/feed.md).
# The id's GLOB spells one [0-9] per digit: GLOB has no repetition count, and with no
# wildcard it matches exactly that many characters. SQLite keeps this text, as written,
# in sqlite_master; `check_schema` compares it.
_SCHEMA = """CREATE TABLE tickets (
    tenant TEXT NOT NULL CHECK (typeof(tenant) = 'text'),
    id TEXT NOT NULL CHECK (typeof(id) = 'text' AND id GLOB '{id_glob}'),
    title TEXT NOT NULL CHECK (typeof(title) = 'text'),
    status TEXT NOT NULL CHECK (typeof(status) = 'text'),
    version INTEGER NOT NULL CHECK (typeof(version) = 'integer' AND version >= 0),
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID"""
# A deleted ticket's key and the version of its delete, so that an older upsert
# arriving later cannot bring it back. A table of its own, which no reader's
# statement names: a tombstone cannot reach a reader, and a page is still one range
# of the tickets key with no deleted rows to skip.
# Its id holds the same width's CHECK as the tickets table's.
_TOMBSTONES = """CREATE TABLE tombstones (
    tenant TEXT NOT NULL CHECK (typeof(tenant) = 'text'),
    id TEXT NOT NULL CHECK (typeof(id) = 'text' AND id GLOB '{id_glob}'),
    version INTEGER NOT NULL CHECK (typeof(version) = 'integer' AND version >= 0),
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID"""

# The store's high-water version: no row (none, the default) or one, written by a refresh
# from a versioned snapshot (docs/feed.md): a key neither stored nor buried counts as
# stored at it. Not tenant data, and no reader's statement names it.
HIGH_WATER = """CREATE TABLE high_water (
    version INTEGER NOT NULL CHECK (typeof(version) = 'integer' AND version >= 0)
)"""

MIGRATE_FROM_4 = (HIGH_WATER,)
"""What turns a schema version 4 file into version 5: the empty high_water table. Rows,
versions and tombstones stay as they are; `migrate.py` runs it, then version 6's."""


def schema_sql(id_format: IdFormat = ID_FORMAT) -> str:
    """Return the CREATE TABLE statement of the tickets table for ticket IDs of `id_format`."""
    return _SCHEMA.format(id_glob=_id_glob(id_format))


def tombstones_sql(id_format: IdFormat = ID_FORMAT) -> str:
    """Return the CREATE TABLE statement of the tombstones table for IDs of `id_format`."""
    return _TOMBSTONES.format(id_glob=_id_glob(id_format))


def _id_glob(id_format: IdFormat) -> str:
    return ID_PREFIX + "[0-9]" * id_format.digits


def _objects(id_format: IdFormat, version: int = SCHEMA_VERSION) -> list[tuple[object, ...]]:
    """The rows of sqlite_master (ordered by name) of a database for IDs of `id_format`.

    Those of schema `version` (4, 5 or this one): what a file to migrate must hold.
    """
    objects: list[tuple[object, ...]] = [
        ("table", "gram_counts", "gram_counts", GRAM_COUNTS),
        ("table", "high_water", "high_water", HIGH_WATER),
        ("table", "tenant_sizes", "tenant_sizes", TENANT_SIZES),
        ("table", "tickets", "tickets", schema_sql(id_format)),
        ("table", "title_grams", "title_grams", TITLE_GRAMS),
        ("table", "tombstones", "tombstones", tombstones_sql(id_format)),
    ]
    kept = {4: {"tickets", "tombstones"}, 5: {"high_water", "tickets", "tombstones"}}
    if version in kept:
        return [row for row in objects if row[1] in kept[version]]
    return objects


SCHEMA = schema_sql()
"""The tickets table of the brief's IDs, TKT- and three digits."""
TOMBSTONES = tombstones_sql()
"""The tombstones table of the brief's IDs, TKT- and three digits."""

# sqlite3_errstr's wording for the failures a user can act on (SQLite's own text,
# so never anything from the file); any other code is shown by its name alone.
_CAUSES = {
    sqlite3.SQLITE_CANTOPEN: "unable to open database file",
    sqlite3.SQLITE_CORRUPT: "database disk image is malformed",
    sqlite3.SQLITE_FULL: "database or disk is full",
    sqlite3.SQLITE_IOERR: "disk I/O error",
    sqlite3.SQLITE_NOMEM: "out of memory",
    sqlite3.SQLITE_PERM: "access permission denied",
    sqlite3.SQLITE_READONLY: "attempt to write a readonly database",
}


def create_schema(connection: sqlite3.Connection, id_format: IdFormat = ID_FORMAT) -> None:
    """Stamp the file header and create the tables and index (inside the caller's transaction)."""
    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    connection.execute(schema_sql(id_format))
    connection.execute(tombstones_sql(id_format))
    connection.execute(HIGH_WATER)
    create_index_schema(connection)


def check_schema(
    connection: sqlite3.Connection,
    source: str,
    id_format: IdFormat = ID_FORMAT,
    *,
    version: int = SCHEMA_VERSION,
) -> None:
    """Raise StoreFailure("schema") unless the database is exactly what `create_schema` makes.

    Exactly: the header stamps, UTF-8 text (SQLite compares TEXT as stored bytes,
    and only UTF-8 bytes order as Python orders str), and six objects, the tickets
    and tombstones tables, high_water and the title index's three tables, declared by
    the very text of `schema_sql(id_format)`,
    `tombstones_sql(id_format)`, HIGH_WATER and `title_index.INDEX_SCHEMA`: so no
    collation, type or constraint can differ, and no index, view or trigger was added.
    A database made for another ID width is refused with a message naming both widths.
    `version` 4 or 5 checks a file to migrate: exactly what that version made.
    """
    objects = connection.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()
    problem = None
    found = connection.execute("PRAGMA user_version").fetchone()[0]
    if connection.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        problem = "it was not made by ticket-tools import"
    elif found != version:
        problem = _version_problem(found)
    if problem is None and connection.execute("PRAGMA encoding").fetchone()[0] != "UTF-8":
        problem = "its text is not stored as UTF-8"
    elif problem is None and objects != _objects(id_format, version):
        made_for = _id_digits_of(objects, version)
        if made_for is not None:
            raise IdWidthError(source, made_for, id_format)
        problem = "its tables differ from the ones import creates"
    if problem is not None:
        raise StoreFailure(
            "schema",
            f"{source} is not a ticket database of schema version {version}: {problem}",
        )


def _version_problem(found: int) -> str:
    """Say what to do with a database of another schema version than this one."""
    if found in MIGRATES_FROM:
        return f"it has schema version {found}; to migrate, run ticket-tools migrate --db FILE"
    if found < SCHEMA_VERSION:
        return (
            f"it has schema version {found}; to migrate, import its records again "
            "into a new file (ticket-tools import RECORDS --db NEW_FILE)"
        )
    return "it was made by a newer version of ticket-tools"


def _id_digits_of(objects: list[tuple[object, ...]], version: int) -> int | None:
    """Return the ID width whose schema the database has, if it is one import makes."""
    for digits in range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1):
        if objects == _objects(IdFormat(digits), version):
            return digits
    return None


def check_file(path: Path, action: str) -> None:
    """Raise StoreFailure unless `path` is a file this process may open to `action` it.

    Asked of the system before SQLite opens it, so that a refusal is named in the system's
    words (`cannot read FILE: Permission denied`: the file, or a folder on its way), where
    SQLite says only `unable to open database file`. Missing: StoreFailure("missing"); a
    FIFO, socket or device is refused too, as no database.
    """
    try:
        found = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise StoreFailure("missing", f"no database at {path}") from None
    except OSError as error:
        raise _refused(path, action, error) from None
    if stat.S_ISDIR(found.st_mode):  # else SQLite reports a disk I/O error
        raise StoreFailure("unavailable", f"cannot {action} {path}: it is a folder")
    if not stat.S_ISREG(found.st_mode):  # SQLite's open of a FIFO waits for a writer for ever
        raise StoreFailure("unavailable", f"cannot {action} {path}: it is not a regular file")
    # Non-blocking: had it become a FIFO since, this open would not wait for a writer.
    flags = (os.O_RDONLY if action == "read" else os.O_RDWR) | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        os.close(os.open(path, flags))
    except OSError as error:
        raise _refused(path, action, error) from None


def _refused(path: Path, action: str, error: OSError) -> StoreFailure:
    reason = error.strerror or os.strerror(error.errno or errno.EIO)
    return StoreFailure("unavailable", f"cannot {action} {path}: {reason}")


def store_error(error: sqlite3.Error, source: str, action: str = "read") -> StoreFailure:
    """Classify an sqlite3 error by its result code, never by its message.

    The message says what went wrong in SQLite's fixed words, never the error's own
    text, which can quote the file (a malformed schema is shown as written).
    """
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:  # raised by the sqlite3 module itself, not by SQLite
        return StoreFailure("unavailable", f"cannot {action} {source} ({type(error).__name__})")
    primary = code & 0xFF
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreFailure("locked", f"{source} is locked by another connection; try again")
    if primary == sqlite3.SQLITE_NOTADB:
        return StoreFailure("schema", f"{source} is not an SQLite database")
    name = getattr(error, "sqlite_errorname", "")
    cause = _CAUSES.get(primary)
    reason = name if cause is None else f"{cause} ({name})"
    return StoreFailure("unavailable", f"cannot {action} {source}: {reason}")
