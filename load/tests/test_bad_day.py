"""The bad-day phase's own logic (load/bad_day/): answers named, targets judged, problems
found, and the helper that runs a flood in a process of its own. The phase runs in `make load`."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest

from load import stats
from load.bad_day import elsewhere, rpc
from load.bad_day import report as bad_day_report


def _rpc(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, **message}).encode()


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        pytest.param(200, _rpc({"result": {"tools": []}}), "tools", id="tools-list"),
        pytest.param(
            200, _rpc({"result": {"structuredContent": {"ok": True}}}), "ok", id="a-ticket"
        ),
        pytest.param(
            200,
            _rpc({"result": {"structuredContent": {"ok": False, "code": "unavailable"}}}),
            "unavailable",
            id="a-tool-failure",
        ),
        pytest.param(200, _rpc({"error": {"code": -32602}}), "-32602", id="a-protocol-error"),
        pytest.param(200, b"<html>", "not json", id="not-json"),
        pytest.param(429, b"{}", "http 429", id="refused"),
        pytest.param(0, b"", "http 0", id="no-answer"),
    ],
)
def test_an_answer_is_named_by_what_it_was(status: int, body: bytes, code: str) -> None:
    assert rpc.answer_code(status, body) == code


def test_percentiles_in_milliseconds_and_ratios() -> None:
    assert stats.ms([0.010, 0.020, 0.030, 0.040], 50) == 20.0
    assert stats.ms([], 50) is None
    assert stats.ratio(30.0, 20.0) == 1.5
    assert (stats.ratio(None, 20.0), stats.ratio(30.0, 0.0)) == (None, None)


def _summary(p50: float, p99: float) -> dict[str, Any]:
    return {"calls": 100, "calls_per_s": 12.5, "p50_ms": p50, "p99_ms": p99, "max_ms": p99}


def _stall(p99: float, fail_max: float) -> dict[str, Any]:
    return {
        "seconds": 8.0,
        "no_store_idle": _summary(2.0, 4.0),
        "no_store_stalled": _summary(3.0, p99),
        "machine_lag_ms": {"p50": 0.1, "p99": 30.5, "max": 70.0},
        "no_store_codes": {"-32602": 10, "invalid_arguments": 10, "tools": 10},
        "store_calls_failed": 6,
        "store_fail_median_s": 2.0,
        "store_fail_max_s": fail_max,
        "getter_codes": {"ok": 50, "unavailable": 6},
        "readyz_503_after_s": 2.5,
        "readyz_200_after_s": 0.03,
    }


FIGURES: dict[str, Any] = {
    "noisy_neighbour": {
        "q_alone": _summary(10.0, 20.0),
        "q_with_h": _summary(12.0, 50.0),
        "p50_ratio": 1.2,
        "p99_ratio": 2.5,
        "q_codes": {"ok": 500},
        "h_codes": {"ok": 40},
    },
    "stall_lock": _stall(62.6, 2.05),
    "sessions": {
        "q_alone": _summary(5.0, 9.0),
        "q_during_flood": _summary(6.0, 12.0),
        "q_during_burst": _summary(7.0, 14.0),
        "flood_p50_ratio": 1.2,
        "burst_p50_ratio": 1.4,
        "flood_opened": 32,
        "flood_refused": {"http 429 session cap": 900},
        "newcomer_sessions": 40,
        "newcomer_failures": {},
        "per_call_host": {
            "walk_codes": {"ok": 40},
            "at_once_codes": {"ok": 10},
            "odd_statuses": {},
        },
        "burst_codes": {"rate_limited": 650, "http 429": 50, "not_found": 38},
        "q_codes": {"ok": 300},
    },
    "sigterm": {
        "rounds": [{"exit_s": 3.3, "status": 0, "answer": "unavailable"}],
        "exit_median_s": 3.3,
        "exit_max_s": 3.3,
    },
}


def test_where_the_cpu_went_is_a_row_after_the_noisy_neighbours() -> None:
    cores = {
        "alone": {"postgres": 0.2, "replica": 0.5, "machine": 1.1, "of": 2},
        "with_h": {"postgres": 1.3, "replica": 0.4, "machine": 1.97, "of": 2},
    }
    figures = {"noisy_neighbour": {**FIGURES["noisy_neighbour"], "cores_busy": cores}}
    assert bad_day_report.rows(figures)[2:] == [
        (
            "cores busy alone -> with H: PostgreSQL, replica, whole machine",
            "0.2 -> 1.3, 0.5 -> 0.4, 1.1 -> 1.97 (of 2)",
            "(no target)",
            "-",
        )
    ]


def test_each_target_is_judged_met_or_not() -> None:
    assert bad_day_report.rows(FIGURES) == [
        ("Q's p50 with H's searches / alone", "1.2x (10.0 -> 12.0 ms)", "<= 2x", "met"),
        ("Q's p99 with H's searches / alone", "2.5x (20.0 -> 50.0 ms)", "<= 2x", "NOT met"),
        (
            "table locked: p99 of calls needing no store (idle before; machine lag p99)",
            "62.6 ms (4.0 ms; 30.5 ms)",
            "<= 50 ms",
            "NOT met",
        ),
        (
            "table locked: a store call fails after (median, max)",
            "2.0 s, 2.05 s (6 calls)",
            "<= 2.5 s",
            "met",
        ),
        ("table locked: /readyz 503 after / 200 again after", "2.5 s / 0.03 s", "(no target)", "-"),
        (
            "Q's p50 during one token's session flood / alone",
            "1.2x (5.0 -> 6.0 ms)",
            "<= 2x",
            "met",
        ),
        (
            "Q's p50 during one token's burst of calls / alone",
            "1.4x (5.0 -> 7.0 ms)",
            "<= 2x",
            "met",
        ),
        (
            "the flooding token: sessions opened, refused",
            "32, 900 http 429 session cap",
            "(bounded)",
            "-",
        ),
        (
            "a session-per-call host, default limits: 40 pages, then 10 at once: answered",
            "50 of 50",
            "all",
            "met",
        ),
        ("the bursting token: calls answered, refused", "38, 700", "(bounded)", "-"),
        ("Q's new sessions meanwhile: opened, failed", "40, 0", "0 failed", "met"),
        (
            "SIGTERM during a stall: exit (median, max of 1)",
            "3.3 s, 3.3 s, status [0]",
            "<= 4 s",
            "met",
        ),
    ]
    table = bad_day_report.render(FIGURES).splitlines()
    assert table[0].split() == ["bad", "day", "(one", "replica)", "figure", "target"]
    assert table[2].endswith("<= 2x        met")
    assert (bad_day_report.rows(None), bad_day_report.render({})) == ([], "")


def test_a_missed_timing_is_no_problem_but_a_wrong_answer_is() -> None:
    assert bad_day_report.problems(FIGURES) == []
    assert bad_day_report.problems(None) == []
    wrong = json.loads(json.dumps(FIGURES))
    wrong["noisy_neighbour"]["q_codes"] = {"ok": 5, "-32603": 1}
    wrong["stall_lock"]["no_store_codes"]["http 503"] = 1
    wrong["stall_lock"]["getter_codes"]["-32603"] = 2
    wrong["stall_lock"]["readyz_200_after_s"] = None
    wrong["sessions"]["newcomer_failures"] = {"a session could not be opened: HTTP 429": 1}
    wrong["sessions"]["per_call_host"]["walk_codes"] = {"ok": 7, "http 429": 33}
    wrong["sessions"]["per_call_host"]["odd_statuses"] = {"(200, 202, 200, 429, 200, 429)": 33}
    wrong["sigterm"]["rounds"].append({"exit_s": 9.0, "status": 1, "answer": "no answer"})
    assert bad_day_report.problems(wrong) == [
        "bad day: noisy neighbour: Q got {'-32603': 1}",
        "bad day: lock: calls that need no store got ['http 503']",
        "bad day: lock: store calls got ['-32603']",
        "bad day: lock: /readyz did not turn 503 and back to 200",
        "bad day: a session-per-call host got {'http 429': 33}, statuses"
        " {'(200, 202, 200, 429, 200, 429)': 33}",
        "bad day: Q's new sessions failed: {'a session could not be opened: HTTP 429': 1}",
        "bad day: a SIGTERM round exited 1, answer no answer",
    ]


def test_elsewhere_runs_the_jobs_in_another_process_and_sends_back_their_figures() -> None:
    seen: list[int] = []

    def job(stop: threading.Event) -> None:
        seen.append(os.getpid())
        stop.wait()

    with elsewhere.elsewhere([job, job], lambda: sorted(seen)) as got:
        pass
    [pids] = got
    assert len(pids) == 2
    assert pids[0] == pids[1] != os.getpid()
    assert seen == []  # the jobs ran in the child only


def test_the_lag_sampler_measures_oversleep() -> None:
    lag = elsewhere.Lag()
    stop = threading.Event()
    timer = threading.Timer(0.1, stop.set)
    timer.start()
    lag.run(stop)
    figures = lag.figures()
    assert len(lag.late) >= 1
    assert figures["max"] == round(max(lag.late) * 1000, 1)
