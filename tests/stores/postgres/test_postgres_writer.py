"""PostgresWriter: the version rule under forced row-level security, all or nothing per batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from feed_changes import check_the_version_rule, delete, up
from index_rows import expected_index, index_rows
from ticket_tools import TicketFilter, fixture_records
from ticket_tools.stores import index_writes
from ticket_tools.stores.failure import StoreFailure
from ticket_tools.stores.feed import Counts, FeedError
from ticket_tools.stores.postgres import writer as postgres_writer
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.migrate import migrate_dsn
from ticket_tools.stores.postgres.schema import (
    MIGRATE_FROM_1,
    MIGRATE_FROM_2,
    MIGRATE_FROM_3,
    WRITER_LOCK,
    describe,
)
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.postgres.writer import PostgresWriter

Dump = tuple[list[tuple[object, ...]], list[tuple[object, ...]]]


@pytest.fixture
def dsns(postgres_database: PostgresDatabase, scratch: str) -> dict[str, str]:
    """The scratch database holding the fixture tickets: each role's DSN."""
    cluster = postgres_database.cluster
    owner = cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    return {
        "owner": owner,
        "reader": cluster.dsn(READER, scratch),
        "super": cluster.dsn("postgres", scratch),
    }


@pytest.fixture
def writer(dsns: dict[str, str]) -> Iterator[PostgresWriter]:
    with PostgresWriter.open(dsns["owner"]) as opened:
        yield opened


@pytest.fixture
def store(dsns: dict[str, str]) -> Iterator[PostgresStore]:
    with PostgresStore.open(dsns["reader"]) as opened:
        yield opened


def dump(dsn: str) -> Dump:
    """Every row of both tables, versions and lowered titles included (as a superuser)."""
    with psycopg.connect(dsn) as connection:
        tickets = connection.execute("SELECT * FROM tickets ORDER BY tenant, id").fetchall()
        tombstones = connection.execute("SELECT * FROM tombstones ORDER BY tenant, id").fetchall()
    return tickets, tombstones


def test_the_version_rule_on_postgres(writer: PostgresWriter, store: PostgresStore) -> None:
    check_the_version_rule(writer, store)


def test_the_lowered_title_follows_every_title_change(
    writer: PostgresWriter, store: PostgresStore, dsns: dict[str, str]
) -> None:
    writer.apply([up("TKT-101", 1, "VPN drops HOURLY")])
    assert store.find("alpha", TicketFilter(text="hourly"), limit=None) == [
        {"id": "TKT-101", "title": "VPN drops HOURLY", "status": "open"}
    ]
    # The old title's words no longer match; Python's lowering, not PostgreSQL's.
    assert store.find("alpha", TicketFilter(text="password reset"), limit=None) == [
        {"id": "TKT-115", "title": "Password reset email delayed", "status": "closed"}
    ]
    writer.apply([up("TKT-101", 2, "İstanbul")])
    assert store.find("alpha", TicketFilter(text="i̇stanbul"), limit=None) == [
        {"id": "TKT-101", "title": "İstanbul", "status": "open"}
    ]
    assert dump(dsns["super"])[0][0] == ("alpha", "TKT-101", "İstanbul", "open", "i̇stanbul", 2)


def test_batches_across_tenants_and_replays(writer: PostgresWriter, dsns: dict[str, str]) -> None:
    batch = [
        up("TKT-101", 4),
        delete("TKT-103", 2, "beta"),
        up("TKT-120", 1, "new", "gamma"),
        up("TKT-101", 3),
        delete("TKT-999", 5, "delta"),
    ]
    assert writer.apply(batch) == Counts(2, 2, 1)
    after = dump(dsns["super"])
    assert after[1] == [("beta", "TKT-103", 2), ("delta", "TKT-999", 5)]
    assert ("gamma", "TKT-120", "new", "open", "new", 1) in after[0]
    assert writer.apply(batch) == Counts(0, 0, 5)
    assert dump(dsns["super"]) == after
    assert writer.apply([]) == Counts()


def test_a_failing_batch_writes_nothing(writer: PostgresWriter, dsns: dict[str, str]) -> None:
    before = dump(dsns["super"])
    # NUL: PostgreSQL refuses it (apply's check says so first; here it is skipped).
    broken = up("TKT-121", 1, "a\x00b")
    with pytest.raises(StoreFailure) as raised:
        writer.apply([up("TKT-120", 1), delete("TKT-101", 1), broken])
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot write {describe(dsns['owner'])}: "
        "a value PostgreSQL cannot hold (a NUL character, say)",
    )
    assert dump(dsns["super"]) == before
    assert writer.apply([up("TKT-120", 1)]) == Counts(1, 0, 0)


def test_check_refuses_nul(writer: PostgresWriter) -> None:
    writer.check(up("TKT-101", 1))
    with pytest.raises(FeedError) as raised:
        writer.check(up("TKT-101", 1, "a\x00b"))
    assert str(raised.value) == "PostgreSQL text cannot hold a NUL character"


@pytest.mark.parametrize(
    ("role", "method"),
    [
        pytest.param("owner", "_write_all", id="the-owner-whole-batch"),
        pytest.param("writer", "_write", id="a-writer-role-tenant-by-tenant"),
    ],
)
def test_an_interrupted_batch_is_rolled_back(
    dsns: dict[str, str], monkeypatch: pytest.MonkeyPatch, role: str, method: str
) -> None:
    before = dump(dsns["super"])
    write = getattr(PostgresWriter, method)

    def write_then_interrupt(self: PostgresWriter, *arguments: object) -> None:
        write(self, *arguments)
        raise KeyboardInterrupt

    monkeypatch.setattr(PostgresWriter, method, write_then_interrupt)
    with (
        writer_role(dsns) as writer_dsn,
        PostgresWriter.open(dsns["owner"] if role == "owner" else writer_dsn) as writer,
        pytest.raises(KeyboardInterrupt),
    ):
        writer.apply([up("TKT-101", 1), delete("TKT-102", 1)])
    assert dump(dsns["super"]) == before


def test_the_readers_policy_is_unchanged_and_tombstones_are_not_granted(
    writer: PostgresWriter, dsns: dict[str, str]
) -> None:
    writer.apply([delete("TKT-101", 1)])
    with psycopg.connect(dsns["reader"]) as reader:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM tombstones")
        reader.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT * FROM high_water")
        reader.rollback()
        assert reader.execute("SELECT count(*) FROM tickets").fetchone() == (0,)


def test_open_refuses_the_reader(dsns: dict[str, str]) -> None:
    with pytest.raises(StoreFailure) as raised:
        PostgresWriter.open(dsns["reader"])
    assert (raised.value.reason, str(raised.value)) == (
        "privileged",
        f"{describe(dsns['reader'])} connects as a role that cannot write the tickets, "
        "tombstones and title index tables (and read high_water); connect as their owner or "
        "the writer role",
    )


@contextmanager
def writer_role(dsns: dict[str, str]) -> Iterator[str]:
    """The writer role docs/postgres.md defines, for the block: its DSN."""
    # A role granted the four privileges on both tables, not the owner.
    with psycopg.connect(dsns["super"], autocommit=True) as connection:
        connection.execute("DROP ROLE IF EXISTS ticket_writer")
        connection.execute("CREATE ROLE ticket_writer LOGIN")
        connection.execute(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON tickets, tombstones, title_grams, "
            "gram_counts, tenant_sizes TO ticket_writer"
        )
        connection.execute("GRANT SELECT ON high_water TO ticket_writer")
    try:
        yield dsns["owner"].replace(f"user={OWNER}", "user=ticket_writer")
    finally:
        with psycopg.connect(dsns["super"], autocommit=True) as connection:
            connection.execute(
                "REVOKE ALL ON tickets, tombstones, high_water, title_grams, gram_counts, "
                "tenant_sizes FROM ticket_writer"
            )
            connection.execute("DROP ROLE ticket_writer")


def test_a_writer_role_as_the_docs_define_it(dsns: dict[str, str]) -> None:
    with writer_role(dsns) as dsn, PostgresWriter.open(dsn) as writer:
        with PostgresStore.open(dsns["reader"]) as store:
            check_the_version_rule(writer, store)
        assert writer.apply([up("TKT-120", 3), delete("TKT-102", 3, "beta")]) == Counts(1, 1, 0)
    tickets, tombstones = dump(dsns["super"])
    assert ("alpha", "TKT-120", "t", "open", "t", 3) in tickets
    assert ("beta", "TKT-102", 3) in tombstones


@pytest.mark.parametrize("role", ["owner", "writer"])
def test_a_batch_waits_for_the_writers_lock_no_longer_than_its_timeout(
    dsns: dict[str, str], role: str
) -> None:
    with ExitStack() as stack:
        dsn = dsns["owner"] if role == "owner" else stack.enter_context(writer_role(dsns))
        writer = stack.enter_context(PostgresWriter.open(dsn, timeout=0.2))
        # What an import --replace holds through its copy and swap.
        holder = stack.enter_context(psycopg.connect(dsns["owner"], autocommit=True))
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
        with pytest.raises(StoreFailure) as raised:
            writer.apply([up("TKT-120", 3)])
        assert (raised.value.reason, str(raised.value)) == (
            "unavailable",
            f"cannot write {describe(dsn)} (QueryCanceled)",
        )
        holder.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))
        assert writer.apply([up("TKT-120", 3)]) == Counts(1, 0, 0)


@pytest.mark.parametrize("role", ["owner", "writer"])
def test_a_batch_that_finds_the_lock_taken_says_so_then_waits_for_it(
    dsns: dict[str, str], role: str
) -> None:
    with ExitStack() as stack:
        dsn = dsns["owner"] if role == "owner" else stack.enter_context(writer_role(dsns))
        holder = stack.enter_context(psycopg.connect(dsns["owner"], autocommit=True))
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))
        announced: list[str] = []

        def on_wait() -> None:
            announced.append("waiting")
            holder.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))

        writer = stack.enter_context(PostgresWriter.open(dsn, timeout=30, on_wait=on_wait))
        assert writer.apply([up("TKT-120", 3)]) == Counts(1, 0, 0)
        assert announced == ["waiting"]
        assert writer.apply([up("TKT-121", 3)]) == Counts(1, 0, 0)  # the lock was free
        assert announced == ["waiting"]


UNSCOPED = "SELECT tenant, id FROM tickets ORDER BY tenant, id"
ALL_KEYS = sorted((key.split(":")[0], ticket["id"]) for key, ticket in fixture_records().items())


@pytest.mark.parametrize("role", ["owner", "writer"])
def test_the_title_index_follows_both_writers(
    dsns: dict[str, str], monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    # alpha's 7 fixture tickets grow to the threshold (8) with one batch and are indexed
    # whole; then titles change and a ticket goes: the index is a build's, exactly.
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 8)
    with ExitStack() as stack:
        writer_dsn = stack.enter_context(writer_role(dsns))
        chosen = dsns["owner"] if role == "owner" else writer_dsn
        writer = stack.enter_context(PostgresWriter.open(chosen))
        assert writer.apply([up("TKT-120", 1, "Kerberos expired")]) == Counts(1, 0, 0)
        batch = [
            up("TKT-101", 1, "Kerberos again"),
            delete("TKT-102", 1),
            up("TKT-120", 2, "Printer jammed"),
            up("TKT-101", 1, "New", tenant="beta"),
        ]
        assert writer.apply(batch) == Counts(3, 1, 0)
    with psycopg.connect(dsns["super"]) as connection:
        stored = {
            f"{tenant}:{ticket_id}": {"id": ticket_id, "title": title, "status": status}
            for tenant, ticket_id, title, status in connection.execute(
                "SELECT tenant, id, title, status FROM tickets"
            )
        }
        assert index_rows(connection) == expected_index(stored, indexed={"alpha"})
    with PostgresStore.open(dsns["reader"]) as store:
        assert store.find("alpha", TicketFilter(text="kerberos"), limit=None) == [
            {"id": "TKT-101", "title": "Kerberos again", "status": "open"}
        ]


def test_the_writer_policy_covers_the_owner_alone(dsns: dict[str, str]) -> None:
    # Without app.tenant: the owner sees every tenant's rows through its writer policy;
    # the writer role and the reader see none, and the reader set to alpha sees alpha's.
    with writer_role(dsns) as writer_dsn:
        seen = {}
        for name, dsn in (
            ("owner", dsns["owner"]),
            ("writer", writer_dsn),
            ("reader", dsns["reader"]),
        ):
            with psycopg.connect(dsn) as connection:
                seen[name] = connection.execute(UNSCOPED).fetchall()
                connection.execute("SELECT set_config('app.tenant', 'alpha', true)")
                seen[name + " as alpha"] = connection.execute(UNSCOPED).fetchall()
    alpha = [key for key in ALL_KEYS if key[0] == "alpha"]
    assert seen == {
        "owner": ALL_KEYS,
        "owner as alpha": ALL_KEYS,
        "writer": [],
        "writer as alpha": alpha,
        "reader": [],
        "reader as alpha": alpha,
    }
    with psycopg.connect(dsns["super"]) as connection:
        policies = connection.execute(
            "SELECT polrelid::regclass::text, polname, polroles::regrole[]::text[] "
            "FROM pg_policy ORDER BY 1, 2"
        ).fetchall()
    assert policies == [
        (table, f"{table}_{kind}", ["-"] if kind == "tenant" else [OWNER])
        for table in ("gram_counts", "tenant_sizes", "tickets", "title_grams", "tombstones")
        for kind in ("tenant", "writer")
    ]


def _downgrade(dsn: str, version: int) -> None:
    # What an import of that version made: version 5 had no title index; version 4 no
    # high_water either; version 3 no writer policies either; version 2 no version column
    # and no tombstones either; version 1 no id CHECK either.
    with psycopg.connect(dsn) as connection:
        connection.execute("DROP TABLE title_grams, gram_counts, tenant_sizes")
        if version <= 4:
            connection.execute("DROP TABLE high_water")
        else:
            comment = f"ticket-tools high water, schema version {version}"
            connection.execute(f"COMMENT ON TABLE high_water IS '{comment}'")
        if version <= 3:
            connection.execute("DROP POLICY tickets_writer ON tickets")
            connection.execute("DROP POLICY tombstones_writer ON tombstones")
        if version <= 2:
            connection.execute("DROP TABLE tombstones")
            connection.execute("ALTER TABLE tickets DROP COLUMN version")
        else:
            comment = f"ticket-tools tombstones, schema version {version}"
            connection.execute(f"COMMENT ON TABLE tombstones IS '{comment}'")
        if version == 1:
            connection.execute("ALTER TABLE tickets DROP CONSTRAINT tickets_id_check")
        connection.execute(
            f"COMMENT ON TABLE tickets IS 'ticket-tools tickets, schema version {version}'"
        )


def _refused_then_migrated(dsns: dict[str, str], version: int, migration: Sequence[str]) -> None:
    """Both openers refuse a database at `version`, by name; then run `migration` on it,
    and `ticket-tools migrate`'s own (from version 4 or 5, the one; before, both)."""
    fix = (
        "run ticket-tools migrate --postgres DSN as the tables' owner"
        if version >= 4
        else "run docs/postgres.md's migration statements as the table's owner"
    )
    for opener, dsn in ((PostgresWriter.open, dsns["owner"]), (PostgresStore.open, dsns["reader"])):
        with pytest.raises(StoreFailure) as raised:
            opener(dsn)
        assert (raised.value.reason, str(raised.value)) == (
            "schema",
            f"{describe(dsn)} has schema version {version}; to migrate, {fix}",
        )
    with psycopg.connect(dsns["owner"]) as connection:
        for statement in migration:
            connection.execute(statement)
    assert migrate_dsn(dsns["owner"]) == 0  # the fixture's tenants are below INDEX_MIN_TICKETS


def _fed_then_migrated(dsns: dict[str, str], version: int, migration: Sequence[str]) -> None:
    """Feed a database, take it back to `version`, migrate it: its rows and versions kept.

    After it, TKT-101 is at version 5 ("kept"), TKT-102 buried at 8, TKT-103 new at 1.
    """
    with PostgresWriter.open(dsns["owner"]) as writer:
        assert writer.apply([up("TKT-101", 5, "kept"), delete("TKT-102", 8)]) == Counts(1, 1, 0)
    before = dump(dsns["super"])
    _downgrade(dsns["owner"], version)
    _refused_then_migrated(dsns, version, migration)
    assert dump(dsns["super"]) == before
    with PostgresWriter.open(dsns["owner"]) as writer:
        assert writer.apply([up("TKT-101", 4), up("TKT-102", 7), up("TKT-103", 1)]) == Counts(
            1, 0, 2
        )


def test_open_refuses_a_schema_version_5_database_and_the_migration_keeps_its_data(
    dsns: dict[str, str],
) -> None:
    _fed_then_migrated(dsns, 5, ())


def test_open_refuses_a_schema_version_4_database_and_the_migration_keeps_its_data(
    dsns: dict[str, str],
) -> None:
    _fed_then_migrated(dsns, 4, ())
    with psycopg.connect(dsns["owner"]) as connection:
        assert connection.execute("SELECT * FROM high_water").fetchall() == []


def test_open_refuses_a_schema_version_3_database_and_the_migration_keeps_its_data(
    dsns: dict[str, str],
) -> None:
    _fed_then_migrated(dsns, 3, MIGRATE_FROM_3)
    with PostgresStore.open(dsns["reader"]) as store:
        assert [store.get("alpha", f"TKT-10{n}") for n in (1, 2, 3)] == [
            {"id": "TKT-101", "title": "kept", "status": "open"},
            None,
            {"id": "TKT-103", "title": "t", "status": "open"},
        ]


def test_open_refuses_a_schema_version_2_database_and_the_migration_fixes_it(
    dsns: dict[str, str],
) -> None:
    _downgrade(dsns["owner"], 2)
    _refused_then_migrated(dsns, 2, MIGRATE_FROM_2)
    with PostgresWriter.open(dsns["owner"]) as writer:
        assert writer.apply([up("TKT-101", 0), delete("TKT-102", 1)]) == Counts(0, 1, 1)
    with PostgresStore.open(dsns["reader"]) as store:
        assert store.get("alpha", "TKT-102") is None


def test_open_refuses_a_schema_version_1_database_and_the_migration_fixes_it(
    dsns: dict[str, str],
) -> None:
    _downgrade(dsns["owner"], 1)
    _refused_then_migrated(dsns, 1, MIGRATE_FROM_1)
    with PostgresWriter.open(dsns["owner"]) as writer:
        assert writer.apply([up("TKT-101", 0), up("TKT-102", 1)]) == Counts(1, 0, 1)
    with PostgresStore.open(dsns["reader"]) as store:
        assert store.get("alpha", "TKT-102") == {"id": "TKT-102", "title": "t", "status": "open"}


def test_open_refuses_what_it_cannot_reach(postgres_database: PostgresDatabase) -> None:
    dsn = postgres_database.cluster.dsn(OWNER, "no_such_database")
    with pytest.raises(StoreFailure) as raised:
        PostgresWriter.open(dsn, timeout=1)
    assert (raised.value.reason, str(raised.value)) == (
        "unavailable",
        f"cannot connect to {describe(dsn)}: no connection (the server is down or "
        "unreachable, or it refused the database, role or password)",
    )


def test_open_on_a_database_without_tables(
    postgres_database: PostgresDatabase, monkeypatch: pytest.MonkeyPatch, scratch: str
) -> None:
    dsn = postgres_database.cluster.dsn(OWNER, scratch)  # an empty database
    with pytest.raises(StoreFailure) as raised:
        PostgresWriter.open(dsn)
    assert raised.value.reason == "schema"
    # A fault while checking (here a missing table the check itself reads) is classified too.
    monkeypatch.setattr(postgres_writer, "check_schema", lambda *arguments: None)
    with pytest.raises(StoreFailure) as raised:
        PostgresWriter.open(dsn)
    assert (raised.value.reason, str(raised.value)) == (
        "schema",
        f"{describe(dsn)} is not a ticket-tools database",
    )


def test_a_closed_writer_says_so(dsns: dict[str, str]) -> None:
    writer = PostgresWriter.open(dsns["owner"])
    writer.close()
    with pytest.raises(StoreFailure) as raised:
        writer.apply([up("TKT-101", 1)])
    assert str(raised.value) == f"cannot write {describe(dsns['owner'])}: the writer is closed"
