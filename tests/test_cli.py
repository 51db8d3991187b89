"""The ticket-tools command line, run in-process through main(argv)."""

from __future__ import annotations

import io

import pytest

from ticket_tools.cli import main


def test_undecodable_stdin_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xff"), encoding="utf-8"))
    assert main(["call", "get_ticket", "-", "--tenant", "alpha"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "ticket-tools: the arguments are not valid JSON (UnicodeDecodeError)\n",
    )
