"""The churn phase (load/churn.py): the feed, the two-state oracle, the checks, the feeder."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest

from load import churn
from load.checker import Observation
from load.churn import (
    ChurnFeed,
    Oracle,
    after_records,
    after_ticket,
    check_call,
    check_page,
    check_phase,
    check_walk,
    churned_numbers,
    expected_summary,
    feed_lines,
)
from load.client import CallRecord, Client
from load.records import tenant_records
from load.supervise import Supervisor
from load.workload import Call, ClientPlan, Walk
from ticket_tools import execute_tool
from ticket_tools.stores.feed import parse_change, plan
from ticket_tools.stores.sqlite.store import write_database

PER = 40  # tickets per tenant in these tests: TKT-000..TKT-039
T5 = {"tenant": "t005", "can_read_tickets": True}


def oracle() -> Oracle:
    return Oracle(T5, tenant_records(5, PER), after_records(5, PER))


def page(args: dict[str, object], records: dict[str, Any]) -> dict[str, Any]:
    return execute_tool("search_tickets", args, T5, records)


def served(result: dict[str, Any]) -> Observation:
    return Observation(result=result, text=json.dumps(result, ensure_ascii=False))


def test_the_churned_keys_and_their_one_change_each() -> None:
    assert list(churned_numbers(12)) == [1, 5, 9]
    assert after_ticket(3, 1) == {
        "id": "TKT-001",
        "title": "Churned ticket 1 [t003]",
        "status": "closed",  # ticket(3, 1) is open
    }
    assert after_ticket(3, 17) is None  # the fifth churned number: deleted
    with pytest.raises(ValueError, match="TKT-002 is not churned"):
        after_ticket(3, 2)
    lines = feed_lines([5, 7, 5], PER, "seed")
    assert len(lines) == 2 * len(churned_numbers(PER))  # each tenant once
    assert lines == feed_lines([7, 5], PER, "seed")  # deterministic, shuffled
    assert lines != sorted(lines)
    assert expected_summary(lines) == "16 upserted, 4 deleted, 0 stale"


def test_applying_the_feed_by_the_version_rule_gives_the_after_records() -> None:
    changes = [parse_change(line.rstrip(b"\n")) for line in feed_lines([5], PER, "s")]
    stored = {tuple(key.split(":")): 0 for key in tenant_records(5, PER)}
    winners, counts = plan(changes, stored)  # type: ignore[arg-type]
    assert (counts.upserted, counts.deleted, counts.stale) == (8, 2, 0)
    records = {key: dict(stored) for key, stored in tenant_records(5, PER).items()}
    for (tenant, ticket_id), change in winners.items():
        key = f"{tenant}:{ticket_id}"
        if change.op == "delete":
            del records[key]
        else:
            records[key] = {"id": change.id, "title": change.title, "status": change.status}
    public = {k: {f: v[f] for f in ("id", "title", "status")} for k, v in records.items()}
    assert public == {
        k: {f: v[f] for f in ("id", "title", "status")} for k, v in after_records(5, PER).items()
    }


def mixed(changed: set[int]) -> dict[str, Any]:
    """The tenant with only the churned numbers in `changed` changed."""
    records = dict(tenant_records(5, PER))
    for number in changed:
        key = f"t005:TKT-{number:03d}"
        after = after_ticket(5, number)
        if after is None:
            del records[key]
        else:
            records[key] = after
    return records


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"limit": 10},
        {"limit": 3, "cursor": "TKT-004"},
        {"status": "open", "limit": 10},
        {"query": "churned", "limit": 10},
        {"query": "e", "limit": 7, "cursor": "TKT-010"},
    ],
)
@pytest.mark.parametrize("changed", [set(), {1, 5, 9, 13, 17, 21, 25, 29, 33, 37}, {5, 17}, {1}])
def test_every_page_of_any_mix_of_before_and_after_is_correct(
    args: dict[str, object], changed: set[int]
) -> None:
    result = page(args, mixed(changed))
    assert check_page(Call("search_tickets", args), result, oracle())
    verdict = check_call(Call("search_tickets", args), oracle(), served(result))
    assert verdict.outcome == "correct"


def test_pages_that_no_state_gives_are_wrong() -> None:
    args: dict[str, object] = {"limit": 5}
    call = Call("search_tickets", args)
    good = page(args, mixed({1}))  # TKT-000..004, TKT-001 churned
    assert check_page(call, good, oracle())
    tickets = good["tickets"]
    flipped = "open" if tickets[4]["status"] == "closed" else "closed"
    wrong_pages = [
        {**good, "tickets": [tickets[0], *tickets[2:]], "next_cursor": "TKT-004"},  # TKT-001?
        {**good, "tickets": [tickets[1], *tickets[2:]], "next_cursor": "TKT-004"},  # no TKT-000
        {**good, "tickets": [*tickets[:4], {**tickets[4], "title": "other"}]},  # not a state
        {**good, "tickets": [*tickets[:4], {**tickets[4], "status": flipped}]},  # idem
        {**good, "tickets": [tickets[1], tickets[0], *tickets[2:]]},  # out of order
        {**good, "tickets": [tickets[0], tickets[0], *tickets[2:]]},  # twice
        {**good, "next_cursor": "TKT-003"},  # not the last id
        {**good, "next_cursor": None},  # TKT-005.. match and were never changed
        {**good, "tickets": tickets[:4]},  # a short page with a next_cursor
        {**good, "tickets": [*tickets, {"id": "TKT-005", "title": "x", "status": "open"}]},
        {**good, "extra": 1},
        {**good, "tickets": "TKT-000"},
        {**good, "tickets": [*tickets[:4], "TKT-004"]},
    ]
    for result in wrong_pages:
        assert not check_page(call, result, oracle()), result
        assert check_call(call, oracle(), served(result)).outcome == "wrong"
    # After the cursor only, and within the limit.
    after = Call("search_tickets", {"limit": 5, "cursor": "TKT-000"})
    assert not check_page(after, good, oracle())
    assert not check_page(Call("search_tickets", {"limit": True}), good, oracle())


def test_a_churned_key_deleted_afterwards_may_be_missing_one_changed_in_place_may_not() -> None:
    # TKT-017 is deleted by the feed: a page may skip it; TKT-013 only changes title and
    # status, so a filter that matches both of its states must show it.
    call = Call("search_tickets", {"query": "t005", "limit": 10, "cursor": "TKT-012"})
    before = page(call.args, mixed(set()))
    assert [t["id"] for t in before["tickets"]][:6] == [f"TKT-0{n}" for n in range(13, 19)]
    gone = page(call.args, mixed({17}))
    assert "TKT-017" not in [t["id"] for t in gone["tickets"]]
    assert check_page(call, gone, oracle())
    without_13 = [t for t in before["tickets"] if t["id"] != "TKT-013"]
    assert not check_page(call, {**before, "tickets": without_13, "next_cursor": None}, oracle())


def test_other_calls_are_the_before_or_the_after_answer_exactly() -> None:
    get = Call("get_ticket", {"ticket_id": "TKT-017"})
    assert check_call(get, oracle(), served(execute_tool(get.name, get.args, T5, mixed(set()))))
    found = execute_tool(get.name, get.args, T5, tenant_records(5, PER))
    gone = execute_tool(get.name, get.args, T5, after_records(5, PER))
    assert check_call(get, oracle(), served(found)).outcome == "correct"
    gone_seen = Observation(result=gone, is_error=True, text=None)
    assert check_call(get, oracle(), gone_seen).outcome == "wrong"  # not the adapter's text
    assert check_call(get, oracle(), Observation(failure="ConnectError")).outcome == "error"
    # A page sent with another text, or flagged as an error, is wrong even if its ids fit.
    args: dict[str, object] = {"limit": 5}
    result = page(args, mixed({1}))
    call = Call("search_tickets", args)
    assert check_call(call, oracle(), Observation(result=result, text="{}")).outcome == "wrong"
    flagged = Observation(result=result, is_error=True, text=json.dumps(result))
    assert check_call(call, oracle(), flagged).outcome == "wrong"
    refused = {"ok": False, "code": "invalid_argument"}
    assert check_call(call, oracle(), Observation(result=refused)).outcome == "wrong"


def walk_of(pages: list[list[str]], *, done: bool, start: str | None = None) -> Walk:
    return Walk(0, {"query": "e"}, start, 5, pages=pages, done=done, replicas={0})


def test_a_walk_across_the_change_neither_skips_nor_repeats() -> None:
    # The first page before the feed, every later one after it.
    first = page({"query": "e", "limit": 5}, mixed(set()))
    pages = [[t["id"] for t in first["tickets"]], []]
    cursor = first["next_cursor"]
    while cursor is not None:
        rest = page({"query": "e", "limit": 10, "cursor": cursor}, after_records(5, PER))
        pages[1] += [t["id"] for t in rest["tickets"]]
        cursor = rest["next_cursor"]
    checked = check_walk(walk_of(pages, done=True), oracle())
    assert (checked.skipped, checked.repeated, checked.in_order, checked.complete) == (
        0,
        0,
        True,
        True,
    )
    missing = [pages[0], [i for i in pages[1] if i != "TKT-010"]]  # never churned
    assert check_walk(walk_of(missing, done=True), oracle()).skipped == 1
    again = [pages[0], [pages[0][-1], *pages[1]]]
    repeated = check_walk(walk_of(again, done=True), oracle())
    assert (repeated.repeated, repeated.in_order) == (1, False)
    # Not finished: only up to the last id seen; not begun: nothing required.
    partial = check_walk(walk_of([pages[0]], done=False), oracle())
    assert (partial.seen, partial.skipped) == (5, 0)
    assert check_walk(walk_of([], done=False), oracle()).skipped == 0
    late = check_walk(walk_of([["TKT-035"]], done=False, start="TKT-030"), oracle())
    # TKT-031..034: TKT-033 is churned, but both its titles hold an "e", so it is required.
    assert late.skipped == 4


def test_check_phase_counts_a_clients_calls_and_walks() -> None:
    plan_ = ClientPlan(3, 5)
    client = Client(0, 5, True, "token", plan_, replica=0)
    records = mixed({1, 5})
    for _ in range(60):
        call = plan_.next_call()
        result = execute_tool(call.name, call.args, T5, records)
        seen = served(result)
        if result["ok"] is not True:
            seen = Observation(result=result, is_error=True, text=None)  # not the adapter's
        client.records.append(CallRecord(call, seen, 0.0, 0.001, 0))
        if result["ok"] is True or call.walk is not None:
            plan_.page_received(call, result, 0)
    checked = check_phase("churn", [client], 2.0, PER)
    failures = sum(1 for r in client.records if r.seen.is_error)
    assert (checked.calls, checked.wrong) == (60, failures)
    assert checked.walks.checked >= 1
    assert (checked.walks.skipped, checked.walks.repeated, checked.walks.out_of_order) == (0, 0, 0)
    assert checked.calls_per_second == 30.0
    assert check_phase("churn", [], 0.0, PER).calls_per_second == 0.0


def test_the_feeder_applies_the_churn_feed_to_a_served_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    supervisor = Supervisor(120.0, prefix="churn-test-")
    try:
        database = supervisor.folder / "tickets.sqlite"
        write_database(database, {**tenant_records(5, PER), **tenant_records(6, PER)})
        clients = [SimpleNamespace(tenant_index=5), SimpleNamespace(tenant_index=5)]
        phase = SimpleNamespace(supervisor=supervisor, clients=clients, seconds=1.0, figures={})
        monkeypatch.setattr(churn, "FEED_SHARE", 0.5)
        anyio.run(ChurnFeed(["--db", str(database)], PER, "s"), cast(Any, phase))
        figures = phase.figures
        assert figures["churned_keys"] == 10
        assert (figures["apply_status"], figures["feed_as_expected"]) == (0, True)
        assert figures["apply_summary"] == (
            f"applied 10 changes from {supervisor.folder / 'churn.fifo'} to {database}: "
            "8 upserted, 2 deleted, 0 stale"
        )
        connection = sqlite3.connect(database)
        rows = connection.execute(
            "SELECT tenant, id, title, status FROM tickets ORDER BY tenant, id"
        ).fetchall()
        connection.close()
        expected = {**after_records(5, PER), **tenant_records(6, PER)}
        assert rows == sorted(
            (key.split(":")[0], t["id"], t["title"], t["status"]) for key, t in expected.items()
        )
    finally:
        supervisor.cleanup()
