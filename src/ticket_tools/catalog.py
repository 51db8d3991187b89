"""The registered tools, in the order the model sees them. A new tool is one line here."""

from __future__ import annotations

from ticket_tools.arguments import object_schema
from ticket_tools.registry import ToolRegistry
from ticket_tools.tickets import ID_FORMAT, IdFormat
from ticket_tools.tools import get_ticket, search_tickets


def make_registry(id_format: IdFormat = ID_FORMAT) -> ToolRegistry:
    """Build the registry of every tool, declared for ticket IDs of `id_format`."""
    return ToolRegistry(
        [
            get_ticket.make_tool(id_format),
            search_tickets.make_tool(id_format),
        ]
    )


REGISTRY = make_registry()
"""The brief's tools, for TKT- and three digits: what `execute_tool` runs."""


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
