"""Ticket IDs of a deployment's width (src/ticket_tools/stores/ids.py): TKT- and 3 to 18 digits."""

from __future__ import annotations

from typing import cast

import pytest

from ticket_tools.stores.ids import ID_FORMAT, MAX_ID_DIGITS, MIN_ID_DIGITS, IdFormat
from ticket_tools.tickets import ID_LENGTH, ID_PATTERN, ID_RULE


@pytest.mark.parametrize(
    ("digits", "pattern", "length", "example", "rule"),
    [
        pytest.param(
            3,
            "TKT-[0-9]{3}",
            7,
            "TKT-104",
            "a ticket ID: TKT- followed by exactly three digits, such as TKT-104",
            id="three-the-brief",
        ),
        pytest.param(
            6,
            "TKT-[0-9]{6}",
            10,
            "TKT-000104",
            "a ticket ID: TKT- followed by exactly six digits, such as TKT-000104",
            id="six",
        ),
        pytest.param(
            18,
            "TKT-[0-9]{18}",
            22,
            "TKT-000000000000000104",
            "a ticket ID: TKT- followed by exactly eighteen digits, such as TKT-000000000000000104",
            id="eighteen-the-widest",
        ),
    ],
)
def test_an_id_format_says_its_width_everywhere(
    digits: int, pattern: str, length: int, example: str, rule: str
) -> None:
    id_format = IdFormat(digits)
    assert (id_format.pattern, id_format.length, id_format.example, id_format.rule) == (
        pattern,
        length,
        example,
        rule,
    )


def test_the_default_id_format_is_the_briefs() -> None:
    assert (
        IdFormat(3),
        "TKT-[0-9]{3}",
        7,
        "a ticket ID: TKT- followed by exactly three digits, such as TKT-104",
    ) == (ID_FORMAT, ID_FORMAT.pattern, ID_FORMAT.length, ID_FORMAT.rule)


def test_every_allowed_width_has_its_word() -> None:
    words = [IdFormat(digits).shape for digits in range(MIN_ID_DIGITS, MAX_ID_DIGITS + 1)]
    assert words == [
        f"TKT- followed by exactly {word} digits"
        for word in [
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
        ]
    ]


@pytest.mark.parametrize(
    "digits",
    [
        pytest.param(2, id="below-three"),
        pytest.param(19, id="above-eighteen"),
        pytest.param(0, id="zero"),
        pytest.param(True, id="bool"),
        pytest.param(6.0, id="float"),
        pytest.param("6", id="str"),
    ],
)
def test_a_width_outside_three_to_eighteen_raises(digits: object) -> None:
    with pytest.raises(ValueError, match=r"^id digits: an integer from 3 to 18\Z"):
        IdFormat(cast(int, digits))


@pytest.mark.parametrize(
    ("digits", "text", "matches"),
    [
        pytest.param(3, "TKT-104", True, id="three-match"),
        pytest.param(3, "TKT-000104", False, id="three-wider"),
        pytest.param(6, "TKT-000104", True, id="six-match"),
        pytest.param(6, "TKT-104", False, id="six-narrower"),
        pytest.param(6, "TKT-0001040", False, id="six-seven-digits"),
        pytest.param(6, "TKT-000104\n", False, id="six-trailing-newline"),
        pytest.param(6, "TKT-\u0660\u0660\u0660\u0661\u0660\u0664", False, id="six-arabic-digits"),
        pytest.param(6, "tkt-000104", False, id="six-lowercase"),
    ],
)
def test_an_id_format_matches_its_width_only(digits: int, text: str, matches: bool) -> None:
    assert IdFormat(digits).matches(text) is matches


def test_the_briefs_width_is_the_one_the_root_spells_out() -> None:
    # ticket_tools.tickets declares TKT-ddd as constants; IdFormat(3) must say the same.
    assert (ID_FORMAT.pattern, ID_FORMAT.length, ID_FORMAT.rule) == (ID_PATTERN, ID_LENGTH, ID_RULE)
