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
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Protocol, TextIO, cast

from ticket_tools.cli import signals, streams
from ticket_tools.cli.command import CommandError, Commands, counted
from ticket_tools.cli.dead_letters import DeadLetters, FileId
from ticket_tools.cli.inputs import closed_stdin, os_reason, positive_seconds, stdout_refused
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
# The exit status of apply's own: some lines were set aside (--dead-letter). SIGTERM's,
# 143, is every command's (`signals`).
EXIT_SET_ASIDE = 3


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
    uncommitted_from: int | None = None
    """With `woken`: the first line not committed, when SIGTERM's grace ran out in a batch
    (`signals.finishing`, a wait for the store); it and every line after it were not."""


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
    by then is applied and committed and the run returns with `woken`; a batch that
    is still being written GRACE_SECONDS after SIGTERM (`signals.finishing`) is rolled
    back, and the run returns with `woken` and `uncommitted_from`. A
    KeyboardInterrupt loses only the open batch (the writer rolls back a batch it was
    applying). A batch holds `batch_changes` (default BATCH_CHANGES) changes at most,
    and is committed at most `batch_seconds` (default BATCH_SECONDS) after its first
    change was read. Titles are cleaned (`stores.text`) unless `raw_titles`.
    """
    # Past the limit by a byte is enough for parse_change to know a line is too long.
    reader = LineReader(stream.fileno(), limit=MAX_LINE_BYTES + 1, wake_fd=wake_fd)
    batches = _Batches(writer, on_commit)
    deadline = 0.0
    most = BATCH_CHANGES if batch_changes is None else batch_changes
    seconds = BATCH_SECONDS if batch_seconds is None else batch_seconds
    number = 0
    try:
        while True:
            waiting = max(0.0, deadline - time.monotonic()) if batches.changes else None
            try:
                item = reader.read_line(waiting)
            except OSError as error:
                batches.commit(number)
                raise FeedReadError(os_reason(error)) from None
            if item is Event.WAITED:
                batches.commit(number)
                continue
            if isinstance(item, Event):
                batches.commit(number)
                return replace(batches.total, woken=item is Event.WOKEN)
            number += 1
            if not item.strip():  # a blank line, such as one at the very end
                batches.passed(number)
                continue
            try:
                change = parse_change(item.removesuffix(b"\n"), id_format=writer.id_format)
                change, cleaned = clean_change(change, raw=raw_titles)
                writer.check(change)
            except FeedError as error:
                if set_aside is None:
                    batches.commit(number - 1)
                    raise FeedLineError(number, str(error)) from None
                set_aside(number, str(error), item)
                batches.set_aside(number)
                continue
            if not batches.changes:
                deadline = time.monotonic() + seconds
            batches.add(change, cleaned)
            if len(batches.changes) >= most:
                batches.commit(number)
    except signals.Terminated:
        # SIGTERM's grace ran out in a batch, rolled back: say where the feed must resume.
        return replace(batches.total, woken=True, uncommitted_from=batches.settled + 1)


class _Batches:
    """The open batch of `apply_feed`, the run's totals, and how far the feed is settled."""

    def __init__(self, writer: FeedWriter, on_commit: Callable[[Applied], None] | None) -> None:
        self._writer = writer
        self._on_commit = on_commit
        self.changes: list[Change] = []
        self._cleaned = 0
        self.total = Applied(0, Counts())
        self.settled = 0
        """Every line up to this one is committed, set aside or blank."""

    def add(self, change: Change, cleaned: int) -> None:
        """Add `change` to the open batch (`cleaned`: whether its title was cleaned)."""
        self.changes.append(change)
        self._cleaned += cleaned

    def passed(self, number: int) -> None:
        """Line `number` needs no commit (a blank line): settled, if no batch is open."""
        if not self.changes:
            self.settled = number

    def set_aside(self, number: int) -> None:
        """Count line `number`, just set aside."""
        self.total = replace(self.total, set_aside=self.total.set_aside + 1)
        self.passed(number)

    def commit(self, number: int) -> None:
        """Commit the open batch, if any: every line up to `number` is then settled."""
        if self.changes:
            with signals.finishing():
                counts = self.total.counts + self._writer.apply(self.changes)
            self.total = replace(
                self.total,
                changes=self.total.changes + len(self.changes),
                counts=counts,
                cleaned=self.total.cleaned + self._cleaned,
            )
            self.changes.clear()
            self._cleaned = 0
            if self._on_commit is not None:
                self._on_commit(self.total)
        self.settled = number


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
    if options.feed == "-" and sys.stdin is None:
        raise closed_stdin()  # before a dead-letter file is created
    source = "stdin" if options.feed == "-" else options.feed
    with contextlib.ExitStack() as stack:
        letters = None
        if options.dead_letter is not None:
            letters = stack.enter_context(
                DeadLetters.open(options.dead_letter, source, feed_file=_feed_file(options.feed))
            )
        stream = stack.enter_context(_open_feed(options.feed))
        progress = Progress(sys.stderr) if sys.stderr.isatty() else None
        if progress is not None:
            stack.callback(progress.finish)
        writer, target = _open_writer(
            options.db, dsn, id_format_of(options), options.wait_seconds, progress
        )
        stack.callback(writer.close)
        # From here SIGTERM drains; before, it ends apply where it is (nothing read yet).
        wake_fd = stack.enter_context(signals.draining())
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
    status, outcome = _outcome(applied, options.dead_letter)
    try:
        # Flushed before the outcome's line, which follows it in a log of both streams.
        print(
            f"applied {counted(applied.changes, 'change')} from {source} to {target}: "
            f"{applied.counts}{titles_cleaned(applied.cleaned)}",
            flush=True,
        )
    except (BrokenPipeError, streams.StdoutError) as error:
        if not status:
            raise  # nothing else to say: the exit says why stdout was not written (141, 2)
        streams.silence_stdout()  # the outcome, and its status, still stand
        if not streams.closed_pipe(error):  # a full disk: said, as a closed pipe is not
            print(f"ticket-tools: {stdout_refused(error)}", file=sys.stderr)
    if outcome:
        print(f"ticket-tools: {outcome}", file=sys.stderr)
    return status


def _outcome(applied: Applied, dead_letter: Path | None) -> tuple[int, str]:
    """Return the exit status of a run that ended well, and its line for stderr (if any)."""
    aside = (
        f"{counted(applied.set_aside, 'line')} set aside in {dead_letter}"
        if applied.set_aside
        else ""
    )
    if not applied.woken:
        return (EXIT_SET_ASIDE, aside) if aside else (0, "")
    terminated = "terminated (SIGTERM)"
    if applied.uncommitted_from is not None:
        terminated += (
            " while a batch waited for the store: lines from "
            f"{applied.uncommitted_from} on were not committed"
        )
    return signals.EXIT_TERMINATED, "; ".join(part for part in (terminated, aside) if part)


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


def _feed_file(feed: str) -> FileId | None:
    """Return the file the feed is read from, if it can be told: the dead letters' must differ."""
    try:
        found = os.fstat(0) if feed == "-" else os.stat(feed)
    except OSError:
        return None  # the feed cannot be opened: `_open_feed` says why
    return FileId.of(found)


def _open_feed(feed: str) -> contextlib.AbstractContextManager[BinaryIO]:
    if feed == "-":
        # Left open when done: it is the process's stdin.
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(feed, "rb")  # closed by run_apply's with block
    except OSError as failure:
        raise CommandError(f"cannot read {feed}: {os_reason(failure)}") from None
