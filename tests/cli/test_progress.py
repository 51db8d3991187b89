"""ImportProgress: one line, redrawn in place at most once a second, ended once."""

from __future__ import annotations

import io

import pytest

from ticket_tools.cli import progress
from ticket_tools.cli.progress import ImportProgress


@pytest.mark.parametrize(
    ("records", "bytes_read", "size", "drawn"),
    [
        pytest.param(0, 0, 400, "\rimporting: 0 records, 0% of the file", id="start"),
        pytest.param(3, 100, 400, "\rimporting: 3 records, 25% of the file", id="quarter"),
        pytest.param(9, 400, 400, "\rimporting: 9 records, 100% of the file", id="done"),
        # A file grown since its size was taken reads past it: 100%, never more.
        pytest.param(9, 500, 400, "\rimporting: 9 records, 100% of the file", id="grown"),
        pytest.param(0, 0, 0, "\rimporting: 0 records, 100% of the file", id="empty"),
    ],
)
def test_update_draws_one_line(
    monkeypatch: pytest.MonkeyPatch, records: int, bytes_read: int, size: int, drawn: str
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    out = io.StringIO()
    ImportProgress(out, size).update(records, bytes_read)
    assert out.getvalue() == drawn


def test_the_line_is_drawn_at_most_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 3600.0)
    out = io.StringIO()
    line = ImportProgress(out, 100)
    line.update(1, 50)  # within the hour of the start
    line.finish()
    assert out.getvalue() == ""


def test_finish_ends_the_line_only_after_a_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    drawn = io.StringIO()
    line = ImportProgress(drawn, 10)
    line.update(1, 5)
    line.finish()
    assert drawn.getvalue() == "\rimporting: 1 record, 50% of the file\n"
