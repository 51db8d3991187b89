"""The tool declarations in each model API's own format, all from one source."""

from __future__ import annotations

from typing import Literal, get_args

from ticket_tools.arguments import object_schema
from ticket_tools.catalog import REGISTRY
from ticket_tools.registry import Tool, ToolRegistry

ExportFormat = Literal["json-schema", "mcp"]
FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)

# Every tool here only reads, gives the same answer twice, and touches nothing
# outside the ticket store: the hints an MCP host uses to skip confirmations.
_MCP_ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


def _json_schema(tool: Tool) -> dict[str, object]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": object_schema(tool.arguments),
    }


def _mcp(tool: Tool) -> dict[str, object]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": object_schema(tool.arguments),
        "annotations": dict(_MCP_ANNOTATIONS),
    }


_EXPORTERS = {"json-schema": _json_schema, "mcp": _mcp}


def export_declarations(
    fmt: ExportFormat = "json-schema", registry: ToolRegistry = REGISTRY
) -> list[dict[str, object]]:
    """Return every registered tool's declaration in format `fmt`, in registry order."""
    exporter = _EXPORTERS[fmt]
    return [exporter(tool) for tool in registry]
