"""What a ticket is, as the tools show it to the model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

from ticket_tools.arguments import Arg

Status = Literal["open", "closed"]
STATUSES: tuple[Status, ...] = ("open", "closed")

# "TKT-" and exactly three ASCII digits. Every ID has the same width, so string
# order is numeric order: the property that makes an ID usable as a cursor.
TICKET_ID_PATTERN = "TKT-[0-9]{3}"
TICKET_ID_LENGTH = 7
TICKET_ID_RULE = "a ticket ID: TKT- followed by exactly three digits, such as TKT-104"


class Ticket(TypedDict):
    """The only fields that ever leave the store."""

    id: str
    title: str
    status: str


def public_view(stored: Mapping[str, object]) -> Ticket:
    """Copy the three public fields of a stored ticket into a fresh dict."""
    return {
        "id": str(stored["id"]),
        "title": str(stored["title"]),
        "status": str(stored["status"]),
    }


def ticket_id_arg(name: str, description: str, *, required: bool = False) -> Arg:
    """Declare an argument holding a ticket ID (get_ticket's ticket_id, the search cursor)."""
    return Arg(
        name=name,
        type="string",
        description=description,
        required=required,
        min_length=TICKET_ID_LENGTH,
        max_length=TICKET_ID_LENGTH,
        pattern=TICKET_ID_PATTERN,
        pattern_rule=TICKET_ID_RULE,
    )
