"""The failover phase's own logic (load/failover.py): the recovery seconds, the replay's count,
the oracle's end state, the versioned throughput feed, the DSNs, and the problems it reports.
The phase itself (a primary killed, a standby promoted) runs in `make load`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from load import failover, report, stats
from load.checker import Observation
from load.churn import after_records, feed_lines
from load.client import CallRecord, Client
from load.workload import Call, ClientPlan

GET = Call("get_ticket", {"ticket_id": "TKT-001"})
OK = Observation(result={"ok": True, "ticket": {}}, text="x")
UNAVAILABLE = Observation(result={"ok": False, "code": "unavailable"}, is_error=True, text="x")
KILLED = 100.0
APPLIED = "applied 10000 changes from feed.jsonl to tickets: "


def _client(number: int, replica: int, calls: list[tuple[float, float, Observation]]) -> Client:
    client = Client(number, 5, True, "token", ClientPlan(number, 5), replica=replica)
    for started, ended, seen in calls:
        client.records.append(CallRecord(GET, seen, started, ended, replica))
    return client


def test_recovery_counts_only_calls_sent_after_the_kill() -> None:
    on_primary = _client(
        1,
        1,
        [
            (99.9, 100.05, OK),  # sent before the kill: answered by the primary itself
            (100.05, 100.3, UNAVAILABLE),
            (100.3, 100.45, OK),
        ],
    )
    on_standby = _client(0, 0, [(100.01, 100.02, OK)])
    slow = _client(2, 0, [(100.5, 101.25, OK)])
    figures = failover.recovery_figures(
        [on_primary, on_standby, slow], KILLED, 100.2, 4740, [(100.3, 4740), (101.2, 4741)]
    )
    assert figures == {
        "promoted_after_s": 0.2,
        "first_good_read_s": 0.45,
        "all_clients_read_after_s": 1.25,
        "first_good_write_s": 1.2,
        "held_at_promotion": 4740,
    }


def test_recovery_figures_are_none_when_never_seen() -> None:
    never = _client(1, 1, [(100.1, 100.2, UNAVAILABLE)])
    figures = failover.recovery_figures([never], KILLED, 100.5, 10, [(100.6, 10), (100.7, 9)])
    assert (figures["first_good_read_s"], figures["all_clients_read_after_s"]) == (None, None)
    assert figures["first_good_write_s"] is None


def test_clients_without_the_read_scope_are_not_waited_for() -> None:
    reader = _client(1, 1, [(100.1, 100.3, OK)])
    no_scope = _client(3, 1, [(100.1, 100.2, OK)])
    no_scope.can_read = False
    figures = failover.recovery_figures([reader, no_scope], KILLED, 100.1, 0, [])
    assert (figures["first_good_read_s"], figures["all_clients_read_after_s"]) == (0.3, 0.3)


@pytest.mark.parametrize(
    ("summary", "exact"),
    [
        pytest.param(f"{APPLIED}4208 upserted, 1052 deleted, 4740 stale", True, id="exact"),
        pytest.param(
            f"{APPLIED}4208 upserted, 1052 deleted, 4739 stale", False, id="too-few-stale"
        ),
        pytest.param(f"{APPLIED}4209 upserted, 1052 deleted, 4740 stale", False, id="one-too-many"),
        pytest.param(f"{APPLIED}4208 upserted, 1052 deleted, 4740 stale.", False, id="a-tail"),
        pytest.param("ticket-tools: cannot write PostgreSQL", False, id="an-error-line"),
        pytest.param("", False, id="nothing"),
    ],
)
def test_a_replay_is_exact_when_it_counts_every_line_once(summary: str, exact: bool) -> None:
    assert failover.replay_exact(summary, 10_000, 4740) is exact


def test_the_end_state_is_every_tenant_after_the_feed() -> None:
    rows = failover.expected_rows(2, 8)
    expected = sorted(
        (key.partition(":")[0], t["id"], t["title"], t["status"])
        for index in (0, 1)
        for key, t in after_records(index, 8).items()
    )
    assert rows == expected
    assert rows[:2] == [
        ("t000", "TKT-000", "Login fails after password reset [t000]", "closed"),
        ("t000", "TKT-001", "Churned ticket 1 [t000]", "closed"),  # was open
    ]
    assert len(rows) == 16  # 8 tickets each, TKT-001 and TKT-005 changed in place


def test_the_throughput_feed_is_the_feed_at_each_version() -> None:
    lines = feed_lines([0], 8, "s")
    copies = failover.versioned(lines, range(4, 6))
    assert len(copies) == 2 * len(lines)
    assert [line.count(b'"version": 4') for line in copies[: len(lines)]] == [1] * len(lines)
    assert copies[len(lines) :] == [
        line.replace(b'"version": 1', b'"version": 5') for line in lines
    ]


def test_the_dsns_name_both_hosts_in_the_order_each_role_wants() -> None:
    pair = cast(Any, failover.Pair.__new__(failover.Pair))
    pair.primary = SimpleNamespace(root=Path("/p"))
    pair.standby = SimpleNamespace(root=Path("/s"))
    assert failover.Pair.reader_dsns(pair) == [
        "host=/s,/p dbname=tickets user=tickets_reader target_session_attrs=prefer-standby",
        "host=/p,/s dbname=tickets user=tickets_reader target_session_attrs=any",
    ]
    assert failover.Pair.writer_dsn(pair, "feed_sync") == (
        "host=/p,/s dbname=feed_sync user=tickets_owner target_session_attrs=read-write"
    )


def _failover(**fault: object) -> report.PhaseResult:
    figures: dict[str, object] = {
        "first_good_read_s": 0.1,
        "all_clients_read_after_s": 0.2,
        "first_good_write_s": 1.2,
        "replay_as_expected": True,
        "end_state_as_oracle": True,
    }
    return report.PhaseResult(
        name="failover",
        clients=16,
        seconds=40.0,
        calls=100,
        calls_per_second=2.5,
        latency=stats.Latency(1.0, 2.0, 3.0, 4.0),
        wrong=0,
        cross_tenant=0,
        errors={"unavailable": 3},
        codes={"ok": 97},
        walks=report.WalkTotals(),
        fault={**figures, **fault},
    )


def test_the_failover_may_fail_only_with_unavailable_and_must_end_as_the_oracle() -> None:
    assert report.problems([_failover()], []) == []
    bad = _failover(
        end_state_as_oracle=False,
        replay_as_expected=False,
        first_good_write_s=None,
        all_clients_read_after_s=None,
    )
    bad.errors = {"unavailable": 3, "internal_error": 1}
    assert report.problems([bad], []) == [
        "failover: unexpected errors {'internal_error': 1}",
        "failover: the end state differs from the oracle's",
        "failover: the replay did not count every change once",
        "failover: no all clients read after",
        "failover: no first good write",
    ]
