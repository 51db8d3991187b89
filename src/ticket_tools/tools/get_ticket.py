"""get_ticket: read one ticket by ID (the starting adapter's contract, unchanged)."""

from __future__ import annotations

from typing import cast

from ticket_tools.arguments import Arguments
from ticket_tools.outcome import Outcome, failure, success
from ticket_tools.registry import Tool
from ticket_tools.store import TicketStore
from ticket_tools.tickets import ticket_id_arg


def _get_ticket(args: Arguments, tenant: str, store: TicketStore) -> Outcome:
    ticket = store.get(tenant, cast(str, args["ticket_id"]))
    if ticket is None:
        return failure("not_found", "no ticket with that ID is visible in this session")
    return success(ticket=ticket)


TOOL = Tool(
    name="get_ticket",
    description=(
        "Read one support ticket by its ID, such as TKT-104. Use it when the user names a "
        "ticket. Returns the ticket's id, title and status. Only tickets of the signed-in "
        "agent's organisation are visible: the organisation comes from the session and is "
        "never an argument. Fails with not_found when no such ticket is visible."
    ),
    arguments=(
        ticket_id_arg(
            "ticket_id",
            "The ticket's ID: TKT- followed by exactly three digits, such as TKT-104.",
            required=True,
        ),
    ),
    handler=_get_ticket,
)
