"""Where the tickets come from: the store options every serving command takes, and `import`."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

from ticket_tools.cli.command import CommandError, Commands, counted
from ticket_tools.cli.inputs import (
    NESTED_TOO_DEEPLY,
    SYNTAX,
    integer_too_long,
    os_reason,
    read_records,
)
from ticket_tools.cli.progress import ImportProgress, IndexingProgress
from ticket_tools.fixtures import fixture_records
from ticket_tools.store import Records, TicketStore
from ticket_tools.stores.ids import (
    DEFAULT_ID_DIGITS,
    ID_FORMAT,
    MAX_ID_DIGITS,
    MIN_ID_DIGITS,
    IdFormat,
)
from ticket_tools.stores.records import (
    DUPLICATE_FIELD_RULE,
    MAX_VERSION,
    NOT_AN_OBJECT_RULE,
    RecordsError,
    StoredRow,
    duplicate_key,
)
from ticket_tools.stores.records_stream import (
    MAX_RECORD_CHARS,
    RecordsReader,
    RecordsSyntaxError,
)
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.schema import SCHEMA_VERSION
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.text import titles_cleaned

# Below this size (about 30,000 tickets) an import is too quick for a progress line to help.
PROGRESS_MIN_BYTES = 4 << 20
# Where --postgres is read from when not given, so a password need not be on a command line.
POSTGRES_ENV = "TICKET_TOOLS_POSTGRES"

Progress = Callable[[int], None]
"""Called as progress(done) while an import writes: the rows written so far."""

IndexProgress = Callable[[int, int], None]
"""Called as progress(done, total) while the title index is built: tickets indexed so far."""

Importer = Callable[[Callable[[], Iterator[StoredRow]], Progress, IndexProgress], tuple[int, str]]
"""Write the rows a loader reads somewhere, as it reads them; return the ticket count and
where they went.

A replacer calls the loader once it holds the writers' lock (docs/feed.md)."""


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """Add --records, --db and --postgres, one at most, to a command that reads tickets."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--records",
        type=Path,
        metavar="FILE",
        help='a records JSON file: an object of "tenant:TKT-123" -> ticket '
        "(default: the built-in fixture store)",
    )
    source.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        help="an SQLite ticket database made by `ticket-tools import`, opened read-only",
    )
    source.add_argument(
        "--postgres",
        metavar="DSN",
        help="a PostgreSQL ticket database, connecting as the reader role "
        f"(default: ${POSTGRES_ENV}, unless --records or --db is given)",
    )
    add_raw_titles_option(parser)


def add_raw_titles_option(parser: argparse.ArgumentParser) -> None:
    """Add --raw-titles, which keeps a records file's or feed's titles as they are."""
    parser.add_argument(
        "--raw-titles",
        action="store_true",
        help="keep titles as given, invisible characters included (default: removed, "
        "docs/input-rules.md); the length bound still applies",
    )


def add_id_digits_option(parser: argparse.ArgumentParser) -> None:
    """Add --id-digits N, the width of every ticket ID, to a command that reads or writes them."""
    parser.add_argument(
        "--id-digits",
        type=_id_digits,
        default=DEFAULT_ID_DIGITS,
        metavar="N",
        help=f"how many digits follow TKT- in every ticket ID of this deployment, "
        f"{MIN_ID_DIGITS} to {MAX_ID_DIGITS} (default: {DEFAULT_ID_DIGITS}, the brief's "
        "TKT-ddd); every command on one store takes the same N",
    )


def id_format_of(options: argparse.Namespace) -> IdFormat:
    """Return the ticket-ID format `add_id_digits_option` read."""
    return IdFormat(options.id_digits)


def _id_digits(text: str) -> int:
    # Digits only: int() would also take " 6", "+6" and "٦".
    if re.fullmatch("[0-9]{1,2}", text) is None or not (
        MIN_ID_DIGITS <= int(text) <= MAX_ID_DIGITS
    ):
        raise argparse.ArgumentTypeError(
            f"expected an integer from {MIN_ID_DIGITS} to {MAX_ID_DIGITS}"
        )
    return int(text)


def open_store(
    options: argparse.Namespace,
    id_format: IdFormat = ID_FORMAT,
    *,
    timeout: float | None = None,
    connections: int | None = None,
    on_titles_cleaned: Callable[[int], None] | None = None,
) -> Records | TicketStore:
    """Open the store the options name (`add_store_options`); the fixture store by default.

    A records file is checked, and a database opened, for ticket IDs of `id_format`.
    `timeout` and `connections` size a PostgreSQL store: its statement and pool timeouts,
    and its pool (`serve http` gives its deadline per call and its store workers).
    A records file's titles are cleaned (`stores.text`), and `on_titles_cleaned` told how
    many changed.
    """
    if options.db is not None:
        return SQLiteStore.open(options.db, id_format=id_format)
    if options.records is not None:
        records, cleaned = _load_records(options.records, id_format, options.raw_titles)
        if on_titles_cleaned is not None:
            on_titles_cleaned(cleaned)
        return records
    dsn = postgres_dsn(options)
    if dsn is None:
        return fixture_records()
    require_postgres()
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

    if timeout is None or connections is None:
        return PostgresStore.open(dsn, id_format=id_format)
    return PostgresStore.open(
        dsn, id_format=id_format, timeout=timeout, max_connections=connections
    )


def add_commands(commands: Commands) -> None:
    """Add `import` and `migrate`."""
    load = commands.add_parser(
        "import",
        help="copy a records JSON file into a new SQLite database or an empty PostgreSQL table",
    )
    load.add_argument(
        "records",
        type=Path,
        metavar="RECORDS_FILE",
        help='the path of a records JSON file: an object of "tenant:TKT-123" -> ticket',
    )
    target = load.add_mutually_exclusive_group()
    target.add_argument("--db", type=Path, metavar="FILE", help="the database file to create")
    target.add_argument(
        "--postgres",
        metavar="DSN",
        help=f"a PostgreSQL database to fill, connecting as the table's owner "
        f"(default: ${POSTGRES_ENV})",
    )
    load.add_argument(
        "--grant-to",
        metavar="ROLE",
        help="with --postgres: the reader role to give SELECT on the tickets table",
    )
    load.add_argument(
        "--replace",
        action="store_true",
        help="replace every ticket of an existing database while it serves: the new set is "
        "built beside the old one and swapped in atomically (docs/feed.md)",
    )
    load.add_argument(
        "--high-water",
        type=_high_water,
        metavar="N",
        help='for tickets with "version"s: the snapshot holds every change up to version N, '
        "so a key it lacks counts as deleted at N (needed with --replace; docs/feed.md)",
    )
    add_id_digits_option(load)
    add_raw_titles_option(load)
    load.set_defaults(run=_run_import)
    migrate = commands.add_parser(
        "migrate",
        help="bring a ticket database of schema version 4 or 5 to this version, in place "
        "and while it serves: the title index is built",
    )
    target = migrate.add_mutually_exclusive_group()
    target.add_argument("--db", type=Path, metavar="FILE", help="the database file to migrate")
    target.add_argument(
        "--postgres",
        metavar="DSN",
        help=f"a PostgreSQL database to migrate, connecting as the tables' owner "
        f"(default: ${POSTGRES_ENV})",
    )
    add_id_digits_option(migrate)
    migrate.set_defaults(run=_run_migrate)


def _high_water(text: str) -> int:
    # Digits only, as a feed's version is a JSON integer: int() would also take "+5", " 5".
    if re.fullmatch("[0-9]{1,19}", text) is None or int(text) > MAX_VERSION:
        raise argparse.ArgumentTypeError("expected an integer from 0 to 2^63-1")
    return int(text)


def postgres_dsn(options: argparse.Namespace) -> str | None:
    """Return --postgres, else $TICKET_TOOLS_POSTGRES, else None."""
    dsn: str | None = options.postgres or os.environ.get(POSTGRES_ENV) or None
    return dsn


def require_postgres() -> None:
    """Raise CommandError saying how to install the postgres extra, if it is missing."""
    # Asked before importing the PostgreSQL store: psycopg is an optional extra, and
    # the core never needs it.
    if (
        importlib.util.find_spec("psycopg") is None
        or importlib.util.find_spec("psycopg_pool") is None
    ):
        raise CommandError(
            "--postgres needs the postgres extra: in a clone of ticket-tools, "
            "pip install -e '.[postgres]'"
        )


def _load_records(path: Path, id_format: IdFormat, raw_titles: bool) -> tuple[Records, int]:
    """Read a records file as `import` reads it: one stream, the same reader and rules.

    So --records and --db answer alike for one file, whatever rule a record breaks (a
    record too long, a field given twice), and a FIFO is read once. A key given twice
    is named once every record is read, as an import's primary key finds it.
    """
    try:
        stream = path.open("rb")
    except OSError as error:
        raise CommandError(f"cannot read {path}: {os_reason(error)}") from None
    records: dict[str, dict[str, str]] = {}
    repeated: int | None = None
    with stream:
        reader = RecordsReader(stream, id_format=id_format, raw_titles=raw_titles)
        try:
            for position, row in enumerate(reader.rows(), start=1):
                key = f"{row.tenant}:{row.id}"
                if key in records and repeated is None:
                    repeated = position
                records[key] = {"id": row.id, "title": row.title, "status": row.status}
            if repeated is not None:
                raise duplicate_key(repeated)
        except RecordsError as error:
            raise CommandError(f"{path}: {error}") from None
        except RecordsSyntaxError as error:
            raise _syntax_error(path, error, reader.read) from None
        except OSError as error:  # a read that failed after the open (EIO)
            raise CommandError(f"cannot read {path}: {os_reason(error)}") from None
    return cast(Records, records), reader.cleaned


def _run_import(options: argparse.Namespace) -> int:
    dsn = None if options.db is not None else postgres_dsn(options)
    if dsn is None and options.db is None:
        raise CommandError(f"import needs --db FILE or --postgres DSN (or ${POSTGRES_ENV})")
    if dsn is None and options.grant_to is not None:
        raise CommandError("--grant-to applies to --postgres only")
    if options.replace and options.grant_to is not None:
        raise CommandError("--grant-to applies to a new table; --replace keeps the table's grants")
    id_format = id_format_of(options)
    high_water: int | None = options.high_water
    if options.replace:
        write = (
            _sqlite_replacer(options.db, id_format, high_water)
            if dsn is None
            else _postgres_replacer(dsn, id_format, high_water)
        )
    else:
        write = (
            _sqlite_importer(options.db, id_format, high_water)
            if dsn is None
            else _postgres_importer(dsn, options, id_format, high_water)
        )
    line: ImportProgress | None = None
    readers: list[RecordsReader] = []  # the one the loader made, once it has

    with contextlib.ExitStack() as files:

        def load() -> Iterator[StoredRow]:
            # Read, checked and written one record at a time, all in one transaction.
            nonlocal line
            try:
                stream = files.enter_context(options.records.open("rb"))
                size = os.fstat(stream.fileno()).st_size
            except OSError as error:
                raise CommandError(f"cannot read {options.records}: {os_reason(error)}") from None
            readers.append(
                RecordsReader(stream, id_format=id_format, raw_titles=options.raw_titles)
            )
            if sys.stderr.isatty() and size >= PROGRESS_MIN_BYTES:
                line = ImportProgress(sys.stderr, size)
            return readers[0].rows()

        def progress(done: int) -> None:
            if line is not None:
                line.update(done, readers[0].bytes_read)

        def indexed(done: int, total: int) -> None:
            if line is not None:
                line.indexing(done, total)

        try:
            count, target = write(load, progress, indexed)
        except RecordsError as error:
            raise CommandError(f"{options.records}: {error}") from None
        except RecordsSyntaxError as error:
            raise _syntax_error(options.records, error, readers[0].read) from None
        finally:
            if line is not None:
                line.finish()
    cleaned = readers[0].cleaned
    if options.replace and high_water is not None:
        print(
            f"merged {counted(count, 'ticket')} into {target} up to version {high_water}"
            f"{titles_cleaned(cleaned)}"
        )
    elif options.replace:
        print(f"replaced the tickets of {target} with {count}{titles_cleaned(cleaned)}")
    else:
        print(f"imported {counted(count, 'ticket')} into {target}{titles_cleaned(cleaned)}")
    return 0


def _syntax_error(path: Path, error: RecordsSyntaxError, read: int) -> CommandError:
    """Say which rule a records file read as a stream broke, in `read_records`' words."""
    if error.kind == "NotAnObject":
        # Refused either way: a file is read whole only to say whether it is JSON at all.
        # A FIFO or a pipe cannot be read again (its open would wait for another writer).
        if path.is_file():
            read_records(path)
        return CommandError(f"{path}: {NOT_AN_OBJECT_RULE}")
    if error.kind == "UnicodeDecodeError":
        return CommandError(f"cannot read {path}: it is not UTF-8 text")
    if error.kind == "TooLong":
        return CommandError(
            f"{path}: record {read + 1} (in file order): "
            f"the record is longer than {MAX_RECORD_CHARS} characters"
        )
    if error.kind == "DuplicateField":
        return CommandError(f"{path}: record {read + 1} (in file order): {DUPLICATE_FIELD_RULE}")
    fault = {"RecursionError": NESTED_TOO_DEEPLY, "ValueError": integer_too_long()}
    return CommandError(
        f"the records in {path} are not valid JSON: {fault.get(error.kind, SYNTAX)}"
    )


def _sqlite_importer(path: Path, id_format: IdFormat, high_water: int | None) -> Importer:
    def write(
        load: Callable[[], Iterator[StoredRow]], progress: Progress, indexed: IndexProgress
    ) -> tuple[int, str]:
        records = load()
        try:
            count = write_database(
                path,
                records,
                on_progress=progress,
                id_format=id_format,
                high_water=high_water,
                on_index=indexed,
            )
            return count, str(path)
        except FileExistsError:
            raise CommandError(f"{path} already exists; import only creates new files") from None
        except OSError as error:
            raise CommandError(f"cannot write {path}: {os_reason(error)}") from None

    return write


def _sqlite_replacer(path: Path, id_format: IdFormat, high_water: int | None) -> Importer:
    from ticket_tools.stores.sqlite.writer import SQLiteWriter  # noqa: PLC0415

    def write(
        load: Callable[[], Iterator[StoredRow]], progress: Progress, indexed: IndexProgress
    ) -> tuple[int, str]:
        with SQLiteWriter.open(path, id_format=id_format) as writer:
            # Read under the write lock, and written as it is read, in one transaction.
            count = writer.replace(load, progress, high_water=high_water, on_index=indexed)
            return count, str(path)

    return write


def _postgres_replacer(dsn: str, id_format: IdFormat, high_water: int | None) -> Importer:
    require_postgres()  # before reading a large file: the extra may be missing
    from ticket_tools.stores.postgres.importer import replace_dsn  # noqa: PLC0415
    from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415

    def write(
        load: Callable[[], Iterator[StoredRow]], progress: Progress, indexed: IndexProgress
    ) -> tuple[int, str]:
        count = replace_dsn(
            dsn,
            load,
            on_progress=progress,
            id_format=id_format,
            high_water=high_water,
            on_index=indexed,
        )
        return count, describe(dsn)

    return write


def _postgres_importer(
    dsn: str, options: argparse.Namespace, id_format: IdFormat, high_water: int | None
) -> Importer:
    require_postgres()  # before reading a large file: the extra may be missing
    from ticket_tools.stores.postgres.importer import (  # noqa: PLC0415
        TableNotEmptyError,
        import_dsn,
    )
    from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415

    target = describe(dsn)

    def write(
        load: Callable[[], Iterator[StoredRow]], progress: Progress, indexed: IndexProgress
    ) -> tuple[int, str]:
        records = load()
        try:
            count = import_dsn(
                dsn,
                records,
                grant_to=options.grant_to,
                on_progress=progress,
                id_format=id_format,
                high_water=high_water,
                on_index=indexed,
            )
        except TableNotEmptyError:
            raise CommandError(
                f"{target} already holds tickets; import only fills an empty table"
            ) from None
        return count, target

    return write


def _run_migrate(options: argparse.Namespace) -> int:
    dsn = None if options.db is not None else postgres_dsn(options)
    if dsn is None and options.db is None:
        raise CommandError(f"migrate needs --db FILE or --postgres DSN (or ${POSTGRES_ENV})")
    id_format = id_format_of(options)
    line = IndexingProgress(sys.stderr) if sys.stderr.isatty() else None
    indexed = None if line is None else line.indexing
    try:
        if dsn is None:
            from ticket_tools.stores.sqlite.migrate import migrate_database  # noqa: PLC0415

            target, version = str(options.db), SCHEMA_VERSION
            count = migrate_database(options.db, id_format=id_format, on_progress=indexed)
        else:
            require_postgres()
            from ticket_tools.stores.postgres.migrate import migrate_dsn  # noqa: PLC0415
            from ticket_tools.stores.postgres.schema import (  # noqa: PLC0415
                SCHEMA_VERSION as POSTGRES_VERSION,
            )
            from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415

            target, version = describe(dsn), POSTGRES_VERSION
            count = migrate_dsn(dsn, id_format=id_format, on_progress=indexed)
    finally:
        if line is not None:
            line.finish()
    if count is None:
        print(f"{target} already has schema version {version}; nothing to migrate")
    else:
        print(f"migrated {target} to schema version {version}: {counted(count, 'ticket')} indexed")
    return 0
