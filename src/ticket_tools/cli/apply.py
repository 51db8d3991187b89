"""`ticket-tools apply FEED`: write a change feed into a store while it serves (docs/feed.md).

The feed is read line by line on the main thread from its file descriptor
(`cli.lines`), so memory stays flat however long the feed is, and a batch is committed
when it is full or when its first change has waited BATCH_SECONDS, whichever comes
first: a slow trickle from a pipe is applied within a second, a fast file in large
batches. No thread waits on the feed, so every exit (a bad line, a refused store,
Ctrl-C, SIGTERM) is prompt whatever feeds it, a pipe or FIFO whose writer stays silent
included.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import BinaryIO, Protocol, TextIO, cast

from ticket_tools.cli.command import CommandError, Commands, counted
from ticket_tools.cli.dead_letters import DeadLetters
from ticket_tools.cli.inputs import os_reason, positive_seconds
from ticket_tools.cli.lines import Event, LineReader
from ticket_tools.cli.stores import (
    POSTGRES_ENV,
    add_id_digits_option,
    add_raw_titles_option,
    id_format_of,
    postgres_dsn,
    require_postgres,
)
from ticket_tools.stores.feed import (
    MAX_LINE_BYTES,
    Change,
    Counts,
    FeedError,
    OnWait,
    parse_change,
)
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.text import clean_change, titles_cleaned

# A batch is committed at this many changes: large enough that a commit's cost is
# shared by many changes, small enough that a batch's transaction stays short.
BATCH_CHANGES = 1_000
# ... or this long after its first change was read, so a change from a slow source is
# visible to readers within a second (half of it waiting, the rest for the commit).
BATCH_SECONDS = 0.5
# On a terminal, progress is redrawn at most this often.
PROGRESS_SECONDS = 1.0
# Exit statuses of apply's own: some lines were set aside (--dead-letter), and SIGTERM
# (128 + 15, what a shell reports for a process it ended).
EXIT_SET_ASIDE = 3
EXIT_TERMINATED = 143


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
    set_aside: int = 0
    """Refused lines handed to `set_aside` instead of stopping the run."""
    woken: bool = False
    """Whether the run stopped at its wake-up (SIGTERM) before the feed's end."""
    cleaned: int = 0
    """Titles the clean-text rules changed (`stores.text`), stale changes' included."""


SetAside = Callable[[int, str, bytes], None]
"""Take a refused line aside: its number, the rule it broke, the line as read."""


def apply_feed(
    stream: BinaryIO,
    writer: FeedWriter,
    *,
    on_commit: Callable[[Applied], None] | None = None,
    batch_changes: int | None = None,
    batch_seconds: float | None = None,
    set_aside: SetAside | None = None,
    wake_fd: int | None = None,
    raw_titles: bool = False,
) -> Applied:
    """Read `stream` to its end, applying its changes in batches; return the totals.

    `stream` is read through its file descriptor, never its buffer. Raises
    FeedLineError at the first malformed line, after committing every change before
    it, unless `set_aside` takes it (then the run goes on), and FeedReadError if
    reading fails, likewise. When `wake_fd` becomes readable, every whole line read
    by then is applied and committed and the run returns with `woken`. A
    KeyboardInterrupt loses only the open batch (the writer rolls back a batch it was
    applying). A batch holds `batch_changes` (default BATCH_CHANGES) changes at most,
    and is committed at most `batch_seconds` (default BATCH_SECONDS) after its first
    change was read. Titles are cleaned (`stores.text`) unless `raw_titles`.
    """
    # Past the limit by a byte is enough for parse_change to know a line is too long.
    reader = LineReader(stream.fileno(), limit=MAX_LINE_BYTES + 1, wake_fd=wake_fd)
    batch: list[Change] = []
    batch_cleaned = 0
    total = Applied(0, Counts())
    deadline = 0.0
    most = BATCH_CHANGES if batch_changes is None else batch_changes
    seconds = BATCH_SECONDS if batch_seconds is None else batch_seconds

    def commit() -> None:
        nonlocal total, batch_cleaned
        if batch:
            counts = total.counts + writer.apply(batch)
            total = replace(
                total,
                changes=total.changes + len(batch),
                counts=counts,
                cleaned=total.cleaned + batch_cleaned,
            )
            batch.clear()
            batch_cleaned = 0
            if on_commit is not None:
                on_commit(total)

    number = 0
    while True:
        try:
            item = reader.read_line(max(0.0, deadline - time.monotonic()) if batch else None)
        except OSError as error:
            commit()
            raise FeedReadError(os_reason(error)) from None
        if item is Event.WAITED:
            commit()
            continue
        if isinstance(item, Event):
            commit()
            return replace(total, woken=item is Event.WOKEN)
        number += 1
        if not item.strip():
            continue  # a blank line, such as one at the very end
        try:
            change = parse_change(item.removesuffix(b"\n"), id_format=writer.id_format)
            change, cleaned = clean_change(change, raw=raw_titles)
            writer.check(change)
        except FeedError as error:
            if set_aside is None:
                commit()
                raise FeedLineError(number, str(error)) from None
            set_aside(number, str(error), item)
            total = replace(total, set_aside=total.set_aside + 1)
            continue
        batch.append(change)
        batch_cleaned += cleaned
        if len(batch) == 1:
            deadline = time.monotonic() + seconds
        if len(batch) >= most:
            commit()


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
        self._out.write(f"\rapplying: {counted(applied.changes, 'change')}, {applied.counts}")
        self._out.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the line, if one was drawn."""
        if self._drawn:
            self._out.write("\n")
            self._out.flush()
            self._drawn = False

    def note(self, text: str) -> None:
        """Write `text` on a line of its own, after the progress line if one is drawn."""
        self.finish()
        self._out.write(f"{text}\n")
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
        "--dead-letter",
        type=Path,
        metavar="FILE",
        help="set each refused line aside in FILE (appended, one JSON object a line: its "
        "number, the rule it broke, the line) and go on; exit 3 if any were",
    )
    apply.add_argument(
        "--wait-seconds",
        type=positive_seconds,
        default=WAIT_SECONDS,
        metavar="N",
        help="how long a batch may wait for the writers' lock, held by another apply or by "
        f"an import --replace until its swap, before apply exits 2 (default: {WAIT_SECONDS:g}; "
        "on PostgreSQL the batch's own time included)",
    )
    add_id_digits_option(apply)
    add_raw_titles_option(apply)
    apply.set_defaults(run=run_apply)


# A refresh holds the writers' lock while it reads, copies and swaps: 16 s for 10^6
# tickets on SQLite (measured for issue 23). A batch waits for it rather than failing.
WAIT_SECONDS = 120.0


APPLY_EPILOG = """exit status:
  0    every line applied (or stale); the summary is on stdout
  2    a malformed line (stderr names its number and rule; the lines before it are
       applied, it and the lines after it are not), or an unusable database
  3    with --dead-letter: the feed was applied to its end, and some lines were set
       aside in the dead-letter file (stderr says how many)
  130  interrupted (Ctrl-C): the open batch is rolled back, earlier batches stay
  143  terminated (SIGTERM): every whole line read by then is applied and committed,
       the summary is on stdout"""


def run_apply(options: argparse.Namespace) -> int:
    """Apply the feed `options.feed` to the store the options name; print the summary."""
    dsn = None if options.db is not None else postgres_dsn(options)
    if dsn is None and options.db is None:
        raise CommandError(f"apply needs --db FILE or --postgres DSN (or ${POSTGRES_ENV})")
    if dsn is not None:
        require_postgres()  # says how to install the extra if it is missing
    source = "stdin" if options.feed == "-" else options.feed
    with contextlib.ExitStack() as stack:
        letters = None
        if options.dead_letter is not None:
            letters = stack.enter_context(DeadLetters.open(options.dead_letter, source))
        stream = stack.enter_context(_open_feed(options.feed))
        progress = Progress(sys.stderr) if sys.stderr.isatty() else None
        if progress is not None:
            stack.callback(progress.finish)
        writer, target = _open_writer(
            options.db, dsn, id_format_of(options), options.wait_seconds, progress
        )
        stack.callback(writer.close)
        wake_fd = stack.enter_context(_sigterm_wakes())
        try:
            applied = apply_feed(
                stream,
                writer,
                on_commit=None if progress is None else progress.update,
                set_aside=None if letters is None else letters.set_aside,
                wake_fd=wake_fd,
                raw_titles=options.raw_titles,
            )
        except FeedLineError as error:
            raise CommandError(f"{source} {error}") from None
        except FeedReadError as error:
            raise CommandError(f"cannot read {source}: {error}") from None
    print(
        f"applied {counted(applied.changes, 'change')} from {source} to {target}: {applied.counts}"
        f"{titles_cleaned(applied.cleaned)}"
    )
    aside = f"{counted(applied.set_aside, 'line')} set aside in {options.dead_letter}"
    if applied.woken:
        terminated = "terminated (SIGTERM)"
        print(
            f"ticket-tools: {terminated}{'; ' + aside if applied.set_aside else ''}",
            file=sys.stderr,
        )
        return EXIT_TERMINATED
    if applied.set_aside:
        print(f"ticket-tools: {aside}", file=sys.stderr)
        return EXIT_SET_ASIDE
    return 0


@contextlib.contextmanager
def _sigterm_wakes() -> Iterator[int]:
    """While in the block, SIGTERM makes the yielded descriptor readable (a self-pipe).

    The loop sees it at its next wait, between lines, so SIGTERM never lands in the
    middle of a batch. The previous handler is put back after.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def wake(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(BlockingIOError):  # already readable: once is enough
            os.write(write_fd, b"T")

    previous = signal.signal(signal.SIGTERM, wake)
    try:
        yield read_fd
    finally:
        signal.signal(signal.SIGTERM, previous)
        os.close(read_fd)
        os.close(write_fd)


def _open_writer(
    db: Path | None, dsn: str | None, id_format: IdFormat, wait: float, progress: Progress | None
) -> tuple[FeedWriter, str]:
    """Open the writer; on a terminal (`progress`), say when a batch waits for the lock."""
    if db is not None:
        from ticket_tools.stores.sqlite.writer import SQLiteWriter  # noqa: PLC0415

        target = str(db)
        on_wait = _announce_wait(progress, target, wait)
        return SQLiteWriter.open(db, timeout=wait, id_format=id_format, on_wait=on_wait), target
    # Imported here: psycopg is an optional extra.
    from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415
    from ticket_tools.stores.postgres.writer import PostgresWriter  # noqa: PLC0415

    postgres = cast(str, dsn)  # run_apply passes one or the other
    target = describe(postgres)
    on_wait = _announce_wait(progress, target, wait)
    writer = PostgresWriter.open(postgres, timeout=wait, id_format=id_format, on_wait=on_wait)
    return writer, target


def _announce_wait(progress: Progress | None, target: str, wait: float) -> OnWait | None:
    """Return what a writer calls when a batch must wait for the writers' lock, if anything."""
    if progress is None:
        return None  # not a terminal: stderr keeps to the one line of an exit
    shown = progress

    def waiting() -> None:
        shown.note(
            f"ticket-tools: waiting for the writers' lock of {target}: another apply or an "
            f"import --replace holds it (up to {wait:g} s, --wait-seconds)"
        )

    return waiting


def _open_feed(feed: str) -> contextlib.AbstractContextManager[BinaryIO]:
    if feed == "-":
        # Left open when done: it is the process's stdin.
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(feed, "rb")  # closed by run_apply's with block
    except OSError as failure:
        raise CommandError(f"cannot read {feed}: {os_reason(failure)}") from None
