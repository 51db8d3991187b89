"""Walks under churn, and a refresh from a versioned snapshot amid a replayed feed.

Walks: a writer commits random feed batches between a reader's pages.

On SQLite and PostgreSQL, against a dict store kept by the version rule as the oracle:
- every call (a page, a get) answers exactly what the dict store answers at that moment:
  a change committed before a call is visible in that call;
- within a walk, ids strictly increase (so none appears twice);
- every ticket that matched when the walk began and whose key no change touched
  during the walk appears in it.
The interleaving is generated: a batch (possibly empty) is committed before each page,
and each call is one snapshot, so this covers every order of commits and calls a real
concurrent writer could produce between two calls.

Refresh: a source's history of changes (versions 1, 2, ... in order) reaches the store
out of order, part of it before and part after an `import --replace` from a versioned
snapshot of the source at a generated point (high-water: the highest version so far);
then an older feed is replayed. After each step the store holds exactly what the
oracle holds, the version rule applied to every change the store has been given, the
snapshot's changes included, and the writer's counts are the oracle's.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import OWNER, READER, PostgresDatabase
from store_cases import EVERY
from strategies import statuses, titles
from ticket_tools import Records, TicketFilter, TicketStore, execute_tool
from ticket_tools.stores.feed import Change, Counts
from ticket_tools.stores.postgres.importer import import_records, replace_records
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter
from ticket_tools.stores.records import record_rows
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.writer import SQLiteWriter

TENANTS = ("alpha", "beta")
ALPHA = {"tenant": "alpha", "can_read_tickets": True}
# Few ids, so that changes often hit the tickets a walk is reading.
ids = st.integers(min_value=100, max_value=124).map(lambda n: f"TKT-{n}")
versions = st.integers(min_value=0, max_value=12)


@st.composite
def changes(draw: st.DrawFn) -> Change:
    op = draw(st.sampled_from(("upsert", "upsert", "delete")))
    tenant, ticket_id, version = draw(st.sampled_from(TENANTS)), draw(ids), draw(versions)
    if op == "delete":
        return Change("delete", tenant, ticket_id, version)
    return Change("upsert", tenant, ticket_id, version, draw(titles), draw(statuses))


@st.composite
def initial_records(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    keys = draw(st.sets(st.tuples(st.sampled_from(TENANTS), ids), max_size=30))
    return {
        f"{tenant}:{ticket_id}": {"id": ticket_id, "title": draw(titles), "status": draw(statuses)}
        for tenant, ticket_id in sorted(keys)
    }


search_args = st.fixed_dictionaries(
    {"limit": st.integers(min_value=1, max_value=4)},
    optional={"status": statuses, "query": st.sampled_from(("login", "LOGIN", "crash", "😀"))},
)
schedules = st.lists(st.lists(changes(), max_size=6), max_size=10)


@dataclass
class Oracle:
    """The dict store, kept by the version rule in its plainest form."""

    records: dict[str, dict[str, str]]
    versions: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.versions = dict.fromkeys(self.records, 0)

    def apply(self, batch: list[Change]) -> Counts:
        """Apply `batch` by the version rule: per key, the highest version wins."""
        counts = Counts()
        for change in batch:
            key = f"{change.tenant}:{change.id}"
            if key in self.versions and change.version <= self.versions[key]:
                counts += Counts(stale=1)
                continue
            self.versions[key] = change.version
            if change.op == "upsert":
                self.records[key] = {
                    "id": change.id,
                    "title": change.title,
                    "status": change.status,
                }
                counts += Counts(upserted=1)
            else:
                self.records.pop(key, None)
                counts += Counts(deleted=1)
        return counts


Apply = Callable[[list[Change]], Counts]


def walk_under_churn(
    store: TicketStore,
    apply: Apply,
    records: dict[str, dict[str, str]],
    args: dict[str, Any],
    schedule: list[list[Change]],
) -> None:
    oracle = Oracle({key: dict(ticket) for key, ticket in records.items()})
    start: dict[str, Any] = execute_tool(
        "search_tickets", {**args, "limit": 10}, ALPHA, oracle.records
    )
    matched = set()
    while start["ok"]:  # the whole first-call answer, every page of it
        matched |= {ticket["id"] for ticket in start["tickets"]}
        if start["next_cursor"] is None:
            break
        start = execute_tool(
            "search_tickets",
            {**args, "limit": 10, "cursor": start["next_cursor"]},
            ALPHA,
            oracle.records,
        )
    touched: set[str] = set()
    seen: list[str] = []
    cursor: str | None = None
    for page in range(100):
        batch = schedule[page] if page < len(schedule) else []
        assert apply(batch) == oracle.apply(batch)
        touched |= {change.id for change in batch if change.tenant == "alpha"}
        for change in batch:  # every changed key reads as the oracle says, at once
            get = {"ticket_id": change.id}
            context = {"tenant": change.tenant, "can_read_tickets": True}
            assert execute_tool("get_ticket", get, context, store) == execute_tool(
                "get_ticket", get, context, oracle.records
            )
        call = {**args, **({} if cursor is None else {"cursor": cursor})}
        got: dict[str, Any] = execute_tool("search_tickets", call, ALPHA, store)
        assert got == execute_tool("search_tickets", call, ALPHA, oracle.records)
        seen += [ticket["id"] for ticket in got["tickets"]]
        cursor = got["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(set(seen))  # strictly increasing: no id twice
    assert matched - touched <= set(seen)


@pytest.fixture(scope="module")
def churn_pg(
    postgres_database: PostgresDatabase,
) -> Iterator[tuple[str, str, PostgresStore, PostgresWriter]]:
    """A database of its own for the churn walks: its DSNs, one reader store, one writer."""
    name = "churn"
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
    owner = postgres_database.cluster.dsn(OWNER, name)
    with psycopg.connect(owner) as connection:
        import_records(connection, {}, grant_to=READER)
    store = PostgresStore.open(postgres_database.cluster.dsn(READER, name))
    writer = PostgresWriter.open(owner)
    try:
        yield owner, name, store, writer
    finally:
        store.close()
        writer.close()
        with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


@settings(max_examples=60)
@given(records=initial_records(), args=search_args, schedule=schedules)
def test_walks_under_churn_on_sqlite(
    records: dict[str, dict[str, str]], args: dict[str, Any], schedule: list[list[Change]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tickets.sqlite"
        write_database(path, records)
        with SQLiteStore.open(path) as store, SQLiteWriter.open(path) as writer:
            walk_under_churn(store, writer.apply, records, args, schedule)


@settings(max_examples=30)
@given(records=initial_records(), args=search_args, schedule=schedules)
def test_walks_under_churn_on_postgres(
    churn_pg: tuple[str, str, PostgresStore, PostgresWriter],
    records: dict[str, dict[str, str]],
    args: dict[str, Any],
    schedule: list[list[Change]],
) -> None:
    owner, _, store, writer = churn_pg
    with psycopg.connect(owner) as connection, connection.transaction():
        connection.execute("TRUNCATE tickets, tombstones")
        import_records(connection, records)
    walk_under_churn(store, writer.apply, records, args, schedule)


# The refresh property. A history is what a source did, in order: change n has version n.
history_changes = st.lists(changes(), max_size=24).map(
    lambda drawn: [
        Change(c.op, c.tenant, c.id, number, c.title, c.status) for number, c in enumerate(drawn, 1)
    ]
)


@dataclass(frozen=True)
class Refresh:
    """One generated run: a history, and what reaches the store in which order."""

    records: dict[str, dict[str, str]]
    history: list[Change]
    steps: list[list[Change] | int]
    """Batches of changes to apply, and refreshes: an int `n` is a refresh from the
    snapshot of the records and history[:n], whose high-water is n."""


def _batches(draw: st.DrawFn, changes: list[Change]) -> list[list[Change] | int]:
    """`changes` in any order, cut into batches."""
    shuffled = draw(st.permutations(changes))
    cuts = sorted(draw(st.lists(st.integers(0, len(shuffled)), max_size=3)))
    bounds = [0, *cuts, len(shuffled)]
    return [shuffled[start:end] for start, end in itertools.pairwise(bounds)]


@st.composite
def refreshes(draw: st.DrawFn) -> Refresh:
    history = draw(history_changes)
    some = st.lists(st.sampled_from(history), max_size=10) if history else st.just([])
    steps: list[list[Change] | int] = []
    # One or two refreshes, the second one's snapshot possibly older than the first's.
    for point in draw(st.lists(st.integers(0, len(history)), min_size=1, max_size=2)):
        # The store lags and is fed out of order: any changes, before or past the point
        # (a feed applied beside the refresh), some twice.
        steps += [*_batches(draw, draw(some)), point]
    # Then the whole feed replayed, and an older part of it again.
    steps += _batches(draw, history) + _batches(draw, draw(some))
    return Refresh(draw(initial_records()), history, steps)


def _snapshot(records: dict[str, dict[str, str]], changes: list[Change]) -> Records:
    """The source's state after `changes` (in order), each ticket with its version."""
    state: dict[str, dict[str, object]] = {
        key: {**ticket, "version": 0} for key, ticket in records.items()
    }
    for change in changes:
        key = f"{change.tenant}:{change.id}"
        state.pop(key, None)
        if change.op == "upsert":
            ticket = {"id": change.id, "title": change.title, "status": change.status}
            state[key] = {**ticket, "version": change.version}
    return cast(Records, state)


def _everything(store: TicketStore | Records) -> dict[str, list[Any]]:
    if isinstance(store, TicketStore):
        return {tenant: store.find(tenant, TicketFilter(), limit=EVERY) for tenant in TENANTS}
    return {
        tenant: [
            {"id": t["id"], "title": t["title"], "status": t["status"]}
            for key, t in sorted(store.items())
            if key.startswith(f"{tenant}:")
        ]
        for tenant in TENANTS
    }


Replace = Callable[[Records, int], object]


def refresh_amid_a_feed(store: TicketStore, apply: Apply, replace: Replace, run: Refresh) -> None:
    oracle = Oracle({key: dict(ticket) for key, ticket in run.records.items()})
    assert _everything(store) == _everything(oracle.records)
    for step in run.steps:
        if isinstance(step, int):
            # The snapshot is the source's state at the point: the store now has every
            # change before it, whichever it had been given already.
            replace(_snapshot(run.records, run.history[:step]), step)
            oracle.apply(run.history[:step])
        else:
            assert apply(step) == oracle.apply(step)
        assert _everything(store) == _everything(oracle.records)
    # And the end is the source's own end: the whole history, in order.
    assert _everything(store) == _everything(_snapshot(run.records, run.history))


@settings(max_examples=150)
@given(run=refreshes())
def test_a_versioned_refresh_amid_a_replayed_feed_on_sqlite(run: Refresh) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tickets.sqlite"
        write_database(path, run.records)
        with SQLiteStore.open(path) as store, SQLiteWriter.open(path) as writer:

            def replace(snapshot: Records, high_water: int) -> object:
                return writer.replace(record_rows(snapshot), high_water=high_water)

            refresh_amid_a_feed(store, writer.apply, replace, run)


@settings(max_examples=60)
@given(run=refreshes())
def test_a_versioned_refresh_amid_a_replayed_feed_on_postgres(
    churn_pg: tuple[str, str, PostgresStore, PostgresWriter], run: Refresh
) -> None:
    owner, _, store, writer = churn_pg
    with psycopg.connect(owner) as connection:
        with connection.transaction():
            connection.execute("TRUNCATE tickets, tombstones, high_water")
            import_records(connection, run.records)

        def replace(snapshot: Records, high_water: int) -> object:
            return replace_records(connection, snapshot, high_water=high_water)

        refresh_amid_a_feed(store, writer.apply, replace, run)


def test_the_oracle_follows_the_version_rule() -> None:
    records: Records = {"alpha:TKT-101": {"id": "TKT-101", "title": "t", "status": "open"}}
    oracle = Oracle(dict(records))  # type: ignore[arg-type]
    batch = [
        Change("upsert", "alpha", "TKT-101", 0, "same", "open"),
        Change("delete", "alpha", "TKT-101", 2),
        Change("upsert", "alpha", "TKT-101", 1, "older", "open"),
        Change("upsert", "alpha", "TKT-102", 1, "new", "closed"),
    ]
    assert oracle.apply(batch) == Counts(1, 1, 2)
    assert oracle.records == {
        "alpha:TKT-102": {"id": "TKT-102", "title": "new", "status": "closed"}
    }
