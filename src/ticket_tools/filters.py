"""Which tickets a tool asks a store for: one filter value, its matching rule, its arguments.

Every store answers a `TicketFilter`, and every tool that filters builds one with
`filter_from` from the shared `STATUS_ARG` and `QUERY_ARG` declarations, so the
rule and its arguments are each written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from ticket_tools.arguments import Arg, Arguments
from ticket_tools.tickets import STATUSES

# Long enough for a phrase, short enough that a query cannot smuggle a document.
MAX_QUERY_LENGTH = 40


def title_contains(title: str, text: str) -> bool:
    """Return whether `title`, lowercased, contains `text`, lowercased (the contract's rule).

    Python's `str.lower()` and a literal substring test: no wildcards, no trimming.
    A store that filters elsewhere (a database) must give exactly these answers.
    """
    return text.lower() in title.lower()


@dataclass(frozen=True)
class TicketFilter:
    """Which of a tenant's tickets to read; None means no filter on that field."""

    status: str | None = None
    """Keep tickets with exactly this status."""
    text: str | None = None
    """Keep tickets whose title contains this text, ignoring case (`title_contains`)."""
    after: str | None = None
    """Keep tickets whose id is greater than this one: the keyset position of a page."""

    def matches(self, ticket: Mapping[str, object]) -> bool:
        """Return whether a stored ticket passes every filter that is set."""
        return (
            (self.status is None or ticket["status"] == self.status)
            and (self.text is None or title_contains(str(ticket["title"]), self.text))
            and (self.after is None or str(ticket["id"]) > self.after)
        )


STATUS_ARG = Arg(
    name="status",
    type="string",
    description="Only tickets with this status. Omit to include both.",
    enum=STATUSES,
)

QUERY_ARG = Arg(
    name="query",
    type="string",
    description=(
        "Only tickets whose title contains this text, ignoring case (the title "
        "alone is searched; the text is used as given, spaces included). Omit "
        "for no text filter."
    ),
    min_length=1,
    max_length=MAX_QUERY_LENGTH,
)


def filter_from(args: Arguments, *, after: str | None = None) -> TicketFilter:
    """Build the filter of a tool whose arguments include STATUS_ARG and QUERY_ARG."""
    return TicketFilter(
        status=cast("str | None", args.get(STATUS_ARG.name)),
        text=cast("str | None", args.get(QUERY_ARG.name)),
        after=after,
    )
