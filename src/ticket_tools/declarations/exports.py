"""The tool declarations in each model API's own format, all from one source.

Every format wraps the same `object_schema(tool.arguments)`; the only change a
format makes to that schema is removing the keywords its API documents as
rejected (docs/declarations.md, "Sources read for these decisions", cites them). The brief's
own format, `ticket_tools.tool_declarations()`, is the "json-schema" one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, cast, get_args

from ticket_tools.arguments import object_schema
from ticket_tools.catalog import REGISTRY, tool_declarations
from ticket_tools.declarations.annotations import READ_ONLY, mcp_annotations
from ticket_tools.registry import Tool, ToolRegistry

ExportFormat = Literal["json-schema", "openai", "openai-chat", "anthropic", "gemini", "mcp"]
FORMATS: tuple[ExportFormat, ...] = get_args(ExportFormat)

SCHEMA_PATHS: Mapping[ExportFormat, tuple[str, ...]] = {
    "json-schema": ("parameters",),
    "openai": ("parameters",),
    "openai-chat": ("function", "parameters"),
    "anthropic": ("input_schema",),
    "gemini": ("parametersJsonSchema",),
    "mcp": ("inputSchema",),
}
"""Where the arguments' JSON Schema sits inside one declaration of each format."""

# Strict mode would make every property required and each optional one
# nullable, drop minLength/maxLength (outside OpenAI's strict subset), and so
# declare null as a value our contract rejects. Non-strict keeps the one schema
# every other format gets; the parser stays the only judge. OpenAI's Responses
# API turns strict on when the field is omitted, so it is always sent.
OPENAI_STRICT = False

# Gemini answers 400 for `$schema` in a function declaration's schema, and
# gemini-cli strips it from parametersJsonSchema for that reason. object_schema
# never emits it today; removing it here keeps that true if it ever does.
GEMINI_REJECTED_KEYWORDS: tuple[str, ...] = ("$schema",)


def _json_schema(tool: Tool) -> dict[str, object]:
    (declaration,) = tool_declarations(ToolRegistry([tool]))
    return declaration


def _openai(tool: Tool) -> dict[str, object]:
    """Responses API: a flat function tool."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": object_schema(tool.arguments),
        "strict": OPENAI_STRICT,
    }


def _openai_chat(tool: Tool) -> dict[str, object]:
    """Chat Completions: the function nested under "function"."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": object_schema(tool.arguments),
            "strict": OPENAI_STRICT,
        },
    }


def _anthropic(tool: Tool) -> dict[str, object]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": object_schema(tool.arguments),
    }


def _gemini(tool: Tool) -> dict[str, object]:
    """One FunctionDeclaration; the host puts the list under tools[].functionDeclarations."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": without_keywords(
            object_schema(tool.arguments), GEMINI_REJECTED_KEYWORDS
        ),
    }


def _mcp(tool: Tool) -> dict[str, object]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": object_schema(tool.arguments),
        "annotations": mcp_annotations(READ_ONLY),
    }


_EXPORTERS: Mapping[ExportFormat, Callable[[Tool], dict[str, object]]] = {
    "json-schema": _json_schema,
    "openai": _openai,
    "openai-chat": _openai_chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "mcp": _mcp,
}


def export_declarations(
    fmt: ExportFormat = "json-schema", registry: ToolRegistry = REGISTRY
) -> list[dict[str, object]]:
    """Return every registered tool's declaration in format `fmt`, in registry order."""
    exporter = _EXPORTERS[fmt]
    return [exporter(tool) for tool in registry]


def declaration_schema(fmt: ExportFormat, declaration: Mapping[str, object]) -> dict[str, object]:
    """Return the arguments' JSON Schema inside one declaration exported in format `fmt`."""
    node: object = declaration
    for key in SCHEMA_PATHS[fmt]:
        node = cast(Mapping[str, object], node)[key]
    return cast(dict[str, object], node)


def without_keywords(schema: Mapping[str, object], rejected: tuple[str, ...]) -> dict[str, object]:
    """Copy `schema` without the `rejected` keywords, in it and in each property's schema.

    Property names are data, not keywords: a property called "$schema" is kept.
    """
    kept = {keyword: value for keyword, value in schema.items() if keyword not in rejected}
    properties = kept.get("properties")
    if isinstance(properties, Mapping):
        kept["properties"] = {
            name: without_keywords(cast(Mapping[str, object], subschema), rejected)
            for name, subschema in properties.items()
        }
    return kept
