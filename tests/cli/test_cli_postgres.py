"""The command line with PostgreSQL: import --postgres, --postgres and its environment variable."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from conftest import OWNER, READER, PostgresDatabase
from ticket_tools import cli, fixture_records
from ticket_tools.cli.stores import POSTGRES_ENV
from ticket_tools.stores.postgres.schema import describe

Captured = pytest.CaptureFixture[str]

GAMMA = {"gamma:TKT-001": {"id": "TKT-001", "title": "Only in PostgreSQL", "status": "open"}}
GAMMA_CALL = ["call", "get_ticket", '{"ticket_id": "TKT-001"}', "--tenant", "gamma"]
GAMMA_FOUND = {
    "ok": True,
    "ticket": {"id": "TKT-001", "title": "Only in PostgreSQL", "status": "open"},
}


def _write(path: Path, records: object) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture
def owner_dsn(postgres_database: PostgresDatabase, scratch: str) -> str:
    return postgres_database.cluster.dsn(OWNER, scratch)


@pytest.fixture
def reader_dsn(postgres_database: PostgresDatabase, scratch: str) -> str:
    return postgres_database.cluster.dsn(READER, scratch)


@pytest.fixture
def gamma(tmp_path: Path, owner_dsn: str, capsys: Captured) -> None:
    """The scratch database holds gamma's one ticket, which the fixture store lacks."""
    records = _write(tmp_path / "gamma.json", GAMMA)
    assert cli.main(["import", str(records), "--postgres", owner_dsn, "--grant-to", READER]) == 0
    capsys.readouterr()


def test_import_fills_the_table_and_call_reads_it(
    tmp_path: Path, owner_dsn: str, reader_dsn: str, capsys: Captured
) -> None:
    records = _write(tmp_path / "records.json", fixture_records())
    status = cli.main(["import", str(records), "--postgres", owner_dsn, "--grant-to", READER])
    assert (status, capsys.readouterr()) == (
        0,
        (f"imported 10 tickets into {describe(owner_dsn)}\n", ""),
    )
    status = cli.main(["acceptance", "--postgres", reader_dsn])
    out, err = capsys.readouterr()
    assert (status, out.splitlines()[-1], err) == (0, "13 passed, 0 failed", "")


@pytest.mark.usefixtures("gamma")
def test_the_dsn_may_come_from_the_environment(
    reader_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    monkeypatch.setenv(POSTGRES_ENV, reader_dsn)
    status = cli.main(GAMMA_CALL)
    out, err = capsys.readouterr()
    assert (status, json.loads(out), err) == (0, GAMMA_FOUND, "")


@pytest.mark.usefixtures("gamma")
def test_records_on_the_command_line_win_over_the_environment(
    tmp_path: Path, reader_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    monkeypatch.setenv(POSTGRES_ENV, reader_dsn)
    records = _write(tmp_path / "records.json", fixture_records())
    status = cli.main([*GAMMA_CALL, "--records", str(records)])
    out, err = capsys.readouterr()
    assert (status, json.loads(out), err) == (
        1,
        {"ok": False, "code": "not_found"},
        "ticket-tools: not_found: no ticket with that ID is visible in this session\n",
    )


@pytest.mark.usefixtures("gamma")
def test_import_refuses_a_table_that_holds_tickets(
    tmp_path: Path, owner_dsn: str, capsys: Captured
) -> None:
    records = _write(tmp_path / "records.json", fixture_records())
    status = cli.main(["import", str(records), "--postgres", owner_dsn])
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: {describe(owner_dsn)} already holds tickets; "
            "import only fills an empty table\n",
        ),
    )


def test_import_refuses_records_postgresql_cannot_hold(
    tmp_path: Path, owner_dsn: str, capsys: Captured
) -> None:
    records = _write(
        tmp_path / "records.json",
        {"a:TKT-001": {"id": "TKT-001", "title": "\x00", "status": "open"}},
    )
    # A cleaned title loses its NUL (a control); a raw one keeps it, and is refused.
    status = cli.main(["import", str(records), "--postgres", owner_dsn, "--raw-titles"])
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: {records}: record 1 (in file order): "
            "PostgreSQL text cannot hold a NUL character\n",
        ),
    )


@pytest.mark.usefixtures("gamma")
def test_a_privileged_role_is_one_line_and_exit_2(owner_dsn: str, capsys: Captured) -> None:
    status = cli.main([*GAMMA_CALL, "--postgres", owner_dsn])
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: {describe(owner_dsn)} connects as the owner of the tickets table "
            "(or a member of its role), which row-level security does not restrict; "
            "connect as the reader role\n",
        ),
    )


def test_no_server_is_one_line_and_exit_2(tmp_path: Path, capsys: Captured) -> None:
    dsn = f"host={tmp_path} dbname=tickets user=reader"
    status = cli.main(["acceptance", "--postgres", dsn])
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: cannot connect to {describe(dsn)}: no connection (the server is "
            "down or unreachable, or it refused the database, role or password)\n",
        ),
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            [],
            "import needs --db FILE or --postgres DSN (or $TICKET_TOOLS_POSTGRES)",
            id="no-target",
        ),
        pytest.param(
            ["--db", "t.sqlite", "--grant-to", "reader"],
            "--grant-to applies to --postgres only",
            id="grant-to-with-db",
        ),
    ],
)
def test_import_needs_one_target(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Captured,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.delenv(POSTGRES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["import", "records.json", *args])
    assert (status, capsys.readouterr(), list(tmp_path.iterdir())) == (
        2,
        ("", f"ticket-tools: {message}\n"),
        [],
    )


@pytest.mark.parametrize("missing", ["psycopg", "psycopg_pool"])
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["acceptance", "--postgres", "dbname=x"], id="acceptance"),
        pytest.param(["import", "records.json", "--postgres", "dbname=x"], id="import"),
    ],
)
def test_postgres_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, missing: str, args: list[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name: None if name == missing else real(name)
    )
    status = cli.main(args)
    assert (status, capsys.readouterr()) == (
        2,
        (
            "",
            "ticket-tools: --postgres needs the postgres extra: in a clone of ticket-tools, "
            "pip install -e '.[postgres]'\n",
        ),
    )
