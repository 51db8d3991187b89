"""Arg, parse_arguments and object_schema: one declaration, both the check and the schema."""

from __future__ import annotations

import pytest

from ticket_tools import Arg, ArgError
from ticket_tools.arguments import ArgValue, object_schema, parse_arguments

LIMIT = Arg("limit", "integer", "How many.", default=5, minimum=1, maximum=10)
STATUS = Arg("status", "string", "Which status.", enum=("open", "closed"))
QUERY = Arg("query", "string", "Text.", min_length=1, max_length=40)
TICKET_ID = Arg(
    "ticket_id",
    "string",
    "An ID.",
    required=True,
    min_length=7,
    max_length=7,
    pattern="TKT-[0-9]{3}",
    pattern_rule="a ticket ID",
)
SPEC = (TICKET_ID, STATUS, QUERY, LIMIT)
# A pattern with room to spare under its length bound.
CODE = Arg("code", "string", "", max_length=5, pattern="[a-z]{2}", pattern_rule="two letters")


@pytest.mark.parametrize(
    ("arg", "rule"),
    [
        pytest.param(LIMIT, "an integer from 1 to 10", id="integer-both-bounds"),
        pytest.param(STATUS, 'one of "open", "closed"', id="enum"),
        pytest.param(TICKET_ID, "a ticket ID", id="pattern"),
        pytest.param(QUERY, "a string of 1 to 40 characters", id="string-both-bounds"),
    ],
)
def test_rule_phrase(arg: Arg, rule: str) -> None:
    assert arg.rule == rule


@pytest.mark.parametrize(
    ("arg", "value", "expected"),
    [
        pytest.param(LIMIT, 1, 1, id="int-min"),
        pytest.param(LIMIT, 10, 10, id="int-max"),
        pytest.param(LIMIT, 0, None, id="int-below"),
        pytest.param(LIMIT, 11, None, id="int-above"),
        pytest.param(LIMIT, 5.0, 5, id="int-integral-float"),
        pytest.param(LIMIT, -0.0, None, id="int-negative-zero"),
        pytest.param(LIMIT, 1.5, None, id="int-fraction"),
        pytest.param(LIMIT, float("nan"), None, id="int-nan"),
        pytest.param(LIMIT, float("inf"), None, id="int-inf"),
        pytest.param(LIMIT, True, None, id="int-bool"),
        pytest.param(LIMIT, "5", None, id="int-numeric-string"),
        pytest.param(Arg("n", "integer", ""), 10**100, 10**100, id="int-unbounded-huge"),
        pytest.param(Arg("n", "integer", ""), -7.0, -7, id="int-unbounded-float"),
        pytest.param(STATUS, "open", "open", id="enum-member"),
        pytest.param(STATUS, "OPEN", None, id="enum-case"),
        pytest.param(STATUS, ["open"], None, id="enum-list-is-not-hashed"),
        pytest.param(STATUS, {"open": 1}, None, id="enum-dict"),
        pytest.param(QUERY, "a", "a", id="str-min"),
        pytest.param(QUERY, "a" * 40, "a" * 40, id="str-max"),
        pytest.param(QUERY, "", None, id="str-below"),
        pytest.param(QUERY, "a" * 41, None, id="str-above"),
        pytest.param(QUERY, "😀" * 40, "😀" * 40, id="str-code-points"),
        pytest.param(QUERY, b"login", None, id="str-bytes"),
        pytest.param(TICKET_ID, "TKT-104", "TKT-104", id="pattern-match"),
        pytest.param(TICKET_ID, "TKT-1045", None, id="pattern-too-long"),
        pytest.param(TICKET_ID, "TKT-104\n", None, id="pattern-newline"),
        pytest.param(TICKET_ID, "TKT-\u0661\u0660\u0664", None, id="pattern-arabic-digits"),
        pytest.param(TICKET_ID, "XKT-104", None, id="pattern-mismatch-right-length"),
        # Room past the pattern: only a whole-value match (re.fullmatch) rejects the tail.
        pytest.param(CODE, "ab", "ab", id="pattern-shorter-than-bound"),
        pytest.param(CODE, "abc", None, id="pattern-prefix-is-not-a-match"),
        pytest.param(CODE, "ab\n", None, id="pattern-newline-within-bound"),
        pytest.param(Arg("s", "string", ""), "", "", id="str-unbounded-empty"),
    ],
)
def test_parse_one_value(arg: Arg, value: object, expected: ArgValue | None) -> None:
    parsed = arg.parse(value)
    assert parsed == expected
    assert type(parsed) is type(expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({"ticket_id": "TKT-001"}, {"ticket_id": "TKT-001", "limit": 5}, id="defaults"),
        pytest.param(
            {"ticket_id": "TKT-001", "status": "open", "query": "q", "limit": 2.0},
            {"ticket_id": "TKT-001", "status": "open", "query": "q", "limit": 2},
            id="all",
        ),
        pytest.param(None, ArgError(None, "the arguments must be a JSON object"), id="null"),
        pytest.param([], ArgError(None, "the arguments must be a JSON object"), id="list"),
        pytest.param(
            {"ticket_id": "TKT-001", "secret_key_name": 1},
            ArgError(None, "the only arguments accepted are: ticket_id, status, query, limit"),
            id="unknown-key",
        ),
        pytest.param({}, ArgError("ticket_id", "required, a ticket ID"), id="missing-required"),
        pytest.param(
            {"ticket_id": "TKT-001", "limit": 0},
            ArgError("limit", "an integer from 1 to 10"),
            id="bad-value",
        ),
        pytest.param(
            {"ticket_id": "nope", "limit": 0},
            ArgError("ticket_id", "a ticket ID"),
            id="first-error-in-spec-order",
        ),
    ],
)
def test_parse_arguments(args: object, expected: dict[str, ArgValue] | ArgError) -> None:
    assert parse_arguments(SPEC, args) == expected


def test_parse_arguments_never_modifies_args() -> None:
    args = {"ticket_id": "TKT-001", "limit": 3.0}
    parse_arguments(SPEC, args)
    assert args == {"ticket_id": "TKT-001", "limit": 3.0}
    assert type(args["limit"]) is float


@pytest.mark.parametrize(
    ("error", "detail"),
    [
        pytest.param(
            ArgError(None, "the arguments must be a JSON object"),
            "the arguments must be a JSON object",
            id="whole",
        ),
        pytest.param(
            ArgError("limit", "an integer from 1 to 10"),
            "limit: an integer from 1 to 10",
            id="one-argument",
        ),
    ],
)
def test_arg_error_detail(error: ArgError, detail: str) -> None:
    assert error.detail == detail


def test_unknown_key_detail_never_names_the_key() -> None:
    error = parse_arguments(SPEC, {"ticket_id": "TKT-001", "<script>": 1})
    assert isinstance(error, ArgError)
    assert "<script>" not in error.detail


def test_object_schema_derives_every_keyword() -> None:
    assert object_schema(SPEC) == {
        "type": "object",
        "properties": {
            "ticket_id": {
                "type": "string",
                "description": "An ID.",
                "minLength": 7,
                "maxLength": 7,
                "pattern": "^TKT-[0-9]{3}$",
            },
            "status": {
                "type": "string",
                "description": "Which status.",
                "enum": ["open", "closed"],
            },
            "query": {"type": "string", "description": "Text.", "minLength": 1, "maxLength": 40},
            "limit": {
                "type": "integer",
                "description": "How many.",
                "minimum": 1,
                "maximum": 10,
                "default": 5,
            },
        },
        "required": ["ticket_id"],
        "additionalProperties": False,
    }


def test_object_schema_of_no_arguments() -> None:
    assert object_schema(()) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
