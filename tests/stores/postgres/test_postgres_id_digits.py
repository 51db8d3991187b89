"""PostgreSQL with six-digit ticket IDs: the table records its width, import and open check it."""

from __future__ import annotations

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from store_cases import EVERY
from ticket_tools import DictStore, TicketFilter
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.ids import IdFormat
from ticket_tools.stores.postgres.importer import import_dsn, import_records
from ticket_tools.stores.postgres.schema import create_schema, describe
from ticket_tools.stores.postgres.store import PostgresStore
from wide_ids import SIX, numbered_records, widened


def _dsn(database: PostgresDatabase, user: str, dbname: str) -> str:
    return database.cluster.dsn(user, dbname)


def test_the_table_checks_the_width_of_every_id() -> None:
    assert create_schema(SIX)[0] == (
        "\nCREATE TABLE tickets (\n"
        '    tenant text COLLATE "C" NOT NULL,\n'
        "    id text COLLATE \"C\" NOT NULL CHECK (id ~ '^TKT-[0-9]{6}$'),\n"
        '    title text COLLATE "C" NOT NULL,\n'
        '    status text COLLATE "C" NOT NULL,\n'
        '    title_lower text COLLATE "C" NOT NULL,\n'
        "    version bigint NOT NULL CHECK (version >= 0),\n"
        "    PRIMARY KEY (tenant, id)\n"
        ")\n"
    )
    assert create_schema(SIX)[5] == (
        "\nCREATE TABLE tombstones (\n"
        '    tenant text COLLATE "C" NOT NULL,\n'
        "    id text COLLATE \"C\" NOT NULL CHECK (id ~ '^TKT-[0-9]{6}$'),\n"
        "    version bigint NOT NULL CHECK (version >= 0),\n"
        "    PRIMARY KEY (tenant, id)\n"
        ")\n"
    )
    assert create_schema() == create_schema(IdFormat(3))
    assert create_schema(IdFormat(3))[0] == create_schema(SIX)[0].replace("{6}", "{3}")


def test_six_digit_tickets_import_open_and_page(
    postgres_database: PostgresDatabase, scratch: str
) -> None:
    records = numbered_records(SIX, 30) | widened(SIX)
    count = import_dsn(
        _dsn(postgres_database, OWNER, scratch), records, grant_to=READER, id_format=SIX
    )
    dict_store = DictStore(records)
    with PostgresStore.open(_dsn(postgres_database, READER, scratch), id_format=SIX) as store:
        assert count == 40
        for tenant in ("alpha", "beta"):
            assert store.find(tenant, TicketFilter(), limit=None) == (
                dict_store.find(tenant, TicketFilter(), limit=EVERY)
            )
        assert store.find("alpha", TicketFilter(after="TKT-000028"), limit=3) == [
            {"id": "TKT-000029", "title": "Ticket 29", "status": "closed"},
            {"id": "TKT-000101", "title": "Login fails after password reset", "status": "open"},
            {"id": "TKT-000102", "title": "CSV export times out", "status": "closed"},
        ]
        assert store.get("beta", "TKT-000104") == {
            "id": "TKT-000104",
            "title": "Private billing issue",
            "status": "closed",
        }


@pytest.mark.parametrize(
    ("made_for", "opened_with"),
    [
        pytest.param(6, 3, id="six-opened-as-three"),
        pytest.param(3, 6, id="three-opened-as-six"),
    ],
)
def test_a_table_of_another_width_is_refused_on_open(
    postgres_database: PostgresDatabase, scratch: str, made_for: int, opened_with: int
) -> None:
    made = IdFormat(made_for)
    import_dsn(
        _dsn(postgres_database, OWNER, scratch), widened(made), grant_to=READER, id_format=made
    )
    dsn = _dsn(postgres_database, READER, scratch)
    with pytest.raises(StoreFailure) as raised:
        PostgresStore.open(dsn, id_format=IdFormat(opened_with))
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} holds ticket IDs of {made_for} digits, not {opened_with}: "
        f"use --id-digits {made_for}",
    )


def test_an_import_into_an_empty_table_of_another_width_is_refused(
    postgres_database: PostgresDatabase, scratch: str
) -> None:
    dsn = _dsn(postgres_database, OWNER, scratch)
    import_dsn(dsn, {}, id_format=IdFormat(3))
    with pytest.raises(StoreFailure) as raised:
        import_dsn(dsn, widened(SIX), id_format=SIX)
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} holds ticket IDs of 3 digits, not 6: use --id-digits 3",
    )


@pytest.mark.parametrize(
    "ticket_id",
    [
        pytest.param("TKT-104", id="three-digits"),
        pytest.param("TKT-0001040", id="seven-digits"),
        pytest.param("TKT-000104\n", id="trailing-newline"),
        pytest.param("TKT-00010\u0664", id="arabic-indic-digit"),
    ],
)
def test_postgresql_itself_refuses_an_id_of_another_width(
    postgres_database: PostgresDatabase, scratch: str, ticket_id: str
) -> None:
    # A writer that skips the records rules still cannot mix widths in one table.
    with psycopg.connect(_dsn(postgres_database, OWNER, scratch)) as connection:
        import_records(connection, widened(SIX), id_format=SIX)
        connection.execute("ALTER TABLE tickets NO FORCE ROW LEVEL SECURITY")
        with pytest.raises(psycopg.errors.CheckViolation):
            connection.execute(
                "INSERT INTO tickets VALUES ('alpha', %s, 't', 'open', 't', 0)", (ticket_id,)
            )
