"""ProgressBar: one line, redrawn in place, ended once."""

from __future__ import annotations

import io

import pytest

from ticket_tools.cli.progress import ProgressBar


@pytest.mark.parametrize(
    ("done", "total", "drawn"),
    [
        pytest.param(0, 4, "\rload [                              ]   0% 0/4", id="start"),
        pytest.param(1, 4, "\rload [########                      ]  25% 1/4", id="quarter"),
        pytest.param(4, 4, "\rload [##############################] 100% 4/4", id="done"),
        pytest.param(0, 0, "\rload [##############################] 100% 0/0", id="empty"),
        pytest.param(0, 1, "\rload [                              ]   0% 0/1", id="one-step"),
    ],
)
def test_update_draws_one_line(done: int, total: int, drawn: str) -> None:
    out = io.StringIO()
    ProgressBar(out, "load").update(done, total)
    assert out.getvalue() == drawn


def test_finish_ends_the_line_only_after_a_draw() -> None:
    untouched, drawn = io.StringIO(), io.StringIO()
    ProgressBar(untouched, "load").finish()
    bar = ProgressBar(drawn, "load")
    bar.update(2, 2)
    bar.finish()
    assert (untouched.getvalue(), drawn.getvalue()) == (
        "",
        "\rload [##############################] 100% 2/2\n",
    )
