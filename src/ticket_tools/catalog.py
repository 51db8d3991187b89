"""The registered tools, in the order the model sees them. A new tool is one line here."""

from __future__ import annotations

from ticket_tools.registry import ToolRegistry
from ticket_tools.tools import get_ticket, search_tickets

REGISTRY = ToolRegistry(
    [
        get_ticket.TOOL,
        search_tickets.TOOL,
    ]
)
