"""`ticket-tools apply FEED`: write a change feed into a store while it serves (docs/feed.md).

The feed is read line by line on a thread of its own into a bounded queue, so memory
stays flat however long the feed is, and a batch is committed when it is full or when
its first change has waited BATCH_SECONDS, whichever comes first: a slow trickle from a
pipe is applied within a second, a fast file in large batches.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol, TextIO, cast

from ticket_tools.cli.command import CommandError, Commands
from ticket_tools.cli.inputs import os_reason
from ticket_tools.cli.serve import _seconds
from ticket_tools.cli.stores import (
    POSTGRES_ENV,
    add_id_digits_option,
    id_format_of,
    postgres_dsn,
    require_postgres,
)
from ticket_tools.stores.feed import MAX_LINE_BYTES, Change, Counts, FeedError, parse_change
from ticket_tools.tickets import IdFormat

# A batch is committed at this many changes: large enough that a commit's cost is
# shared by many changes, small enough that a batch's transaction stays short.
BATCH_CHANGES = 1_000
# ... or this long after its first change was read, so a change from a slow source is
# visible to readers within a second (half of it waiting, the rest for the commit).
BATCH_SECONDS = 0.5
# Lines read ahead of the writer: what bounds the memory a long feed takes.
READ_AHEAD_LINES = 2 * BATCH_CHANGES
# On a terminal, progress is redrawn at most this often.
PROGRESS_SECONDS = 1.0


class FeedWriter(Protocol):
    """What `apply` writes through: SQLiteWriter or PostgresWriter."""

    id_format: IdFormat
    """The ticket-ID width of the store: every line's ids are checked against it."""

    def check(self, change: Change) -> None:
        """Raise FeedError if this store cannot hold `change`."""

    def apply(self, changes: Sequence[Change]) -> Counts:
        """Apply a batch in one transaction; return its counts."""

    def close(self) -> None:
        """Close the writer's connection."""


class FeedLineError(Exception):
    """A feed line that breaks a rule: the lines before it are applied, it and later ones not."""

    def __init__(self, number: int, rule: str) -> None:
        super().__init__(f"line {number}: {rule}")
        self.number = number
        self.rule = rule


class FeedReadError(Exception):
    """The feed could not be read (an I/O error); the lines before it are applied."""


@dataclass(frozen=True)
class Applied:
    """What a whole run did: changes read, and their counts."""

    changes: int
    counts: Counts


# What the reading thread hands over: a line, the error that ended reading, or None at the end.
_Item = bytes | OSError | None
# How often a reading thread blocked on a full queue looks whether the run has ended.
_PUT_SECONDS = 0.1


def apply_feed(
    stream: BinaryIO,
    writer: FeedWriter,
    *,
    on_commit: Callable[[Applied], None] | None = None,
    batch_changes: int | None = None,
    batch_seconds: float | None = None,
) -> Applied:
    """Read `stream` to its end, applying its changes in batches; return the totals.

    Raises FeedLineError at the first malformed line, after committing every change
    before it, and FeedReadError if reading fails, likewise. A KeyboardInterrupt loses
    only the open batch (the writer rolls back a batch it was applying). A batch holds
    `batch_changes` (default BATCH_CHANGES) changes at most, and is committed at most
    `batch_seconds` (default BATCH_SECONDS) after its first change was read.
    """
    lines: queue.Queue[_Item] = queue.Queue(maxsize=READ_AHEAD_LINES)
    stop = threading.Event()
    # A daemon: a thread blocked reading a pipe must not keep the process alive.
    threading.Thread(target=_read_lines, args=(stream, lines, stop), daemon=True).start()
    try:
        return _apply_lines(
            lines,
            writer,
            on_commit,
            BATCH_CHANGES if batch_changes is None else batch_changes,
            BATCH_SECONDS if batch_seconds is None else batch_seconds,
        )
    finally:
        stop.set()


def _apply_lines(
    lines: queue.Queue[_Item],
    writer: FeedWriter,
    on_commit: Callable[[Applied], None] | None,
    batch_changes: int,
    batch_seconds: float,
) -> Applied:
    batch: list[Change] = []
    total = Applied(0, Counts())
    deadline = 0.0

    def commit() -> None:
        nonlocal total
        if batch:
            total = Applied(total.changes + len(batch), total.counts + writer.apply(batch))
            batch.clear()
            if on_commit is not None:
                on_commit(total)

    number = 0
    while True:
        try:
            item = lines.get(timeout=max(0.0, deadline - time.monotonic()) if batch else None)
        except queue.Empty:
            commit()
            continue
        if item is None:
            commit()
            return total
        if isinstance(item, OSError):
            commit()
            raise FeedReadError(item.strerror or type(item).__name__)
        number += 1
        line = item
        if not line.strip():
            continue  # a blank line, such as one at the very end
        try:
            change = parse_change(line.removesuffix(b"\n"), id_format=writer.id_format)
            writer.check(change)
        except FeedError as error:
            commit()
            raise FeedLineError(number, str(error)) from None
        batch.append(change)
        if len(batch) == 1:
            deadline = time.monotonic() + batch_seconds
        if len(batch) >= batch_changes:
            commit()


def _read_lines(stream: BinaryIO, lines: queue.Queue[_Item], stop: threading.Event) -> None:
    """Put each line of `stream` on `lines` (waiting while it is full), then None."""
    item: _Item
    try:
        # Past the limit by a byte (and its newline) is enough to know a line is too long.
        while item := stream.readline(MAX_LINE_BYTES + 2):
            if not _put(lines, item, stop) or len(item) > MAX_LINE_BYTES + 1:
                return  # the run has ended, or parse_change will refuse this line
        item = None
    except OSError as error:
        item = error
    _put(lines, item, stop)


def _put(lines: queue.Queue[_Item], item: _Item, stop: threading.Event) -> bool:
    """Put `item` on `lines` unless the run ends first; return whether it was put."""
    while not stop.is_set():
        try:
            lines.put(item, timeout=_PUT_SECONDS)
        except queue.Full:
            continue
        return True
    return False


class Progress:
    """`applying: 12000 changes, 9000 upserted, 1000 deleted, 2000 stale`, redrawn in place."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._last = time.monotonic()
        self._drawn = False

    def update(self, applied: Applied) -> None:
        """Redraw the line, at most once every PROGRESS_SECONDS."""
        now = time.monotonic()
        if now - self._last < PROGRESS_SECONDS:
            return
        self._last = now
        self._out.write(f"\rapplying: {applied.changes} changes, {applied.counts}")
        self._out.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the line, if one was drawn."""
        if self._drawn:
            self._out.write("\n")
            self._out.flush()


def add_commands(commands: Commands) -> None:
    """Add `apply`."""
    apply = commands.add_parser(
        "apply",
        help="apply a change feed (JSON Lines of upserts and deletes) to a ticket database",
        description="Apply a change feed, one JSON change a line, to an SQLite ticket "
        "database or a PostgreSQL one, while it serves. Per ticket the highest version "
        "wins; replaying a feed changes nothing (docs/feed.md).",
        epilog=APPLY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    apply.add_argument("feed", metavar="FEED", help="the feed file; - reads it from stdin")
    target = apply.add_mutually_exclusive_group()
    target.add_argument(
        "--db", type=Path, metavar="FILE", help="the SQLite ticket database to write"
    )
    target.add_argument(
        "--postgres",
        metavar="DSN",
        help="a PostgreSQL ticket database, connecting as the tables' owner or the writer "
        f"role (default: ${POSTGRES_ENV})",
    )
    apply.add_argument(
        "--wait-seconds",
        type=_seconds,
        default=WAIT_SECONDS,
        metavar="N",
        help="how long a batch may wait for the writers' lock, held by another apply or by "
        f"an import --replace until its swap, before apply exits 2 (default: {WAIT_SECONDS:g}; "
        "on PostgreSQL the batch's own time included)",
    )
    add_id_digits_option(apply)
    apply.set_defaults(run=run_apply)


# A refresh holds the writers' lock while it reads, copies and swaps: 16 s for 10^6
# tickets on SQLite (measured for issue 23). A batch waits for it rather than failing.
WAIT_SECONDS = 120.0


APPLY_EPILOG = """exit status:
  0    every line applied (or stale); the summary is on stdout
  2    a malformed line (stderr names its number and rule; the lines before it are
       applied, it and the lines after it are not), or an unusable database
  130  interrupted (Ctrl-C): the open batch is rolled back, earlier batches stay"""


def run_apply(options: argparse.Namespace) -> int:
    """Apply the feed `options.feed` to the store the options name; print the summary."""
    dsn = None if options.db is not None else postgres_dsn(options)
    if dsn is None and options.db is None:
        raise CommandError(f"apply needs --db FILE or --postgres DSN (or ${POSTGRES_ENV})")
    if dsn is not None:
        require_postgres()  # says how to install the extra if it is missing
    source = "stdin" if options.feed == "-" else options.feed
    with _open_feed(options.feed) as stream:
        writer, target = _open_writer(options.db, dsn, id_format_of(options), options.wait_seconds)
        progress = Progress(sys.stderr) if sys.stderr.isatty() else None
        try:
            applied = apply_feed(
                stream, writer, on_commit=None if progress is None else progress.update
            )
        except FeedLineError as error:
            raise CommandError(f"{source} {error}") from None
        except FeedReadError as error:
            raise CommandError(f"cannot read {source}: {error}") from None
        finally:
            if progress is not None:
                progress.finish()
            writer.close()
    print(f"applied {applied.changes} changes from {source} to {target}: {applied.counts}")
    return 0


def _open_writer(
    db: Path | None, dsn: str | None, id_format: IdFormat, wait: float
) -> tuple[FeedWriter, str]:
    if db is not None:
        from ticket_tools.stores.sqlite.writer import SQLiteWriter  # noqa: PLC0415

        return SQLiteWriter.open(db, timeout=wait, id_format=id_format), str(db)
    # Imported here: psycopg is an optional extra.
    from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415
    from ticket_tools.stores.postgres.writer import PostgresWriter  # noqa: PLC0415

    postgres = cast(str, dsn)  # run_apply passes one or the other
    return PostgresWriter.open(postgres, timeout=wait, id_format=id_format), describe(postgres)


def _open_feed(feed: str) -> contextlib.AbstractContextManager[BinaryIO]:
    if feed == "-":
        # Left open when done: it is the process's stdin.
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(feed, "rb")  # closed by run_apply's with block
    except OSError as failure:
        raise CommandError(f"cannot read {feed}: {os_reason(failure)}") from None
