"""get_ticket unchanged: the starting adapter's six checks, in order, on its own two fixtures.

The records are the brief's first two rows (alpha's and beta's TKT-104) and nothing else.
Each check has its failing values, each pair of checks an input that breaks both (the
earlier one answers), and success returns a fresh {id, title, status} of the caller's own.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from brief_calls import Records, call
from brief_table import ALPHA, ALPHA_NO_READ, BETA, BETA_T104, STARTING_ROWS, T104, fail

INVALID = fail("invalid_arguments")
GAMMA = {"tenant": "gamma", "can_read_tickets": True}


def starting_records() -> Records:
    return {key: dict(ticket) for key, ticket in STARTING_ROWS}


def get(args: object, context: Mapping[str, object] = ALPHA, name: object = "get_ticket") -> object:
    return call(name, args, context, starting_records())


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        pytest.param(ALPHA, T104, id="alpha-sees-its-own-104"),
        pytest.param(BETA, BETA_T104, id="beta-sees-its-own-104"),
    ],
)
def test_success_is_the_callers_own_ticket(
    context: Mapping[str, object], expected: dict[str, str]
) -> None:
    assert get({"ticket_id": "TKT-104"}, context) == {"ok": True, "ticket": expected}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("Get_Ticket", id="case"),
        pytest.param("get_ticket ", id="trailing-space"),
        pytest.param(" get_ticket", id="leading-space"),
        pytest.param("get_tickets", id="plural"),
        pytest.param("get-ticket", id="dash"),
        pytest.param("", id="empty"),
        pytest.param(None, id="null"),
        pytest.param(["get_ticket"], id="list"),
    ],
)
def test_1_unknown_tool(name: object) -> None:
    assert get({"ticket_id": "TKT-104"}, name=name) == fail("unknown_tool")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(None, id="null"),
        pytest.param([], id="empty-array"),
        pytest.param(["TKT-104"], id="array"),
        pytest.param("TKT-104", id="string"),
        pytest.param(104, id="integer"),
        pytest.param(1.5, id="float"),
        pytest.param(True, id="boolean"),
    ],
)
def test_2_args_not_a_plain_object(args: object) -> None:
    assert get(args) == INVALID


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({}, id="no-ticket_id"),
        pytest.param({"id": "TKT-104"}, id="other-key-only"),
        pytest.param({"Ticket_Id": "TKT-104"}, id="key-case"),
        pytest.param({"ticket_id": "TKT-104", "tenant": "alpha"}, id="tenant-matching-trusted"),
        pytest.param({"ticket_id": "TKT-104", "tenant": "beta"}, id="tenant-other"),
        pytest.param({"ticket_id": "TKT-104", "limit": 5}, id="extra-key"),
    ],
)
def test_3_a_key_other_than_ticket_id_or_none(args: object) -> None:
    assert get(args) == INVALID


# The ticket ID format on both sides of each edge: TKT- and exactly three digits 0-9.
VALID_IDS_NOT_STORED = ["TKT-000", "TKT-999", "TKT-103", "TKT-105"]
INVALID_IDS = [
    pytest.param("TKT-10", id="two-digits"),
    pytest.param("TKT-1040", id="four-digits"),
    pytest.param("TKT-", id="no-digits"),
    pytest.param("", id="empty"),
    pytest.param("tkt-104", id="lowercase-prefix"),
    pytest.param("Tkt-104", id="mixed-case-prefix"),
    pytest.param("TKT104", id="no-dash"),
    pytest.param("TKT_104", id="underscore"),
    pytest.param("TKT-10a", id="letter"),
    pytest.param("TKT-1O4", id="letter-o-for-zero"),
    pytest.param("TKT--10", id="sign"),
    pytest.param(" TKT-104", id="leading-space"),
    pytest.param("TKT-104 ", id="trailing-space"),
    pytest.param("TKT-104\n", id="trailing-newline"),
    pytest.param("TKT-١٠٤", id="arabic-indic-digits"),
    pytest.param("TKT-\uff11\uff10\uff14", id="fullwidth-digits"),
    pytest.param("alpha:TKT-104", id="store-key"),
    pytest.param("104", id="number-only"),
]
NON_STRINGS = [
    pytest.param(None, id="null"),
    pytest.param(104, id="integer"),
    pytest.param(["TKT-104"], id="list"),
    pytest.param({"id": "TKT-104"}, id="object"),
    pytest.param(True, id="boolean"),
]


@pytest.mark.parametrize("ticket_id", INVALID_IDS + NON_STRINGS)
def test_4_ticket_id_not_in_the_format(ticket_id: object) -> None:
    assert get({"ticket_id": ticket_id}) == INVALID


@pytest.mark.parametrize("ticket_id", VALID_IDS_NOT_STORED)
def test_4_valid_ids_pass_the_format_check(ticket_id: str) -> None:
    # Well-formed, so the checks go on: with no such record, the answer is not_found.
    assert get({"ticket_id": ticket_id}) == fail("not_found")


def test_5_forbidden_without_read_permission() -> None:
    assert get({"ticket_id": "TKT-104"}, ALPHA_NO_READ) == fail("forbidden")


@pytest.mark.parametrize(
    ("ticket_id", "context"),
    [
        pytest.param("TKT-105", ALPHA, id="no-such-id"),
        pytest.param("TKT-104", GAMMA, id="tenant-without-tickets"),
    ],
)
def test_6_not_found(ticket_id: str, context: Mapping[str, object]) -> None:
    assert get({"ticket_id": ticket_id}, context) == fail("not_found")


@pytest.mark.parametrize(
    ("name", "args", "context", "expected"),
    [
        # Check 1 answers before every later one.
        pytest.param("list_tickets", None, ALPHA, "unknown_tool", id="1-before-2"),
        pytest.param("list_tickets", {"tenant": "a"}, ALPHA, "unknown_tool", id="1-before-3"),
        pytest.param("list_tickets", {"ticket_id": "x"}, ALPHA, "unknown_tool", id="1-before-4"),
        pytest.param(
            "list_tickets", {"ticket_id": "TKT-104"}, ALPHA_NO_READ, "unknown_tool", id="1-before-5"
        ),
        pytest.param(
            "list_tickets", {"ticket_id": "TKT-105"}, ALPHA, "unknown_tool", id="1-before-6"
        ),
        # Checks 2-4 (the arguments) answer before permission and lookup.
        pytest.param("get_ticket", None, ALPHA_NO_READ, "invalid_arguments", id="2-before-5"),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-105", "x": 1},
            ALPHA,
            "invalid_arguments",
            id="3-before-6",
        ),
        pytest.param(
            "get_ticket", {"tenant": "alpha"}, ALPHA_NO_READ, "invalid_arguments", id="3-before-5"
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-10"},
            ALPHA_NO_READ,
            "invalid_arguments",
            id="4-before-5",
        ),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-1050"}, ALPHA, "invalid_arguments", id="4-before-6"
        ),
        # Check 5 answers before the lookup: no permission tells nothing about existence.
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-105"}, ALPHA_NO_READ, "forbidden", id="5-before-6"
        ),
    ],
)
def test_checks_run_in_order(
    name: str, args: object, context: Mapping[str, object], expected: str
) -> None:
    assert get(args, context, name) == fail(expected)


def test_the_result_is_exactly_three_fields_even_when_more_are_stored() -> None:
    records = starting_records()
    records["alpha:TKT-104"]["internal_note"] = "Escalated by the on-call engineer"
    assert call("get_ticket", {"ticket_id": "TKT-104"}, ALPHA, records) == {
        "ok": True,
        "ticket": T104,
    }
