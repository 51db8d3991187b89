"""The progress line of `import` and `migrate`, redrawn in place on a terminal."""

from __future__ import annotations

import time
from typing import TextIO

from ticket_tools.cli.command import counted

# The line is redrawn at most this often, as `apply`'s.
PROGRESS_SECONDS = 1.0


class IndexingProgress:
    """`indexing: 1200000 of 10000000 tickets`, redrawn in place (`migrate`)."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._last = time.monotonic()
        self._drawn = 0  # the length of the text drawn last (0: none yet)

    def indexing(self, done: int, total: int) -> None:
        """Redraw the line with the title index's build, at most once every PROGRESS_SECONDS."""
        self._draw(f"indexing: {done} of {counted(total, 'ticket')}")

    def _draw(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_SECONDS:
            return
        self._last = now
        # Spaces over what a longer line before left, so no character of it stays shown.
        self._out.write(f"\r{text.ljust(self._drawn)}")
        self._out.flush()
        self._drawn = len(text)

    def finish(self) -> None:
        """End the line, if one was drawn."""
        if self._drawn:
            self._out.write("\n")
            self._out.flush()


class ImportProgress(IndexingProgress):
    """`importing: 1200000 records, 37% of the file`, then the index's build, redrawn in place.

    A streamed import knows how many records it has written and how far into the file
    it has read, not how many records the file holds.
    """

    def __init__(self, out: TextIO, size: int) -> None:
        super().__init__(out)
        self._size = size

    def update(self, records: int, bytes_read: int) -> None:
        """Redraw the line, at most once every PROGRESS_SECONDS."""
        share = min(bytes_read / self._size, 1.0) if self._size > 0 else 1.0
        self._draw(f"importing: {counted(records, 'record')}, {share:.0%} of the file")
