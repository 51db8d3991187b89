"""DeadLetters: each refused line appended as one JSON object, at once; failures one line."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from ticket_tools.cli.command import CommandError
from ticket_tools.cli.dead_letters import DeadLetters
from ticket_tools.stores.feed import MAX_LINE_BYTES

RULE = "the line is not JSON"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        pytest.param(b'{"op": \xc3\xa9}\n', {"text": '{"op": \u00e9}'}, id="utf-8"),
        pytest.param(b"{\r\n", {"text": "{\r"}, id="crlf-keeps-cr"),
        pytest.param(b"{\xff}", {"base64": base64.b64encode(b"{\xff}").decode()}, id="not-utf-8"),
        pytest.param(b"x" * MAX_LINE_BYTES, {"text": "x" * MAX_LINE_BYTES}, id="at-the-limit"),
        pytest.param(b"x" * (MAX_LINE_BYTES + 1), {}, id="over-the-limit"),
    ],
)
def test_a_line_is_set_aside_with_its_number_and_rule(
    tmp_path: Path, line: bytes, kept: dict[str, str]
) -> None:
    path = tmp_path / "dead.jsonl"
    path.write_text('{"earlier": "run"}\n')  # appended to, never replaced
    with DeadLetters.open(path, "feed.jsonl") as letters:
        letters.set_aside(7, RULE, line)
    first, second = path.read_text().splitlines()
    assert (first, json.loads(second)) == (
        '{"earlier": "run"}',
        {"feed": "feed.jsonl", "line": 7, "rule": RULE, **kept},
    )


def test_a_new_file_is_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    with DeadLetters.open(path, "stdin"):
        pass
    assert (path.read_bytes(), path.stat().st_mode & 0o777) == (b"", 0o600)


def test_a_file_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(tmp_path, "stdin")
    assert str(raised.value) == f"cannot write {tmp_path}: Is a directory"


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        pytest.param(OSError(28, "No space left on device"), "No space left on device", id="full"),
        pytest.param(3, "the disk took part of a line", id="short-write"),
    ],
)
def test_a_failed_write_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: int | OSError, reason: str
) -> None:
    def write(fd: int, data: bytes) -> int:
        if isinstance(written, OSError):
            raise written
        return written

    path = tmp_path / "dead.jsonl"
    with DeadLetters.open(path, "stdin") as letters:
        monkeypatch.setattr(os, "write", write)
        with pytest.raises(CommandError) as raised:
            letters.set_aside(1, RULE, b"{")
        monkeypatch.undo()
    assert str(raised.value) == f"cannot write {path}: {reason}"
