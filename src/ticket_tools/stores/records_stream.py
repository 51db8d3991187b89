"""Read a records file one record at a time: its top-level object, without holding it whole.

`iter_records` yields each (key, ticket) pair of the file's one JSON object as soon as
it has been read, holding at most one record (and one chunk) in memory: the records
rules (`stores.records.checked_rows`) then check each as it comes. Every value is
decoded by the standard library's own parser (`json.JSONDecoder.raw_decode`), so a
record means exactly what `json.load` would make of it.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import BinaryIO, Literal, cast

from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.records import (
    DuplicateFieldError,
    StoredRow,
    checked_rows,
    unique_fields,
)
from ticket_tools.stores.text import TitleCleaner

# Bytes read at a time.
CHUNK_BYTES = 1 << 16
# A ticket is three short strings: a record longer than this is refused rather than
# buffered whole, as a feed line is (stores/feed.py MAX_LINE_BYTES).
MAX_RECORD_CHARS = 1 << 20
_WHITESPACE = " \t\n\r"  # JSON's four
_AFTER_SCALAR = _WHITESPACE + ",}"

Failure = Literal[
    "JSONDecodeError",
    "RecursionError",
    "UnicodeDecodeError",
    "ValueError",
    "TooLong",
    "NotAnObject",
    "DuplicateField",
]


class RecordsSyntaxError(ValueError):
    """The file is not one JSON object of records; `kind` says which rule it broke."""

    def __init__(self, kind: Failure) -> None:
        super().__init__(kind)
        self.kind: Failure = kind


def iter_records(
    stream: BinaryIO, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[tuple[str, object]]:
    """Yield the (key, value) pairs of the one JSON object `stream` holds, in file order.

    Raises RecordsSyntaxError when the bytes are not UTF-8, not JSON, not one object
    (whitespace alone may surround it), nested too deeply, a record is longer than
    MAX_RECORD_CHARS, or an object within a record gives a field name twice
    ("DuplicateField", `records.unique_fields`). Its kind is "NotAnObject" when the text
    does not start with "{" (an empty file too): whether the rest is JSON is not read. A
    key of the object given twice is yielded twice: the caller decides.

    Example: b' {"a:TKT-1": {"id": "x"}, "b": 2} ' -> ("a:TKT-1", {"id": "x"}), ("b", 2)
    """
    reader = _Reader(stream, chunk_bytes)
    if reader.next_char() != "{":
        raise RecordsSyntaxError("NotAnObject")
    if reader.peek() == "}":
        reader.next_char()
        reader.end()
        return
    while True:
        if reader.peek() != '"':  # a key is a string: raw_decode would take any value
            raise RecordsSyntaxError("JSONDecodeError")
        key = cast(str, reader.value())
        if reader.next_char() != ":":
            raise RecordsSyntaxError("JSONDecodeError")
        reader.skip_whitespace()
        value = reader.value()
        yield key, value
        separator = reader.next_char()
        if separator == "}":
            reader.end()
            return
        if separator != ",":
            raise RecordsSyntaxError("JSONDecodeError")


class RecordsReader:
    """The checked rows of a records file, read and checked one record at a time.

    `rows()` yields a `StoredRow` per record as the file is read: its title cleaned
    (`stores.text`, unless `raw_titles`), then checked by the records rules
    (`stores.records.checked_rows`), each refused with its position. `read` counts the
    records read so far, `cleaned` the titles changed, `bytes_read` the file's bytes.
    """

    def __init__(
        self,
        stream: BinaryIO,
        *,
        id_format: IdFormat = ID_FORMAT,
        raw_titles: bool = False,
        chunk_bytes: int | None = None,
    ) -> None:
        self._stream = stream
        self._id_format = id_format
        self._cleaner = TitleCleaner(raw=raw_titles)
        self._chunk = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self.read = 0

    @property
    def cleaned(self) -> int:
        """How many of the titles read so far were changed by cleaning."""
        return self._cleaner.changed

    @property
    def bytes_read(self) -> int:
        """How many bytes of the file were read so far (a chunk at a time)."""
        return self._stream.tell()

    def rows(self) -> Iterator[StoredRow]:
        """Yield the file's rows in file order, each checked as it is read."""
        pairs = self._cleaner.pairs(
            self._counted(iter_records(self._stream, chunk_bytes=self._chunk))
        )
        return checked_rows(pairs, id_format=self._id_format)

    def _counted(self, pairs: Iterator[tuple[str, object]]) -> Iterator[tuple[str, object]]:
        for pair in pairs:
            self.read += 1
            yield pair


class _Reader:
    """A window on the decoded text: `buffer[at:]` is what is read and not yet parsed."""

    def __init__(self, stream: BinaryIO, chunk_bytes: int) -> None:
        self._stream = stream
        self._chunk = chunk_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder(object_pairs_hook=unique_fields)
        self._buffer = ""
        self._at = 0
        self._eof = False

    def _more(self) -> bool:
        """Read one more chunk onto the buffer (dropping what is parsed); False at the end."""
        if self._eof:
            return False
        data = self._stream.read(self._chunk)
        try:
            text = self._decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise RecordsSyntaxError("UnicodeDecodeError") from None
        self._eof = not data
        self._buffer = self._buffer[self._at :] + text
        self._at = 0
        return True

    def skip_whitespace(self) -> None:
        """Move past whitespace, reading as needed."""
        while True:
            while self._at < len(self._buffer) and self._buffer[self._at] in _WHITESPACE:
                self._at += 1
            if self._at < len(self._buffer) or not self._more():
                return

    def next_char(self) -> str:
        """Return the next character after whitespace and move past it ("" at the end)."""
        self.skip_whitespace()
        if self._at >= len(self._buffer):
            return ""
        self._at += 1
        return self._buffer[self._at - 1]

    def peek(self) -> str:
        """Return the next character after whitespace, staying before it ("" at the end)."""
        self.skip_whitespace()
        return self._buffer[self._at] if self._at < len(self._buffer) else ""

    def value(self) -> object:
        """Decode the JSON value that starts here, reading until it is whole."""
        while True:
            try:
                value, end = self._json.raw_decode(self._buffer, self._at)
            except json.JSONDecodeError:
                # Perhaps only cut by the chunk's end: read on, unless it is too long.
                if len(self._buffer) - self._at > MAX_RECORD_CHARS:
                    raise RecordsSyntaxError("TooLong") from None
                if not self._more():
                    raise RecordsSyntaxError("JSONDecodeError") from None
                continue
            except RecursionError:
                raise RecordsSyntaxError("RecursionError") from None
            except DuplicateFieldError:  # in an object read whole: no later chunk undoes it
                raise RecordsSyntaxError("DuplicateField") from None
            except ValueError:  # an integer past Python's digit limit, as json.loads says
                raise RecordsSyntaxError("ValueError") from None
            # A number or literal is whole only before a delimiter: "-0" may be the start
            # of "-0.5e-3" in the next chunk (raw_decode stops at the first character it
            # cannot take).
            if (end == len(self._buffer) or self._buffer[end] not in _AFTER_SCALAR) and (
                self._buffer[self._at] not in '{["'
            ):
                if len(self._buffer) - self._at > MAX_RECORD_CHARS:
                    raise RecordsSyntaxError("TooLong")
                if self._more():
                    continue
            if end - self._at > MAX_RECORD_CHARS:
                raise RecordsSyntaxError("TooLong")
            self._at = end
            return value

    def end(self) -> None:
        """Refuse anything but whitespace after the object."""
        if self.next_char() != "":
            raise RecordsSyntaxError("JSONDecodeError")
