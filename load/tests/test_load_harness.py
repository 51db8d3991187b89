"""The load harness's own logic (load/): store, plan, checker, percentiles, report, process
supervision, and its client against two real replicas. The run itself is `make load`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path

import anyio
import pytest

from load import bad_day, checker, failover, report, run, soak, stats, supervise
from load import client as client_module
from load.checker import Observation, Tally, Verdict, WalkCheck, check, check_walk, oracle_walk
from load.client import CallRecord, Client, _leaf, run_client
from load.records import owner_of, tenant_records, ticket, write_records
from load.workload import Call, ClientPlan, Walk
from testkit.server import NO_RATE_LIMITS, HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import Records, execute_tool, run_tool

T5 = {"tenant": "t005", "can_read_tickets": True}
T5_NO_READ = {"tenant": "t005", "can_read_tickets": False}
# The repository root: where `load` and `testkit` are imported from.
ROOT = Path(__file__).resolve().parents[2]


def served(call: Call, context: dict[str, object], records: Records) -> Observation:
    """What a correct server sends for `call`: the MCP adapter's rendering of the core."""
    outcome = run_tool(call.name, call.args, context, records)
    result = outcome.result
    if result.get("code") == "unknown_tool":
        return Observation(protocol_code=-32602, protocol_message=f"unknown_tool: {outcome.detail}")
    if result["ok"] is True:
        return Observation(result=result, text=json.dumps(result, ensure_ascii=False))
    detailed = {**result, "detail": outcome.detail}
    return Observation(result=detailed, is_error=True, text=f"{result['code']}: {outcome.detail}")


# --- the generated store -------------------------------------------------------------------


def test_ticket_is_a_pure_function_naming_its_tenant() -> None:
    assert ticket(42, 17) == {
        "id": "TKT-017",
        "title": "Webhook delivered twice [t042]",
        "status": "open",
        "internal_note": "internal canary t042",
    }
    assert ticket(2, 0) == {
        "id": "TKT-000",
        "title": "Invoice PDF missing logo [t002]",
        "status": "open",
        "internal_note": "internal canary t002",
    }
    assert ticket(0, 3)["status"] == "closed"  # (3 * 7 + 0) % 3 == 0


@pytest.mark.parametrize(
    ("title", "owner"),
    [
        pytest.param("CSV export times out [t042]", "t042", id="generated"),
        pytest.param("a [b] [t001]", "t001", id="last-bracket"),
        pytest.param("Settings crash", None, id="no-bracket"),
        pytest.param("[t001]", None, id="no-head"),
        pytest.param("x [t001", None, id="unclosed"),
    ],
)
def test_owner_of_reads_the_tenant_from_a_title(title: str, owner: str | None) -> None:
    assert owner_of(title) == owner


def test_tenant_records_and_the_import_file_come_from_one_function(tmp_path: Path) -> None:
    assert list(tenant_records(3, 2)) == ["t003:TKT-000", "t003:TKT-001"]
    path = tmp_path / "records.json"
    with path.open("w", encoding="utf-8") as out:
        assert write_records(out, 2, 3) == 6
    assert json.loads(path.read_text()) == {**tenant_records(0, 3), **tenant_records(1, 3)}


def test_an_empty_store_is_still_a_json_object(tmp_path: Path) -> None:
    path = tmp_path / "records.json"
    with path.open("w", encoding="utf-8") as out:
        assert write_records(out, 0, 3) == 0
    assert json.loads(path.read_text()) == {}


# --- the workload ---------------------------------------------------------------------------


def test_a_plan_is_the_same_for_the_same_seed() -> None:
    first, second = ClientPlan(7, 5), ClientPlan(7, 5)
    calls = [first.next_call() for _ in range(50)]
    assert calls == [second.next_call() for _ in range(50)]
    assert calls[:5] == [
        Call("search_tickets", {"status": "closed", "limit": 5}, walk=0),
        Call("get_ticket", {}),
        Call("delete_ticket", {"ticket_id": "TKT-001"}),
        Call("get_ticket", {}),
        Call("get_ticket", {"ticket_id": "TKT-088"}),
    ]
    assert first.tenant == "t005"


@pytest.mark.parametrize(
    ("walk", "args"),
    [
        pytest.param(Walk(0, {}, None, None), {}, id="defaults"),
        pytest.param(
            Walk(0, {"status": "open"}, "TKT-010", 3),
            {"status": "open", "limit": 3, "cursor": "TKT-010"},
            id="start-cursor",
        ),
        pytest.param(
            Walk(0, {"query": "pdf"}, "TKT-010", None, cursor="TKT-020", pages=[["TKT-020"]]),
            {"query": "pdf", "cursor": "TKT-020"},
            id="after-a-page",
        ),
        pytest.param(
            Walk(0, {}, "TKT-010", 1, cursor=None, pages=[[]]), {"limit": 1}, id="page-no-cursor"
        ),
    ],
)
def test_walk_args_carry_the_held_cursor(walk: Walk, args: dict[str, object]) -> None:
    assert walk.args() == args


def _next_page_call(plan: ClientPlan) -> Call:
    for _ in range(1_000):
        call = plan.next_call()
        if call.walk is not None:
            return call
    raise AssertionError("no page call in 1,000 draws")


def test_a_walk_moves_only_when_a_page_arrives() -> None:
    plan = ClientPlan(3, 5)
    first = _next_page_call(plan)
    plan.page_received(Call("get_ticket", {"ticket_id": "TKT-001"}), {"ok": True}, 0)
    assert _next_page_call(plan) == first  # no page yet: the same page is asked again
    plan.page_received(first, {"ok": True, "tickets": [{"id": "TKT-004"}], "next_cursor": "X"}, 1)
    walk = plan.walks[0]
    assert (walk.pages, walk.cursor, walk.done, walk.replicas) == ([["TKT-004"]], "X", False, {1})
    assert _next_page_call(plan).args["cursor"] == "X"
    plan.page_received(_next_page_call(plan), {"ok": True, "tickets": [], "next_cursor": None}, 0)
    assert (walk.done, walk.refused, walk.replicas) == (True, False, {0, 1})
    assert _next_page_call(plan).walk == 1  # a finished walk: the next page starts another


def test_a_refused_page_ends_the_walk() -> None:
    plan = ClientPlan(3, 5)
    plan.page_received(_next_page_call(plan), {"ok": False, "code": "forbidden"}, 0)
    assert (plan.walks[0].done, plan.walks[0].refused, plan.walks[0].pages) == (True, True, [])


# --- the checker ----------------------------------------------------------------------------

PAGE = Call("search_tickets", {"status": "closed", "limit": 2})
GET = Call("get_ticket", {"ticket_id": "TKT-003"})
BAD = Call("search_tickets", {"limit": 11})
UNKNOWN = Call("delete_ticket", {"ticket_id": "TKT-001"})
OTHER = {"id": "TKT-001", "title": "CSV export times out [t006]", "status": "open"}


def _records() -> Records:
    return tenant_records(5, 20)


def test_a_correct_answer_is_correct_for_every_kind_of_call() -> None:
    records = _records()
    verdicts = [
        check(call, context, records, served(call, context, records))
        for call, context in (
            (PAGE, T5),
            (GET, T5),
            (BAD, T5),
            (UNKNOWN, T5),
            (GET, T5_NO_READ),
            (Call("get_ticket", {"ticket_id": "TKT-900"}), T5),
        )
    ]
    assert verdicts == [
        Verdict("correct", None, 0, True, "ok"),
        Verdict("correct", None, 0, True, "ok"),
        Verdict("correct", None, 0, False, "invalid_arguments"),
        Verdict("correct", None, 0, False, "unknown_tool"),
        Verdict("correct", None, 0, False, "forbidden"),
        Verdict("correct", None, 0, True, "not_found"),
    ]


def _page() -> dict[str, object]:
    return execute_tool(PAGE.name, PAGE.args, T5, _records())


@pytest.mark.parametrize(
    ("seen", "verdict"),
    [
        pytest.param(
            Observation(result={**_page(), "next_cursor": None}, text=json.dumps(_page())),
            Verdict("wrong", None, 0, True, "ok"),
            id="other-cursor",
        ),
        pytest.param(
            Observation(result={**_page(), "tickets": [OTHER]}, text=json.dumps(_page())),
            Verdict("wrong", None, 1, True, "ok"),
            id="cross-tenant",
        ),
        pytest.param(
            Observation(result=_page(), is_error=True, text=json.dumps(_page())),
            Verdict("wrong", None, 0, True, "ok"),
            id="is-error",
        ),
        pytest.param(
            Observation(result=_page(), text="{}"),
            Verdict("wrong", None, 0, True, "ok"),
            id="text",
        ),
        pytest.param(
            Observation(protocol_code=-32603, protocol_message="Internal error"),
            Verdict("error", "internal_error", 0, True, "ok"),
            id="internal-error",
        ),
        pytest.param(
            Observation(protocol_code=-32603, protocol_message="boom: relation tickets"),
            Verdict("wrong", None, 0, True, "ok"),
            id="internal-error-with-a-leak",
        ),
        pytest.param(
            Observation(protocol_code=-32602, protocol_message="unknown_tool: x"),
            Verdict("wrong", None, 0, True, "ok"),
            id="protocol-error-for-a-valid-call",
        ),
        pytest.param(
            Observation(failure="ConnectError"),
            Verdict("error", "transport:ConnectError", 0, True, "ok"),
            id="transport",
        ),
        pytest.param(
            Observation(result={"ok": False, "code": "unavailable", "detail": "x"}, is_error=True),
            Verdict("error", "unavailable", 0, True, "ok"),
            id="unavailable",
        ),
        pytest.param(
            Observation(result={"ok": False, "code": "unavailable", "detail": "x"}),
            Verdict("wrong", None, 0, True, "ok"),
            id="unavailable-without-is-error",
        ),
    ],
)
def test_anything_but_the_expected_answer_is_wrong_or_an_error(
    seen: Observation, verdict: Verdict
) -> None:
    assert check(PAGE, T5, _records(), seen) == verdict


def test_a_failure_must_carry_its_detail_and_no_other() -> None:
    records = _records()
    right = served(BAD, T5, records)
    assert right.result is not None
    bare = Observation(result={"ok": False, "code": "invalid_arguments"}, is_error=True)
    other = Observation(result={**right.result, "detail": "x"}, is_error=True, text=right.text)
    assert check(BAD, T5, records, right).outcome == "correct"
    assert check(BAD, T5, records, Observation(**{**right.__dict__, "text": None})).outcome == (
        "wrong"
    )
    assert check(BAD, T5, records, bare).outcome == "wrong"
    assert check(BAD, T5, records, other).outcome == "wrong"


def test_an_unknown_tool_must_be_the_protocol_error_with_its_message() -> None:
    records = _records()
    answered = Observation(result={"ok": False, "code": "unknown_tool"}, is_error=True)
    other_message = Observation(protocol_code=-32602, protocol_message="unknown_tool: nope")
    assert check(UNKNOWN, T5, records, answered).outcome == "wrong"
    assert check(UNKNOWN, T5, records, other_message).outcome == "wrong"


def test_cross_tenant_tickets_are_counted_in_single_and_list_results() -> None:
    records = _records()
    single = Observation(result={"ok": True, "ticket": OTHER}, text="x")
    listed = Observation(
        result={"ok": True, "tickets": [OTHER, OTHER, {"title": 3}, "x"]}, text="x"
    )
    assert check(GET, T5, records, single).cross_tenant == 1
    assert check(PAGE, T5, records, listed).cross_tenant == 2


def test_tally_counts_outcomes_errors_and_codes() -> None:
    tally = Tally()
    for verdict in (
        Verdict("correct", None, 0, True, "ok"),
        Verdict("correct", None, 0, False, "invalid_arguments"),
        Verdict("wrong", None, 2, True, "ok"),
        Verdict("error", "internal_error", 0, True, "ok"),
        Verdict("error", "internal_error", 0, True, "ok"),
    ):
        tally.add(verdict)
    assert (tally.calls, tally.correct, tally.wrong, tally.cross_tenant) == (5, 2, 1, 2)
    assert dict(tally.errors) == {"internal_error": 2}
    assert dict(tally.codes) == {"ok": 1, "invalid_arguments": 1}


def test_the_oracle_walk_is_every_match_after_the_start_in_id_order() -> None:
    records = tenant_records(5, 40)
    walk = Walk(0, {"status": "closed"}, "TKT-004", 3)
    expected = [
        stored["id"]
        for stored in records.values()
        if stored["status"] == "closed" and stored["id"] > "TKT-004"
    ]
    assert oracle_walk(walk, T5, records) == expected
    assert expected[:2] == ["TKT-007", "TKT-010"]
    assert oracle_walk(walk, T5_NO_READ, records) == []


def test_the_oracle_walk_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checker, "MAX_ORACLE_PAGES", 2)
    monkeypatch.setattr(checker, "ORACLE_LIMIT", 1)
    assert oracle_walk(Walk(0, {}, None, None), T5, tenant_records(5, 40)) == ["TKT-000", "TKT-001"]


ORACLE = ["TKT-001", "TKT-002", "TKT-003", "TKT-004"]


def _walk(pages: list[list[str]], *, done: bool, replicas: set[int]) -> Walk:
    return Walk(0, {}, None, 2, pages=pages, done=done, replicas=replicas)


@pytest.mark.parametrize(
    ("walk", "result"),
    [
        pytest.param(
            _walk([["TKT-001", "TKT-002"], ["TKT-003", "TKT-004"]], done=True, replicas={0, 1}),
            WalkCheck(4, 0, 0, True, True, 2),
            id="complete-across-a-switch",
        ),
        pytest.param(
            _walk([["TKT-001", "TKT-002"], ["TKT-004"]], done=True, replicas={0}),
            WalkCheck(3, 1, 0, False, True, 1),
            id="skipped",
        ),
        pytest.param(
            _walk([["TKT-001", "TKT-002"], ["TKT-002", "TKT-003"]], done=False, replicas={1}),
            WalkCheck(4, 0, 1, False, False, 1),
            id="repeated-unfinished",
        ),
        pytest.param(
            _walk([["TKT-001", "TKT-002"]], done=False, replicas={0}),
            WalkCheck(2, 0, 0, True, False, 1),
            id="unfinished-prefix",
        ),
        pytest.param(
            _walk([["TKT-001"], ["TKT-003"]], done=False, replicas={0}),
            WalkCheck(2, 1, 0, False, False, 1),
            id="unfinished-skip",
        ),
        pytest.param(_walk([], done=False, replicas=set()), WalkCheck(0, 0, 0, True, False, 0)),
    ],
)
def test_check_walk_finds_skipped_and_repeated_tickets(walk: Walk, result: WalkCheck) -> None:
    assert check_walk(walk, ORACLE) == result


# --- percentiles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "value"),
    [(50, 20.0), (95, 40.0), (25, 10.0), (26, 20.0), (100, 40.0)],
)
def test_percentile_is_nearest_rank(q: float, value: float) -> None:
    assert stats.percentile([10.0, 20.0, 30.0, 40.0], q) == value


@pytest.mark.parametrize("q", [0, -1, 101])
def test_percentile_refuses_a_q_out_of_range(q: float) -> None:
    with pytest.raises(ValueError, match="q must be"):
        stats.percentile([1.0], q)


def test_latency_summarises_seconds_in_milliseconds() -> None:
    seconds = [i / 1000 for i in range(100, 0, -1)]  # 1..100 ms, unsorted
    assert stats.Latency.of(seconds) == stats.Latency(p50=50.0, p95=95.0, p99=99.0, max=100.0)
    assert stats.Latency.of([]) == stats.Latency(None, None, None, None)


# --- the report -----------------------------------------------------------------------------


def _client(number: int, tenant: int, calls: list[tuple[Call, Observation, float]]) -> Client:
    plan = ClientPlan(number, tenant)
    client = Client(number, tenant, True, "token", plan, replica=0)
    at = 100.0
    for call, seen, latency in calls:
        client.records.append(CallRecord(call, seen, at, at + latency, 0))
        at += 1.0
    return client


def _phase_clients() -> list[Client]:
    records = tenant_records(5, 1_000)
    ok = served(GET, T5, records)
    crossed = Observation(result={"ok": True, "ticket": OTHER}, text="x")
    first = _client(0, 5, [(GET, ok, 0.010), (GET, ok, 0.020), (PAGE, crossed, 0.030)])
    page = served(PAGE, T5, records)
    first.plan.walks[:] = [
        Walk(0, PAGE.args, None, 2, pages=[["TKT-001", "TKT-004"]], replicas={0, 1}),
        Walk(1, {}, None, None, done=True, refused=True),
        Walk(2, {}, None, None),  # no page yet: not checked
    ]
    assert page.result is not None
    second = _client(
        1,
        5,
        [
            (GET, Observation(failure="ConnectError"), 5.0),
            (GET, Observation(protocol_code=-32603, protocol_message="Internal error"), 0.040),
        ],
    )
    return [first, second]


def test_check_phase_counts_every_call_and_walk() -> None:
    result = report.check_phase("load-8", _phase_clients(), 10.0, 1_000)
    assert (result.calls, result.calls_per_second, result.wrong, result.cross_tenant) == (
        5,
        0.5,
        1,
        1,
    )
    assert result.errors == {"internal_error": 1, "transport:ConnectError": 1}
    assert result.codes == {"ok": 2}
    # The transport failure has no latency: 10, 20, 30, 40 ms.
    assert astuple(result.latency) == pytest.approx((20.0, 40.0, 40.0, 40.0))
    assert result.walks == report.WalkTotals(checked=1, crossed=1)
    assert result.calls_per_replica_core_second is None
    result.usage = report.Usage(2.5, 1.0, 3.0, 9.0, 20.0)
    assert result.calls_per_replica_core_second == 2.0
    assert report.check_phase("x", [], 0.0, 10).calls_per_second == 0.0


def test_first_pages_after_a_moment() -> None:
    clients = _phase_clients()
    # Client 0's ok results end at 100.01 and 101.02; client 1 never gets one.
    first, slowest = report.first_pages_ms(clients, 100.5)
    assert first == pytest.approx(520.0)
    assert slowest is None
    assert report.first_pages_ms(clients[:1], 100.0) == pytest.approx((10.0, 10.0))
    assert report.first_pages_ms(clients, 500.0) == (None, None)
    refused = Observation(result={"ok": False, "code": "forbidden"}, is_error=True, text="x")
    ok = Observation(result={"ok": True, "ticket": OTHER}, text="x")
    mixed = _client(2, 5, [(GET, refused, 0.5), (GET, ok, 0.5)])  # ends 100.5 and 101.5
    assert report.first_pages_ms([mixed], 100.0) == pytest.approx((1500.0, 1500.0))
    assert report.first_pages_ms([mixed], 100.0, any_answer=True) == pytest.approx((500.0, 500.0))


def test_rss_growth_from_the_sample_nearest_the_baseline() -> None:
    samples = [(0.0, 0, 100 * 1024), (59.0, 0, 110 * 1024), (0.0, 1, 50 * 1024)]
    samples += [(61.0, 1, 60 * 1024), (120.0, 0, 121 * 1024), (120.0, 1, 57 * 1024)]
    assert soak.rss_growth(samples, 60.0) == {
        "replica-0": {
            "baseline_at_s": 59.0,
            "baseline_mib": 110.0,
            "end_at_s": 120.0,
            "end_mib": 121.0,
            "growth_mib": 11.0,
            "growth_percent": 10.0,
        },
        "replica-1": {
            "baseline_at_s": 61.0,
            "baseline_mib": 60.0,
            "end_at_s": 120.0,
            "end_mib": 57.0,
            "growth_mib": -3.0,
            "growth_percent": -5.0,
        },
    }


def _result(name: str, **fields: object) -> report.PhaseResult:
    values: dict[str, object] = {
        "name": name,
        "clients": 8,
        "seconds": 20.0,
        "calls": 4000,
        "calls_per_second": 200.0,
        "latency": stats.Latency(30.0, 60.0, 90.5, 120.0),
        "wrong": 0,
        "cross_tenant": 0,
        "errors": {},
        "codes": {"ok": 3600, "invalid_arguments": 400},
        "walks": report.WalkTotals(checked=50, complete=20),
    }
    return report.PhaseResult(**{**values, **fields})  # type: ignore[arg-type]


def test_problems_name_every_target_missed() -> None:
    phases = [
        _result("load-8"),
        _result("load-32", wrong=2, cross_tenant=1, errors={"internal_error": 1}),
        _result("replica-loss", errors={"transport:ConnectError": 3, "internal_error": 1}),
        _result(
            "db-restart",
            errors={"internal_error": 9, "unavailable": 4},
            fault={"replicas_alive_after": True},
        ),
        _result("soak", walks=report.WalkTotals(checked=5, skipped=1, repeated=2, out_of_order=1)),
        _result("db-restart", fault={"replicas_alive_after": False}),
    ]
    assert report.problems(phases, [123]) == [
        "load-32: 2 wrong results",
        "load-32: 1 cross-tenant tickets",
        "load-32: unexpected errors {'internal_error': 1}",
        "replica-loss: unexpected errors {'internal_error': 1}",
        "soak: page walks skipped 1, repeated 2, out of order 1",
        "db-restart: a replica died that was not killed",
        "processes left behind: [123]",
    ]
    assert report.problems(phases[:1], []) == []


def test_the_table_has_a_row_per_phase_and_a_line_per_fault() -> None:
    plain = _result("load-8")
    plain.usage = report.Usage(20.0, 5.0, 15.0, 38.0, 40.0)
    faulted = _result(
        "db-restart",
        errors={"internal_error": 12},
        fault={"down_s": 4.56, "rss": {"a": 1}, "moved": 3, "ms": None},
    )
    lines = report.render_table([plain, faulted]).splitlines()
    assert lines[0].split() == [
        "phase", "clients", "secs", "calls", "calls/s", "p50", "ms", "p95", "ms", "p99", "ms",
        "wrong", "cross", "walks", "skip/rep", "calls/core-s", "errors",
    ]  # fmt: skip
    assert lines[2].split() == [
        "load-8", "8", "20", "4000", "200.0", "30.0", "60.0", "90.5", "0", "0", "50", "0/0",
        "200", "none",
    ]  # fmt: skip
    assert lines[3].split()[-3:] == ["-", "internal_error", "12"]
    assert lines[4] == ""
    assert lines[5].split() == [
        "CPU", "per", "call", "replica", "ms", "pg", "ms/read", "client", "ms", "this", "run",
        "%", "machine", "%",
    ]  # fmt: skip
    # 20 s of replica CPU over 4000 calls; 5 s of PostgreSQL over 3600 store reads.
    assert lines[7].split() == ["load-8", "5.00", "1.39", "3.75", "100", "95"]
    assert lines[8] == 'db-restart: down_s 4.6, rss {"a": 1}, moved 3, ms None'
    assert len(lines) == 9
    idle = _result("idle", calls=0, codes={})
    idle.usage = report.Usage(0.0, 0.0, 0.0, 0.0, 0.0)
    assert report.render_table([idle]).splitlines()[-1].split() == ["idle", "-", "-", "-", "0", "0"]
    empty = _result("x", latency=stats.Latency(None, None, None, None))
    assert report.render_table([empty]).splitlines()[2].split()[5:8] == ["-", "-", "-"]


def test_the_json_report_holds_every_figure(tmp_path: Path) -> None:
    phase = _result("soak", rss_kib=[(5.0, 0, 1000)])
    phase.usage = report.Usage(1.0, 2.0, 3.0, 4.0, 5.0)
    data = report.phase_json(phase)
    assert data["calls_per_replica_core_second"] == 4000.0
    assert data["store_reads"] == 3600
    assert data["rss_kib"] == [[5.0, 0, 1000]]
    assert data["latency"] == {"p50": 30.0, "p95": 60.0, "p99": 90.5, "max": 120.0}
    assert data["usage"]["replicas"] == 1.0
    path = tmp_path / "build" / "load-report.json"
    report.write_report(path, {"phases": [data]})
    assert json.loads(path.read_text())["phases"][0]["walks"]["checked"] == 50
    assert report.median_or_none([3.0, 1.0, 2.0]) == 2.0
    assert report.median_or_none([]) is None


# --- the run's options and the client's failure names ---------------------------------------


def test_the_default_run_fits_in_ten_minutes_and_the_failover_and_the_bad_day() -> None:
    options = run._parser().parse_args([])
    assert (options.soak_seconds, options.clients, options.store, options.failover_seconds) == (
        120.0,
        (1, 8, 32, 64),
        "postgres",
        40.0,
    )
    budget = run.default_budget(options)
    # The run stops itself within ten minutes (the churn phase included), then the failover's
    # and the bad day's own budgets (services of their own); the watchdog's
    # HARD_GRACE_SECONDS beyond it are for a cleanup that hangs.
    own = failover.budget_seconds(40.0) + bad_day.BUDGET_SECONDS
    assert failover.budget_seconds(40.0) == 200.0
    assert budget - own <= 600
    sqlite = run._parser().parse_args(["--store", "sqlite"])  # neither without PostgreSQL
    assert run.default_budget(sqlite) == budget - own
    longer = run._parser().parse_args(["--soak-seconds", "600", "--clients", "4,8"])
    assert longer.clients == (4, 8)
    assert run.default_budget(longer) == run.default_budget(options) + 480 - 2 * (20 + 10)
    shorter = run._parser().parse_args(["--failover-seconds", "30"])
    assert run.default_budget(shorter) == budget - 10


def test_leaf_names_the_innermost_first_exception() -> None:
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [ConnectionError("x")])])
    assert _leaf(nested) == "ConnectionError"
    assert _leaf(TimeoutError()) == "TimeoutError"


# --- supervision ----------------------------------------------------------------------------


def test_proc_figures_of_this_process_and_of_a_gone_one() -> None:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    gone = 2**22 + 1  # above the kernel's pid_max default
    assert supervise.alive(os.getpid())
    assert not supervise.alive(gone)
    assert supervise.cpu_seconds(gone) == 0.0
    assert supervise.rss_kib(gone) is None
    assert supervise.cpu_seconds(os.getpid()) > 0
    assert supervise.cpu_seconds(os.getpid(), reaped=True) >= supervise.cpu_seconds(os.getpid())
    assert supervise.cpu_seconds(gone, reaped=True) == 0.0
    rss = supervise.rss_kib(os.getpid())
    assert rss is not None
    assert rss > 1024
    assert os.getpid() in supervise.children(os.getppid())
    busy, total = supervise.machine_cpu()
    assert 0 < busy < total


def test_leaving_by_an_exception_stops_every_process_and_runs_cleanups() -> None:
    order: list[str] = []
    supervisor = supervise.Supervisor(60)
    folder = supervisor.folder
    sleeper = supervisor.start(
        [sys.executable, "-c", "import time; time.sleep(60)"], log=folder / "log"
    )
    supervisor.adopt(sleeper.pid)
    supervisor.on_cleanup(lambda: order.append("first"))
    supervisor.on_cleanup(lambda: 1 / 0)
    supervisor.on_cleanup(lambda: order.append("last"))
    assert supervisor.remaining() > 50

    def fail_in_the_block() -> None:
        with supervisor:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_in_the_block()
    assert sleeper.poll() is not None
    assert order == ["last", "first"]
    assert not folder.exists()
    assert supervisor.leftovers() == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_a_process_that_ignores_sigterm_is_killed() -> None:
    ignoring = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    with supervise.Supervisor(60) as supervisor:
        stubborn = supervisor.start(
            [sys.executable, "-c", f"{ignoring}"], log=supervisor.folder / "log"
        )
        time.sleep(0.5)  # let it install its handler
        started = time.monotonic()
        supervisor.stop(stubborn)
        assert stubborn.returncode == -signal.SIGKILL
        assert time.monotonic() - started >= supervise.STOP_GRACE_SECONDS
        supervisor.stop(stubborn)  # stopping it again is harmless


def test_the_budget_interrupts_the_block() -> None:
    def wait_in_the_block() -> None:
        with supervise.Supervisor(1.0):
            for _ in range(100):
                time.sleep(0.1)

    with pytest.raises(supervise.Interrupted, match="the time budget of 1 s ran out"):
        wait_in_the_block()


def test_inside_async_work_the_budget_calls_the_hook_and_check_raises_after() -> None:
    called: list[str] = []
    supervisor = supervise.Supervisor(1.0)

    def run_until_stopped() -> None:
        with supervisor:
            supervisor.check()  # nothing asked yet
            supervisor.interrupt_with(lambda: called.append("cancel"))
            for _ in range(100):
                if called:
                    break
                time.sleep(0.1)
            supervisor.interrupt_with(None)
            supervisor.check()

    with pytest.raises(supervise.Interrupted, match="the time budget of 1 s ran out"):
        run_until_stopped()
    assert called == ["cancel"]
    assert supervisor.stop_reason == "the time budget of 1 s ran out"


SIGNALLED_RUN = """
import sys, time
from load.supervise import Supervisor, Interrupted
try:
    with Supervisor(60) as supervisor:
        child = supervisor.start([sys.executable, "-c", "import time; time.sleep(60)"],
                                 log=supervisor.folder / "log")
        print(child.pid, supervisor.folder, flush=True)
        for _ in range(600):
            time.sleep(0.1)
except Interrupted as stop:
    print(stop.reason, flush=True)
    sys.exit(3)
"""


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_stops_the_run_and_leaves_nothing_behind(number: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    harness = subprocess.Popen(
        [sys.executable, "-c", SIGNALLED_RUN], stdout=subprocess.PIPE, text=True, env=env
    )
    assert harness.stdout is not None
    pid, folder = harness.stdout.readline().split()
    assert supervise.alive(int(pid))
    harness.send_signal(number)
    assert harness.wait(timeout=30) == 3
    assert harness.stdout.read() == f"stopped by {number.name}\n"
    harness.stdout.close()
    assert not supervise.alive(int(pid))
    assert not Path(folder).exists()


# --- the client, against two real `serve http --stateless` replicas ------------------------


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Issuer, list[str]]]:
    """Two stateless servers on one records file of 3 tenants x 40 generated tickets."""
    folder = tmp_path_factory.mktemp("load-replicas")
    idp = Issuer()
    jwks = folder / "jwks.json"
    jwks.write_text(json.dumps(idp.jwks()))
    records = folder / "records.json"
    with records.open("w", encoding="utf-8") as out:
        write_records(out, 3, 40)
    # Load clients call faster than an agent's rate limit allows, as `make load` does.
    servers = [
        HttpServer(
            folder / f"replica-{n}",
            str(jwks),
            "--stateless",
            *NO_RATE_LIMITS,
            "--records",
            str(records),
        )
        for n in (0, 1)
    ]
    yield idp, [server.url for server in servers]
    for server in servers:
        server.stop()


def _closed_port_url() -> str:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def test_a_client_moves_to_the_live_replica_and_its_walks_go_on(
    replicas: tuple[Issuer, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    idp, (first, second) = replicas
    token = idp.sign(claims("t001", "agent-1"))
    agent = Client(1, 1, True, token, ClientPlan(11, 1), replica=0)
    deadline = time.monotonic() + 120  # a bound only: the call counts end each run
    monkeypatch.setattr(client_module, "MAX_CALLS", 20)
    anyio.run(run_client, agent, [first, second], deadline)
    assert (len(agent.records), agent.switches, agent.connect_failures) == (20, 0, 0)
    # The first replica is gone: the client cannot connect, moves on, and goes on walking.
    monkeypatch.setattr(client_module, "MAX_CALLS", 60)
    anyio.run(run_client, agent, [_closed_port_url(), second], deadline)
    assert (len(agent.records), agent.switches, agent.connect_failures) == (60, 1, 1)
    assert [record.replica for record in agent.records] == [0] * 20 + [1] * 40
    result = report.check_phase("moved", [agent], 1.0, 40)
    assert (result.wrong, result.cross_tenant, result.errors) == (0, 0, {})
    assert result.walks.crossed == 1
    assert (result.walks.skipped, result.walks.repeated, result.walks.out_of_order) == (0, 0, 0)


def test_a_token_without_the_read_scope_is_forbidden_and_checked_so(
    replicas: tuple[Issuer, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    idp, urls = replicas
    token = idp.sign(claims("t002", "agent-2", scope="openid"))
    agent = Client(2, 2, False, token, ClientPlan(12, 2), replica=1)
    monkeypatch.setattr(client_module, "MAX_CALLS", 30)
    anyio.run(run_client, agent, urls, time.monotonic() + 120)
    result = report.check_phase("no-scope", [agent], 1.0, 40)
    assert (result.calls, result.wrong, result.cross_tenant, result.errors) == (30, 0, 0, {})
    assert result.codes == {"forbidden": 27, "invalid_arguments": 3}
