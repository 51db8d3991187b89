"""The title index on SQLite and PostgreSQL: every page the dict store's, before and after writes.

Issue 31's done-when, as properties over generated stores: titles and queries of ASCII,
é, ß, CJK, İ (two code points lowered), the Kelvin sign, sigma, %, _, \\ and spaces;
cursors of any text; limits 1 to 11 and past any tenant (2^63 - 1, 2^70). Every tenant is
indexed here (INDEX_MIN_TICKETS 0) and the scan before the index reads one row a ticket, so that the
index's own paths answer most searches; ids of six digits spread over several buckets.
After generated feeds (upserts, deletes, stale changes, tombstones) and refreshes (a swap,
a versioned merge), the pages still match the oracle's, and the index is exactly what a
build from the stored tickets makes: no gram left behind, none missing.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import OWNER, READER, PostgresDatabase
from index_rows import expected_index, index_rows
from store_cases import EVERY
from ticket_tools import DictStore, Records, TicketFilter, TicketStore, run_tool
from ticket_tools.declarations.widths import make_registry
from ticket_tools.stores import index_search, index_writes
from ticket_tools.stores.feed import Change, Counts
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.postgres.importer import import_records, replace_records
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter
from ticket_tools.stores.records import record_rows
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore
from ticket_tools.stores.sqlite.writer import SQLiteWriter

SIX = IdFormat(6)
REGISTRY = make_registry(SIX)
TENANTS = ("alpha", "beta", "É")
# Issue 31's characters, END (\x01) itself, and words that make queries hit.
ALPHABET = "aAbBkKlLoOgG eéÉßẞİiI\u212a\u03a3\u03c3\u03c2票据%_\\\x01"
WORDS = ("login", "LOGIN", "kerberos", "İstanbul", "Straße", "票据", "100%", "a_b", "C:\\x")
# Numbers across four buckets of 4,096: the first, the second's edges, and far on.
numbers = st.sampled_from((0, 1, 2, 4095, 4096, 4097, 8191, 12288, 999_999)) | st.integers(
    0, 13_000
)
ticket_ids = numbers.map(lambda n: f"TKT-{n:06d}")
statuses = st.sampled_from(("open", "closed"))
titles = st.lists(st.sampled_from(WORDS) | st.text(ALPHABET, max_size=6), max_size=4).map(" ".join)
queries = (
    st.sampled_from(WORDS)
    | st.text(ALPHABET, min_size=1, max_size=6)
    | st.text(ALPHABET, min_size=30, max_size=40)
)
cursors = st.none() | ticket_ids | st.text("TK-0149 \x00\uffff", max_size=8)
# Past any tenant: the largest LIMIT either database takes, and past it (store_cases).
limits = st.integers(1, 11) | st.just(EVERY) | st.just(2**70)


@st.composite
def stores(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    keys = draw(st.sets(st.tuples(st.sampled_from(TENANTS), ticket_ids), max_size=40))
    return {
        f"{tenant}:{ticket_id}": {"id": ticket_id, "title": draw(titles), "status": draw(statuses)}
        for tenant, ticket_id in sorted(keys)
    }


@st.composite
def requests(draw: st.DrawFn, records: dict[str, dict[str, str]]) -> tuple[str, TicketFilter, int]:
    tenant = draw(st.sampled_from((*TENANTS, "delta")))
    stored = [ticket["title"] for key, ticket in records.items() if key.startswith(f"{tenant}:")]
    # A query cut from a stored title, so that most searches find something.
    cut: st.SearchStrategy[str] = st.nothing()
    if any(stored):
        cut = st.sampled_from([title for title in stored if title]).flatmap(
            lambda title: st.tuples(st.integers(0, len(title) - 1), st.integers(1, 40)).map(
                lambda span: title[span[0] : span[0] + span[1]]
            )
        )
    text = draw(st.none() | queries | cut)
    where = TicketFilter(draw(st.none() | statuses), text, draw(cursors))
    return tenant, where, draw(limits)


@pytest.fixture(scope="module", autouse=True)
def index_everything() -> Iterator[None]:
    """Index every tenant, and let the index answer after a scan of one row a ticket."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
        patch.setattr(index_search, "MIN_SCAN_ROWS", 1)
        patch.setattr(index_search, "SCAN_ROWS_PER_TICKET", 1)
        yield


# --- The stores under test, each made from records, with its writer and index dump ---


@dataclass
class Made:
    """A store of the generated records, its writer's apply and replace, and its index rows."""

    store: TicketStore
    apply: Callable[[list[Change]], Counts]
    replace: Callable[[Records, int | None], object]
    index: Callable[[], dict[str, set[tuple[object, ...]]]]


Maker = Callable[[Records], Made]


@pytest.fixture(scope="module")
def sqlite_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


@pytest.fixture(scope="module")
def pg_six(
    postgres_database: PostgresDatabase,
) -> Iterator[tuple[str, PostgresStore, PostgresWriter]]:
    """A database of six-digit ids: the owner's DSN, a reader store, the owner's writer."""
    name = "title_index"
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
    owner = postgres_database.cluster.dsn(OWNER, name)
    with psycopg.connect(owner) as connection:
        import_records(connection, {}, grant_to=READER, id_format=SIX)
    store = PostgresStore.open(postgres_database.cluster.dsn(READER, name), id_format=SIX)
    writer = PostgresWriter.open(owner, id_format=SIX)
    try:
        yield owner, store, writer
    finally:
        store.close()
        writer.close()
        with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def make(request: pytest.FixtureRequest) -> Iterator[Maker]:
    if request.param == "sqlite":
        folder: Path = request.getfixturevalue("sqlite_folder")
        counter = iter(range(10**9))
        opened: list[SQLiteStore | SQLiteWriter] = []

        def sqlite_made(records: Records) -> Made:
            for done in opened:  # the previous example's
                done.close()
            path = folder / f"t{next(counter)}.sqlite"
            write_database(path, records, id_format=SIX)
            store = SQLiteStore.open(path, id_format=SIX)
            writer = SQLiteWriter.open(path, id_format=SIX)
            opened[:] = [store, writer]

            def replace(snapshot: Records, high_water: int | None) -> object:
                return writer.replace(record_rows(snapshot, id_format=SIX), high_water=high_water)

            def index() -> dict[str, set[tuple[object, ...]]]:
                with sqlite3.connect(path) as connection:
                    return index_rows(connection)

            return Made(store, writer.apply, replace, index)

        yield sqlite_made
        for done in opened:
            done.close()
        return
    owner, store, writer = request.getfixturevalue("pg_six")

    def postgres_made(records: Records) -> Made:
        with psycopg.connect(owner) as connection, connection.transaction():
            connection.execute("TRUNCATE tickets, tombstones, high_water")
            import_records(connection, records, id_format=SIX)

        def replace(snapshot: Records, high_water: int | None) -> object:
            with psycopg.connect(owner) as connection:
                return replace_records(connection, snapshot, high_water=high_water, id_format=SIX)

        def index() -> dict[str, set[tuple[object, ...]]]:
            with psycopg.connect(owner) as connection:
                return index_rows(connection)

        return Made(store, writer.apply, replace, index)

    yield postgres_made


def same_answers(store: TicketStore, records: Records, data: st.DataObject) -> None:
    """Generated finds and search walks answer as the dict store does."""
    oracle = DictStore(records)
    for _ in range(4):
        tenant, where, limit = data.draw(requests(dict(records)), label="find")  # type: ignore[arg-type]
        assert store.find(tenant, where, limit=limit) == oracle.find(tenant, where, limit=limit)
    tenant, where, limit = data.draw(requests(dict(records)), label="walk")  # type: ignore[arg-type]
    args: dict[str, Any] = {"limit": limit if limit <= 11 else 10}
    if where.text is not None and len(where.text) <= 40:
        args["query"] = where.text
    if where.status is not None:
        args["status"] = where.status
    context = {"tenant": tenant, "can_read_tickets": True}
    for _ in range(50):
        got = run_tool("search_tickets", args, context, store, registry=REGISTRY).result
        assert got == run_tool("search_tickets", args, context, records, registry=REGISTRY).result
        if got.get("next_cursor") is None:
            break
        args["cursor"] = got["next_cursor"]


@settings(max_examples=120)
@given(records=stores(), data=st.data())
def test_every_page_is_the_dict_stores(
    make: Maker, records: dict[str, dict[str, str]], data: st.DataObject
) -> None:
    made = make(records)
    same_answers(made.store, records, data)
    assert made.index() == expected_index(records)


# --- After feeds and refreshes ---


@st.composite
def changes(draw: st.DrawFn, records: dict[str, dict[str, str]]) -> Change:
    """A change of a stored key (its title changed or the ticket deleted) or of a new one."""
    new = st.tuples(st.sampled_from(TENANTS), ticket_ids)
    stored = [tuple(key.split(":")) for key in records]
    key = draw(st.sampled_from(stored) | new if stored else new)
    version = draw(st.integers(0, 6))
    if draw(st.booleans()) and draw(st.booleans()):
        return Change("delete", key[0], key[1], version)
    return Change("upsert", key[0], key[1], version, draw(titles), draw(statuses))


@dataclass
class State:
    """The oracle: the tickets and every key's version, by the version rule."""

    records: dict[str, dict[str, str]]
    versions: dict[str, int]
    floor: int | None = None
    """The version of every key neither stored nor buried (after a versioned refresh)."""

    def apply(self, batch: list[Change]) -> Counts:
        counts = Counts()
        for change in batch:
            key = f"{change.tenant}:{change.id}"
            version = self.versions.get(key, self.floor)
            if version is not None and change.version <= version:
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


@settings(max_examples=60)
@given(records=stores(), data=st.data())
def test_the_index_follows_feeds_and_refreshes(
    make: Maker, records: dict[str, dict[str, str]], data: st.DataObject
) -> None:
    made = make(records)
    state = State({key: dict(ticket) for key, ticket in records.items()}, dict.fromkeys(records, 0))
    for step in range(data.draw(st.integers(1, 4), label="steps")):
        kind = data.draw(st.sampled_from(("feed", "feed", "swap", "merge")), label=f"step {step}")
        if kind == "feed":
            batch = data.draw(st.lists(changes(state.records), max_size=12), label="batch")
            assert made.apply(batch) == state.apply(batch)
        elif kind == "swap":
            fresh = data.draw(stores(), label="swap")
            made.replace(fresh, None)
            state = State(
                {key: dict(ticket) for key, ticket in fresh.items()}, dict.fromkeys(fresh, 0)
            )
        else:
            # A snapshot at a high-water past every version so far: it is the whole truth.
            fresh = data.draw(stores(), label="merge")
            high = max([*state.versions.values(), state.floor or 0]) + 1
            made.replace({key: {**ticket, "version": high} for key, ticket in fresh.items()}, high)
            state = State(
                {key: dict(ticket) for key, ticket in fresh.items()},
                dict.fromkeys(fresh, high),
                high,
            )
        same_answers(made.store, state.records, data)
        assert made.index() == expected_index(state.records)


def test_a_tenant_grown_to_the_threshold_is_indexed_whole(
    make: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 3)
    records = {
        f"alpha:TKT-00000{n}": {"id": f"TKT-00000{n}", "title": f"Login {n}", "status": "open"}
        for n in (1, 2)
    }
    made = make(records)
    assert made.index() == expected_index(records, indexed=())
    grown = Change("upsert", "alpha", "TKT-004097", 1, "Kerberos expired", "open")
    assert made.apply([grown]) == Counts(1, 0, 0)
    state = {
        **records,
        "alpha:TKT-004097": {"id": "TKT-004097", "title": "Kerberos expired", "status": "open"},
    }
    assert made.index() == expected_index(state, indexed={"alpha"})
    # It keeps its index as it shrinks below the threshold again.
    shrink = [
        Change("delete", "alpha", "TKT-000001", 1),
        Change("delete", "alpha", "TKT-000002", 1),
    ]
    assert made.apply(shrink) == Counts(0, 2, 0)
    del state["alpha:TKT-000001"], state["alpha:TKT-000002"]
    assert made.index() == expected_index(state, indexed={"alpha"})
    assert made.store.find("alpha", TicketFilter(text="kerberos"), limit=EVERY) == [
        {"id": "TKT-004097", "title": "Kerberos expired", "status": "open"}
    ]


@pytest.mark.parametrize("limit", [EVERY, 2**70])
def test_a_limit_past_any_tenant_is_every_match(
    make: Maker, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # The shipped scan (8 rows a ticket wanted): 8 x limit is past any LIMIT either takes.
    monkeypatch.setattr(index_search, "MIN_SCAN_ROWS", 64)
    monkeypatch.setattr(index_search, "SCAN_ROWS_PER_TICKET", 8)
    records = {
        f"alpha:TKT-{n:06d}": {
            "id": f"TKT-{n:06d}",
            "title": "Kerberos expired" if n % 3 == 0 else "Login fails",
            "status": "open" if n % 5 == 0 else "closed",
        }
        for n in range(12)
    }
    made = make(records)
    oracle = DictStore(records)
    for where in (
        TicketFilter(text="kerberos"),
        TicketFilter(text="fails"),
        TicketFilter(status="open"),
        TicketFilter(status="closed", text="login", after="TKT-000004"),
    ):
        assert made.store.find("alpha", where, limit=limit) == oracle.find(
            "alpha", where, limit=limit
        )


def test_a_tombstones_key_brought_back_in_an_indexed_tenant(make: Maker) -> None:
    # The key's lookup finds the tombstone (no title to drop), the upsert indexes the new one.
    records = {
        f"alpha:TKT-00000{n}": {"id": f"TKT-00000{n}", "title": f"Login {n}", "status": "open"}
        for n in (1, 2)
    }
    made = make(records)
    assert made.apply([Change("delete", "alpha", "TKT-000001", 5)]) == Counts(0, 1, 0)
    back = Change("upsert", "alpha", "TKT-000001", 6, "Kerberos again", "closed")
    assert made.apply([back]) == Counts(1, 0, 0)
    state = {
        "alpha:TKT-000001": {"id": "TKT-000001", "title": "Kerberos again", "status": "closed"},
        "alpha:TKT-000002": records["alpha:TKT-000002"],
    }
    assert made.index() == expected_index(state)
    assert made.store.find("alpha", TicketFilter(text="kerberos"), limit=EVERY) == [
        state["alpha:TKT-000001"]
    ]
