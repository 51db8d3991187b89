"""The brief's tools declared for a deployment's ID width (`--id-digits N`).

The root declares every ticket-ID argument for TKT- and three digits. A deployment with
wider IDs serves the same tools with each such argument widened: its length, pattern and
rule, and the example and shape its descriptions (and the tool's) give the model. Nothing
else changes: the handlers, the other arguments, the order of checks.
"""

from __future__ import annotations

from dataclasses import replace

from ticket_tools.arguments import Arg
from ticket_tools.catalog import REGISTRY
from ticket_tools.declarations.checks import check_registry
from ticket_tools.registry import Tool, ToolRegistry
from ticket_tools.stores.ids import ID_FORMAT, IdFormat
from ticket_tools.tickets import ID_PATTERN


def make_registry(id_format: IdFormat = ID_FORMAT) -> ToolRegistry:
    """Build the registry of every tool, declared for ticket IDs of `id_format`.

    With the brief's format, the tools are REGISTRY's, tool for tool. Every declaration
    is checked (`check_registry`), so one whose schema and check disagree never serves.
    """
    return check_registry(ToolRegistry(widened_tool(tool, id_format) for tool in REGISTRY))


def widened_tool(tool: Tool, id_format: IdFormat) -> Tool:
    """Return `tool` with every ticket-ID argument and mention declared for `id_format`."""
    return replace(
        tool,
        description=_widened_text(tool.description, id_format),
        arguments=tuple(_widened_arg(arg, id_format) for arg in tool.arguments),
    )


def _widened_arg(arg: Arg, id_format: IdFormat) -> Arg:
    if arg.pattern != ID_PATTERN:
        return arg
    return replace(
        arg,
        description=_widened_text(arg.description, id_format),
        min_length=id_format.length,
        max_length=id_format.length,
        pattern=id_format.pattern,
        pattern_rule=id_format.rule,
    )


def _widened_text(text: str, id_format: IdFormat) -> str:
    # The brief's texts name the format in exactly these two phrases ("TKT- followed by
    # exactly three digits", "TKT-104"); tests/test_catalog.py pins the six-digit result.
    return text.replace(ID_FORMAT.shape, id_format.shape).replace(
        ID_FORMAT.example, id_format.example
    )
