"""Differential conformance: each exported schema accepts exactly what the parser accepts.

The JSON Schema each tool's declaration carries (in every export format) is run
through `jsonschema`'s Draft 2020-12 validator beside `parse_arguments`, on
thousands of generated argument objects weighted toward the edges of each rule.
There is no deliberate disagreement: any disagreement fails the test.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from jsonschema import Draft202012Validator

from argument_edges import argument_objects
from ticket_tools import ArgError, Tool
from ticket_tools.arguments import parse_arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.declarations.exports import FORMATS, declaration_schema, export_declarations

# The floor: at least this many generated argument objects per tool.
MIN_EXAMPLES = 5_000
# Each side must see plenty of both answers, or agreement proves little.
MIN_EACH_ANSWER = 500

TOOLS = {tool.name: tool for tool in REGISTRY}


def exported_schemas(tool: Tool) -> list[dict[str, object]]:
    """Return each distinct JSON Schema the six exports declare for `tool`."""
    distinct: dict[str, dict[str, object]] = {}
    for fmt in FORMATS:
        for registered, declaration in zip(REGISTRY, export_declarations(fmt), strict=True):
            if registered.name == tool.name:
                schema = declaration_schema(fmt, declaration)
                distinct[json.dumps(schema, sort_keys=True)] = schema
    return list(distinct.values())


def parser_accepts(tool: Tool, args: object) -> bool:
    return not isinstance(parse_arguments(tool.arguments, args), ArgError)


@pytest.mark.parametrize("tool", list(REGISTRY), ids=lambda tool: tool.name)
def test_jsonschema_accepts_exactly_what_the_parser_accepts(
    tool: Tool, capsys: pytest.CaptureFixture[str]
) -> None:
    validators = [Draft202012Validator(schema) for schema in exported_schemas(tool)]
    tally: Counter[str] = Counter()

    @settings(max_examples=max(MIN_EXAMPLES, settings().max_examples), deadline=None)
    @given(argument_objects(tool.arguments))
    def check(args: object) -> None:
        expected = parser_accepts(tool, args)
        for validator in validators:
            assert validator.is_valid(args) == expected, (
                f"jsonschema {'rejects' if expected else 'accepts'} what the parser "
                f"{'accepts' if expected else 'rejects'}: {args!r}"
            )
        tally["accepted" if expected else "rejected"] += 1

    check()
    with capsys.disabled():
        print(
            f"\nconformance {tool.name}: {tally.total()} generated argument objects "
            f"({tally['accepted']} accepted, {tally['rejected']} rejected) against "
            f"{len(validators)} distinct exported schema(s), 0 disagreements"
        )
    assert tally.total() >= MIN_EXAMPLES
    assert tally["accepted"] >= MIN_EACH_ANSWER
    assert tally["rejected"] >= MIN_EACH_ANSWER


@pytest.mark.parametrize(
    ("tool_name", "args", "accepted"),
    [
        pytest.param("get_ticket", {"ticket_id": "TKT-104"}, True, id="ticket-id"),
        pytest.param("get_ticket", {"ticket_id": "TKT-104\n"}, False, id="ticket-id-newline"),
        pytest.param("get_ticket", {"ticket_id": "\nTKT-104"}, False, id="ticket-id-lead-newline"),
        pytest.param("get_ticket", {"ticket_id": "TKT-١٠٤"}, False, id="ticket-id-arabic-digits"),
        pytest.param("search_tickets", {"cursor": "TKT-104\n"}, False, id="cursor-newline"),
        pytest.param("search_tickets", {"limit": 5.0}, True, id="limit-integral-float"),
        pytest.param("search_tickets", {"limit": 1.5}, False, id="limit-fraction"),
        pytest.param("search_tickets", {"limit": True}, False, id="limit-bool"),
        pytest.param("search_tickets", {"query": "😀" * 40}, True, id="query-40-emoji"),
        pytest.param("search_tickets", {"query": "😀" * 41}, False, id="query-41-emoji"),
        pytest.param("search_tickets", {"limit": float("nan")}, False, id="limit-nan"),
        pytest.param("search_tickets", {"limit": "5"}, False, id="limit-numeric-string"),
        pytest.param("search_tickets", {"status": None}, False, id="status-null"),
        pytest.param("search_tickets", {"tenant": "alpha"}, False, id="tenant-key"),
    ],
)
def test_named_edges_agree(tool_name: str, args: object, accepted: bool) -> None:
    tool = TOOLS[tool_name]
    assert parser_accepts(tool, args) is accepted
    for schema in exported_schemas(tool):
        assert Draft202012Validator(schema).is_valid(args) is accepted


def test_pattern_alone_would_let_a_trailing_newline_through() -> None:
    # Why every pattern is paired with maxLength: jsonschema runs re.search and
    # Python's `$` matches before a final newline.
    (schema,) = exported_schemas(TOOLS["get_ticket"])
    pattern = schema["properties"]["ticket_id"]["pattern"]  # type: ignore[index]
    assert re.search(pattern, "TKT-104\n") is not None
    without_length = {"type": "string", "pattern": pattern}
    assert Draft202012Validator(without_length).is_valid("TKT-104\n") is True
