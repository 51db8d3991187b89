"""Whether a declared pattern reads the same to Python's `re` and to an ECMAScript validator.

The argument check runs Python's `re`; the schema a model's host validates with is read by
ECMAScript's. Only the exported schema makes the two meet, so the check lives here, and
`tests/test_portability.py` runs it over every registered tool at every ID width.
"""

from __future__ import annotations

# Escapes Python's `re` reads over all of Unicode (\d matches Arabic-Indic digits)
# and ECMAScript over ASCII, or not at all (\A, \Z): schema and check would disagree.
_UNPORTABLE_ESCAPES = "dDwWsSbBAZ"
# The only (?...) groups both dialects read alike; inline flags, (?P<...>) and
# lookbehind are refused rather than judged per engine.
_PORTABLE_GROUPS = ("(?:", "(?=", "(?!")


def unportable_pattern(pattern: str) -> str | None:
    """Name a construct that Python's `re` and an ECMAScript validator read differently.

    Not a full parser: it refuses the known traps of a pattern that compiles.
    "TKT-[0-9]{3}" passes; "TKT-\\d{3}" is refused (`\\d` matches Arabic-Indic
    digits in Python only), and so is "open|closed" (the schema's "^open|closed$" means "starts
    with open or ends with closed", the check means one or the other whole).
    """
    depth = 0
    in_class = False
    escaped = False
    for index, char in enumerate(pattern):
        if escaped:
            escaped = False
            if char in _UNPORTABLE_ESCAPES:
                return f"pattern uses \\{char}, which Python and ECMAScript read differently"
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            # Python reads a leading "]" as a literal; ECMAScript reads "[]" as empty.
            if pattern.startswith(("[]", "[^]"), index):
                return "pattern starts a class with ], which Python and ECMAScript read differently"
            in_class = True
        elif char in "^$":
            return "pattern has an anchor: the schema adds ^...$ itself"
        elif char == "(":
            if pattern.startswith("(?", index) and not pattern.startswith(_PORTABLE_GROUPS, index):
                return "pattern uses a (?...) group other than (?:...), (?=...) or (?!...)"
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return "pattern has a top-level |: wrap it in (?:...) so ^...$ binds the whole"
    return None
