"""`apply --dead-letter FILE`: refused feed lines set aside, so a feed no one can replay goes on.

Each refused line is appended to FILE as one JSON object, written at once (one
`write`, no buffer), before any later line is committed:

    {"feed": "stdin", "line": 3, "rule": "the version is not ...", "text": "{\\"op\\": ...}"}

`text` is the line as read, without its newline, when it is UTF-8; `base64` holds its
bytes when it is not; a line over the length limit keeps neither (it was never read
whole). The line is the operator's own data, kept so it can be fixed and fed again:
the file is created readable by its owner alone, since a line may hold internal fields.

FILE is a regular file of mode 0600 (created so), or /dev/stderr. Refused before any line
is read: a symbolic link (never followed: it could point anywhere, a file others read
included), a FIFO or device (a FIFO no one reads would block the open for ever), a file
of another mode, and the file the feed is read from (each letter would be read back as
a new refused line, without end). A letter a full disk cut short is completed: the next
letter starts on a line of its own.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ticket_tools.cli.command import CommandError
from ticket_tools.cli.inputs import os_reason
from ticket_tools.stores.feed import MAX_LINE_BYTES

# Owner read and write only: a set-aside line may hold a ticket's internal fields.
FILE_MODE = 0o600
# Named so, the letters go to stderr itself (its descriptor, whatever it is open on).
STDERR = Path("/dev/stderr")
# A symbolic link is never followed; a FIFO is never waited for (opened for reading too,
# and non-blocking, it opens at once, to be refused; a socket gives ENXIO).
_FLAGS = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class FileId:
    """Which file a descriptor or path is open on: its device and inode."""

    device: int
    inode: int

    @classmethod
    def of(cls, found: os.stat_result) -> FileId:
        """Return the file `found` (an `os.stat` or `os.fstat` result) describes."""
        return cls(found.st_dev, found.st_ino)


class DeadLetters:
    """An open dead-letter file, appended to by `set_aside`."""

    def __init__(self, fd: int, path: Path, feed: str, *, own_file: bool = True) -> None:
        self._fd = fd
        self._path = path
        self._feed = feed
        self._own_file = own_file

    @classmethod
    def open(cls, path: Path, feed: str, *, feed_file: FileId | None = None) -> DeadLetters:
        """Open (or create) `path` for appending; CommandError in one line if it cannot be.

        `feed` names the feed in each letter; `feed_file` is the file it is read from,
        which `path` must not be.
        """
        fd = os.dup(2) if path == STDERR else _open_file(path)
        try:
            found = os.fstat(fd)
            if FileId.of(found) == feed_file:
                reason = "it is the file stdin reads" if feed == "stdin" else "it is the feed"
                raise CommandError(f"cannot write {path}: {reason}")
            if path != STDERR:
                _check_file(path, found)
        except BaseException:
            os.close(fd)
            raise
        # Only a file of its own is checked for a letter cut short: stderr may be write-only.
        return cls(fd, path, feed, own_file=path != STDERR)

    def set_aside(self, number: int, rule: str, line: bytes) -> None:
        """Append line `number`, refused by `rule`; CommandError if it cannot be written."""
        letter: dict[str, object] = {"feed": self._feed, "line": number, "rule": rule}
        data = line.removesuffix(b"\n")
        if len(data) <= MAX_LINE_BYTES:
            try:
                letter["text"] = data.decode("utf-8")
            except UnicodeDecodeError:
                letter["base64"] = base64.b64encode(data).decode("ascii")
        record = (json.dumps(letter) + "\n").encode("utf-8")
        try:
            if self._own_file and not _ends_a_line(self._fd):
                record = b"\n" + record  # the rest of a letter a full disk cut short
            written = os.write(self._fd, record)
        except OSError as error:
            raise CommandError(f"cannot write {self._path}: {os_reason(error)}") from None
        if written != len(record):  # a full disk part-way: the next letter completes it
            raise CommandError(f"cannot write {self._path}: the disk took part of a line")

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)

    def __enter__(self) -> DeadLetters:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _open_file(path: Path) -> int:
    """Create `path` with FILE_MODE exactly, or open the file there; never follow a link."""
    try:
        try:
            fd = os.open(path, _FLAGS | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            return os.open(path, _FLAGS)
        os.fchmod(fd, FILE_MODE)  # as asked, whatever the umask took away
    except OSError as error:
        raise CommandError(f"cannot write {path}: {_reason(path, error)}") from None
    return fd


def _reason(path: Path, error: OSError) -> str:
    if error.errno == errno.ELOOP and path.is_symlink():
        return "it is a symbolic link"
    if error.errno == errno.ENXIO:  # a FIFO no one reads, a socket
        return "it is not a regular file"
    return os_reason(error)


def _check_file(path: Path, found: os.stat_result) -> None:
    if not stat.S_ISREG(found.st_mode):  # a FIFO (opened for reading too: never blocked), a device
        raise CommandError(f"cannot write {path}: it is not a regular file")
    mode = stat.S_IMODE(found.st_mode)
    if mode != FILE_MODE:
        raise CommandError(
            f"cannot write {path}: its mode is {mode:04o}, not {FILE_MODE:04o}; a line set "
            "aside may hold internal fields (chmod 600 it, or name a new file)"
        )


def _ends_a_line(fd: int) -> bool:
    """Say whether the file is empty or ends with a newline (else a letter was cut short)."""
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b"\n"
