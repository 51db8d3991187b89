"""The tool declarations in each model API's format, and MCP's annotations (the serving side)."""

from ticket_tools.declarations.annotations import READ_ONLY, Annotations, mcp_annotations
from ticket_tools.declarations.exports import (
    FORMATS,
    ExportFormat,
    declaration_schema,
    export_declarations,
)

__all__ = [
    "FORMATS",
    "READ_ONLY",
    "Annotations",
    "ExportFormat",
    "declaration_schema",
    "export_declarations",
    "mcp_annotations",
]
