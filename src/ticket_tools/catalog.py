"""The registered tools, in the order the model sees them. A new tool is one line here."""

from __future__ import annotations

from ticket_tools import get_ticket, search_tickets
from ticket_tools.registry import ToolRegistry

REGISTRY = ToolRegistry(
    [
        get_ticket.TOOL,
        search_tickets.TOOL,
    ]
)
