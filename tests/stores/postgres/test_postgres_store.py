"""PostgresStore: the second wall (row-level security), refused roles, faults, import, differential.

The contract suites (acceptance, paging, isolation, never-raises, fuzz, text traps) run
on PostgreSQL through conftest's `make_store`; this module tests what only PostgreSQL has.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import cast

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from conftest import OWNER, READER, PostgresDatabase, StoreFactory
from expected import ALPHA, ALPHA_TICKETS, BETA_T103, BETA_T104, BETA_T108, T101, T104
from store_cases import TRAP_RECORDS, multi_tenant_records, odd_requests, store_find_requests
from ticket_tools import DictStore, Records, fixture_records
from ticket_tools.filters import TicketFilter
from ticket_tools.serve.server import UNAVAILABLE_DETAIL, build_server
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.postgres import importer as postgres_importer
from ticket_tools.stores.postgres import store as postgres_store
from ticket_tools.stores.postgres.deadline import DeadlineConnection
from ticket_tools.stores.postgres.importer import TableNotEmptyError, import_dsn, import_records
from ticket_tools.stores.postgres.schema import describe
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.records import RecordsError

BETA_TICKETS = [BETA_T103, BETA_T104, BETA_T108]
BYPASS = "ticket_bypass"
OWNER_MEMBER = "ticket_owner_member"
NO_CONNECTION = (
    "no connection (the server is down or unreachable, or it refused the database, role or "
    "password)"
)


@pytest.fixture(scope="module")
def database(postgres_database: PostgresDatabase) -> PostgresDatabase:
    """The session's database, with the roles `open` must refuse created once."""
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {BYPASS} LOGIN BYPASSRLS")
        connection.execute(f"GRANT SELECT ON tickets TO {BYPASS}")
        connection.execute(f"CREATE ROLE {OWNER_MEMBER} LOGIN IN ROLE {OWNER}")
    return postgres_database


@pytest.fixture
def fixture_store(postgres_factory: StoreFactory, database: PostgresDatabase) -> PostgresStore:
    """The session's reader store, holding the brief's fixture tickets."""
    store = postgres_factory(fixture_records())
    assert isinstance(store, PostgresStore)
    return store


@pytest.fixture
def reader(
    fixture_store: PostgresStore, database: PostgresDatabase
) -> Iterator[psycopg.Connection]:
    """A plain connection as the reader role: SQL that forgot the tenant, written by hand."""
    with psycopg.connect(database.reader) as connection:
        yield connection


def _dsn(database: PostgresDatabase, user: str, dbname: str = "tickets") -> str:
    return database.cluster.dsn(user, dbname)


# --- The second wall: row-level security, as the reader role ---


@pytest.mark.parametrize(
    ("tenant", "rows"),
    [
        pytest.param("alpha", [("alpha", t["id"]) for t in ALPHA_TICKETS], id="alpha"),
        pytest.param("beta", [("beta", t["id"]) for t in BETA_TICKETS], id="beta"),
        pytest.param("gamma", [], id="a-tenant-with-no-tickets"),
    ],
)
def test_unscoped_select_returns_only_the_set_tenants_rows(
    reader: psycopg.Connection, tenant: str, rows: list[tuple[str, str]]
) -> None:
    reader.execute("SELECT set_config('app.tenant', %s, true)", (tenant,))
    assert reader.execute("SELECT tenant, id FROM tickets ORDER BY id").fetchall() == rows


def test_unscoped_select_without_a_tenant_returns_nothing(reader: psycopg.Connection) -> None:
    assert reader.execute("SELECT tenant, id FROM tickets").fetchall() == []


def test_reader_cannot_write(reader: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("DELETE FROM tickets")


def test_the_owner_sees_every_row_only_through_its_writer_policy(
    database: PostgresDatabase, fixture_store: object
) -> None:
    # FORCE: the table's owner is held by the policies too; its writer policy (schema
    # version 4) is what lets it see every tenant's rows, and without it, none.
    with psycopg.connect(database.owner) as owner:
        assert owner.execute("SELECT count(*) FROM tickets").fetchone() == (len(fixture_records()),)
        owner.execute("DROP POLICY tickets_writer ON tickets")
        assert owner.execute("SELECT count(*) FROM tickets").fetchone() == (0,)
        owner.rollback()


def test_pool_of_one_alternating_tenants_never_mixes(
    fixture_store: PostgresStore, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, max_connections=1) as store:
        seen = [
            (
                store.find(tenant, TicketFilter(), limit=None),
                store.get(tenant, "TKT-104"),
                store.get(tenant, "TKT-101"),
            )
            for _ in range(5)
            for tenant in ("alpha", "beta")
        ]
    alpha = (ALPHA_TICKETS, T104, T101)
    beta = (BETA_TICKETS, BETA_T104, None)
    assert seen == [alpha, beta] * 5


def test_app_tenant_ends_with_the_call(
    fixture_store: PostgresStore, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, max_connections=1) as store:
        assert store.find("alpha", TicketFilter(), limit=1) == [T101]
        # The store's only connection, borrowed right after: no tenant is left set.
        with store._pool.connection() as connection:
            setting = connection.execute("SELECT current_setting('app.tenant', true)").fetchone()
            rows = connection.execute("SELECT id FROM tickets").fetchall()
            read_only = connection.execute("SHOW transaction_read_only").fetchone()
    assert (setting, rows, read_only) == (("",), [], ("on",))


def test_threads_sharing_one_store_see_only_their_own_tenant(fixture_store: PostgresStore) -> None:
    found: dict[str, list[object]] = {"alpha": [], "beta": []}

    def read(tenant: str) -> None:
        for _ in range(20):
            found[tenant].append(fixture_store.find(tenant, TicketFilter(), limit=None))

    threads = [threading.Thread(target=read, args=(tenant,)) for tenant in found]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {"alpha": [ALPHA_TICKETS] * 20, "beta": [BETA_TICKETS] * 20}


# --- open refuses a role that could bypass the policy, and a database without the schema ---


@pytest.mark.parametrize(
    ("user", "refusal"),
    [
        pytest.param("postgres", "a superuser role (or a member of one)", id="superuser"),
        pytest.param(BYPASS, "a role with BYPASSRLS (or a member of one)", id="bypassrls"),
        pytest.param(OWNER, "the owner of the tickets table (or a member of its role)", id="owner"),
        pytest.param(
            OWNER_MEMBER,
            "the owner of the tickets table (or a member of its role)",
            id="member-of-the-owner",
        ),
    ],
)
def test_open_refuses_a_role_that_could_bypass_the_policy(
    database: PostgresDatabase, user: str, refusal: str
) -> None:
    dsn = _dsn(database, user)
    with pytest.raises(StoreFailure) as raised:
        PostgresStore.open(dsn)
    assert (raised.value.reason, str(raised.value)) == (
        "privileged",
        f"{describe(dsn)} connects as {refusal}, which row-level security does not restrict; "
        "connect as the reader role",
    )


def test_a_pooled_connection_is_checked_again(database: PostgresDatabase) -> None:
    # The pool runs the same check on every new connection, and closes a refused one.
    connection = DeadlineConnection.connect(_dsn(database, BYPASS))
    with pytest.raises(StoreFailure) as raised:
        postgres_store._configure(connection, "here", 1.0, lambda host, port: None)
    assert (raised.value.reason, connection.closed) == ("privileged", True)


def _owner_runs(database: PostgresDatabase, dbname: str, *statements: str) -> None:
    with psycopg.connect(_dsn(database, OWNER, dbname)) as connection:
        for statement in statements:
            connection.execute(statement)


SCHEMA_DAMAGE = [
    pytest.param((), id="no-table"),
    pytest.param(("ALTER TABLE tickets NO FORCE ROW LEVEL SECURITY",), id="not-forced"),
    pytest.param(("ALTER TABLE tickets DISABLE ROW LEVEL SECURITY",), id="disabled"),
    pytest.param(
        ("CREATE POLICY everything ON tickets USING (true)",), id="a-second-permissive-policy"
    ),
    pytest.param(
        ("COMMENT ON TABLE tickets IS 'ticket-tools tickets, schema version 7'",), id="v7"
    ),
    pytest.param(("DROP TABLE high_water",), id="no-high-water"),
    pytest.param(
        ("ALTER TABLE high_water DROP CONSTRAINT high_water_version_check",),
        id="high-water-unchecked",
    ),
    pytest.param(
        ("CREATE POLICY everything ON high_water USING (true)",), id="a-high-water-policy"
    ),
    # The writer policy for any role but the owner alone would widen what a reader sees.
    pytest.param(("ALTER POLICY tickets_writer ON tickets TO PUBLIC",), id="writer-policy-public"),
    pytest.param(
        ("ALTER POLICY tombstones_writer ON tombstones TO ticket_reader",),
        id="tombstones-writer-policy-for-the-reader",
    ),
    pytest.param(
        ("ALTER POLICY tickets_writer ON tickets USING (tenant <> '')",),
        id="writer-policy-another-rule",
    ),
    pytest.param(("DROP POLICY tickets_writer ON tickets",), id="no-writer-policy"),
    pytest.param(("ALTER TABLE tickets DROP CONSTRAINT tickets_id_check",), id="no-id-width-check"),
    pytest.param(
        ("ALTER TABLE tombstones DROP CONSTRAINT tombstones_id_check",),
        id="no-tombstones-id-width-check",
    ),
    pytest.param(("ALTER TABLE tickets ADD COLUMN notes text",), id="an-extra-column"),
    pytest.param(("DROP TABLE tombstones",), id="no-tombstones"),
    pytest.param(
        ("ALTER TABLE tombstones NO FORCE ROW LEVEL SECURITY",), id="tombstones-not-forced"
    ),
    pytest.param(
        ("ALTER TABLE tickets DROP CONSTRAINT tickets_version_check",), id="version-unchecked"
    ),
    # The title index's tables: each under its own forced tenant policy, exactly.
    pytest.param(("DROP TABLE tenant_sizes",), id="no-tenant-sizes"),
    pytest.param(
        ("ALTER TABLE title_grams NO FORCE ROW LEVEL SECURITY",), id="title-grams-not-forced"
    ),
    pytest.param(
        ("CREATE POLICY everything ON gram_counts USING (true)",),
        id="a-second-gram-counts-policy",
    ),
    pytest.param(
        ("ALTER POLICY title_grams_writer ON title_grams TO PUBLIC",),
        id="title-grams-writer-policy-public",
    ),
    pytest.param(
        ('ALTER TABLE title_grams ALTER COLUMN gram TYPE text COLLATE "ucs_basic"',),
        id="grams-in-a-locale-order",
    ),
    pytest.param(("CREATE INDEX extra ON title_grams (bucket)",), id="an-extra-index"),
]


@pytest.mark.parametrize("damage", SCHEMA_DAMAGE)
def test_open_refuses_a_database_without_the_schema(
    database: PostgresDatabase, scratch: str, damage: tuple[str, ...]
) -> None:
    if damage:
        with psycopg.connect(_dsn(database, OWNER, scratch)) as connection:
            import_records(connection, fixture_records(), grant_to=READER)
        _owner_runs(database, scratch, *damage)
    dsn = _dsn(database, READER, scratch)
    with pytest.raises(StoreFailure) as raised:
        PostgresStore.open(dsn)
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} has no ticket-tools tickets, tombstones and high_water tables "
        "(schema version 6) with their row-level security forced",
    )


def test_a_table_dropped_after_open_is_a_schema_error(
    database: PostgresDatabase, scratch: str
) -> None:
    with psycopg.connect(_dsn(database, OWNER, scratch)) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    dsn = _dsn(database, READER, scratch)
    with PostgresStore.open(dsn) as store:
        assert store.get("alpha", "TKT-101") == T101
        _owner_runs(database, scratch, "DROP TABLE tickets")
        with pytest.raises(StoreFailure) as raised:
            store.get("alpha", "TKT-101")
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} is not a ticket-tools database",
    )


@pytest.mark.parametrize(
    ("dsn", "reason", "message"),
    [
        pytest.param(
            "host={root} dbname=nowhere user=ticket_reader",
            "unavailable",
            "cannot connect to PostgreSQL (user=ticket_reader host={root} dbname=nowhere): "
            + NO_CONNECTION,
            id="no-such-database",
        ),
        pytest.param(
            "host={root}/absent dbname=tickets user=ticket_reader",
            "unavailable",
            "cannot connect to PostgreSQL (user=ticket_reader host={root}/absent dbname=tickets): "
            + NO_CONNECTION,
            id="no-server",
        ),
        pytest.param(
            "host={root} dbname=tickets user=nobody",
            "unavailable",
            "cannot connect to PostgreSQL (user=nobody host={root} dbname=tickets): "
            + NO_CONNECTION,
            id="no-such-role",
        ),
        pytest.param(
            "host={root} dbname=tickets user=ticket_reader nonsense=1",
            "unavailable",
            "cannot connect to PostgreSQL (an unreadable DSN): "
            "psycopg refused the DSN or the statement",
            id="unreadable-dsn",
        ),
    ],
)
def test_open_refuses_what_it_cannot_reach(
    database: PostgresDatabase, dsn: str, reason: str, message: str
) -> None:
    root = database.cluster.root
    with pytest.raises(StoreFailure) as raised:
        PostgresStore.open(dsn.format(root=root))
    assert (raised.value.reason, str(raised.value)) == (reason, message.format(root=root))


def test_describe_never_shows_the_password() -> None:
    assert describe("postgresql://reader:s3cret@db.example:6543/tickets?sslmode=require") == (
        "PostgreSQL (user=reader host=db.example port=6543 dbname=tickets)"
    )
    assert describe("") == "PostgreSQL (default connection)"


def test_closed_store_raises_store_error(fixture_store: object, database: PostgresDatabase) -> None:
    store = PostgresStore.open(database.reader)
    store.close()
    with pytest.raises(StoreFailure) as raised:
        store.get("alpha", "TKT-101")
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot read {describe(database.reader)} (PoolClosed)",
    )


# --- Faults: the server stops, a connection drops, a statement times out ---


def test_server_stopped_between_two_calls_then_started(
    fixture_store: object, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, timeout=1.0) as store:
        assert store.get("alpha", "TKT-101") == T101
        database.cluster.stop()
        try:
            with pytest.raises(StoreFailure) as raised:
                store.find("alpha", TicketFilter(), limit=2)
        finally:
            database.cluster.start()
        # The same store object answers: no restart of the process holding it.
        after = store.find("alpha", TicketFilter(), limit=2)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot read {describe(database.reader)} (PoolTimeout)",
    )
    assert after == ALPHA_TICKETS[:2]


def test_a_dropped_connection_is_replaced_within_the_call(
    fixture_store: object, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, max_connections=1) as store:
        assert store.get("beta", "TKT-103") == BETA_T103
        with psycopg.connect(database.superuser, autocommit=True) as superuser:
            superuser.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (READER,),
            )
        # The idle pooled connection is dead; the call is tried again on a new one.
        assert store.get("beta", "TKT-103") == BETA_T103


def test_statement_timeout_is_unavailable_then_the_next_call_answers(
    fixture_store: object, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, timeout=0.3) as store:
        with psycopg.connect(database.owner) as owner:
            # The owner holds the table: a reader's SELECT waits for the lock, and times out.
            owner.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreFailure) as raised:
                store.find("alpha", TicketFilter(), limit=2)
        assert store.find("alpha", TicketFilter(), limit=2) == ALPHA_TICKETS[:2]
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot read {describe(database.reader)} (QueryCanceled)",
    )


@pytest.mark.anyio
async def test_over_mcp_a_stopped_server_is_unavailable_retry_later(
    fixture_store: object, database: PostgresDatabase
) -> None:
    with PostgresStore.open(database.reader, timeout=1.0) as store:
        async with Client(build_server(ALPHA, store), mode="legacy") as client:
            before = await client.call_tool("get_ticket", {"ticket_id": "TKT-101"})
            database.cluster.stop()
            try:
                failed = await client.call_tool("get_ticket", {"ticket_id": "TKT-101"})
            finally:
                database.cluster.start()
            after = await client.call_tool("get_ticket", {"ticket_id": "TKT-101"})
    expected = {"ok": True, "ticket": T101}
    # A tool error the model reads as "retry later", not the -32603 kept for bugs.
    assert (failed.is_error, failed.structured_content) == (
        True,
        {"ok": False, "code": "unavailable", "detail": UNAVAILABLE_DETAIL},
    )
    assert (before.structured_content, after.structured_content) == (expected, expected)


# The tempting text filter, with PostgreSQL's lower(): under the column's collation ("C"),
# and under the cluster's locale (C.UTF-8, libc).
NAIVE_SQL = {
    "C": "SELECT id FROM tickets WHERE strpos(lower(title), lower(%s)) > 0 ORDER BY id",
    "libc": (
        'SELECT id FROM tickets WHERE strpos(lower(title COLLATE "default"), lower(%s)) > 0 '
        "ORDER BY id"
    ),
}


@pytest.mark.parametrize(
    ("collation", "query", "naive_ids"),
    [
        # "C" folds ASCII only: É stays. Python finds TKT-106 and TKT-107.
        pytest.param("C", "école", [], id="C-folds-ascii-only"),
        # libc lowers 'İ' to 'i' (Python: 'i' and a combining dot), and capital sigma
        # always to the medial form, never the word-final one. Python finds nothing.
        pytest.param("libc", "istanbul", ["TKT-108"], id="libc-dotted-capital-i"),
        pytest.param("libc", "Σ", ["TKT-112"], id="libc-final-sigma"),
    ],
)
def test_postgres_lower_would_break_the_traps(
    postgres_factory: StoreFactory,
    database: PostgresDatabase,
    collation: str,
    query: str,
    naive_ids: list[str],
) -> None:
    # PostgreSQL's own lower() answers these trap queries differently from Python's,
    # so the store compares with title_lower, lowered by Python at import.
    postgres_factory(TRAP_RECORDS)
    with psycopg.connect(database.reader) as reader:
        reader.execute("SELECT set_config('app.tenant', 'alpha', true)")
        rows = reader.execute(NAIVE_SQL[collation], (query,)).fetchall()
    assert [row[0] for row in rows] == naive_ids


# --- Values PostgreSQL text cannot hold, and limits ---


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(TicketFilter(text="\x00"), id="nul-text"),
        pytest.param(TicketFilter(text="lo\ud800"), id="surrogate-text"),
        pytest.param(TicketFilter(status="op\x00en"), id="nul-status"),
    ],
)
def test_unstorable_filter_values_match_nothing(
    fixture_store: PostgresStore, where: TicketFilter
) -> None:
    assert fixture_store.find("alpha", where, limit=None) == []


@pytest.mark.parametrize(
    ("tenant", "ticket_id"),
    [
        pytest.param("alpha\x00", "TKT-101", id="nul-tenant"),
        pytest.param("\ud800", "TKT-101", id="surrogate-tenant"),
        pytest.param("alpha", "TKT-101\x00", id="nul-id"),
    ],
)
def test_unstorable_keys_are_not_found(
    fixture_store: PostgresStore, tenant: str, ticket_id: str
) -> None:
    assert fixture_store.get(tenant, ticket_id) is None


@pytest.mark.parametrize("tenant", ["alpha\x00", "\ud800"], ids=["nul", "surrogate"])
def test_unstorable_tenants_have_no_tickets(fixture_store: PostgresStore, tenant: str) -> None:
    assert fixture_store.find(tenant, TicketFilter(), limit=None) == []


@pytest.mark.parametrize(
    ("after", "ids"),
    [
        pytest.param("TKT-104", ["TKT-107", "TKT-110"], id="a-stored-id"),
        pytest.param("TKT-10", ["TKT-101", "TKT-102"], id="a-prefix-of-ids"),
        pytest.param("TKT-1\x00", ["TKT-101", "TKT-102"], id="nul-below-every-longer-id"),
        pytest.param("TKS\ud800", ["TKT-101", "TKT-102"], id="surrogate-below-every-id"),
        pytest.param("TKT-\ud800", [], id="surrogate-above-every-id"),
    ],
)
def test_a_cursor_of_any_text_is_a_position(
    fixture_store: PostgresStore, after: str, ids: list[str]
) -> None:
    # The bound sent is storable text even when the cursor is not; the answer is the dict's.
    where = TicketFilter(after=after)
    found = fixture_store.find("alpha", where, limit=2)
    assert [t["id"] for t in found] == ids
    assert found == DictStore(fixture_records()).find("alpha", where, limit=2)


@pytest.mark.parametrize(
    ("after", "bound"),
    [
        pytest.param("TKT-104", "TKT-104\x01", id="plain"),
        pytest.param("TKT-1\x00x", "TKT-1\x01", id="nul"),
        pytest.param("TKT-\udfffx", "TKT-\ue000", id="surrogate"),
        pytest.param("", "\x01", id="empty"),
    ],
)
def test_lower_bound(after: str, bound: str) -> None:
    assert postgres_store._lower_bound(after) == bound


@pytest.mark.parametrize(
    ("limit", "ids"),
    [
        pytest.param(0, [], id="zero"),
        pytest.param(-1, [], id="negative"),
        pytest.param(1, ["TKT-101"], id="one"),
        pytest.param(None, [t["id"] for t in ALPHA_TICKETS], id="none"),
        pytest.param(2**64, [t["id"] for t in ALPHA_TICKETS], id="beyond-bigint"),
    ],
)
def test_limits(fixture_store: PostgresStore, limit: int | None, ids: list[str]) -> None:
    assert [t["id"] for t in fixture_store.find("alpha", TicketFilter(), limit=limit)] == ids


# --- Import ---


def test_import_keeps_only_the_public_fields_and_pythons_lowercase(
    fixture_store: object, database: PostgresDatabase
) -> None:
    with psycopg.connect(database.superuser) as superuser:  # a superuser skips the policy
        rows = superuser.execute("SELECT * FROM tickets ORDER BY tenant, id").fetchall()
    assert rows == [
        (
            "alpha",
            "TKT-101",
            "Login fails after password reset",
            "open",
            "login fails after password reset",
            0,
        ),
        ("alpha", "TKT-102", "CSV export times out", "closed", "csv export times out", 0),
        ("alpha", "TKT-104", "Settings crash", "open", "settings crash", 0),
        ("alpha", "TKT-107", "Login page slow on mobile", "open", "login page slow on mobile", 0),
        ("alpha", "TKT-110", "Invoice PDF missing logo", "closed", "invoice pdf missing logo", 0),
        (
            "alpha",
            "TKT-112",
            "Settings page shows wrong time zone",
            "open",
            "settings page shows wrong time zone",
            0,
        ),
        (
            "alpha",
            "TKT-115",
            "Password reset email delayed",
            "closed",
            "password reset email delayed",
            0,
        ),
        ("beta", "TKT-103", "Refund not received", "open", "refund not received", 0),
        ("beta", "TKT-104", "Private billing issue", "closed", "private billing issue", 0),
        (
            "beta",
            "TKT-108",
            "Login fails after SSO change",
            "open",
            "login fails after sso change",
            0,
        ),
    ]


def _table(database: PostgresDatabase, dbname: str) -> object:
    with psycopg.connect(_dsn(database, "postgres", dbname)) as superuser:
        exists = superuser.execute("SELECT to_regclass('tickets') IS NOT NULL").fetchone()
        if exists != (True,):
            return None
        return superuser.execute("SELECT tenant, id FROM tickets ORDER BY tenant, id").fetchall()


def test_import_creates_the_schema_and_grants_the_reader(
    database: PostgresDatabase, scratch: str
) -> None:
    count = import_dsn(_dsn(database, OWNER, scratch), fixture_records(), grant_to=READER)
    with PostgresStore.open(_dsn(database, READER, scratch)) as store:
        assert (count, store.find("beta", TicketFilter(), limit=None)) == (10, BETA_TICKETS)


def test_import_refuses_a_table_that_holds_tickets(
    database: PostgresDatabase, scratch: str
) -> None:
    dsn = _dsn(database, OWNER, scratch)
    import_dsn(dsn, {"gamma:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"}})
    with pytest.raises(TableNotEmptyError) as raised:
        import_dsn(dsn, fixture_records())
    assert str(raised.value) == (
        "the tickets table already holds tickets, tombstones or a high-water version"
    )
    assert _table(database, scratch) == [("gamma", "TKT-001")]


def test_import_failure_writes_nothing(database: PostgresDatabase, scratch: str) -> None:
    # The grant fails last, after the schema and the rows: all of it is rolled back.
    dsn = _dsn(database, OWNER, scratch)
    with pytest.raises(StoreFailure) as raised:
        import_dsn(dsn, fixture_records(), grant_to="no_such_role")
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot import into {describe(dsn)} (UndefinedObject)",
    )
    assert _table(database, scratch) is None


def test_import_into_a_missing_database(database: PostgresDatabase) -> None:
    dsn = _dsn(database, OWNER, "nowhere")
    with pytest.raises(StoreFailure) as raised:
        import_dsn(dsn, fixture_records())
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot import into {describe(dsn)}: " + NO_CONNECTION,
    )


def test_import_refuses_a_table_of_another_schema(database: PostgresDatabase, scratch: str) -> None:
    _owner_runs(database, scratch, "CREATE TABLE tickets (key text, body text)")
    dsn = _dsn(database, OWNER, scratch)
    with pytest.raises(StoreFailure) as raised:
        import_dsn(dsn, fixture_records())
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} has no ticket-tools tickets, tombstones and high_water tables "
        "(schema version 6) with their row-level security forced",
    )


@pytest.mark.parametrize(
    ("records", "message"),
    [
        pytest.param(
            {"alpha:TKT-101": {"id": "TKT-101", "title": "a\x00b", "status": "open"}},
            "record 1 (in file order): PostgreSQL text cannot hold a NUL character",
            id="nul-in-title",
        ),
        pytest.param(
            {"a:b:TKT-101": {"id": "TKT-101", "title": "t", "status": "open"}},
            'record 1 (in file order): the key is not "tenant:" followed by the ticket\'s own id',
            id="the-records-rules-apply",
        ),
    ],
)
def test_import_refuses_malformed_records(
    database: PostgresDatabase, scratch: str, records: Records, message: str
) -> None:
    with pytest.raises(RecordsError) as raised:
        import_dsn(_dsn(database, OWNER, scratch), records)
    assert str(raised.value) == message
    assert _table(database, scratch) is None


def test_import_reports_progress_per_batch(
    database: PostgresDatabase, scratch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_importer, "IMPORT_BATCH", 4)
    seen: list[int] = []
    import_dsn(_dsn(database, OWNER, scratch), fixture_records(), on_progress=seen.append)
    assert seen == [4, 8, 10]


# --- Differential: PostgreSQL and the dict store agree on generated multi-tenant stores ---


def _without_nul(records: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    # PostgreSQL text cannot hold NUL (the import refuses it); queries keep it.
    return {
        key: {**ticket, "title": ticket["title"].replace("\x00", "")}
        for key, ticket in records.items()
    }


storable_records = multi_tenant_records().map(_without_nul)


@given(records=storable_records, request=store_find_requests, data=st.data())
def test_find_matches_the_dict_store(
    postgres_factory: StoreFactory,
    records: dict[str, dict[str, str]],
    request: tuple[str, TicketFilter, int],
    data: st.DataObject,
) -> None:
    tenant, where, limit = request
    store = postgres_factory(records)
    assert isinstance(store, PostgresStore)
    dict_store = DictStore(records)
    assert store.find(tenant, where, limit=limit) == dict_store.find(tenant, where, limit=limit)
    key = data.draw(st.sampled_from([*records, "alpha:TKT-999"]), label="key")
    tenant, _, ticket_id = key.rpartition(":")
    assert store.get(tenant, ticket_id) == dict_store.get(tenant, ticket_id)


@given(records=storable_records, request=odd_requests)
def test_any_text_gets_the_dict_stores_answer(
    postgres_factory: StoreFactory, records: dict[str, dict[str, str]], request: dict[str, object]
) -> None:
    # Tenants, statuses, texts and cursors with lone surrogates around them: never a raise.
    where = TicketFilter(
        cast("str | None", request["status"]),
        cast("str | None", request["text"]),
        cast("str | None", request["after"]),
    )
    tenant, limit = cast(str, request["tenant"]), cast(int, request["limit"])
    store = postgres_factory(records)
    assert isinstance(store, PostgresStore)
    dict_store = DictStore(records)
    assert store.find(tenant, where, limit=limit) == dict_store.find(tenant, where, limit=limit)
    ticket_id = where.after if where.after is not None else "TKT-001"
    assert store.get(tenant, ticket_id) == dict_store.get(tenant, ticket_id)
