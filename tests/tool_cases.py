"""Arguments for any registered tool, derived from its declaration: what "each tool" tests send.

A test about every tool takes the names from `expected.TOOL_NAMES` (the golden file) or the
registry, and the arguments from here, so a new tool is covered without a line of its own.
"""

from __future__ import annotations

from ticket_tools.arguments import ArgError, ArgValue, parse_arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.registry import Tool
from ticket_tools.stores.ids import ID_FORMAT, IdFormat


def id_arguments(tool: Tool, id_format: IdFormat = ID_FORMAT) -> tuple[str, ...]:
    """Name `tool`'s arguments that hold a ticket ID of `id_format`, in declaration order."""
    return tuple(arg.name for arg in tool.arguments if arg.pattern == id_format.pattern)


def valid_arguments(tool: Tool, id_format: IdFormat = ID_FORMAT) -> dict[str, ArgValue]:
    """Return the fewest arguments `tool` accepts: each required one, with a valid value.

    For get_ticket: {"ticket_id": "TKT-104"}. A tool with no required argument: {}.
    """
    args: dict[str, ArgValue] = {}
    for arg in tool.arguments:
        if not arg.required:
            continue
        if arg.pattern == id_format.pattern:
            args[arg.name] = id_format.example
        elif arg.enum:
            args[arg.name] = arg.enum[0]
        elif arg.type == "integer":
            args[arg.name] = 1 if arg.minimum is None else arg.minimum
        else:
            args[arg.name] = "x" * (arg.min_length or 1)
    if isinstance(parse_arguments(tool.arguments, args), ArgError):
        raise ValueError(f"tool {tool.name!r}: no valid arguments derived; add its case here")
    return args


def invalid_arguments(tool: Tool, id_format: IdFormat = ID_FORMAT) -> dict[str, object]:
    """Return arguments every tool refuses: its valid ones plus a "tenant" it never declares."""
    return {**valid_arguments(tool, id_format), "tenant": "beta"}


ID_ARGUMENTS: dict[str, tuple[str, ...]] = {tool.name: id_arguments(tool) for tool in REGISTRY}
"""Each registered tool's ID arguments: {"get_ticket": ("ticket_id",), ...}."""
