"""What a records file must hold to be served or imported: the rules, checked in one place.

The contract's `records` dict is passed to `execute_tool` as it is. A records *file*
(`--records`, `import`) comes from outside, so each record is checked first, by the
same rules for the dict store and for a database: both then give the same answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple, TypeGuard

from ticket_tools.store import tenant_of
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.tickets import STATUSES

_FIELDS_RULE = "id, title and status must be strings of valid Unicode"
_KEY_RULE = 'the key is not "tenant:" followed by the ticket\'s own id'
# The statuses search_tickets filters on and declares to the model, exactly: a ticket
# stored as "Open" or "" would be missed by every status filter.
STATUS_RULE = "the status is not " + " or ".join(f'"{status}"' for status in STATUSES)
# The largest version: a signed 64-bit integer, what SQLite's INTEGER and PostgreSQL's
# bigint hold. A microsecond timestamp fits until the year 294,247.
MAX_VERSION = 2**63 - 1
VERSION_RULE = "the version is not an integer from 0 to 2^63-1"
_MIXED_RULE = 'either every ticket has a "version" or none does'
NOT_AN_OBJECT_RULE = 'not a JSON object of "tenant:TKT-123" -> ticket'
DUPLICATE_RULE = "the key was given before"
DUPLICATE_FIELD_RULE = "a field name appears twice in one object"


class RecordsError(ValueError):
    """A records value that breaks a rule; the message names the record by position only."""


class StoredRow(NamedTuple):
    """One checked record: the key's tenant, the ticket's three public fields, its version."""

    tenant: str
    id: str
    title: str
    status: str
    version: int | None = None
    """The ticket's `"version"` in a records file with versions; None in one without."""


def is_version(value: object) -> TypeGuard[int]:
    """Return whether `value` is a version: an int (not a bool) from 0 to MAX_VERSION."""
    return type(value) is int and 0 <= value <= MAX_VERSION


def is_text(value: object) -> TypeGuard[str]:
    """Return whether `value` is a str with a UTF-8 form.

    JSON can escape a lone surrogate ("\\ud800") and a non-UTF-8 command line or
    stdin decodes to one: such a str cannot be printed, bound to SQL or stored.
    """
    if type(value) is not str:
        return False
    if value.isascii():  # the common case, answered without encoding
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def record_rows(records: object, *, id_format: IdFormat = ID_FORMAT) -> list[StoredRow]:
    """Check every record of a records mapping; return one row per record, in order.

    The whole value is a JSON object (a mapping); each record follows `record_row`'s
    rules, refused with the record's position (never its contents).
    """
    return list(records_rows(records, id_format=id_format))


def records_rows(records: object, *, id_format: IdFormat = ID_FORMAT) -> Iterator[StoredRow]:
    """Check a records mapping one record at a time, as the rows are taken (`checked_rows`).

    Raises RecordsError at once when `records` is not a mapping.
    """
    if not isinstance(records, Mapping):
        raise RecordsError(NOT_AN_OBJECT_RULE)
    return checked_rows(records.items(), id_format=id_format)


def source_rows(
    records: Mapping[str, object] | Iterator[StoredRow], *, id_format: IdFormat = ID_FORMAT
) -> Iterator[StoredRow]:
    """Return an importer's rows: a records mapping's (`records_rows`), or rows as they are.

    Rows come as an iterator (a records file read as it is imported, `records_stream`),
    checked already; anything else is a records value, checked as it is taken.
    """
    if isinstance(records, Iterator):
        return records
    return records_rows(records, id_format=id_format)


def duplicate_key(position: int) -> RecordsError:
    """Return the refusal of a key given twice, naming its second record's position.

    A JSON object may hold a key twice, and `json.load` would keep the last value at the
    first key's place: an import refuses the file instead (the primary key finds it).
    """
    return RecordsError(f"record {position} (in file order): {DUPLICATE_RULE}")


class DuplicateFieldError(Exception):
    """A JSON object gives one field name twice (`unique_fields`); not a ValueError, so
    that no handler of json's own errors takes it for one."""


def unique_fields(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """Return a JSON object's fields; raise DuplicateFieldError if a name is given twice.

    json's `object_pairs_hook`, for every object of a records file and of a feed line.
    `json.loads` would keep the last of two equal names: a reviewer reading the file sees
    the first `"title"`, the model would read the second.
    """
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise DuplicateFieldError
    return fields


def checked_rows(
    pairs: Iterable[tuple[object, object]], *, id_format: IdFormat = ID_FORMAT
) -> Iterator[StoredRow]:
    """Check (key, ticket) pairs in file order; yield one row per record, as it is checked.

    Each record follows `record_row`'s rules, and the records file's own: a ticket may
    carry `"version": N` (an integer from 0 to 2^63-1, as a feed line's), and either every
    ticket of a file has one or none does, as its first ticket says. A record that
    breaks a rule is refused with its position (never its contents).
    """
    versioned: bool | None = None
    for position, (key, stored) in enumerate(pairs, 1):
        row = _row(position, key, stored, id_format)
        if versioned is None:
            versioned = row.version is not None
        elif versioned != (row.version is not None):
            raise RecordsError(f"record {position} (in file order): {_MIXED_RULE}")
        yield row


def check_high_water(first: StoredRow | None, high_water: int | None, *, replace: bool) -> None:
    """Refuse a high-water version without versions, and a versioned refresh without one.

    `first` is the file's first row (None for an empty file, which either kind may be).
    """
    if first is None:
        return
    if high_water is not None and first.version is None:
        raise RecordsError("a high-water version (--high-water) needs tickets with versions")
    if replace and high_water is None and first.version is not None:
        raise RecordsError(
            "a refresh from tickets with versions needs the snapshot's high-water version "
            "(--high-water N)"
        )


def with_high_water(
    rows: Iterable[StoredRow], high_water: int | None, *, replace: bool
) -> Iterator[StoredRow]:
    """Return all of `rows`, once their first has passed `check_high_water`.

    The first row is read (and checked) before anything is written. When it does not
    fit `high_water`, the rest is read (not written) first: a record that breaks a rule
    is named before the option, as when a file was read whole before.
    """
    first, taken = split_first(rows)
    try:
        check_high_water(first, high_water, replace=replace)
    except RecordsError:
        for _ in taken:
            pass
        raise
    return taken


def split_first(rows: Iterable[StoredRow]) -> tuple[StoredRow | None, Iterator[StoredRow]]:
    """Return the first of `rows` (None: there is none) and all of them, the first included.

    The first row is read (and checked) before anything is written: it decides whether
    the file has versions (`check_high_water`).
    """
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        return None, iterator
    return first, itertools.chain((first,), iterator)


def record_row(key: object, stored: object, *, id_format: IdFormat = ID_FORMAT) -> StoredRow:
    """Check one record; return its row, or raise RecordsError whose message is the rule alone.

    The rules, checked in this order:
    - the ticket is an object whose id, title and status are strings with a UTF-8 form;
    - the id is TKT- followed by exactly `id_format.digits` digits (default three): the
      only ids get_ticket can name and a cursor can page past, all of one width so that
      string order is numeric order (a tenant holds at most 10 ** digits tickets);
    - the key is "tenant:" followed by the ticket's own id (`key_parts`);
    - the status is exactly "open" or "closed" (`tickets.STATUSES`).
    Other fields of a ticket are allowed, and never shown.
    """
    if not isinstance(stored, Mapping):
        raise RecordsError(_FIELDS_RULE)
    ticket_id, title, status = stored.get("id"), stored.get("title"), stored.get("status")
    if not (is_text(ticket_id) and is_text(title) and is_text(status)):
        raise RecordsError(_FIELDS_RULE)
    if not id_format.matches(ticket_id):
        raise RecordsError(f"the id is not {id_format.shape}")
    tenant, key_id = key_parts(key, id_format=id_format)
    if key_id != ticket_id:
        raise RecordsError(_KEY_RULE)
    if status not in STATUSES:
        raise RecordsError(STATUS_RULE)
    return StoredRow(tenant, ticket_id, title, status)


def key_parts(key: object, *, id_format: IdFormat = ID_FORMAT) -> tuple[str, str]:
    """Check a records key alone; return its (tenant, ticket id), or raise RecordsError.

    A key is "tenant:" followed by a ticket id (of `id_format`), the tenant non-empty
    and without ":" (else "a:b:TKT-101" would mean tenant "a:b" to one store, "a" to
    another).
    """
    if not is_text(key):
        raise RecordsError("the key is not a string of valid Unicode")
    tenant = tenant_of(key)
    key_id = key[len(tenant) + 1 :]
    if not tenant or ":" in tenant or not id_format.matches(key_id):
        raise RecordsError(_KEY_RULE)
    return tenant, key_id


class IdWidthError(StoreFailure):
    """A database opened for ticket IDs of another width than the one it holds.

    A `StoreFailure("schema", ...)` whose message is `id_width_message`'s; `made_for` is
    the width the database holds, for a command that cannot take `--id-digits`.
    """

    def __init__(self, source: str, made_for: int, id_format: IdFormat) -> None:
        super().__init__("schema", id_width_message(source, made_for, id_format))
        self.source = source
        self.made_for = made_for


def id_width_message(source: str, made_for: int, id_format: IdFormat) -> str:
    """Say that a database holds IDs of another width than the one it is opened with.

    Every command that takes a store names the width with `--id-digits`.
    """
    return (
        f"{source} holds ticket IDs of {made_for} digits, not {id_format.digits}: "
        f"use --id-digits {made_for}"
    )


def _row(position: int, key: object, stored: object, id_format: IdFormat) -> StoredRow:
    try:
        row = record_row(key, stored, id_format=id_format)
        if isinstance(stored, Mapping) and "version" in stored:
            version = stored["version"]
            if not is_version(version):
                raise RecordsError(VERSION_RULE)
            return row._replace(version=version)
        return row
    except RecordsError as error:
        raise RecordsError(f"record {position} (in file order): {error}") from None
