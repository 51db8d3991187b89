"""The pattern portability check: what Python's `re` and ECMAScript read alike, over every tool."""

from __future__ import annotations

import pytest

from ticket_tools.declarations.portability import unportable_pattern
from ticket_tools.declarations.widths import make_registry
from ticket_tools.stores.ids import MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat

UNPORTABLE = "which Python and ECMAScript read differently"
WIDTHS = range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        pytest.param("TKT-\\d{3}", f"pattern uses \\d, {UNPORTABLE}", id="d"),
        pytest.param("[\\d]", f"pattern uses \\d, {UNPORTABLE}", id="d-in-class"),
        pytest.param("\\w+", f"pattern uses \\w, {UNPORTABLE}", id="w"),
        pytest.param("a\\sb", f"pattern uses \\s, {UNPORTABLE}", id="s"),
        pytest.param("a\\b", f"pattern uses \\b, {UNPORTABLE}", id="b"),
        pytest.param("\\Aa", f"pattern uses \\A, {UNPORTABLE}", id="A"),
        pytest.param("a\\Z", f"pattern uses \\Z, {UNPORTABLE}", id="Z"),
        pytest.param(
            "^[a-z]{2}",
            "pattern has an anchor: the schema adds ^...$ itself",
            id="anchor-caret",
        ),
        pytest.param(
            "[a-z]{2}$",
            "pattern has an anchor: the schema adds ^...$ itself",
            id="anchor-dollar",
        ),
        pytest.param(
            "[]a]",
            f"pattern starts a class with ], {UNPORTABLE}",
            id="class-starts-with-bracket",
        ),
        pytest.param(
            "[^]a]",
            f"pattern starts a class with ], {UNPORTABLE}",
            id="negated-class-starts-with-bracket",
        ),
        pytest.param(
            "a[]b]",
            f"pattern starts a class with ], {UNPORTABLE}",
            id="later-class-starts-with-bracket",
        ),
        pytest.param(
            "(?i)abc",
            "pattern uses a (?...) group other than (?:...), (?=...) or (?!...)",
            id="inline-flag",
        ),
        pytest.param(
            "(?P<code>ab)",
            "pattern uses a (?...) group other than (?:...), (?=...) or (?!...)",
            id="python-named-group",
        ),
        pytest.param(
            "(?<=a)b",
            "pattern uses a (?...) group other than (?:...), (?=...) or (?!...)",
            id="lookbehind",
        ),
        pytest.param(
            "a(?P<code>b)",
            "pattern uses a (?...) group other than (?:...), (?=...) or (?!...)",
            id="later-python-named-group",
        ),
        pytest.param(
            "open|closed",
            "pattern has a top-level |: wrap it in (?:...) so ^...$ binds the whole",
            id="top-level-alternation",
        ),
        pytest.param(
            "(a)|b",
            "pattern has a top-level |: wrap it in (?:...) so ^...$ binds the whole",
            id="alternation-after-a-group",
        ),
        pytest.param(
            "((a))|b",
            "pattern has a top-level |: wrap it in (?:...) so ^...$ binds the whole",
            id="alternation-after-nested-groups",
        ),
    ],
)
def test_an_unportable_pattern_is_named(pattern: str, problem: str) -> None:
    assert unportable_pattern(pattern) == problem


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("TKT-[0-9]{3}", id="ticket"),
        pytest.param("[^a-z]{2}", id="negated-class"),
        pytest.param("[$^|(]x", id="specials-in-a-class"),
        pytest.param("\\$[0-9]\\^\\|", id="escaped-specials"),
        pytest.param("(?:open|closed)", id="alternation-in-a-group"),
        pytest.param("a(b|c)d", id="alternation-in-a-capture"),
        pytest.param("(a(b)|c)", id="alternation-after-a-nested-group"),
        pytest.param("a\\.d", id="an-escape-covers-one-character"),
        pytest.param("X[0-9]", id="a-letter-is-not-an-anchor"),
        pytest.param("a(?=b)b(?!c)", id="lookahead"),
        pytest.param("[\\]a]", id="escaped-bracket-in-class"),
    ],
)
def test_a_portable_pattern_passes(pattern: str) -> None:
    assert unportable_pattern(pattern) is None


@pytest.mark.parametrize("digits", WIDTHS)
def test_every_registered_pattern_is_portable_at_every_width(digits: int) -> None:
    registry = make_registry(IdFormat(digits))
    patterns = {
        (tool.name, arg.name): unportable_pattern(arg.pattern)
        for tool in registry
        for arg in tool.arguments
        if arg.pattern is not None
    }
    assert patterns
    assert set(patterns.values()) == {None}
