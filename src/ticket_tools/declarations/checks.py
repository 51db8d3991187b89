"""Whether a tool's declaration is coherent: its schema and its check can never read it apart.

An `Arg` (ticket_tools.arguments) is the one source of both the runtime check and the JSON
Schema the model reads, but a record can still say something the two read differently: a
`minimum` on a string would reach the schema while the check ignores it, a default could
break its own rule. `check_registry` refuses each such declaration with a ValueError that
names it; `make_registry` (declarations/widths.py) runs it on every registry it builds.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import get_args

from ticket_tools.arguments import Arg, ArgType
from ticket_tools.registry import Tool, ToolRegistry

ARG_TYPES: tuple[ArgType, ...] = get_args(ArgType)


def check_registry(registry: ToolRegistry) -> ToolRegistry:
    """Return `registry` once every tool in it passes `check_tool`; raise ValueError if not."""
    for tool in registry:
        check_tool(tool)
    return registry


def check_tool(tool: Tool) -> None:
    """Raise ValueError unless each argument is declared once and passes `check_arg`."""
    names = [arg.name for arg in tool.arguments]
    # The schema would keep one property of a repeated name, the check both.
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"tool {tool.name!r}: argument {repeated[0]!r} is declared twice")
    for arg in tool.arguments:
        check_arg(arg)


def check_arg(arg: Arg) -> None:
    """Raise ValueError naming the argument and the first way its declaration is incoherent."""
    problem = declaration_problem(arg)
    if problem is not None:
        raise ValueError(f"{arg.name}: {problem}")


def declaration_problem(arg: Arg) -> str | None:
    """Name the first way this declaration is incoherent, or return None."""
    if arg.type not in ARG_TYPES:
        return 'type must be "string" or "integer"'
    inapplicable = _STRING_KEYWORDS if arg.type == "integer" else _INTEGER_KEYWORDS
    for keyword in inapplicable:
        if getattr(arg, keyword) != _UNSET[keyword]:
            return f"{keyword} does not apply to {_A_TYPE[arg.type]}"
    if arg.type == "integer":
        problem = _bounds_problem("minimum", arg.minimum, "maximum", arg.maximum)
    else:
        problem = (
            _bounds_problem("min_length", arg.min_length, "max_length", arg.max_length)
            or _enum_problem(arg)
            or _pattern_problem(arg)
        )
    return problem or _unbounded_problem(arg) or _default_problem(arg)


# The keywords each type reads. One set on the other type would reach the schema
# while the check ignores it.
_STRING_KEYWORDS = ("enum", "min_length", "max_length", "pattern", "pattern_rule")
_INTEGER_KEYWORDS = ("minimum", "maximum")
_UNSET = {field.name: field.default for field in fields(Arg)}
_A_TYPE: dict[str, str] = {"string": "a string", "integer": "an integer"}


def _bounds_problem(low_name: str, low: int | None, high_name: str, high: int | None) -> str | None:
    for name, bound in ((low_name, low), (high_name, high)):
        # A bool is an int in Python, but `true` is no bound in a JSON Schema.
        if bound is not None and type(bound) is not int:
            return f"{name} must be an integer"
        if bound is not None and name.endswith("_length") and bound < 0:
            return f"{name} must not be negative"
    if low is not None and high is not None and low > high:
        return f"{low_name} {low} is above {high_name} {high}: no value would be valid"
    return None


def _unbounded_problem(arg: Arg) -> str | None:
    # `Arg.rule` names both bounds of an integer or of a free-text string, so a model
    # reads the whole rule; one without them would read "from None to ...".
    if arg.type == "integer" and (arg.minimum is None or arg.maximum is None):
        return "an integer needs minimum and maximum"
    free_text = arg.type == "string" and not arg.enum and arg.pattern is None
    if free_text and (arg.min_length is None or arg.max_length is None):
        return "a string without enum or pattern needs min_length and max_length"
    return None


def _enum_problem(arg: Arg) -> str | None:
    # A tuple keeps the declaration hashable and immutable; a list would be neither.
    if type(arg.enum) is not tuple:
        return "enum must be a tuple"
    if not arg.enum:
        return None
    if any(type(value) is not str for value in arg.enum):
        return "enum values must be strings"
    if len(set(arg.enum)) != len(arg.enum):
        return "enum lists a value twice"
    # The rule a model reads names the values only: a bound that rejects one of
    # them would go unsaid.
    if arg.min_length is not None or arg.max_length is not None or arg.pattern is not None:
        return "enum excludes min_length, max_length and pattern"
    return None


def _pattern_problem(arg: Arg) -> str | None:
    if arg.pattern is None:
        return "pattern_rule needs a pattern" if arg.pattern_rule else None
    # A schema pattern is anchored with ^...$, and in Python's `re` (which
    # jsonschema uses) `$` also matches before a trailing newline. A length
    # bound is what keeps "TKT-104\n" out under every validator.
    if arg.max_length is None or not arg.pattern_rule:
        return "a pattern needs max_length and pattern_rule"
    try:
        re.compile(arg.pattern)
    except re.error:
        return "pattern is not a regular expression"
    return None


def _default_problem(arg: Arg) -> str | None:
    if arg.default is None:
        return None
    if arg.required:
        return "a required argument takes no default"
    parsed = arg.parse(arg.default)
    # The type too: 5.0 parses as 5, and the schema would carry 5.0.
    if parsed is None or type(parsed) is not type(arg.default):
        return f"default {arg.default!r} is not {arg.rule}"
    return None
