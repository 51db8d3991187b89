"""DeadLetters: each refused line appended as one JSON object, at once; failures one line."""

from __future__ import annotations

import base64
import json
import os
import socket
from pathlib import Path

import pytest

from ticket_tools.cli.command import CommandError
from ticket_tools.cli.dead_letters import DeadLetters, FileId
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
    path.chmod(0o600)
    with DeadLetters.open(path, "feed.jsonl") as letters:
        letters.set_aside(7, RULE, line)
    first, second = path.read_text().splitlines()
    assert (first, json.loads(second)) == (
        '{"earlier": "run"}',
        {"feed": "feed.jsonl", "line": 7, "rule": RULE, **kept},
    )


@pytest.mark.parametrize("umask", [0o022, 0o277, 0o000], ids=["022", "277", "000"])
def test_a_new_file_is_the_owners_alone(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "dead.jsonl"
    previous = os.umask(umask)
    try:
        with DeadLetters.open(path, "stdin"):
            pass
    finally:
        os.umask(previous)
    assert (path.read_bytes(), path.stat().st_mode & 0o777) == (b"", 0o600)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o700, 0o4600], ids=oct)
def test_a_file_of_another_mode_is_refused_and_left_alone(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "dead.jsonl"
    path.write_bytes(b"kept\n")
    path.chmod(mode)
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(path, "stdin")
    assert str(raised.value) == (
        f"cannot write {path}: its mode is {mode & 0o7777:04o}, not 0600; a line set aside "
        "may hold internal fields (chmod 600 it, or name a new file)"
    )
    assert (path.read_bytes(), path.stat().st_mode & 0o7777) == (b"kept\n", mode)


@pytest.mark.parametrize("target", ["a-file", "missing"])
def test_a_symbolic_link_is_never_followed(tmp_path: Path, target: str) -> None:
    pointed = tmp_path / target
    if target == "a-file":
        pointed.write_bytes(b"kept\n")
        pointed.chmod(0o600)
    link = tmp_path / "dead.jsonl"
    link.symlink_to(pointed)
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(link, "stdin")
    assert str(raised.value) == f"cannot write {link}: it is a symbolic link"
    assert [path.name for path in tmp_path.iterdir() if not path.is_symlink()] == (
        ["a-file"] if target == "a-file" else []
    )
    if target == "a-file":
        assert pointed.read_bytes() == b"kept\n"


@pytest.mark.parametrize("reader", [False, True], ids=["no-reader", "a-reader"])
def test_a_fifo_is_refused_at_once(tmp_path: Path, reader: bool) -> None:
    fifo = tmp_path / "dead.fifo"
    os.mkfifo(fifo, 0o600)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if reader else None
    try:
        with pytest.raises(CommandError) as raised:
            DeadLetters.open(fifo, "stdin")
    finally:
        if held is not None:
            os.close(held)
    assert str(raised.value) == f"cannot write {fifo}: it is not a regular file"


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(Path("/dev/null"), "stdin")
    assert str(raised.value) == "cannot write /dev/null: it is not a regular file"


@pytest.mark.parametrize(
    ("feed", "reason"),
    [
        pytest.param("feed.jsonl", "it is the feed", id="the-feed"),
        pytest.param("stdin", "it is the file stdin reads", id="stdin-s-file"),
    ],
)
def test_the_feeds_own_file_is_refused(tmp_path: Path, feed: str, reason: str) -> None:
    path = tmp_path / "feed.jsonl"
    path.write_bytes(b"{}\n")
    path.chmod(0o600)  # the mode it would be allowed
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(path, feed, feed_file=FileId.of(path.stat()))
    assert (str(raised.value), path.read_bytes()) == (f"cannot write {path}: {reason}", b"{}\n")


def test_another_file_than_the_feeds_is_taken(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"{}\n")
    path = tmp_path / "dead.jsonl"
    with DeadLetters.open(path, "feed.jsonl", feed_file=FileId.of(feed.stat())) as letters:
        letters.set_aside(1, RULE, b"{")
    assert json.loads(path.read_text())["line"] == 1


def test_dev_stderr_is_stderr_whatever_it_is(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with DeadLetters.open(Path("/dev/stderr"), "stdin") as letters:
        letters.set_aside(2, RULE, b"{")
    assert capfd.readouterr() == (
        "",
        json.dumps({"feed": "stdin", "line": 2, "rule": RULE, "text": "{"}) + "\n",
    )


def test_dev_stderr_on_the_feeds_file_is_refused(tmp_path: Path) -> None:
    stderr = os.fstat(2)
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(Path("/dev/stderr"), "feed.jsonl", feed_file=FileId.of(stderr))
    assert str(raised.value) == "cannot write /dev/stderr: it is the feed"


@pytest.mark.parametrize(
    "before",
    [
        pytest.param(b'{"feed": "stdin", "li', id="cut-short"),
        pytest.param(b'{"earlier": 1}\n{"feed": "stdin", "li', id="after-a-whole-one"),
    ],
)
def test_a_letter_cut_short_is_completed_by_the_next(tmp_path: Path, before: bytes) -> None:
    # What a full disk leaves (test_apply_inputs.py makes one with RLIMIT_FSIZE).
    path = tmp_path / "dead.jsonl"
    path.write_bytes(before)
    path.chmod(0o600)
    with DeadLetters.open(path, "stdin") as letters:
        letters.set_aside(1, RULE, b"{")
        letters.set_aside(2, RULE, b"[")
    *kept, first, second = path.read_bytes().split(b"\n")[:-1]
    assert (b"\n".join(kept), json.loads(first)["line"], json.loads(second)["line"]) == (
        before,
        1,
        2,
    )


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


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dead.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        with pytest.raises(CommandError) as raised:
            DeadLetters.open(path, "stdin")
    assert str(raised.value) == f"cannot write {path}: it is not a regular file"


def test_a_loop_of_links_before_the_file_is_the_systems_reason(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    path = loop / "dead.jsonl"
    with pytest.raises(CommandError) as raised:
        DeadLetters.open(path, "stdin")
    assert str(raised.value) == f"cannot write {path}: Too many levels of symbolic links"
