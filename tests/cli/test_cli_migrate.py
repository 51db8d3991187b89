"""`ticket-tools migrate`: a schema version 5 store gets its title index, in place, once."""

from __future__ import annotations

import io
import sqlite3
import sys
from pathlib import Path

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import TicketFilter, cli, fixture_records
from ticket_tools.cli import progress
from ticket_tools.stores import index_writes
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.postgres.schema import describe
from ticket_tools.stores.postgres.store import PostgresStore
from ticket_tools.stores.sqlite import importer as sqlite_import
from ticket_tools.stores.sqlite import title_index as sqlite_index
from ticket_tools.stores.sqlite.store import SQLiteStore

Captured = pytest.CaptureFixture[str]
LOGIN = [
    {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"},
    {"id": "TKT-107", "title": "Login page slow on mobile", "status": "open"},
]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _version_5(path: Path) -> None:
    """Make `path` a file as schema version 5 left it: no title index."""
    sqlite_import.write_database(path, fixture_records())
    connection = sqlite3.connect(path)
    for table in ("title_grams", "gram_counts", "tenant_sizes"):
        connection.execute(f"DROP TABLE {table}")
    connection.execute("PRAGMA user_version = 5")
    connection.commit()
    connection.close()


def test_migrate_a_version_5_file_then_again(
    tmp_path: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
    path = tmp_path / "tickets.sqlite"
    _version_5(path)
    assert cli.main(["call", "search_tickets", "{}", "--tenant", "alpha", "--db", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"ticket-tools: {path} is not a ticket database of schema version 6: it has schema "
        "version 5; to migrate, run ticket-tools migrate --db FILE\n"
    )
    assert cli.main(["migrate", "--db", str(path)]) == 0
    assert capsys.readouterr() == (
        f"migrated {path} to schema version 6: 10 tickets indexed\n",
        "",
    )
    with SQLiteStore.open(path) as store:
        assert store.find("alpha", TicketFilter(text="login"), limit=None) == LOGIN
    assert cli.main(["migrate", "--db", str(path)]) == 0
    assert capsys.readouterr().out == f"{path} already has schema version 6; nothing to migrate\n"


def test_migrate_draws_the_indexing_line_on_a_terminal(
    tmp_path: Path, capsys: Captured, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
    monkeypatch.setattr(sqlite_index, "_BUILD_BATCH", 4)
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    path = tmp_path / "tickets.sqlite"
    _version_5(path)
    assert cli.main(["migrate", "--db", str(path)]) == 0
    # alpha's 7 tickets in batches of 4, then beta's 3: of the 10 to index.
    assert terminal.getvalue() == (
        "\rindexing: 4 of 10 tickets\rindexing: 7 of 10 tickets\rindexing: 10 of 10 tickets\n"
    )


def test_import_draws_the_indexing_line_after_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
    monkeypatch.setattr(progress, "PROGRESS_SECONDS", 0.0)
    monkeypatch.setattr("ticket_tools.cli.stores.PROGRESS_MIN_BYTES", 10)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    records = tmp_path / "records.json"
    records.write_text(
        '{"alpha:TKT-101": {"id": "TKT-101", "title": "Login fails", "status": "open"}}'
    )
    assert cli.main(["import", str(records), "--db", str(tmp_path / "t.sqlite")]) == 0
    # The shorter line is padded over the longer one it replaces.
    assert terminal.getvalue() == (
        "\rimporting: 1 record, 100% of the file"
        + "\rindexing: 1 of 1 ticket"
        + " " * 14  # the 37 characters drawn before
        + "\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["migrate"],
            "ticket-tools: migrate needs --db FILE or --postgres DSN (or $TICKET_TOOLS_POSTGRES)\n",
            id="no-store",
        ),
        pytest.param(
            ["migrate", "--db", "{tmp}/absent.sqlite"],
            "ticket-tools: no database at {tmp}/absent.sqlite\n",
            id="missing-file",
        ),
    ],
)
def test_migrate_refuses(
    tmp_path: Path,
    capsys: Captured,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("TICKET_TOOLS_POSTGRES", raising=False)
    argv = [arg.format(tmp=tmp_path) for arg in args]
    assert cli.main(argv) == 2
    assert capsys.readouterr() == ("", message.format(tmp=tmp_path))


# --- PostgreSQL ---


def _postgres_version_5(owner: str) -> None:
    """Take a schema version 6 database back to what version 5 made."""
    with psycopg.connect(owner) as connection:
        connection.execute("DROP TABLE title_grams, gram_counts, tenant_sizes")
        for table, name in (
            ("tickets", "tickets"),
            ("tombstones", "tombstones"),
            ("high_water", "high water"),
        ):
            comment = f"ticket-tools {name}, schema version 5"
            connection.execute(f"COMMENT ON TABLE {table} IS '{comment}'")


def test_migrate_a_version_5_postgres_database(
    postgres_database: PostgresDatabase,
    scratch: str,
    capsys: Captured,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(index_writes, "INDEX_MIN_TICKETS", 0)
    cluster = postgres_database.cluster
    owner, reader = cluster.dsn(OWNER, scratch), cluster.dsn(READER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    _postgres_version_5(owner)
    # The reader cannot: only the tables' owner migrates them; nothing changed.
    assert cli.main(["migrate", "--postgres", reader]) == 2
    assert capsys.readouterr().err == (
        f"ticket-tools: {describe(reader)} connects as a role that does not own the tables; "
        "connect as their owner to migrate them\n"
    )
    assert cli.main(["migrate", "--postgres", owner]) == 0
    assert capsys.readouterr().out == (
        f"migrated {describe(owner)} to schema version 6: 10 tickets indexed\n"
    )
    # The reader was granted the index's tables as it was granted tickets.
    with PostgresStore.open(reader) as store:
        assert store.find("alpha", TicketFilter(text="login"), limit=None) == LOGIN
    monkeypatch.setenv("TICKET_TOOLS_POSTGRES", owner)
    assert cli.main(["migrate"]) == 0
    assert capsys.readouterr().out == (
        f"{describe(owner)} already has schema version 6; nothing to migrate\n"
    )


def test_migrate_an_unreachable_postgres_database(
    postgres_database: PostgresDatabase, capsys: Captured
) -> None:
    dsn = postgres_database.cluster.dsn(OWNER, "no_such_database")
    assert cli.main(["migrate", "--postgres", dsn]) == 2
    assert capsys.readouterr().err == (
        f"ticket-tools: cannot migrate {describe(dsn)}: no connection (the server is down or "
        "unreachable, or it refused the database, role or password)\n"
    )
