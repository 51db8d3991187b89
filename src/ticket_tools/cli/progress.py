"""A one-line progress bar for long commands, redrawn in place on a terminal."""

from __future__ import annotations

from typing import TextIO

BAR_WIDTH = 30


class ProgressBar:
    """Draw `label [#####     ]  50% 500/1000` on one line, redrawn by each update."""

    def __init__(self, out: TextIO, label: str) -> None:
        self._out = out
        self._label = label
        self._drawn = False

    def update(self, done: int, total: int) -> None:
        """Redraw the bar for `done` of `total` steps."""
        share = done / total if total > 0 else 1.0
        filled = round(BAR_WIDTH * share)
        bar = "#" * filled + " " * (BAR_WIDTH - filled)
        self._out.write(f"\r{self._label} [{bar}] {share:4.0%} {done}/{total}")
        self._out.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the bar's line, if one was drawn."""
        if self._drawn:
            self._out.write("\n")
            self._out.flush()
