"""The tool declarations the model receives, derived from the registry."""

from __future__ import annotations

from ticket_tools.catalog import REGISTRY
from ticket_tools.exports import export_declarations
from ticket_tools.registry import ToolRegistry


def tool_declarations(registry: ToolRegistry = REGISTRY) -> list[dict[str, object]]:
    """Return {"name", "description", "parameters"} for each tool, in registry order."""
    return export_declarations("json-schema", registry)
