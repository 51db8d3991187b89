"""The inputs REVIEW.md uses against the sample submission, pinned on this project's tools.

The sample decodes its cursor as base64 JSON and takes the tenant from it. Here the cursor is
only a ticket ID, so such a token is invalid_arguments, whoever calls and whatever it names;
and the ID is a keyset position, so a change before it cannot shift the next page.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from conftest import StoreFactory
from expected import ALPHA, ALPHA_NO_READ, INVALID, T101, T102, T104, T107
from ticket_tools import execute_tool, fixture_records

# base64 of {"tenant":"beta","after":""} (REVIEW.md, comment 1): alpha reads beta's tickets.
FORGED_BETA = "eyJ0ZW5hbnQiOiJiZXRhIiwiYWZ0ZXIiOiIifQ=="
# base64 of {"tenant":"alpha","after":"TKT-110"}: the sample's own next_cursor for A2.
SAMPLE_ALPHA_NEXT = "eyJ0ZW5hbnQiOiJhbHBoYSIsImFmdGVyIjoiVEtULTExMCJ9"


@pytest.mark.parametrize(
    ("context", "args"),
    [
        pytest.param(ALPHA, {"cursor": FORGED_BETA}, id="forged-beta-token"),
        pytest.param(ALPHA, {"cursor": FORGED_BETA, "limit": 1}, id="forged-beta-token-limit-1"),
        pytest.param(ALPHA, {"cursor": SAMPLE_ALPHA_NEXT}, id="samples-own-alpha-token"),
        pytest.param(ALPHA_NO_READ, {"cursor": FORGED_BETA}, id="forged-token-before-forbidden"),
    ],
)
def test_a_token_cursor_cannot_switch_tenant(
    make_store: StoreFactory, context: Mapping[str, object], args: dict[str, object]
) -> None:
    result = execute_tool("search_tickets", args, context, make_store(fixture_records()))
    assert result == INVALID


def _deleted_before_cursor() -> dict[str, dict[str, str]]:
    records = fixture_records()
    del records["alpha:TKT-101"]
    return records


def _inserted_before_cursor() -> dict[str, dict[str, str]]:
    records = fixture_records()
    records["alpha:TKT-100"] = {"id": "TKT-100", "title": "New ticket", "status": "open"}
    return records


def test_first_page_of_two(make_store: StoreFactory) -> None:
    result = execute_tool("search_tickets", {"limit": 2}, ALPHA, make_store(fixture_records()))
    assert result == {"ok": True, "tickets": [T101, T102], "next_cursor": "TKT-102"}


@pytest.mark.parametrize(
    "records",
    [
        # An offset of 2 would now start at TKT-107 and skip TKT-104.
        pytest.param(_deleted_before_cursor(), id="deleted-before-cursor"),
        # An offset of 2 would now start at TKT-102 again and repeat it.
        pytest.param(_inserted_before_cursor(), id="inserted-before-cursor"),
    ],
)
def test_page_two_is_anchored_to_the_cursor_not_an_offset(
    make_store: StoreFactory, records: dict[str, dict[str, str]]
) -> None:
    result = execute_tool(
        "search_tickets", {"limit": 2, "cursor": "TKT-102"}, ALPHA, make_store(records)
    )
    assert result == {"ok": True, "tickets": [T104, T107], "next_cursor": "TKT-107"}
