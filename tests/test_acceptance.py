"""The brief's thirteen acceptance calls, A1-A13, on every store, and `ticket-tools acceptance`."""

from __future__ import annotations

import io
from collections.abc import Mapping

import pytest

from brief_table import ACCEPTANCE, T101, T104, fail, page
from conftest import StoreFactory
from print_acceptance import run
from ticket_tools import execute_tool, fixture_records
from ticket_tools.cli.acceptance import A101, A104, CALLS, _fail, _page, run_acceptance


@pytest.mark.parametrize(
    ("context", "name", "args", "expected"),
    # The brief's table, written once in tests/brief/brief_table.py; here on every store.
    [
        pytest.param(row.context, row.name, row.args, row.expected, id=row.label)
        for row in ACCEPTANCE
    ],
)
def test_acceptance_call(
    make_store: StoreFactory,
    context: Mapping[str, object],
    name: str,
    args: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert execute_tool(name, args, context, make_store(fixture_records())) == expected


def test_expected_results_are_built_in_the_contract_shape() -> None:
    # CALLS is built once at import; these rebuild its expected values at test time.
    assert _page([A101, A104], "TKT-104") == page(T101, T104, next_cursor="TKT-104")
    assert _page([], None) == page(next_cursor=None)
    assert _fail("forbidden") == fail("forbidden")


def test_run_acceptance_prints_thirteen_passes(make_store: StoreFactory) -> None:
    out = io.StringIO()
    assert run_acceptance(make_store(fixture_records()), out) == 0
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[:13]] == [["PASS", row.label] for row in ACCEPTANCE]
    assert lines[0] == (
        'PASS A1  [alpha, can read] get_ticket {"ticket_id": "TKT-104"} -> '
        '{"ok": true, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}}'
    )
    assert (
        lines[10]
        == 'PASS A11 [alpha, cannot read] search_tickets {} -> {"ok": false, "code": "forbidden"}'
    )
    assert lines[13:] == ["13 passed, 0 failed"]


def test_run_acceptance_reports_each_mismatch(make_store: StoreFactory) -> None:
    records = fixture_records()
    records["alpha:TKT-104"]["title"] = "Changed"
    out = io.StringIO()
    assert run_acceptance(make_store(records), out) == 2  # A1 and A2 show TKT-104
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        'FAIL A1  [alpha, can read] get_ticket {"ticket_id": "TKT-104"} -> '
        '{"ok": true, "ticket": {"id": "TKT-104", "title": "Changed", "status": "open"}}'
    )
    assert lines[1] == (
        '         expected {"ok": true, "ticket": '
        '{"id": "TKT-104", "title": "Settings crash", "status": "open"}}'
    )
    assert lines[-1] == "11 passed, 2 failed"


def test_the_commands_table_is_the_briefs() -> None:
    rows = [(c.label, c.context, c.name, c.args, c.expected) for c in CALLS]
    assert rows == [tuple(row) for row in ACCEPTANCE]


def test_the_command_prints_what_the_hand_ins_make_run_prints() -> None:
    # `ticket-tools acceptance` and the hand-in's tests/brief/print_acceptance.py: one format.
    command, hand_in = io.StringIO(), io.StringIO()
    assert (run_acceptance(fixture_records(), command), run(hand_in)) == (0, 0)
    assert command.getvalue() == hand_in.getvalue()
