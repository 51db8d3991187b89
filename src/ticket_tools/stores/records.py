"""What a records file must hold to be served or imported: the rules, checked in one place.

The contract's `records` dict is passed to `execute_tool` as it is. A records *file*
(`--records`, `import`) comes from outside, so each record is checked first, by the
same rules for the dict store and for a database: both then give the same answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, TypeGuard

from ticket_tools.store import tenant_of
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.tickets import ID_FORMAT, IdFormat

_FIELDS_RULE = "id, title and status must be strings of valid Unicode"
_KEY_RULE = 'the key is not "tenant:" followed by the ticket\'s own id'


class RecordsError(ValueError):
    """A records value that breaks a rule; the message names the record by position only."""


class StoredRow(NamedTuple):
    """One checked record: the key's tenant and the ticket's three public fields."""

    tenant: str
    id: str
    title: str
    status: str


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
    if not isinstance(records, Mapping):
        raise RecordsError('not a JSON object of "tenant:TKT-123" -> ticket')
    return [
        _row(position, key, stored, id_format)
        for position, (key, stored) in enumerate(records.items(), 1)
    ]


def record_row(key: object, stored: object, *, id_format: IdFormat = ID_FORMAT) -> StoredRow:
    """Check one record; return its row, or raise RecordsError whose message is the rule alone.

    The rules, checked in this order:
    - the ticket is an object whose id, title and status are strings with a UTF-8 form;
    - the id is TKT- followed by exactly `id_format.digits` digits (default three): the
      only ids get_ticket can name and a cursor can page past, all of one width so that
      string order is numeric order (a tenant holds at most 10 ** digits tickets);
    - the key is "tenant:" followed by the ticket's own id (`key_parts`).
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
        return record_row(key, stored, id_format=id_format)
    except RecordsError as error:
        raise RecordsError(f"record {position} (in file order): {error}") from None
