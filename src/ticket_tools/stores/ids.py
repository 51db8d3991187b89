"""Ticket IDs of a deployment's width: TKT- and 3 to 18 digits (`--id-digits N`).

The brief's IDs are TKT- and three digits (`ticket_tools.tickets`); a source system that
numbers its tickets past 999 needs wider ones. Every ID of one deployment has the same
width, so string order stays numeric order and an ID stays usable as a cursor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ID_PREFIX = "TKT-"
# The brief's format, TKT-ddd. Narrower IDs would hold fewer than the brief's
# examples and fixtures need, so three is also the least width allowed.
DEFAULT_ID_DIGITS = 3
MIN_ID_DIGITS = 3
# 18 digits number every value a source system's bigint sequence takes below 10**18
# (a bigint stops at 9.2 * 10**18): no help-desk needs a wider number.
MAX_ID_DIGITS = 18

_DIGIT_WORDS = (
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
)


@dataclass(frozen=True)
class IdFormat:
    """The shape of every ticket ID of one deployment: TKT- and a fixed number of ASCII digits.

    IdFormat(3) is the brief's TKT-ddd; IdFormat(6) reads "TKT-000104".
    """

    digits: int = DEFAULT_ID_DIGITS
    """How many digits follow TKT-, from MIN_ID_DIGITS to MAX_ID_DIGITS."""
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # `type(...) is int`: True is an int in Python, and no width.
        if type(self.digits) is not int or not MIN_ID_DIGITS <= self.digits <= MAX_ID_DIGITS:
            raise ValueError(f"id digits: an integer from {MIN_ID_DIGITS} to {MAX_ID_DIGITS}")
        # Compiled once: an import checks every record's id against it.
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    @property
    def pattern(self) -> str:
        """The regular expression of an ID, unanchored: "TKT-[0-9]{3}"."""
        return f"{ID_PREFIX}[0-9]{{{self.digits}}}"

    @property
    def length(self) -> int:
        """The length of every ID, in characters: 7 for TKT-ddd."""
        return len(ID_PREFIX) + self.digits

    @property
    def example(self) -> str:
        """The example ID the model reads: TKT-104, or TKT-000104 with six digits."""
        return ID_PREFIX + "104".zfill(self.digits)

    @property
    def shape(self) -> str:
        """Say what an ID is: "TKT- followed by exactly three digits"."""
        return f"{ID_PREFIX} followed by exactly {_DIGIT_WORDS[self.digits - MIN_ID_DIGITS]} digits"

    @property
    def rule(self) -> str:
        """The rule a model reads when an ID argument is wrong."""
        return f"a ticket ID: {self.shape}, such as {self.example}"

    def matches(self, text: str) -> bool:
        """Return whether `text` is exactly an ID of this format."""
        # fullmatch and [0-9]: no trailing newline, no Unicode digits.
        return self._regex.fullmatch(text) is not None


ID_FORMAT = IdFormat()
"""The brief's format, TKT- and three digits: `ticket_tools.tickets` spells the same one out."""
