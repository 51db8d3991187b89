"""Tool arguments, declared once as data.

Both the runtime check (`parse_arguments`) and the JSON Schema the model reads
(`object_schema`) are derived from the same `Arg` records, so each rule is written once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ArgType = Literal["string", "integer"]
ArgValue = str | int
Arguments = Mapping[str, ArgValue]
"""Parsed arguments: every present value checked, defaults filled in."""


@dataclass(frozen=True)
class Arg:
    """One argument of a tool: its JSON type, its bounds and what the model reads about it."""

    name: str
    """The key in the model's arguments object."""
    type: ArgType
    """The JSON type. "integer" accepts an integral JSON number (5 or 5.0), never a boolean."""
    description: str
    """What the model reads about this argument."""
    required: bool = False
    default: ArgValue | None = None
    """The value used when the argument is absent (null is never a value)."""
    enum: tuple[str, ...] = ()
    """For strings: the only values allowed, when not empty."""
    min_length: int | None = None
    """For strings: the fewest code points allowed."""
    max_length: int | None = None
    """For strings: the most code points allowed."""
    pattern: str | None = None
    """For strings: a regular expression the whole value must match, without anchors."""
    pattern_rule: str = ""
    """How the pattern reads to a model; required with a pattern."""
    minimum: int | None = None
    """For integers: the smallest value allowed."""
    maximum: int | None = None
    """For integers: the largest value allowed."""

    @property
    def rule(self) -> str:
        """Describe, for the model, what a valid value is (never what it was given)."""
        # Each integer and each free-text argument of these tools has both its bounds.
        if self.type == "integer":
            return f"an integer from {self.minimum} to {self.maximum}"
        if self.enum:
            return "one of " + ", ".join(f'"{value}"' for value in self.enum)
        if self.pattern is not None:
            return self.pattern_rule
        return f"a string of {self.min_length} to {self.max_length} characters"

    def parse(self, value: object) -> ArgValue | None:
        """Return the checked value, or None when it breaks this argument's rule."""
        if self.type == "integer":
            return self._parse_integer(value)
        return self._parse_string(value)

    def _parse_integer(self, value: object) -> int | None:
        # JSON has one number type: 5.0 is the integer 5, as JSON Schema says.
        # NaN and the infinities are not integral, so they fall through.
        if type(value) is float and value.is_integer():
            value = int(value)
        # `type(...) is int`, not isinstance: a bool is an int in Python.
        if type(value) is not int:
            return None
        if self.minimum is not None and value < self.minimum:
            return None
        if self.maximum is not None and value > self.maximum:
            return None
        return value

    def _parse_string(self, value: object) -> str | None:
        if type(value) is not str:
            return None
        # Membership in a tuple of strings: safe for any value, never hashes it.
        if self.enum and value not in self.enum:
            return None
        if self.min_length is not None and len(value) < self.min_length:
            return None
        if self.max_length is not None and len(value) > self.max_length:
            return None
        # fullmatch, and patterns spell digits [0-9]: `\d` matches any Unicode digit.
        if self.pattern is not None and re.fullmatch(self.pattern, value) is None:
            return None
        return value

    def json_schema(self) -> dict[str, object]:
        """Return this argument's JSON Schema (Draft 2020-12) property."""
        schema: dict[str, object] = {"type": self.type, "description": self.description}
        keywords: tuple[tuple[str, object], ...] = (
            ("enum", list(self.enum) or None),
            ("minLength", self.min_length),
            ("maxLength", self.max_length),
            ("pattern", None if self.pattern is None else f"^{self.pattern}$"),
            ("minimum", self.minimum),
            ("maximum", self.maximum),
            ("default", self.default),
        )
        schema.update((keyword, value) for keyword, value in keywords if value is not None)
        return schema


@dataclass(frozen=True)
class ArgError:
    """Which argument broke which rule; safe to show a model because it never holds the value."""

    argument: str | None
    """The argument's name, or None when the arguments object as a whole is wrong."""
    rule: str

    @property
    def detail(self) -> str:
        """Phrase the error as one sentence, e.g. "limit: an integer from 1 to 10"."""
        return self.rule if self.argument is None else f"{self.argument}: {self.rule}"


def parse_arguments(spec: tuple[Arg, ...], args: object) -> dict[str, ArgValue] | ArgError:
    """Check untrusted `args` against `spec`; return the parsed values or the first error.

    Accepted: exactly what a JSON object parses to, a plain `dict` whose keys are
    all plain `str`. A dict subclass, a non-str key or a str-subclass key can
    redefine iteration, lookup or equality (a key equal to every name, an
    `__eq__` that raises), so each is "not a JSON object", and no method of theirs
    is ever called.
    """
    if type(args) is not dict or not all(type(key) is str for key in args):
        return ArgError(None, "the arguments must be a JSON object")
    names = tuple(arg.name for arg in spec)
    # The offending key is not named: it is untrusted text chosen by the caller.
    if any(key not in names for key in args):
        allowed = ", ".join(names)
        return ArgError(None, f"the only arguments accepted are: {allowed}")
    parsed: dict[str, ArgValue] = {}
    for arg in spec:
        if arg.name not in args:
            if arg.required:
                return ArgError(arg.name, f"required, {arg.rule}")
            if arg.default is not None:
                parsed[arg.name] = arg.default
            continue
        value = arg.parse(args[arg.name])
        if value is None:
            return ArgError(arg.name, arg.rule)
        parsed[arg.name] = value
    return parsed


def object_schema(spec: tuple[Arg, ...]) -> dict[str, object]:
    """Return the JSON Schema (Draft 2020-12) of an arguments object following `spec`."""
    return {
        "type": "object",
        "properties": {arg.name: arg.json_schema() for arg in spec},
        "required": [arg.name for arg in spec if arg.required],
        "additionalProperties": False,
    }
