"""Records whose ticket IDs are wider than the brief's three digits (`--id-digits N`)."""

from __future__ import annotations

from collections.abc import Mapping

from ticket_tools import fixture_records
from ticket_tools.stores.ids import IdFormat

SIX = IdFormat(6)


def widened(
    id_format: IdFormat, records: Mapping[str, Mapping[str, object]] | None = None
) -> dict[str, dict[str, object]]:
    """Return the fixture records (or `records`) with every TKT-ddd id zero-padded to the width.

    "alpha:TKT-104" becomes "alpha:TKT-000104" with six digits; every other field is kept.
    """
    source = fixture_records() if records is None else records
    wide: dict[str, dict[str, object]] = {}
    for key, ticket in source.items():
        tenant, _, ticket_id = key.rpartition(":")
        wide_id = wide_id_of(id_format, ticket_id)
        wide[f"{tenant}:{wide_id}"] = {**ticket, "id": wide_id}
    return wide


def wide_id_of(id_format: IdFormat, ticket_id: str) -> str:
    """Return "TKT-104" padded to `id_format`'s width: "TKT-000104" with six digits."""
    return "TKT-" + ticket_id.removeprefix("TKT-").zfill(id_format.digits)


def numbered_records(
    id_format: IdFormat, count: int, tenant: str = "alpha"
) -> dict[str, dict[str, object]]:
    """Return `count` tickets of `tenant`, ids 0 to count-1 at the width, titles "Ticket n".

    Even numbers are open, odd ones closed; each carries an internal field that is never shown.
    """
    records: dict[str, dict[str, object]] = {}
    for number in range(count):
        ticket_id = f"TKT-{number:0{id_format.digits}d}"
        records[f"{tenant}:{ticket_id}"] = {
            "id": ticket_id,
            "title": f"Ticket {number}",
            "status": "closed" if number % 2 else "open",
            "internal_note": "never shown",
        }
    return records
