"""What a ticket is, as the tools show it to the model, and the ticket ID format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict

from ticket_tools.arguments import Arg

Status = Literal["open", "closed"]
STATUSES: tuple[Status, ...] = ("open", "closed")

# TKT- and exactly three ASCII digits: [0-9], never \d (which matches any Unicode digit).
# Unanchored: the check uses re.fullmatch, the schema adds ^...$.
ID_PATTERN = "TKT-[0-9]{3}"
ID_LENGTH = 7
ID_RULE = "a ticket ID: TKT- followed by exactly three digits, such as TKT-104"


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
    # The length bound as well as the pattern: a schema's "^...$" lets "TKT-104\n"
    # through Python's re (its $ matches before a final newline); the length does not.
    return Arg(
        name=name,
        type="string",
        description=description,
        required=required,
        min_length=ID_LENGTH,
        max_length=ID_LENGTH,
        pattern=ID_PATTERN,
        pattern_rule=ID_RULE,
    )
