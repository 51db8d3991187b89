"""SQLiteStore: index use, the contract's text semantics, locks, paging, differential."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given

from conftest import StoreFactory
from store_cases import (
    EVERY,
    TRAP_RECORDS,
    multi_tenant_records,
    odd_requests,
    store_find_requests,
    store_search_args,
)
from ticket_tools import (
    DictStore,
    Records,
    TicketStore,
    execute_tool,
    fixture_records,
)
from ticket_tools.cli.acceptance import CALLS, AcceptanceCall
from ticket_tools.filters import TicketFilter
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.sqlite import store as sqlite_store
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore


@pytest.fixture
def fixture_store() -> Iterator[SQLiteStore]:
    with SQLiteStore.from_records(fixture_records()) as store:
        yield store


def as_store(made: Records | TicketStore) -> TicketStore:
    return made if isinstance(made, TicketStore) else DictStore(made)


# --- The page query reads the primary key: no full scan, no sort ---


@pytest.mark.parametrize("status", [None, "open"], ids=["any-status", "status"])
@pytest.mark.parametrize("query", [None, "login"], ids=["no-query", "query"])
@pytest.mark.parametrize(
    ("after", "plan"),
    [
        pytest.param(None, ["SEARCH tickets USING PRIMARY KEY (tenant=?)"], id="first-page"),
        pytest.param(
            "TKT-104", ["SEARCH tickets USING PRIMARY KEY (tenant=? AND id>?)"], id="cursor"
        ),
    ],
)
def test_page_query_searches_the_primary_key(
    fixture_store: SQLiteStore,
    status: str | None,
    query: str | None,
    after: str | None,
    plan: list[str],
) -> None:
    # One SEARCH line and nothing else: no "SCAN tickets" and no
    # "USE TEMP B-TREE FOR ORDER BY", because the key order is the ORDER BY.
    assert fixture_store.query_plan(TicketFilter(status, query, after)) == plan


# --- The contract's text semantics, where SQLite's own would differ ---

TRAPS = [
    pytest.param("%", ["TKT-101"], id="percent-is-literal"),
    pytest.param("0%", ["TKT-101"], id="percent-after-text"),
    pytest.param("_", ["TKT-103"], id="underscore-is-literal"),
    pytest.param("e_c", ["TKT-103"], id="underscore-not-any-char"),
    pytest.param("\\", ["TKT-105"], id="backslash-is-literal"),
    pytest.param("\\t", ["TKT-105"], id="backslash-is-not-an-escape"),
    pytest.param("école", ["TKT-106", "TKT-107"], id="non-ascii-lowercase-query"),
    pytest.param("ÉCOLE", ["TKT-106", "TKT-107"], id="non-ascii-uppercase-query"),
    pytest.param("FERMÉE", ["TKT-106"], id="non-ascii-inside-word"),
    pytest.param("İSTANBUL", ["TKT-108"], id="dotted-capital-i-both-sides"),
    pytest.param("istanbul", [], id="dotted-capital-i-lowers-to-two-chars"),
    pytest.param("stanbul", ["TKT-108"], id="dotted-capital-i-rest-of-word"),
    pytest.param("ß", ["TKT-109"], id="sharp-s"),
    pytest.param("ẞ", ["TKT-109"], id="capital-sharp-s-lowers-to-sharp-s"),
    pytest.param("strasse", ["TKT-110"], id="lower-is-not-casefold"),
    pytest.param("STRAßE", ["TKT-109"], id="sharp-s-in-uppercase-query"),
    pytest.param("K P", ["TKT-111"], id="kelvin-sign-lowers-to-ascii-k"),
    pytest.param("Σ", [], id="final-sigma-is-not-sigma"),
    pytest.param("ΟΣ", ["TKT-112"], id="final-sigma-in-query-and-title"),
    pytest.param("X", ["TKT-104"], id="ascii-case-folding"),
]


@pytest.mark.parametrize(("query", "ids"), TRAPS)
def test_text_filter_traps(make_store: StoreFactory, query: str, ids: list[str]) -> None:
    store = as_store(make_store(TRAP_RECORDS))
    found = store.find("alpha", TicketFilter(text=query), limit=20)
    assert [ticket["id"] for ticket in found] == ids


@pytest.mark.parametrize(
    ("query", "naive_ids"),
    [
        pytest.param("%", [f"TKT-{n}" for n in range(101, 113)], id="%"),
        pytest.param("e_c", ["TKT-103", "TKT-104", "TKT-109"], id="_"),
        pytest.param("école", [], id="É"),
        pytest.param("ẞ", [], id="ẞ"),
    ],
)
def test_naive_sql_would_break_the_traps(query: str, naive_ids: list[str]) -> None:
    # The tempting query, lower() and LIKE, answers differently: the traps are real.
    with sqlite3.connect(":memory:") as connection:
        connection.execute("CREATE TABLE t (id TEXT, title TEXT)")
        connection.executemany(
            "INSERT INTO t VALUES (?, ?)", [(t["id"], t["title"]) for t in TRAP_RECORDS.values()]
        )
        rows = connection.execute(
            "SELECT id FROM t WHERE lower(title) LIKE '%' || lower(?) || '%' ORDER BY id",
            (query,),
        ).fetchall()
    connection.close()
    assert [row[0] for row in rows] == naive_ids


# --- Locks, and the read-only connection ---


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


@pytest.fixture
def exclusive_lock(database: Path) -> Iterator[sqlite3.Connection]:
    # In WAL mode a writer's transaction never blocks a reader: only a connection in
    # exclusive locking mode (which keeps the WAL index to itself) locks readers out.
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("PRAGMA locking_mode = EXCLUSIVE")
    writer.execute("BEGIN EXCLUSIVE")
    yield writer
    writer.execute("ROLLBACK")
    writer.close()


def test_open_refuses_a_locked_database(database: Path, exclusive_lock: object) -> None:
    with pytest.raises(StoreFailure) as raised:
        SQLiteStore.open(database, timeout=0)
    assert (raised.value.reason, str(raised.value)) == (
        "locked",
        f"{database} is locked by another connection; try again",
    )


def test_a_write_transaction_never_blocks_a_read(database: Path) -> None:
    # WAL (set by import): a read sees the last commit while a writer holds its lock.
    with SQLiteStore.open(database, timeout=0) as store:
        writer = sqlite3.connect(database, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("UPDATE tickets SET title = 'uncommitted' WHERE id = 'TKT-101'")
        assert store.get("alpha", "TKT-101") == {
            "id": "TKT-101",
            "title": "Login fails after password reset",
            "status": "open",
        }
        writer.execute("COMMIT")
        writer.close()
        assert store.get("alpha", "TKT-101") == {
            "id": "TKT-101",
            "title": "uncommitted",
            "status": "open",
        }


def test_opened_store_cannot_write(database: Path) -> None:
    with SQLiteStore.open(database) as store, pytest.raises(sqlite3.OperationalError):
        store._connection.execute("DELETE FROM tickets")  # the store's own connection


# --- Paging while another connection writes ---


def _ids(result: dict[str, object]) -> tuple[list[object], object]:
    tickets = result["tickets"]
    assert isinstance(tickets, list)
    return [ticket["id"] for ticket in tickets], result["next_cursor"]


def test_page_walk_under_concurrent_writes(database: Path) -> None:
    alpha = {"tenant": "alpha", "can_read_tickets": True}
    writer = sqlite3.connect(database, isolation_level=None)
    with SQLiteStore.open(database) as store:
        pages = [_ids(execute_tool("search_tickets", {"limit": 2}, alpha, store))]
        # Behind the cursor (TKT-102): an insert and a delete; ahead: the same.
        writer.execute("INSERT INTO tickets VALUES ('alpha', 'TKT-100', 'new, behind', 'open', 0)")
        writer.execute("DELETE FROM tickets WHERE tenant = 'alpha' AND id = 'TKT-101'")
        writer.execute("INSERT INTO tickets VALUES ('alpha', 'TKT-105', 'new, ahead', 'open', 0)")
        writer.execute("DELETE FROM tickets WHERE tenant = 'alpha' AND id = 'TKT-107'")
        args = {"limit": 2, "cursor": pages[-1][1]}
        pages.append(_ids(execute_tool("search_tickets", args, alpha, store)))
        # The cursor ticket itself disappears: a cursor is a position, so paging goes on.
        writer.execute("DELETE FROM tickets WHERE tenant = 'alpha' AND id = 'TKT-105'")
        args = {"limit": 2, "cursor": pages[-1][1]}
        pages.append(_ids(execute_tool("search_tickets", args, alpha, store)))
    writer.close()
    assert pages == [
        (["TKT-101", "TKT-102"], "TKT-102"),
        (["TKT-104", "TKT-105"], "TKT-105"),
        (["TKT-110", "TKT-112"], "TKT-112"),
    ]


def test_store_is_usable_from_another_thread(fixture_store: SQLiteStore) -> None:
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(fixture_store.get("beta", "TKT-103")))
    thread.start()
    thread.join()
    assert found == [{"id": "TKT-103", "title": "Refund not received", "status": "open"}]


# --- The brief's acceptance calls, on SQLite (the full suites also run via make_store) ---


@pytest.mark.parametrize("call", [pytest.param(call, id=call.label) for call in CALLS])
def test_acceptance_call_on_sqlite(fixture_store: SQLiteStore, call: AcceptanceCall) -> None:
    assert execute_tool(call.name, call.args, call.context, fixture_store) == call.expected


# --- Differential: the dict store and SQLite agree on generated multi-tenant stores ---


@given(records=multi_tenant_records(), request=store_find_requests)
def test_find_matches_the_dict_store(
    records: dict[str, dict[str, str]], request: tuple[str, TicketFilter, int]
) -> None:
    tenant, where, limit = request
    expected = DictStore(records).find(tenant, where, limit=limit)
    with SQLiteStore.from_records(records) as store:
        assert store.find(tenant, where, limit=limit) == expected


@given(records=multi_tenant_records(), args=store_search_args)
def test_search_walk_matches_the_dict_store(
    records: dict[str, dict[str, str]], args: dict[str, object]
) -> None:
    with SQLiteStore.from_records(records) as store:
        for tenant in ("alpha", "beta", "a", "É", "alph"):
            context = {"tenant": tenant, "can_read_tickets": True}
            cursor: object = None
            for _ in range(len(records) + 1):
                page_args = args if cursor is None else {**args, "cursor": cursor}
                expected = execute_tool("search_tickets", page_args, context, records)
                assert execute_tool("search_tickets", page_args, context, store) == expected
                cursor = expected["next_cursor"]
                if cursor is None:
                    break
            for key in records:
                ticket_id = key.rpartition(":")[2]
                get_args = {"ticket_id": ticket_id}
                assert execute_tool("get_ticket", get_args, context, store) == (
                    execute_tool("get_ticket", get_args, context, records)
                )


# --- Text with no UTF-8 form: the dict store's answer, never an exception (issue 12, item 1) ---


@given(records=multi_tenant_records(), request=odd_requests)
def test_any_text_gets_the_dict_stores_answer(
    records: dict[str, dict[str, str]], request: dict[str, object]
) -> None:
    tenant, status, text, after, limit = (
        cast(str, request["tenant"]),
        cast("str | None", request["status"]),
        cast("str | None", request["text"]),
        cast("str | None", request["after"]),
        cast(int, request["limit"]),
    )
    where = TicketFilter(status, text, after)
    dict_store = DictStore(records)
    with SQLiteStore.from_records(records) as store:
        assert store.find(tenant, where, limit=limit) == dict_store.find(tenant, where, limit=limit)
        ticket_id = after if after is not None else "TKT-001"
        assert store.get(tenant, ticket_id) == dict_store.get(tenant, ticket_id)


@pytest.mark.parametrize(
    ("tenant", "where", "ids"),
    [
        pytest.param("\udcff", TicketFilter(), [], id="tenant"),
        pytest.param("alpha", TicketFilter(text="\ud800"), [], id="text"),
        pytest.param("alpha", TicketFilter(status="\ud800"), [], id="status"),
        pytest.param(
            "alpha",
            TicketFilter(after="TKS\ud800"),
            ["TKT-101", "TKT-102", "TKT-104", "TKT-107", "TKT-110", "TKT-112", "TKT-115"],
            id="cursor-below-every-id",
        ),
        pytest.param("alpha", TicketFilter(after="TKT-\ud800"), [], id="cursor-above-every-id"),
    ],
)
def test_text_without_a_utf8_form(
    fixture_store: SQLiteStore, tenant: str, where: TicketFilter, ids: list[str]
) -> None:
    found = fixture_store.find(tenant, where, limit=None)
    assert [ticket["id"] for ticket in found] == ids
    assert found == DictStore(fixture_records()).find(tenant, where, limit=EVERY)


def test_a_limit_beyond_sqlites_integers_means_every_ticket(fixture_store: SQLiteStore) -> None:
    assert [t["id"] for t in fixture_store.find("beta", TicketFilter(), limit=2**70)] == [
        "TKT-103",
        "TKT-104",
        "TKT-108",
    ]


# --- Exact statements and settings (the rest of this module checks their effects) ---


@pytest.mark.parametrize(
    ("where", "sql", "params"),
    [
        pytest.param(
            TicketFilter(),
            "SELECT id, title, status FROM tickets WHERE tenant = ? ORDER BY id LIMIT ?",
            ("alpha", 6),
            id="no-filter",
        ),
        pytest.param(
            TicketFilter(status="open", after="TKT-104"),
            "SELECT id, title, status FROM tickets WHERE tenant = ? AND id > CAST(? AS TEXT) "
            "AND status = ? ORDER BY id LIMIT ?",
            ("alpha", b"TKT-104", "open", 6),
            id="status-and-cursor",
        ),
        pytest.param(
            TicketFilter(status="open", text="Log", after="TKT-104"),
            "SELECT id, title, status FROM tickets WHERE tenant = ? AND id > CAST(? AS TEXT) "
            "AND status = ? AND ticket_title_contains(title, ?) ORDER BY id LIMIT ?",
            ("alpha", b"TKT-104", "open", "Log", 6),
            id="every-filter",
        ),
    ],
)
def test_page_statement_is_built_from_fixed_fragments(
    where: TicketFilter, sql: str, params: tuple[object, ...]
) -> None:
    assert sqlite_store._page_query("alpha", where, 6) == (sql, params)


def test_a_page_of_one(fixture_store: SQLiteStore) -> None:
    assert fixture_store.find("beta", TicketFilter(), limit=1) == [
        {"id": "TKT-103", "title": "Refund not received", "status": "open"}
    ]


@pytest.mark.parametrize(
    ("timeout", "milliseconds"),
    [pytest.param(None, 5000, id="default"), pytest.param(0.25, 250, id="given")],
)
def test_open_waits_for_a_lock_as_long_as_asked(
    database: Path, timeout: float | None, milliseconds: int
) -> None:
    with SQLiteStore.open(database, timeout=timeout) as store:
        busy = store._connection.execute("PRAGMA busy_timeout").fetchone()  # its own connection
    assert busy == (milliseconds,)


def test_opened_store_is_usable_from_another_thread(database: Path) -> None:
    found: list[object] = []
    with SQLiteStore.open(database) as store:
        thread = threading.Thread(target=lambda: found.append(store.get("beta", "TKT-103")))
        thread.start()
        thread.join()
    assert found == [{"id": "TKT-103", "title": "Refund not received", "status": "open"}]


def test_a_read_transaction_ends_once() -> None:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("BEGIN")
    sqlite_store.end_read(connection)
    assert not connection.in_transaction
    sqlite_store.end_read(connection)  # already ended: nothing to roll back
    assert not connection.in_transaction
