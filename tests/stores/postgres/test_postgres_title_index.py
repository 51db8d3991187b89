"""The title index on PostgreSQL: the reader's own plans use it under the forced policy.

Issue 31's point 3. A tenant of 20,000 tickets (testkit/titles.py) beside a small one, read
as the reader role (NOBYPASSRLS, not the owner) with the policies forced: a search for
a rare word reads a few rows of the index and its candidates' tickets, never the
tenant's range; and the index's tables show a connection one tenant's rows, or none.
The trap it avoids: a trigram GIN index is used for a superuser and ignored for the
reader, whose policy runs first, before a condition that is not leakproof.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from index_rows import big_and_small
from testkit import titles
from ticket_tools import DictStore, TicketFilter
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.store import PostgresStore

BIG = 20_000
WIDTH = IdFormat(6)
RECORDS = big_and_small(BIG)
INDEX_TABLES = ("title_grams", "gram_counts", "tenant_sizes")


@pytest.fixture(scope="module")
def big(postgres_database: PostgresDatabase) -> Iterator[tuple[str, str]]:
    """A database holding RECORDS: (the owner's DSN, the reader's DSN)."""
    name = "big_tenant"
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
    owner = postgres_database.cluster.dsn(OWNER, name)
    progress: list[tuple[int, int]] = []
    with psycopg.connect(owner) as connection:
        import_records(
            connection,
            RECORDS,
            grant_to=READER,
            id_format=WIDTH,
            on_index=lambda *told: progress.append(told),
        )
    # The big tenant alone is indexed (the small one is below INDEX_MIN_TICKETS), and told
    # a batch of tickets at a time.
    assert progress == [(10_000, BIG), (BIG, BIG)]
    try:
        yield owner, postgres_database.cluster.dsn(READER, name)
    finally:
        with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def store(big: tuple[str, str]) -> Iterator[PostgresStore]:
    with PostgresStore.open(big[1], id_format=WIDTH) as opened:
        yield opened


SEARCHES = [
    pytest.param(TicketFilter(text=titles.RARE), id="a-word-in-3-titles"),
    pytest.param(TicketFilter(text=titles.RARE.upper()), id="the-word-in-capitals"),
    pytest.param(TicketFilter(text=titles.RARE_SHORT), id="a-rare-2-character-string"),
    pytest.param(TicketFilter(text=titles.RARE_NON_ASCII), id="a-rare-non-ascii-word"),
    pytest.param(TicketFilter(text=titles.ABSENT), id="a-word-in-none"),
    pytest.param(TicketFilter(text=titles.ONE_IN_A_HUNDRED), id="a-word-in-1-percent"),
    pytest.param(TicketFilter("open"), id="the-rare-status"),
    pytest.param(TicketFilter("open", titles.COMMON), id="the-rare-status-and-a-common-word"),
    pytest.param(TicketFilter("closed", titles.RARE), id="the-common-status-and-a-rare-word"),
    pytest.param(
        TicketFilter(text=titles.RARE, after="TKT-010000"), id="a-rare-word-past-a-cursor"
    ),
]


@pytest.mark.parametrize("where", SEARCHES)
def test_the_readers_plan_reads_the_index_not_the_tenant(
    store: PostgresStore, where: TicketFilter
) -> None:
    measured = store.search_plans("big", where, limit=6)
    assert store.find("big", where, limit=6) == DictStore(RECORDS).find("big", where, limit=6)
    # No sequential scan of a table that grows with the tenant, and a few rows fetched:
    # the scan before the index (48 rows: a page of 5 asks 6) and the candidates'.
    for table in ("tickets", "title_grams", "gram_counts"):
        seq_scans, _, _, fetched = measured.reads.get(table, (0, 0, 0, 0))
        assert (table, seq_scans) == (table, 0), measured.plans
        assert fetched <= 200, (table, fetched)
    assert not [plan for plan in measured.plans if "Seq Scan on tickets" in plan]
    assert not [plan for plan in measured.plans if "Seq Scan on title_grams" in plan]


def test_the_plan_test_would_catch_a_scan(store: PostgresStore) -> None:
    # A word the scan before the index finds at once (a quarter of the titles) is read
    # from the tenant's range: what the reads above would show if the index were ignored.
    measured = store.search_plans("big", TicketFilter(text=titles.COMMON), limit=6)
    assert [plan for plan in measured.plans if "Index Scan using tickets_pkey" in plan]
    assert measured.reads["tickets"][3] >= 6


def test_the_index_tables_show_the_reader_one_tenants_rows(big: tuple[str, str]) -> None:
    # SQL that forgot its tenant, by hand, as the reader: the policy of each table.
    with psycopg.connect(big[1]) as reader:
        unscoped = {
            table: reader.execute(f"SELECT DISTINCT tenant FROM {table}").fetchall()  # noqa: S608
            for table in INDEX_TABLES
        }
        reader.execute("SELECT set_config('app.tenant', 'small', true)")
        scoped = {
            table: reader.execute(f"SELECT DISTINCT tenant FROM {table}").fetchall()  # noqa: S608
            for table in INDEX_TABLES
        }
    assert unscoped == {table: [] for table in INDEX_TABLES}
    # The small tenant is below INDEX_MIN_TICKETS: its size alone is kept.
    assert scoped == {"title_grams": [], "gram_counts": [], "tenant_sizes": [("small",)]}
    with psycopg.connect(big[1]) as reader:
        reader.execute("SELECT set_config('app.tenant', 'big', true)")
        assert reader.execute("SELECT tickets, indexed FROM tenant_sizes").fetchall() == [
            (BIG, True)
        ]


@pytest.mark.parametrize("table", INDEX_TABLES)
def test_the_reader_cannot_write_the_index(big: tuple[str, str], table: str) -> None:
    with psycopg.connect(big[1]) as reader, pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute(f"DELETE FROM {table}")  # noqa: S608


def test_a_trigram_index_is_ignored_under_the_forced_policy(
    postgres_database: PostgresDatabase, big: tuple[str, str]
) -> None:
    """The leakproof trap (docs/postgres.md): why the design does not use pg_trgm."""
    superuser = postgres_database.cluster.dsn(dbname="big_tenant")
    with psycopg.connect(superuser, autocommit=True) as connection:
        connection.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        connection.execute("CREATE INDEX trap ON tickets USING gin (title_lower gin_trgm_ops)")
        connection.execute("ANALYZE tickets")
    query = "EXPLAIN SELECT id FROM tickets WHERE tenant = 'big' AND title_lower LIKE '%kerberos%'"
    try:
        with psycopg.connect(superuser) as connection:
            as_superuser = "\n".join(row[0] for row in connection.execute(query))
        with psycopg.connect(big[1]) as reader:
            reader.execute("SELECT set_config('app.tenant', 'big', true)")
            as_reader = "\n".join(row[0] for row in reader.execute(query))
    finally:
        with psycopg.connect(superuser, autocommit=True) as connection:
            connection.execute("DROP INDEX trap")
            connection.execute("DROP EXTENSION pg_trgm")
    assert "trap" in as_superuser
    assert "trap" not in as_reader
    assert "AND (title_lower ~~ '%kerberos%'::text))" in as_reader
    # LIKE's function is not leakproof, the equality of the index's own reads is.
    with psycopg.connect(big[1]) as reader:
        leakproof: dict[str, bool] = dict(
            reader.execute(
                "SELECT proname, proleakproof FROM pg_proc "
                "WHERE proname IN ('textlike', 'texteq', 'text_ge', 'text_le', 'int8eq') "
                "ORDER BY proname"
            ).fetchall()
        )
    assert leakproof == {
        "int8eq": True,
        "text_ge": True,
        "text_le": True,
        "texteq": True,
        "textlike": False,
    }
