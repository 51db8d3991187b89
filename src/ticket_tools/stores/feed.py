"""The change feed: one JSON object a line, each an upsert or a delete with its source's version.

A line is checked by the records rules (`stores.records`) and a few of its own, and
becomes a `Change`; `plan` then decides, per key, which changes win over what is
stored: the highest version, as in Elasticsearch's external versioning. See docs/feed.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.stores.records import (
    DUPLICATE_FIELD_RULE,
    MAX_VERSION,
    VERSION_RULE,
    DuplicateFieldError,
    RecordsError,
    is_text,
    is_version,
    key_parts,
    record_row,
    unique_fields,
)

Op = Literal["upsert", "delete"]
OPS: tuple[Op, ...] = ("upsert", "delete")
# Digits enough for any integer in range with its sign: a longer one is out of range
# whatever its value, and is never converted (Python refuses past 4,300 digits).
_MAX_INT_CHARS = len(str(-MAX_VERSION))
# A key's id of TKT- and digits, of whatever width: a delete's key refused by the key
# rule is then refused by the width rule instead, as an upsert's ticket id is.
_ANY_WIDTH_ID = re.compile("TKT-[0-9]+")
# A ticket is three short strings; a longer line is refused rather than buffered whole.
MAX_LINE_BYTES = 1 << 20
# The fields each op takes, exactly: a misspelt or extra field is refused, not ignored,
# so that a typo (`"verison"`) or a ticket on a delete is found, not silently dropped.
_FIELDS: dict[str, frozenset[str]] = {
    "upsert": frozenset({"op", "key", "version", "ticket"}),
    "delete": frozenset({"op", "key", "version"}),
}

Key = tuple[str, str]
"""A stored key: (tenant, ticket id)."""


OnWait = Callable[[], None]
"""What a writer calls when a batch finds the writers' lock taken, before it waits for it."""


class FeedError(ValueError):
    """A feed line that breaks a rule; the message is the rule, never the line's contents."""


@dataclass(frozen=True)
class Change:
    """One checked feed line: what to do to one key, at which version."""

    op: Op
    """"upsert" writes the ticket; "delete" removes it and leaves a tombstone."""
    tenant: str
    """The key's tenant."""
    id: str
    """The key's ticket id (for an upsert, also the ticket's own id)."""
    version: int
    """The source's version, 0 to MAX_VERSION: per key, the highest wins."""
    title: str = ""
    """The ticket's title (an upsert's; empty on a delete)."""
    status: str = ""
    """The ticket's status (an upsert's; empty on a delete)."""

    @property
    def key(self) -> Key:
        """Return (tenant, id)."""
        return (self.tenant, self.id)


@dataclass(frozen=True)
class Counts:
    """What applying changes did: upserts and deletes written, and changes ignored as stale."""

    upserted: int = 0
    deleted: int = 0
    stale: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.upserted + other.upserted,
            self.deleted + other.deleted,
            self.stale + other.stale,
        )

    def __str__(self) -> str:
        return f"{self.upserted} upserted, {self.deleted} deleted, {self.stale} stale"


def _not_json(text: str, error: ValueError) -> str:
    """Name the rule a line that is not JSON broke: the one-change-per-line rule, if it is that.

    A pretty-printed change spreads one object over lines, so its first line (`{`, or
    `{"op": "upsert",`) is JSON cut short: it opens an object or array and ends inside it.
    """
    ends_inside = isinstance(error, json.JSONDecodeError) and error.pos >= len(text.rstrip())
    if ends_inside and text.lstrip().startswith(("{", "[")):
        return f"the line is not JSON: {PRETTY_PRINTED_RULE}"
    return "the line is not JSON"


PRETTY_PRINTED_RULE = (
    "it ends inside an object or array; a feed holds one whole JSON object per line "
    "(JSON Lines), not pretty-printed JSON"
)


def parse_change(line: bytes | str, *, id_format: IdFormat = ID_FORMAT) -> Change:
    """Check one feed line (without its newline); return its change or raise FeedError.

    The key and ticket follow the records rules, with ids of `id_format`.

    Examples:
        {"op": "delete", "key": "alpha:TKT-102", "version": 8}
            -> Change("delete", "alpha", "TKT-102", 8)
        {"op": "delete", "key": "alpha:TKT-102", "version": true}
            -> FeedError("the version is not an integer from 0 to 2^63-1")
        {"op": "delete", "key": "alpha:TKT-1020", "version": 8}
            -> FeedError("the id is not TKT- followed by exactly three digits")
    """
    if len(line) > MAX_LINE_BYTES:
        raise FeedError("the line is longer than 1 MiB")
    try:
        # Decoded here: json.loads would take UTF-16 and UTF-32 bytes, and a BOM, too.
        text = line.decode("utf-8") if isinstance(line, bytes) else line
    except UnicodeDecodeError:
        raise FeedError("the line is not UTF-8 text") from None
    try:
        value = json.loads(text, object_pairs_hook=unique_fields, parse_int=_parse_int)
    except DuplicateFieldError:
        raise FeedError(DUPLICATE_FIELD_RULE) from None
    except RecursionError:
        raise FeedError("the line nests arrays or objects too deeply") from None
    except ValueError as error:
        raise FeedError(_not_json(text, error)) from None
    if type(value) is not dict:
        raise FeedError("the line is not a JSON object")
    op = value.get("op")
    if not (type(op) is str and op in OPS):
        raise FeedError('the op is not "upsert" or "delete"')
    if set(value) != _FIELDS[op]:
        raise FeedError(f"{op} takes exactly the fields {', '.join(sorted(_FIELDS[op]))}")
    version = value["version"]
    if not is_version(version):
        raise FeedError(VERSION_RULE)
    try:
        if op == "delete":
            tenant, ticket_id = _delete_key(value["key"], id_format)
            return Change("delete", tenant, ticket_id, version)
        row = record_row(value["key"], value["ticket"], id_format=id_format)
    except RecordsError as error:
        raise FeedError(str(error)) from None
    return Change("upsert", row.tenant, row.id, version, row.title, row.status)


class _OutOfRange:
    """What an integer too long for any rule stands for: no rule accepts it."""


_OUT_OF_RANGE = _OutOfRange()


def _parse_int(digits: str) -> int | _OutOfRange:
    return int(digits) if len(digits) <= _MAX_INT_CHARS else _OUT_OF_RANGE


def _delete_key(key: object, id_format: IdFormat) -> tuple[str, str]:
    try:
        return key_parts(key, id_format=id_format)
    except RecordsError:
        tenant, colon, key_id = key.partition(":") if is_text(key) else ("", "", "")
        if tenant and colon and _ANY_WIDTH_ID.fullmatch(key_id):
            raise RecordsError(f"the id is not {id_format.shape}") from None
        raise


def plan(
    changes: Iterable[Change], stored: Mapping[Key, int], floor: int | None = None
) -> tuple[dict[Key, Change], Counts]:
    """Decide which changes win; return the last winner per key, and the counts.

    `stored` holds the version of every stored key (ticket or tombstone) the changes
    name; `floor` is the store's high-water version (None: none), the version of every
    key neither stored nor buried. Changes are taken in order: one whose version is not
    greater than its key's current version (stored, the floor, or set by an earlier
    change here) is stale. The result is what to write: per key, the winning change
    with the highest version.

    Example, with ("alpha", "TKT-101") stored at version 5:
        upsert v7, delete v6, delete v9  ->  {key: delete v9}, Counts(1, 1, 1)
    and with the floor at 4, ("alpha", "TKT-102") neither stored nor buried:
        delete v3, upsert v6  ->  {key: upsert v6}, Counts(1, 0, 1)
    """
    current: dict[Key, int | None] = dict(stored)
    winners: dict[Key, Change] = {}
    upserted = deleted = stale = 0
    for change in changes:
        key = change.key
        version = current.get(key, floor)
        if version is not None and change.version <= version:
            stale += 1
            continue
        current[key] = change.version
        winners[key] = change
        if change.op == "upsert":
            upserted += 1
        else:
            deleted += 1
    return winners, Counts(upserted, deleted, stale)


def has_nul(change: Change) -> bool:
    """Return whether a change holds a NUL character (which PostgreSQL text cannot store)."""
    return any("\x00" in text for text in (change.tenant, change.id, change.title, change.status))
