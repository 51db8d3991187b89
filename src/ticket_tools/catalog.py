"""The registered tools, in the order the model sees them. A new tool is one line here."""

from __future__ import annotations

from ticket_tools.arguments import object_schema
from ticket_tools.registry import ToolRegistry
from ticket_tools.tools import get_ticket, search_tickets

REGISTRY = ToolRegistry(
    [
        get_ticket.TOOL,
        search_tickets.TOOL,
    ]
)
"""The brief's tools: what `execute_tool` runs."""


def tool_declarations(registry: ToolRegistry = REGISTRY) -> list[dict[str, object]]:
    """Return {"name", "description", "parameters"} for each tool, in registry order."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "parameters": object_schema(tool.arguments),
        }
        for tool in registry
    ]
