"""The declaration checks (src/ticket_tools/declarations/checks.py): incoherent ones refused.

Every registry `make_registry` builds is checked; so is the brief's, at every ID width.
"""

from __future__ import annotations

import re

import pytest

from ticket_tools import Arg, Outcome, Tool
from ticket_tools.arguments import Arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.declarations.checks import check_arg, check_registry, check_tool
from ticket_tools.declarations.widths import make_registry
from ticket_tools.outcome import success
from ticket_tools.store import TicketStore
from ticket_tools.stores.ids import MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat


def _ran(args: Arguments, tenant: str, store: TicketStore) -> Outcome:
    return success(ran=True)


@pytest.mark.parametrize("digits", range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1))
def test_every_registered_declaration_is_coherent_at_every_width(digits: int) -> None:
    registry = make_registry(IdFormat(digits))
    assert check_registry(registry) is registry


def test_the_briefs_registry_is_coherent() -> None:
    assert check_registry(REGISTRY) is REGISTRY


def test_an_argument_declared_twice_raises() -> None:
    arguments = (Arg("n", "integer", ""), Arg("m", "integer", ""), Arg("n", "string", ""))
    with pytest.raises(ValueError, match=r"^tool 'probe': argument 'n' is declared twice$"):
        check_tool(Tool("probe", "A probe.", arguments, _ran))


def test_a_tool_with_an_incoherent_argument_raises() -> None:
    arguments = (
        Arg("n", "integer", "", minimum=1, maximum=2),
        Arg("word", "string", "", minimum=1),
    )
    with pytest.raises(ValueError, match=r"^word: minimum does not apply to a string$"):
        check_tool(Tool("probe", "A probe.", arguments, _ran))


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"pattern": "[a-z]+", "pattern_rule": "letters"}, id="no-max-length"),
        pytest.param({"pattern": "[a-z]+", "max_length": 5}, id="no-pattern-rule"),
    ],
)
def test_pattern_needs_max_length_and_rule(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"^word: a pattern needs max_length and pattern_rule$"):
        check_arg(Arg("word", "string", "", **kwargs))  # type: ignore[arg-type]


def patterned(pattern: str) -> dict[str, object]:
    """The keywords of a string argument with `pattern`, a length bound and a rule."""
    return {"pattern": pattern, "max_length": 20, "pattern_rule": "a code"}


LIMIT_BOUNDS: dict[str, object] = {"minimum": 1, "maximum": 10}
STATUS_ENUM: dict[str, object] = {"enum": ("open", "closed")}


@pytest.mark.parametrize(
    ("arg_type", "kwargs", "problem"),
    [
        # A type the declaration cannot describe.
        pytest.param("number", {}, 'type must be "string" or "integer"', id="type-number"),
        # A keyword of the other type: the schema would carry it, the check ignore it.
        pytest.param("integer", STATUS_ENUM, "enum does not apply to an integer", id="int-enum"),
        pytest.param(
            "integer",
            {"min_length": 1},
            "min_length does not apply to an integer",
            id="int-min-len",
        ),
        pytest.param(
            "integer",
            {"max_length": 3},
            "max_length does not apply to an integer",
            id="int-max-len",
        ),
        pytest.param(
            "integer",
            {"pattern": "[0-9]"},
            "pattern does not apply to an integer",
            id="int-pattern",
        ),
        pytest.param(
            "integer",
            {"pattern_rule": "digits"},
            "pattern_rule does not apply to an integer",
            id="int-pattern-rule",
        ),
        pytest.param("string", {"minimum": 1}, "minimum does not apply to a string", id="str-min"),
        pytest.param("string", {"maximum": 9}, "maximum does not apply to a string", id="str-max"),
        # A bound that is not a JSON integer, or that no value can meet.
        pytest.param("integer", {"minimum": True}, "minimum must be an integer", id="minimum-bool"),
        pytest.param("integer", {"maximum": 9.5}, "maximum must be an integer", id="maximum-float"),
        pytest.param(
            "string", {"min_length": 1.0}, "min_length must be an integer", id="min-length-float"
        ),
        pytest.param(
            "string", {"min_length": -1}, "min_length must not be negative", id="min-length-neg"
        ),
        pytest.param(
            "string", {"max_length": -1}, "max_length must not be negative", id="max-length-neg"
        ),
        pytest.param(
            "integer",
            {"minimum": 5, "maximum": 3},
            "minimum 5 is above maximum 3: no value would be valid",
            id="minimum-above-maximum",
        ),
        pytest.param(
            "string",
            {"min_length": 4, "max_length": 2},
            "min_length 4 is above max_length 2: no value would be valid",
            id="min-length-above-max-length",
        ),
        # An enum the check and the schema (or the rule a model reads) would read apart.
        pytest.param("string", {"enum": ["open"]}, "enum must be a tuple", id="enum-list"),
        pytest.param(
            "string", {"enum": ("open", 1)}, "enum values must be strings", id="enum-non-string"
        ),
        pytest.param(
            "string", {"enum": ("open", "open")}, "enum lists a value twice", id="enum-repeated"
        ),
        pytest.param(
            "string",
            {**STATUS_ENUM, "max_length": 4},
            "enum excludes min_length, max_length and pattern",
            id="enum-with-max-length",
        ),
        pytest.param(
            "string",
            {**STATUS_ENUM, "min_length": 5},
            "enum excludes min_length, max_length and pattern",
            id="enum-with-min-length",
        ),
        pytest.param(
            "string",
            {"enum": ("ab",), **patterned("[a-z]{2}")},
            "enum excludes min_length, max_length and pattern",
            id="enum-with-pattern",
        ),
        # A bound missing from a rule that names both ("an integer from 1 to 10").
        pytest.param("integer", {}, "an integer needs minimum and maximum", id="int-unbounded"),
        pytest.param(
            "integer", {"minimum": 1}, "an integer needs minimum and maximum", id="int-low-only"
        ),
        pytest.param(
            "string",
            {},
            "a string without enum or pattern needs min_length and max_length",
            id="str-unbounded",
        ),
        pytest.param(
            "string",
            {"max_length": 3},
            "a string without enum or pattern needs min_length and max_length",
            id="str-high-only",
        ),
        # A pattern that is not one.
        pytest.param(
            "string", {"pattern_rule": "a code"}, "pattern_rule needs a pattern", id="rule-alone"
        ),
        pytest.param(
            "string", patterned("[a-z"), "pattern is not a regular expression", id="not-a-regex"
        ),
        # A default that breaks its own rule, or that can never apply.
        pytest.param(
            "string",
            {**STATUS_ENUM, "required": True, "default": "open"},
            "a required argument takes no default",
            id="required-with-default",
        ),
        pytest.param(
            "integer",
            {**LIMIT_BOUNDS, "default": 11},
            "default 11 is not an integer from 1 to 10",
            id="default-above-maximum",
        ),
        pytest.param(
            "integer",
            {**LIMIT_BOUNDS, "default": 0},
            "default 0 is not an integer from 1 to 10",
            id="default-below-minimum",
        ),
        pytest.param(
            "integer",
            {**LIMIT_BOUNDS, "default": True},
            "default True is not an integer from 1 to 10",
            id="default-bool",
        ),
        pytest.param(
            "integer",
            {**LIMIT_BOUNDS, "default": 5.0},
            "default 5.0 is not an integer from 1 to 10",
            id="default-integral-float",
        ),
        pytest.param(
            "integer",
            {**LIMIT_BOUNDS, "default": "5"},
            "default '5' is not an integer from 1 to 10",
            id="default-string-for-integer",
        ),
        pytest.param(
            "string",
            {**STATUS_ENUM, "default": "pending"},
            'default \'pending\' is not one of "open", "closed"',
            id="default-not-in-enum",
        ),
        pytest.param(
            "string",
            {"min_length": 0, "max_length": 3, "default": "abcd"},
            "default 'abcd' is not a string of 0 to 3 characters",
            id="default-too-long",
        ),
        pytest.param(
            "string",
            {**patterned("[a-z]{2}"), "default": "a1"},
            "default 'a1' is not a code",
            id="default-breaks-pattern",
        ),
        pytest.param(
            "string",
            {"min_length": 1, "max_length": 3, "default": 5},
            "default 5 is not a string of 1 to 3 characters",
            id="default-int-for-string",
        ),
    ],
)
def test_an_incoherent_declaration_raises(
    arg_type: str, kwargs: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(f'word: {problem}')}$"):
        check_arg(Arg("word", arg_type, "", **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arg_type", "kwargs"),
    [
        pytest.param("integer", {**LIMIT_BOUNDS, "default": 1}, id="default-at-minimum"),
        pytest.param("integer", {"minimum": 3, "maximum": 3}, id="one-valid-integer"),
        pytest.param(
            "integer",
            {"minimum": -(10**100), "maximum": 0, "default": -(10**100)},
            id="huge-default",
        ),
        pytest.param("string", {**STATUS_ENUM, "default": "closed"}, id="enum-default"),
        pytest.param("string", {"min_length": 0, "max_length": 0}, id="only-the-empty-string"),
        pytest.param(
            "string", {"min_length": 0, "max_length": 3, "default": ""}, id="empty-default"
        ),
        pytest.param("string", {**patterned("TKT-[0-9]{3}"), "default": "TKT-001"}, id="ticket"),
    ],
)
def test_a_coherent_declaration_is_accepted(arg_type: str, kwargs: dict[str, object]) -> None:
    arg = Arg("word", arg_type, "", **kwargs)  # type: ignore[arg-type]
    check_arg(arg)
    assert (arg.name, arg.type) == ("word", arg_type)
    assert arg.default is None or arg.parse(arg.default) == arg.default
