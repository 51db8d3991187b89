"""The fuzz run: generated calls to every tool over generated multi-tenant stores.

Each generated example is a store whose tickets carry canary internal fields, one call to
each registered tool and one call under a free name (valid or not), each with its own
trusted context (a tenant present or absent, with or without read permission). Every call
is checked, and every check is counted:

- no exception escapes the entry point;
- no ticket of another tenant, no field beside id, title and status, no canary (internal
  value, internal key, or invalid argument text) anywhere in the result or failure detail;
- no success without read permission;
- `records` and `args` are unchanged (compared with snapshots), also after the caller
  mutates the tickets it got;
- a call the generator knows the answer to (valid arguments, surely invalid arguments, an
  unknown name) returns exactly that answer, computed by the contract's own steps below.

`make test` runs it under the default profile; `make fuzz` under the `deep` profile
(HYPOTHESIS_PROFILE=deep: 100,000 examples, so 100,000 calls per tool at least). The
counts are written to build/fuzz-report.json and printed at the end of the session.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings

from conftest import StoreFactory
from fuzz_cases import ARG_CANARY, FUZZ_ROUNDS, STORE_CANARY, FuzzCall, FuzzCase, fuzz_cases
from ticket_tools import Records, TicketFilter, TicketStore, run_tool
from ticket_tools.catalog import REGISTRY
from ticket_tools.store import tenant_of
from ticket_tools.tools.search_tickets import DEFAULT_LIMIT

PUBLIC_FIELDS = ("id", "title", "status")
CODES = ("unknown_tool", "invalid_arguments", "forbidden", "not_found")
REPORT_PATH = Path("build") / "fuzz-report.json"
# The first few violations are kept verbatim in the report; the rest are only counted.
KEPT_VIOLATIONS = 20


@dataclass
class FuzzTally:
    """What one fuzz run made and saw; every count below `calls` must end at 0."""

    store: str
    profile: str
    target: int
    """Calls each registered tool must reach: the profile's max_examples."""
    examples: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    """Calls made, by tool name; calls under a name that is not registered count as "(unknown)"."""
    outcomes: Counter[str] = field(default_factory=Counter)
    """"tool -> ok" or "tool -> code": shows the success paths were exercised."""
    exceptions: int = 0
    cross_tenant: int = 0
    extra_fields: int = 0
    canaries_seen: int = 0
    args_echoed: int = 0
    permission_bypassed: int = 0
    stores_mutated: int = 0
    args_mutated: int = 0
    bad_shapes: int = 0
    wrong_results: int = 0
    seconds: float = 0.0
    violations: list[str] = field(default_factory=list)

    BAD = (
        "exceptions",
        "cross_tenant",
        "extra_fields",
        "canaries_seen",
        "args_echoed",
        "permission_bypassed",
        "stores_mutated",
        "args_mutated",
        "bad_shapes",
        "wrong_results",
    )

    def bad_counts(self) -> dict[str, int]:
        """Return every violation count by name."""
        return {name: getattr(self, name) for name in self.BAD}

    def as_json(self) -> dict[str, object]:
        """Return the tally as plain JSON data (asdict would rebuild the Counters wrongly)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["calls"] = dict(self.calls)
        data["outcomes"] = dict(self.outcomes)
        return data

    def short_tools(self) -> list[str]:
        """Return the registered tools that got fewer calls than the target."""
        return [tool.name for tool in REGISTRY if self.calls[tool.name] < self.target]


class _Reporter:
    """A pytest plugin, registered by the first fuzz test: prints and saves every tally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tallies: list[FuzzTally] = []

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = [tally.as_json() for tally in self.tallies]
        self.path.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", "utf-8")
        terminalreporter.section("fuzz report")
        for tally in self.tallies:
            for line in _report_lines(tally):
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"written to {self.path}")


def _report_lines(tally: FuzzTally) -> Iterator[str]:
    yield (
        f"store={tally.store} profile={tally.profile} examples={tally.examples:,} "
        f"time={tally.seconds:.1f}s target per tool={tally.target:,}"
    )
    calls = ", ".join(f"{name} {count:,}" for name, count in sorted(tally.calls.items()))
    yield f"  calls: {calls}"
    bad = ", ".join(f"{name} {count}" for name, count in tally.bad_counts().items())
    yield f"  {bad}"
    outcomes = ", ".join(f"{name} {count:,}" for name, count in sorted(tally.outcomes.items()))
    yield f"  outcomes: {outcomes}"
    yield from (f"  violation: {text}" for text in tally.violations)


_REPORTER_NAME = "ticket-tools-fuzz-report"


@pytest.fixture
def fuzz_reporter(request: pytest.FixtureRequest) -> _Reporter:
    """Return the session's report plugin, registering it on first use."""
    manager = request.config.pluginmanager
    reporter = manager.get_plugin(_REPORTER_NAME)
    if reporter is None:
        reporter = _Reporter(request.config.rootpath / REPORT_PATH)
        manager.register(reporter, _REPORTER_NAME)
    assert isinstance(reporter, _Reporter)
    return reporter


def _readable_tenant(context: Mapping[str, object]) -> str | None:
    """The contract: only can_read_tickets exactly True, with a non-empty tenant, may read."""
    tenant = context.get("tenant")
    if context.get("can_read_tickets") is not True or type(tenant) is not str or not tenant:
        return None
    return tenant


def _public(stored: Mapping[str, object]) -> dict[str, object]:
    return {name: stored[name] for name in PUBLIC_FIELDS}


def _expected(call: FuzzCall, records: Records) -> dict[str, object] | None:
    """Return the contract's answer when the generator knows it, else None."""
    tool = REGISTRY.get(call.name)
    if tool is None:
        return {"ok": False, "code": "unknown_tool"}
    if call.expect == "invalid":
        return {"ok": False, "code": "invalid_arguments"}
    if call.expect == "unknown":
        return None
    tenant = _readable_tenant(call.context)
    if tenant is None:
        return {"ok": False, "code": "forbidden"}
    assert isinstance(call.args, dict)
    if tool.name == "get_ticket":
        stored = records.get(f"{tenant}:{call.args['ticket_id']}")
        if stored is None:
            return {"ok": False, "code": "not_found"}
        return {"ok": True, "ticket": _public(stored)}
    if tool.name == "search_tickets":
        return _expected_page(call.args, tenant, records)
    return None


def _expected_page(args: Mapping[str, object], tenant: str, records: Records) -> dict[str, object]:
    """The search contract's five steps, written out as plainly as the brief states them."""
    mine = [stored for key, stored in records.items() if tenant_of(key) == tenant]
    mine.sort(key=lambda stored: str(stored["id"]))
    where = TicketFilter(
        status=cast("str | None", args.get("status")),
        text=cast("str | None", args.get("query")),
        after=cast("str | None", args.get("cursor")),
    )
    mine = [stored for stored in mine if where.matches(stored)]
    limit = args.get("limit", DEFAULT_LIMIT)
    assert isinstance(limit, int | float)
    page = [_public(stored) for stored in mine[: int(limit)]]
    next_cursor = page[-1]["id"] if len(mine) > len(page) else None
    return {"ok": True, "tickets": page, "next_cursor": next_cursor}


def _returned_tickets(result: Mapping[str, object]) -> list[object]:
    tickets: list[object] = []
    if "ticket" in result:
        tickets.append(result["ticket"])
    found = result.get("tickets")
    if isinstance(found, list):
        tickets.extend(found)
    return tickets


def _well_shaped(result: object, tool_name: str | None) -> bool:
    if type(result) is not dict:
        return False
    if result.get("ok") is False:
        return set(result) == {"ok", "code"} and result["code"] in CODES
    if result.get("ok") is not True:
        return False
    if tool_name == "get_ticket":
        return set(result) == {"ok", "ticket"} and type(result["ticket"]) is dict
    if tool_name == "search_tickets":
        cursor = result.get("next_cursor")
        return (
            set(result) == {"ok", "tickets", "next_cursor"}
            and type(result["tickets"]) is list
            and all(type(ticket) is dict for ticket in result["tickets"])
            and (cursor is None or type(cursor) is str)
        )
    return True


class _Checker:
    """Run one call and count what it broke."""

    def __init__(self, tally: FuzzTally, records: dict[str, dict[str, object]]) -> None:
        self.tally = tally
        self.records = records
        self.snapshot = repr(records)
        # Titles are unique in a generated store, so each names the tenant it is stored under.
        self.owner = {
            str(stored["title"]): (key.rpartition(":")[0], stored)
            for key, stored in records.items()
        }
        self.broken: list[str] = []

    def flag(self, count: str, what: str, call: FuzzCall) -> None:
        setattr(self.tally, count, getattr(self.tally, count) + 1)
        text = f"{count}: {what} | name={call.name!r} args={call.args!r} context={call.context!r}"
        self.broken.append(text)
        if len(self.tally.violations) < KEPT_VIOLATIONS:
            self.tally.violations.append(text)

    def run(self, call: FuzzCall, store: Records | TicketStore) -> None:
        tool = REGISTRY.get(call.name)
        tool_name = None if tool is None else tool.name
        self.tally.calls[tool_name or "(unknown)"] += 1
        args_before = repr(call.args)
        try:
            outcome = run_tool(call.name, call.args, call.context, store)
        except Exception as error:  # counting what escapes is the point of this test
            self.flag("exceptions", f"{type(error).__name__}: {error}", call)
            return
        result = outcome.result
        code = result.get("code") if type(result) is dict else None
        self.tally.outcomes[f"{tool_name or '(unknown)'} -> {code or 'ok'}"] += 1
        self.check_result(call, result, outcome.detail, tool_name)
        if repr(call.args) != args_before:
            self.flag("args_mutated", "the call changed its args", call)
        if repr(self.records) != self.snapshot:
            self.flag("stores_mutated", "the call changed the records", call)
            self.snapshot = repr(self.records)
        # A caller may change what it got: that must never reach the store.
        for ticket in _returned_tickets(result) if type(result) is dict else []:
            if isinstance(ticket, dict):
                ticket["title"] = "changed by the caller"
                ticket[f"{STORE_CANARY}-added"] = True
        if repr(self.records) != self.snapshot:
            self.flag("stores_mutated", "changing a result changed the records", call)
            self.snapshot = repr(self.records)

    def check_result(
        self, call: FuzzCall, result: object, detail: str | None, tool_name: str | None
    ) -> None:
        if not _well_shaped(result, tool_name):
            self.flag("bad_shapes", f"result {result!r}", call)
        text = json.dumps(result, default=repr, ensure_ascii=False) + repr(detail)
        if STORE_CANARY in text:
            self.flag("canaries_seen", f"result {text}", call)
        if ARG_CANARY in text:
            self.flag("args_echoed", f"result {text}", call)
        if type(result) is not dict:
            return
        tenant = _readable_tenant(call.context)
        if result.get("ok") is not False and tenant is None:
            self.flag("permission_bypassed", f"result {result!r}", call)
        for ticket in _returned_tickets(result):
            self.check_ticket(call, ticket, tenant)
        expected = _expected(call, self.records)
        if expected is not None and result != expected:
            self.flag("wrong_results", f"got {result!r}, expected {expected!r}", call)

    def check_ticket(self, call: FuzzCall, ticket: object, tenant: str | None) -> None:
        if not isinstance(ticket, dict):
            return
        if tuple(ticket) != PUBLIC_FIELDS:
            self.flag("extra_fields", f"ticket fields {sorted(ticket)}", call)
        owner, stored = self.owner.get(str(ticket.get("title")), (None, None))
        if stored is None or any(ticket.get(name) != stored[name] for name in PUBLIC_FIELDS):
            self.flag("wrong_results", f"ticket {ticket!r} is not a stored ticket", call)
        elif owner != tenant:
            self.flag("cross_tenant", f"ticket {ticket!r} is stored under {owner!r}", call)


def test_fuzz_every_tool_over_generated_stores(
    make_store: StoreFactory, request: pytest.FixtureRequest, fuzz_reporter: _Reporter
) -> None:
    """Every generated call passes every check, and each tool reaches the profile's target."""
    store_kind = request.node.callspec.params["make_store"]
    tally = FuzzTally(
        store=store_kind,
        profile=os.environ.get("HYPOTHESIS_PROFILE", "default"),
        target=settings().max_examples,
    )
    fuzz_reporter.tallies.append(tally)

    # Each example makes FUZZ_ROUNDS calls per tool, so fewer examples reach the target.
    @settings(max_examples=-(-tally.target // FUZZ_ROUNDS))
    @given(case=fuzz_cases())
    def run_case(case: FuzzCase) -> None:
        tally.examples += 1
        checker = _Checker(tally, case.records)
        store = make_store(case.records)
        for call in case.calls:
            checker.run(call, store)
        assert checker.broken == []

    started = time.perf_counter()
    try:
        run_case()
    finally:
        tally.seconds = time.perf_counter() - started
    assert tally.bad_counts() == dict.fromkeys(FuzzTally.BAD, 0)
    assert tally.short_tools() == []
