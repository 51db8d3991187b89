"""Each model API's export: pinned by a golden file, valid for its SDK's type, JSON Schema inside.

Regenerate the golden files after a deliberate change with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_exports.py`: that run rewrites
them and fails, so a drift never passes unnoticed; read the diff, then rerun.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from anthropic.types import ToolParam as AnthropicToolParam
from google.genai import types as genai_types
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import BaseModel, TypeAdapter, ValidationError

from ticket_tools import Tool, ToolRegistry, tool_declarations
from ticket_tools.arguments import Arg, object_schema
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli import main
from ticket_tools.declarations import Annotations
from ticket_tools.declarations.exports import (
    FORMATS,
    GEMINI_REJECTED_KEYWORDS,
    ExportFormat,
    declaration_schema,
    export_declarations,
    without_keywords,
)
from ticket_tools.outcome import success

GOLDEN = Path(__file__).parent / "golden"


def rendered(fmt: ExportFormat) -> str:
    """The export as `ticket-tools declarations --format fmt` prints it."""
    return json.dumps(export_declarations(fmt), indent=2, ensure_ascii=False) + "\n"


def test_formats_are_the_six_model_apis() -> None:
    assert FORMATS == ("json-schema", "openai", "openai-chat", "anthropic", "gemini", "mcp")


def test_default_format_is_json_schema() -> None:
    assert export_declarations() == export_declarations("json-schema")


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_matches_its_golden_file(fmt: ExportFormat) -> None:
    path = GOLDEN / f"{fmt}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(rendered(fmt), encoding="utf-8")
        pytest.fail(f"rewrote {path.name}: read the diff, then rerun without UPDATE_GOLDEN")
    assert rendered(fmt) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("fmt", FORMATS)
def test_schema_part_is_valid_draft_2020_12(fmt: ExportFormat) -> None:
    for declaration in export_declarations(fmt):
        Draft202012Validator.check_schema(declaration_schema(fmt, declaration))


@pytest.mark.parametrize("fmt", FORMATS)
def test_schema_part_is_the_one_derived_from_the_arguments(fmt: ExportFormat) -> None:
    schemas = [declaration_schema(fmt, d) for d in export_declarations(fmt)]
    assert schemas == [object_schema(tool.arguments) for tool in REGISTRY]


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        pytest.param(
            "json-schema",
            {"name": "t", "description": "d", "parameters": "S"},
            id="json-schema",
        ),
        pytest.param(
            "openai",
            {
                "type": "function",
                "name": "t",
                "description": "d",
                "parameters": "S",
                "strict": False,
            },
            id="openai-responses",
        ),
        pytest.param(
            "openai-chat",
            {
                "type": "function",
                "function": {"name": "t", "description": "d", "parameters": "S", "strict": False},
            },
            id="openai-chat-completions",
        ),
        pytest.param(
            "anthropic",
            {"name": "t", "description": "d", "input_schema": "S"},
            id="anthropic",
        ),
        pytest.param(
            "gemini",
            {"name": "t", "description": "d", "parametersJsonSchema": "S"},
            id="gemini",
        ),
        pytest.param(
            "mcp",
            {
                "name": "t",
                "description": "d",
                "inputSchema": "S",
                # Every tool reads through a TicketStore, which cannot write.
                "annotations": {
                    "readOnlyHint": True,
                    "destructiveHint": False,
                    "idempotentHint": True,
                    "openWorldHint": False,
                },
            },
            id="mcp",
        ),
    ],
)
def test_shape_of_each_format(fmt: ExportFormat, expected: dict[str, object]) -> None:
    arguments = (Arg(name="n", type="integer", description="a number", minimum=0),)
    registry = ToolRegistry([Tool("t", "d", arguments, lambda args, tenant, store: success())])
    (declaration,) = export_declarations(fmt, registry)
    schema = json.dumps(object_schema(arguments))
    assert declaration == json.loads(json.dumps(expected).replace('"S"', schema))


def test_every_mcp_declaration_says_read_only() -> None:
    hints = {
        declaration["name"]: declaration["annotations"]
        for declaration in export_declarations("mcp")
    }
    read_only = {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert hints == {tool.name: read_only for tool in REGISTRY}


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        pytest.param(
            {"read_only": 1, "destructive": False, "idempotent": True, "open_world": False},
            "read_only must be True or False",
            id="read-only-int",
        ),
        pytest.param(
            {"read_only": True, "destructive": False, "idempotent": True, "open_world": None},
            "open_world must be True or False",
            id="open-world-none",
        ),
        pytest.param(
            {"read_only": True, "destructive": True, "idempotent": True, "open_world": False},
            "a read-only tool is idempotent and not destructive",
            id="read-only-destructive",
        ),
        pytest.param(
            {"read_only": True, "destructive": False, "idempotent": False, "open_world": False},
            "a read-only tool is idempotent and not destructive",
            id="read-only-not-idempotent",
        ),
    ],
)
def test_incoherent_annotations_raise(kwargs: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=f"^annotations: {problem}$"):
        Annotations(**kwargs)  # type: ignore[arg-type]


def test_no_gemini_schema_holds_a_rejected_keyword() -> None:
    for declaration in export_declarations("gemini"):
        schema = declaration_schema("gemini", declaration)
        nodes = [schema, *schema["properties"].values()]  # type: ignore[attr-defined]
        assert [key for node in nodes for key in node if key in GEMINI_REJECTED_KEYWORDS] == []


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        pytest.param(
            {"$schema": "x", "type": "object"},
            {"type": "object"},
            id="top-level",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": {"type": "string", "$schema": "x"}}},
            {"type": "object", "properties": {"a": {"type": "string"}}},
            id="in-a-property",
        ),
        pytest.param(
            {"type": "object", "properties": {"$schema": {"type": "string"}}},
            {"type": "object", "properties": {"$schema": {"type": "string"}}},
            id="property-named-like-the-keyword-kept",
        ),
    ],
)
def test_without_keywords(schema: dict[str, object], expected: dict[str, object]) -> None:
    before = json.dumps(schema)
    assert without_keywords(schema, ("$schema",)) == expected
    assert json.dumps(schema) == before


# The strictest of the providers' documented name rules: OpenAI and Anthropic
# allow [a-zA-Z0-9_-], Gemini wants a letter or "_" first and at most 63 or 64.
PORTABLE_TOOL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,62}")


def test_every_tool_name_is_valid_for_every_provider() -> None:
    names = [tool.name for tool in REGISTRY]
    assert [name for name in names if PORTABLE_TOOL_NAME.fullmatch(name) is None] == []


# --- `ticket-tools declarations --format F` -----------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_prints_each_format(fmt: ExportFormat, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["declarations", "--format", fmt]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (rendered(fmt), "")


def test_cli_default_is_json_schema_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["declarations"]) == 0
    out, _ = capsys.readouterr()
    assert out == json.dumps(tool_declarations(), indent=2, ensure_ascii=False) + "\n"
    assert out == rendered("json-schema")


def test_cli_rejects_an_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["declarations", "--format", "cohere"])
    assert exit_info.value.code == 2
    _, err = capsys.readouterr()
    assert "argument --format: invalid choice: 'cohere'" in err


# --- Each export against the provider SDK's own type ----------------------------
#
# What rejects a wrong shape, checked on this machine: pydantic enforces a TypedDict's
# Required keys and, with strict=True, exact value types (a "false" string is not a bool),
# but drops keys the TypedDict does not declare, and TypeAdapter takes no config to forbid
# them. So each export must also come back from validation unchanged: a key the provider's
# type does not know is dropped there, and the comparison fails. google-genai's
# FunctionDeclaration forbids unknown keys itself; mcp's Tool ignores them, and by_name=False
# makes it read the wire's camelCase names only (else `input_schema` would pass as
# `inputSchema`). None of these types checks the schema inside (its "type" or keywords):
# the JSON Schema tests above do.


def _typed_dict(kind: type[object]) -> Callable[[object], object]:
    adapter = TypeAdapter(kind)
    return lambda declaration: adapter.validate_python(declaration, strict=True)


def _model(kind: type[BaseModel]) -> Callable[[object], object]:
    def validate(declaration: object) -> object:
        model = kind.model_validate(declaration, strict=True, by_alias=True, by_name=False)
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")

    return validate


PROVIDER_TYPES: dict[ExportFormat, Callable[[object], object]] = {
    "openai": _typed_dict(FunctionToolParam),
    "openai-chat": _typed_dict(ChatCompletionFunctionToolParam),
    "anthropic": _typed_dict(AnthropicToolParam),
    "gemini": _model(genai_types.FunctionDeclaration),
    "mcp": _model(mcp_types.Tool),
}
"""Each model API's format, validated by its SDK's type, as the SDK would read it back."""


def test_every_format_but_plain_json_schema_has_a_provider_type() -> None:
    assert sorted(PROVIDER_TYPES) == sorted(set(FORMATS) - {"json-schema"})


@pytest.mark.parametrize("source", ["golden", "export_declarations"])
@pytest.mark.parametrize("fmt", sorted(PROVIDER_TYPES))
def test_export_is_valid_for_the_providers_own_type(fmt: ExportFormat, source: str) -> None:
    if source == "golden":
        declarations = json.loads((GOLDEN / f"{fmt}.json").read_text(encoding="utf-8"))
    else:
        declarations = export_declarations(fmt)
    assert [PROVIDER_TYPES[fmt](d) for d in declarations] == declarations


def _broken(fmt: ExportFormat, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    """The first export of `fmt`, deep-copied, then changed by `change`."""
    declaration: dict[str, Any] = json.loads(json.dumps(export_declarations(fmt)[0]))
    change(declaration)
    return declaration


@pytest.mark.parametrize(
    ("fmt", "declaration", "error"),
    [
        pytest.param(
            "openai",
            _broken("openai", lambda d: d.pop("strict")),
            ("strict", "missing"),
            id="openai-without-strict",
        ),
        pytest.param(
            "openai",
            _broken("openai", lambda d: d.update(strict="false")),
            ("strict", "bool_type"),
            id="openai-strict-a-string",
        ),
        pytest.param(
            "openai-chat",
            export_declarations("openai")[0],
            ("function", "missing"),
            id="openai-chat-given-the-responses-shape",
        ),
        pytest.param(
            "anthropic",
            export_declarations("json-schema")[0],
            ("input_schema", "missing"),
            id="anthropic-given-parameters",
        ),
        pytest.param(
            "gemini",
            export_declarations("anthropic")[0],
            ("input_schema", "extra_forbidden"),
            id="gemini-given-input_schema",
        ),
        pytest.param(
            "mcp",
            export_declarations("anthropic")[0],
            ("inputSchema", "missing"),
            id="mcp-given-snake-case",
        ),
        pytest.param(
            "mcp",
            _broken("mcp", lambda d: d["annotations"].update(readOnlyHint="true")),
            ("annotations.readOnlyHint", "bool_type"),
            id="mcp-hint-a-string",
        ),
    ],
)
def test_provider_type_rejects_a_wrong_shape(
    fmt: ExportFormat, declaration: dict[str, Any], error: tuple[str, str]
) -> None:
    with pytest.raises(ValidationError) as raised:
        PROVIDER_TYPES[fmt](declaration)
    assert [
        (".".join(str(part) for part in e["loc"]), e["type"]) for e in raised.value.errors()
    ] == [error]


@pytest.mark.parametrize(
    ("fmt", "declaration"),
    [
        pytest.param(
            "openai", _broken("openai", lambda d: d.update(strct=False)), id="openai-misspelt"
        ),
        pytest.param(
            "openai-chat",
            _broken("openai-chat", lambda d: d["function"].update(input_schema={})),
            id="openai-chat-nested-unknown-key",
        ),
        pytest.param(
            "anthropic",
            _broken("anthropic", lambda d: d.update(parameters={})),
            id="anthropic-unknown-key",
        ),
        pytest.param(
            "mcp", _broken("mcp", lambda d: d.update(input_schema={})), id="mcp-unknown-key"
        ),
    ],
)
def test_an_unknown_key_the_type_drops_fails_the_round_trip(
    fmt: ExportFormat, declaration: dict[str, Any]
) -> None:
    validated = PROVIDER_TYPES[fmt](declaration)
    assert validated != declaration
    assert validated == PROVIDER_TYPES[fmt](export_declarations(fmt)[0])
