"""search_tickets: list the caller's tickets one page at a time (keyset paging on the id)."""

from __future__ import annotations

from typing import cast

from ticket_tools.arguments import Arg, Arguments
from ticket_tools.filters import QUERY_ARG, STATUS_ARG, filter_from
from ticket_tools.outcome import Outcome, success
from ticket_tools.registry import Tool
from ticket_tools.store import TicketStore
from ticket_tools.tickets import ticket_id_arg

DEFAULT_LIMIT = 5
# Small pages keep each tool result short in the model's context window.
MAX_LIMIT = 10


def _search_tickets(args: Arguments, tenant: str, store: TicketStore) -> Outcome:
    """Return one page of `tenant`'s matching tickets and the cursor of the next page.

    The store is asked for one ticket more than the limit: its presence is what
    says more tickets remain. With alpha's seven fixture tickets and {"limit": 2,
    "cursor": "TKT-108"}, the store returns TKT-110, TKT-112, TKT-115; the page is
    TKT-110, TKT-112 and next_cursor is "TKT-112". Called again with that cursor,
    the store returns TKT-115 alone: the page is TKT-115 and next_cursor is None.
    """
    limit = cast(int, args["limit"])
    where = filter_from(args, after=cast("str | None", args.get("cursor")))
    found = store.find(tenant, where, limit=limit + 1)
    tickets = found[:limit]
    next_cursor = tickets[-1]["id"] if len(found) > limit else None
    return success(tickets=tickets, next_cursor=next_cursor)


TOOL = Tool(
    name="search_tickets",
    description=(
        "List the support tickets of the signed-in agent's organisation, lowest ID first, "
        "one page at a time, optionally filtered by status and by text in the title. Use it "
        'for questions such as "which of my open tickets mention login?". Returns tickets '
        "(id, title, status) and next_cursor. When next_cursor is not null, more tickets "
        "match: call again with the same filters and cursor set to that next_cursor. "
        "When it is null, this is the last page. An empty list means nothing matches. The "
        "organisation comes from the session and is never an argument."
    ),
    arguments=(
        STATUS_ARG,
        QUERY_ARG,
        Arg(
            name="limit",
            type="integer",
            description=f"How many tickets to return at most. Defaults to {DEFAULT_LIMIT}.",
            default=DEFAULT_LIMIT,
            minimum=1,
            maximum=MAX_LIMIT,
        ),
        ticket_id_arg(
            "cursor",
            "Omit for the first page. For the next page, pass the next_cursor returned by "
            "the previous page. Returns tickets with an ID greater than this one.",
        ),
    ),
    handler=_search_tickets,
)
