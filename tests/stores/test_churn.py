"""Walks under churn: a writer commits random feed batches between a reader's pages.

On SQLite and PostgreSQL, against a dict store kept by the version rule as the oracle:
- every call (a page, a get) answers exactly what the dict store answers at that moment:
  a change committed before a call is visible in that call;
- within a walk, ids strictly increase (so none appears twice);
- every ticket that matched when the walk began and whose key no change touched
  during the walk appears in it.
The interleaving is generated: a batch (possibly empty) is committed before each page,
and each call is one snapshot, so this covers every order of commits and calls a real
concurrent writer could produce between two calls.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import OWNER, READER, PostgresDatabase
from strategies import statuses, titles
from ticket_tools import Records, TicketStore, execute_tool
from ticket_tools.stores.feed import Change, Counts
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter
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
