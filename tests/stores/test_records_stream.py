"""The streaming records reader: every chunk boundary, every way a file is not one object."""

from __future__ import annotations

import io

import pytest

from ticket_tools.stores.records_stream import (
    MAX_RECORD_CHARS,
    RecordsSyntaxError,
    iter_records,
)

# Escapes, a surrogate pair, multi-byte UTF-8 (2 and 4 bytes), numbers, literals, nesting
# and JSON's four whitespace characters: cut at every byte, it must read the same.
TRICKY = (
    ' \t\n\r{ "alpha:TKT-101" :\n{"id": "TKT-101", "title": "say \\"hi\\" \\\\ \\u00e9 '
    '\\ud83d\\ude00 é 😀", "status": "open", "version": 12345},'
    '"b:TKT-002":{"id":"TKT-002","n":[1,2.5e3,true,false,null,{"x":{}}]} , '
    '"c": 1234567890 ,"d":"" }\r\n\t '
).encode()
TRICKY_PAIRS = [
    (
        "alpha:TKT-101",
        {
            "id": "TKT-101",
            "title": 'say "hi" \\ é 😀 é 😀',
            "status": "open",
            "version": 12345,
        },
    ),
    ("b:TKT-002", {"id": "TKT-002", "n": [1, 2500.0, True, False, None, {"x": {}}]}),
    ("c", 1234567890),
    ("d", ""),
]


def _read(data: bytes, chunk: int = 7) -> list[tuple[str, object]]:
    return list(iter_records(io.BytesIO(data), chunk_bytes=chunk))


@pytest.mark.parametrize("chunk", range(1, len(TRICKY) + 2))
def test_every_chunk_boundary_reads_the_same(chunk: int) -> None:
    assert _read(TRICKY, chunk) == TRICKY_PAIRS


@pytest.mark.parametrize(
    ("data", "pairs"),
    [
        pytest.param(b"{}", [], id="empty-object"),
        pytest.param(b" \n{ \t}\r\n ", [], id="empty-object-in-whitespace"),
        pytest.param(b'{"a":1,"a":2}', [("a", 1), ("a", 2)], id="a-key-twice-is-yielded-twice"),
        pytest.param(b'{"k": -0.5e-3}', [("k", -0.0005)], id="a-number-last"),
        pytest.param(
            b'{"a": {"x": 1, "y": {"x": 2}}, "b": {"x": 3}}',
            [("a", {"x": 1, "y": {"x": 2}}), ("b", {"x": 3})],
            id="one-name-in-several-objects",
        ),
    ],
)
def test_what_it_reads(data: bytes, pairs: list[tuple[str, object]]) -> None:
    assert [_read(data, chunk) for chunk in (1, 2, 3, 64)] == [pairs] * 4


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param(b"", "NotAnObject", id="empty-file"),
        pytest.param(b"  \n", "NotAnObject", id="whitespace-only"),
        pytest.param(b"[]", "NotAnObject", id="an-array"),
        pytest.param(b'"x"', "NotAnObject", id="a-string"),
        pytest.param(b"1", "NotAnObject", id="a-number"),
        pytest.param(b"{} x", "JSONDecodeError", id="trailing-garbage"),
        pytest.param(b'{"a": 1} {}', "JSONDecodeError", id="a-second-object"),
        pytest.param(b'{"a": 1,}', "JSONDecodeError", id="trailing-comma"),
        pytest.param(b'{"a" 1}', "JSONDecodeError", id="no-colon"),
        pytest.param(b'{"a": 1 "b": 2}', "JSONDecodeError", id="no-comma"),
        pytest.param(b"{1: 2}", "JSONDecodeError", id="key-not-a-string"),
        pytest.param(b'{"a": 1', "JSONDecodeError", id="cut-after-a-value"),
        pytest.param(b'{"a": "x', "JSONDecodeError", id="cut-in-a-string"),
        pytest.param(b'{"a": ', "JSONDecodeError", id="cut-before-a-value"),
        pytest.param(b'{"a": tru}', "JSONDecodeError", id="not-a-literal"),
        pytest.param(b'{"a": "\\x"}', "JSONDecodeError", id="bad-escape"),
        pytest.param(b'{"a": "\xff"}', "UnicodeDecodeError", id="not-utf8"),
        pytest.param(b'{"a": "\xc3', "UnicodeDecodeError", id="cut-utf8-at-the-end"),
        pytest.param(b'\xef\xbb\xbf{"a": 1}', "NotAnObject", id="a-bom"),
        pytest.param(
            b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "RecursionError", id="deep"
        ),
        pytest.param(b'{"a": ' + b"1" * 5000 + b"}", "ValueError", id="an-integer-too-long"),
        pytest.param(b'{"a": {"t": "x", "t": "y"}}', "DuplicateField", id="a-field-twice"),
        pytest.param(b'{"a": [{"b": {"t": 1, "t": 1}}]}', "DuplicateField", id="twice-nested"),
        # Found when its object ends, before the syntax error after it.
        pytest.param(b'{"a": {"t": 1, "t": 2} oops', "DuplicateField", id="twice-then-garbage"),
    ],
)
def test_what_it_refuses(data: bytes, kind: str) -> None:
    for chunk in (1, 5, 1 << 16):
        with pytest.raises(RecordsSyntaxError) as raised:
            _read(data, chunk)
        assert raised.value.kind == kind


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"a": "' + b"x" * MAX_RECORD_CHARS + b'"}', id="a-string-just-over"),
        pytest.param(b'{"a": "' + b"x" * 2 * MAX_RECORD_CHARS + b'"}', id="a-string-cut"),
        pytest.param(b'{"a": 1.5' + b"0" * 2 * MAX_RECORD_CHARS + b"}", id="a-number-cut"),
    ],
)
def test_a_record_too_long_is_refused_not_buffered(data: bytes) -> None:
    # Chunks of 64 KiB, as a file is read: an incomplete record is parsed again per chunk.
    with pytest.raises(RecordsSyntaxError) as raised:
        _read(data, 1 << 16)
    assert raised.value.kind == "TooLong"


def test_a_record_at_the_bound_is_read() -> None:
    data = b'{"a": "' + b"x" * (MAX_RECORD_CHARS - 2) + b'", "b": 1}'
    assert _read(data, 1 << 16) == [("a", "x" * (MAX_RECORD_CHARS - 2)), ("b", 1)]


def test_records_before_a_fault_are_yielded_first() -> None:
    pairs = iter_records(io.BytesIO(b'{"a": 1, "b": 2, oops}'), chunk_bytes=4)
    assert [next(pairs), next(pairs)] == [("a", 1), ("b", 2)]
    with pytest.raises(RecordsSyntaxError):
        next(pairs)
