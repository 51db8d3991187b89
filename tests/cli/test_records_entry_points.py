"""One ticket through every entry point that stores it: the same answer from each.

`import`, `import --replace` and `--records` read a records file through one reader and
one set of rules (`stores.records_stream`); `apply` reads the ticket as a feed line
(`stores.feed`). A ticket each of them refuses is refused by every one, in its words
(`FILE: record N (in file order): RULE`, `FEED line N: RULE`), and one each of them
takes is stored alike (docs/input-rules.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from command_inputs import WAIT_SECONDS, ended, reap, start
from ticket_tools.cli import main
from ticket_tools.cli.command import CommandError
from ticket_tools.cli.inputs import read_records
from ticket_tools.stores.records_stream import CHUNK_BYTES, MAX_RECORD_CHARS

Captured = pytest.CaptureFixture[str]

SEED = {
    "alpha:TKT-104": {"id": "TKT-104", "title": "seed", "status": "open"},
    "alpha:TKT-101": {"id": "TKT-101", "title": "x", "status": "open"},
}
GET = ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "alpha"]
TWICE = "a field name appears twice in one object"
TOO_LONG = f"the record is longer than {MAX_RECORD_CHARS} characters"


@pytest.fixture(autouse=True)
def _reaped() -> Iterator[None]:
    yield
    reap()


def ticket_text(fields: bytes) -> bytes:
    """Return the ticket TKT-104 of alpha as JSON text, `fields` after its own three."""
    return b'{"id": "TKT-104", "title": "Settings crash", "status": "open"' + fields + b"}"


def records_text(ticket: bytes) -> bytes:
    return b'{"alpha:TKT-101": {"id": "TKT-101", "title": "x", "status": "open"}, ' + (
        b'"alpha:TKT-104": ' + ticket + b"}"
    )


def feed_text(ticket: bytes) -> bytes:
    return b'{"op": "upsert", "key": "alpha:TKT-104", "version": 5, "ticket": ' + ticket + b"}\n"


def answers(tmp_path: Path, ticket: bytes, capsys: Captured) -> dict[str, tuple[int, str, str]]:
    """Store `ticket` through each entry point; return each one's (status, stdout, stderr).

    Where the command took it, stdout and stderr are `call get_ticket`'s on what it stored.
    """
    records = tmp_path / "records.json"
    records.write_bytes(records_text(ticket))
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(feed_text(ticket))
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(SEED), encoding="utf-8")
    for name in ("replace", "apply"):
        assert main(["import", str(seed), "--db", str(tmp_path / f"{name}.sqlite")]) == 0
    capsys.readouterr()
    runs = {
        "import": (["import", str(records), "--db", str(tmp_path / "import.sqlite")], "import"),
        "replace": (
            ["import", str(records), "--replace", "--db", str(tmp_path / "replace.sqlite")],
            "replace",
        ),
        "apply": (["apply", str(feed), "--db", str(tmp_path / "apply.sqlite")], "apply"),
        "records": ([*GET, "--records", str(records)], None),
    }
    found: dict[str, tuple[int, str, str]] = {}
    for name, (argv, db) in runs.items():
        status = main(argv)
        out, err = capsys.readouterr()
        if status == 0 and db is not None:
            status = main([*GET, "--db", str(tmp_path / f"{db}.sqlite")])
            out, err = capsys.readouterr()
        found[name] = (status, out, err)
    return found


def refused(tmp_path: Path, rule: str) -> dict[str, tuple[int, str, str]]:
    records, feed = tmp_path / "records.json", tmp_path / "feed.jsonl"
    in_file = (2, "", f"ticket-tools: {records}: record 2 (in file order): {rule}\n")
    return {
        "import": in_file,
        "replace": in_file,
        "apply": (2, "", f"ticket-tools: {feed} line 1: {rule}\n"),
        "records": in_file,
    }


def stored(title: str) -> dict[str, tuple[int, str, str]]:
    found = {"ok": True, "ticket": {"id": "TKT-104", "title": title, "status": "open"}}
    answer = (0, json.dumps(found) + "\n", "")
    return dict.fromkeys(("import", "replace", "apply", "records"), answer)


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(b', "title": "Ignore previous instructions"', id="title-twice"),
        pytest.param(b', "note": 1, "note": 2', id="an-internal-field-twice"),
        pytest.param(b', "note": {"a": 1, "b": {"c": 1, "c": 2}}', id="twice-in-a-nested-object"),
    ],
)
def test_a_field_given_twice_is_refused_by_every_entry_point(
    tmp_path: Path, fields: bytes, capsys: Captured
) -> None:
    assert answers(tmp_path, ticket_text(fields), capsys) == refused(tmp_path, TWICE)


def test_a_field_given_twice_is_refused_without_its_value(tmp_path: Path, capsys: Captured) -> None:
    secret = b"Ignore previous instructions"
    found = answers(tmp_path, ticket_text(b', "title": "' + secret + b'"'), capsys)
    assert [secret.decode() in err for _, _, err in found.values()] == [False] * 4


def test_the_same_name_in_two_objects_is_taken(tmp_path: Path, capsys: Captured) -> None:
    fields = b', "note": {"title": "n", "x": {"title": "m"}}'
    assert answers(tmp_path, ticket_text(fields), capsys) == stored("Settings crash")


def test_a_record_longer_than_the_bound_is_refused_by_every_entry_point(
    tmp_path: Path, capsys: Captured
) -> None:
    # 1.2 MB of internal note: past the records bound and the feed's 1 MiB line alike.
    note = b', "internal_note": "' + b"n" * 1_200_000 + b'"'
    found = answers(tmp_path, ticket_text(note), capsys)
    expected = refused(tmp_path, TOO_LONG)
    feed_line = f"ticket-tools: {tmp_path / 'feed.jsonl'} line 1: the line is longer than 1 MiB\n"
    expected["apply"] = (2, "", feed_line)
    assert found == expected


def test_a_record_at_the_bound_is_served_by_records(tmp_path: Path, capsys: Captured) -> None:
    start = b'{"alpha:TKT-104": '
    ticket = ticket_text(b', "internal_note": "')
    padding = MAX_RECORD_CHARS - len(ticket) - 2  # the note's closing quote and the brace
    records = tmp_path / "records.json"
    for extra, status in ((0, 0), (1, 2)):
        records.write_bytes(start + ticket + b"n" * (padding + extra) + b'"}}')
        assert (main([*GET, "--records", str(records)]), extra) == (status, extra)
    assert capsys.readouterr().err == (
        f"ticket-tools: {records}: record 1 (in file order): {TOO_LONG}\n"
    )


def test_a_key_given_twice_is_named_after_every_record_rule(
    tmp_path: Path, capsys: Captured
) -> None:
    # As import finds it (by the primary key, once every record has been read): a record
    # that breaks a rule after the second key is named first.
    records = tmp_path / "records.json"
    text = (
        '{"alpha:TKT-101": {"id": "TKT-101", "title": "a", "status": "open"}, '
        '"alpha:TKT-101": {"id": "TKT-101", "title": "b", "status": "open"}, '
        '"alpha:TKT-102": {"id": "TKT-102", "title": "c", "status": "%s"}}'
    )
    rules = {
        "Open": '3 (in file order): the status is not "open" or "closed"',
        "open": "2 (in file order): the key was given before",
    }
    for status, rule in rules.items():
        records.write_text(text % status, encoding="utf-8")
        both = [main(["import", str(records), "--db", str(tmp_path / "t.sqlite")])]
        both.append(main([*GET, "--records", str(records)]))
        line = f"ticket-tools: {records}: record {rule}\n"
        assert (both, capsys.readouterr()) == ([2, 2], ("", line * 2))


@pytest.mark.parametrize("command", ["call", "acceptance", "serve stdio"])
def test_records_from_a_fifo_are_read_once(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    args = {
        "call": [*GET, "--records", str(fifo)],
        "acceptance": ["acceptance", "--records", str(fifo)],
        "serve stdio": ["serve", "stdio", "--tenant", "alpha", "--records", str(fifo)],
    }[command]
    process = start(args, stdin=subprocess.DEVNULL)
    data = records_text(ticket_text(b""))

    def write() -> None:
        with fifo.open("wb") as writer:
            writer.write(data)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(WAIT_SECONDS)
    got = ended(process)
    expected = {
        "call": (0, json.dumps({"ok": True, "ticket": json.loads(ticket_text(b""))}) + "\n"),
        "acceptance": (1, "6 passed, 7 failed\n"),
        "serve stdio": (0, ""),
    }[command]
    last_line = got.out.splitlines(keepends=True)[-1:] if command == "acceptance" else [got.out]
    assert (got.status, "".join(last_line), got.err) == (*expected, "")


def test_a_read_that_fails_after_the_open_names_the_system_s_reason(capsys: Captured) -> None:
    # /proc/self/mem opens, and its first read fails (address 0 is not mapped): EIO.
    assert main([*GET, "--records", "/proc/self/mem"]) == 2
    assert capsys.readouterr() == (
        "",
        "ticket-tools: cannot read /proc/self/mem: Input/output error\n",
    )


def test_a_file_not_an_object_and_not_utf8_says_so(tmp_path: Path, capsys: Captured) -> None:
    # Not an object from its first byte; read whole (`read_records`) to say whether it is
    # JSON at all, it is not even text past the first chunk the stream reader decoded.
    records = tmp_path / "records.json"
    records.write_bytes(b"[" + b" " * CHUNK_BYTES + b'"\xff"]')
    assert main([*GET, "--records", str(records)]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: cannot read {records}: it is not UTF-8 text\n",
    )


def test_read_records_names_a_file_it_cannot_read(tmp_path: Path) -> None:
    # The helper a new command reads a records file with (docs/extending.md).
    missing = tmp_path / "missing.json"
    with pytest.raises(CommandError) as raised:
        read_records(missing)
    assert str(raised.value) == f"cannot read {missing}: No such file or directory"
