"""`apply --dead-letter FILE`: refused feed lines set aside, so a feed no one can replay goes on.

Each refused line is appended to FILE as one JSON object, written at once (one
`write`, no buffer), before any later line is committed:

    {"feed": "stdin", "line": 3, "rule": "the version is not ...", "text": "{\\"op\\": ...}"}

`text` is the line as read, without its newline, when it is UTF-8; `base64` holds its
bytes when it is not; a line over the length limit keeps neither (it was never read
whole). The line is the operator's own data, kept so it can be fixed and fed again:
the file is created readable by its owner alone, since a line may hold internal fields.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from types import TracebackType

from ticket_tools.cli.command import CommandError
from ticket_tools.cli.inputs import os_reason
from ticket_tools.stores.feed import MAX_LINE_BYTES

# Owner read and write only: a set-aside line may hold a ticket's internal fields.
FILE_MODE = 0o600


class DeadLetters:
    """An open dead-letter file, appended to by `set_aside`."""

    def __init__(self, fd: int, path: Path, feed: str) -> None:
        self._fd = fd
        self._path = path
        self._feed = feed

    @classmethod
    def open(cls, path: Path, feed: str) -> DeadLetters:
        """Open (or create) `path` for appending; CommandError in one line if it cannot be."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        except OSError as error:
            raise CommandError(f"cannot write {path}: {os_reason(error)}") from None
        return cls(fd, path, feed)

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
            written = os.write(self._fd, record)
        except OSError as error:
            raise CommandError(f"cannot write {self._path}: {os_reason(error)}") from None
        if written != len(record):  # a full disk part-way: the file says so at its end
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
