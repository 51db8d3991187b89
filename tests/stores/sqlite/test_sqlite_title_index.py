"""The title index on SQLite: a search's every statement is a SEARCH of a key, never a SCAN.

A tenant of 5,000 tickets (testkit/titles.py, indexed at the default INDEX_MIN_TICKETS)
beside a small one. SQLite's EXPLAIN QUERY PLAN of each statement a search runs
(`SQLiteStore.search_plans`) names the key it searches; a full read of a table is a
"SCAN" line, which none has, and the answers are the dict store's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from index_rows import big_and_small
from store_cases import EVERY
from testkit import titles
from ticket_tools import DictStore, TicketFilter
from ticket_tools.stores import index_writes
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore

BIG = 5_000
WIDTH = IdFormat(6)
RECORDS = big_and_small(BIG)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    path = tmp_path_factory.mktemp("big") / "big.sqlite"
    progress: list[tuple[int, int]] = []
    write_database(path, RECORDS, id_format=WIDTH, on_index=lambda *told: progress.append(told))
    # The big tenant alone is indexed, and its build is told.
    assert progress == [(BIG, BIG)]
    with SQLiteStore.open(path, id_format=WIDTH) as opened:
        yield opened


SEARCHES = [
    pytest.param(TicketFilter(text=titles.RARE), id="a-word-in-3-titles"),
    pytest.param(TicketFilter(text=titles.RARE_SHORT), id="a-rare-2-character-string"),
    pytest.param(TicketFilter(text=titles.RARE_NON_ASCII), id="a-rare-non-ascii-word"),
    pytest.param(TicketFilter(text=titles.ABSENT), id="a-word-in-none"),
    pytest.param(TicketFilter(text=titles.ONE_IN_A_HUNDRED), id="a-word-in-1-percent"),
    pytest.param(TicketFilter(text=titles.COMMON), id="a-word-in-25-percent"),
    pytest.param(TicketFilter("open"), id="the-rare-status"),
    pytest.param(TicketFilter("open", titles.COMMON), id="the-rare-status-and-a-common-word"),
    pytest.param(TicketFilter("closed", titles.RARE), id="the-common-status-and-a-rare-word"),
    pytest.param(TicketFilter(text="qz \u00f6"), id="a-range-term-beside-others"),
    pytest.param(TicketFilter(text=titles.RARE, after="TKT-002000"), id="past-a-cursor"),
]


@pytest.mark.parametrize("where", SEARCHES)
def test_every_statement_searches_a_key(store: SQLiteStore, where: TicketFilter) -> None:
    plans = store.search_plans("big", where, limit=6)
    assert plans
    assert [line for plan in plans for line in plan if not line.startswith("SEARCH ")] == []
    assert store.find("big", where, limit=6) == DictStore(RECORDS).find("big", where, limit=6)


def test_a_rare_words_statements(store: SQLiteStore) -> None:
    assert store.search_plans("big", TicketFilter(text=titles.RARE), limit=6) == [
        ["SEARCH tenant_sizes USING PRIMARY KEY (tenant=?)"],
        ["SEARCH gram_counts USING PRIMARY KEY (tenant=? AND gram=?)"],
        ["SEARCH title_grams USING PRIMARY KEY (tenant=? AND gram=? AND bucket>?)"],
        ["SEARCH title_grams USING PRIMARY KEY (tenant=? AND gram=? AND bucket=?)"],
        ["SEARCH title_grams USING PRIMARY KEY (tenant=? AND gram=? AND bucket=?)"],
        ["SEARCH tickets USING PRIMARY KEY (tenant=? AND id=?)"],
    ]


def test_a_small_tenant_is_scanned_as_before(store: SQLiteStore) -> None:
    # Below INDEX_MIN_TICKETS: no index rows; its search is the plain filtered scan.
    assert index_writes.INDEX_MIN_TICKETS > 50
    plans = store.search_plans("small", TicketFilter(text=titles.RARE), limit=6)
    assert plans == [
        ["SEARCH tenant_sizes USING PRIMARY KEY (tenant=?)"],
        ["SEARCH tickets USING PRIMARY KEY (tenant=?)"],
    ]


def test_the_store_file(store: SQLiteStore, tmp_path: Path) -> None:
    # The index's build leaves no temporary table behind and the schema exact: reopened.
    with SQLiteStore.open(store._source, id_format=WIDTH) as again:
        assert again.find("big", TicketFilter(text=titles.RARE), limit=EVERY) == DictStore(
            RECORDS
        ).find("big", TicketFilter(text=titles.RARE), limit=EVERY)
