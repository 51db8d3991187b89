"""The progress line of `import`, redrawn in place on a terminal."""

from __future__ import annotations

import time
from typing import TextIO

from ticket_tools.cli.command import counted

# The line is redrawn at most this often, as `apply`'s.
PROGRESS_SECONDS = 1.0


class ImportProgress:
    """`importing: 1200000 records, 37% of the file`, redrawn in place.

    A streamed import knows how many records it has written and how far into the file
    it has read, not how many records the file holds.
    """

    def __init__(self, out: TextIO, size: int) -> None:
        self._out = out
        self._size = size
        self._last = time.monotonic()
        self._drawn = False

    def update(self, records: int, bytes_read: int) -> None:
        """Redraw the line, at most once every PROGRESS_SECONDS."""
        now = time.monotonic()
        if now - self._last < PROGRESS_SECONDS:
            return
        self._last = now
        share = min(bytes_read / self._size, 1.0) if self._size > 0 else 1.0
        self._out.write(f"\rimporting: {counted(records, 'record')}, {share:.0%} of the file")
        self._out.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the line, if one was drawn."""
        if self._drawn:
            self._out.write("\n")
            self._out.flush()
