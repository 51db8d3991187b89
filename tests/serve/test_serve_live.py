"""A running `serve` answers with what `apply` committed a moment before: no restart, no lock.

Real servers (stdio and HTTP subprocesses), real databases (an SQLite file, the session's
throwaway PostgreSQL cluster), a real `apply` process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO, cast

import psycopg
import pytest

from conftest import OWNER, READER, PostgresDatabase
from live_servers import HttpCaller, StdioServer
from testkit.server import HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools import fixture_records
from ticket_tools.stores.postgres.importer import import_records
from ticket_tools.stores.sqlite.importer import write_database

REPLY_TIMEOUT = 60.0  # seconds: only reached when the server never answers
T101 = {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"}
CHANGED = {"id": "TKT-101", "title": "VPN drops hourly", "status": "closed"}


def _line(change: dict[str, object]) -> str:
    return json.dumps(change) + "\n"


# Three changes: TKT-101 retitled and closed, TKT-102 deleted, TKT-120 new.
FEED = "".join(
    _line(change)
    for change in (
        {
            "op": "upsert",
            "key": "alpha:TKT-101",
            "version": 3,
            "ticket": {**CHANGED, "internal_note": "never shown"},
        },
        {"op": "delete", "key": "alpha:TKT-102", "version": 3},
        {
            "op": "upsert",
            "key": "alpha:TKT-120",
            "version": 1,
            "ticket": {"id": "TKT-120", "title": "VPN new", "status": "open"},
        },
    )
)


def _apply(feed: Path, *target: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ticket_tools.cli", "apply", str(feed), *target],
        capture_output=True,
        check=False,
    )
    assert (done.returncode, done.stdout.decode().split(": ")[-1]) == (
        0,
        "2 upserted, 1 deleted, 0 stale\n",
    ), done.stderr


def _sees_every_change(caller: StdioServer | HttpCaller, feed: Path, *target: str) -> None:
    assert caller.call("get_ticket", {"ticket_id": "TKT-101"}) == {"ok": True, "ticket": T101}
    assert caller.call("search_tickets", {"query": "vpn"}) == {
        "ok": True,
        "tickets": [],
        "next_cursor": None,
    }
    _apply(feed, *target)
    # The very next calls, on the same server and connection, see all three changes.
    assert caller.call("get_ticket", {"ticket_id": "TKT-101"}) == {"ok": True, "ticket": CHANGED}
    assert caller.call("get_ticket", {"ticket_id": "TKT-102"}) == {
        "ok": False,
        "code": "not_found",
        "detail": "no ticket with that ID is visible in this session",
    }
    assert caller.call("search_tickets", {"query": "vpn"}) == {
        "ok": True,
        "tickets": [CHANGED, {"id": "TKT-120", "title": "VPN new", "status": "open"}],
        "next_cursor": None,
    }
    # The old title's words are gone from the search, as the lowered copy followed.
    assert caller.call("search_tickets", {"query": "password reset"}) == {
        "ok": True,
        "tickets": [{"id": "TKT-115", "title": "Password reset email delayed", "status": "closed"}],
        "next_cursor": None,
    }


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    path = tmp_path / "feed.jsonl"
    path.write_text(FEED, encoding="utf-8")
    return path


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    path = tmp_path / "tickets.sqlite"
    write_database(path, fixture_records())
    return path


@pytest.fixture
def pg(postgres_database: PostgresDatabase, scratch: str) -> dict[str, str]:
    """The scratch database holding the fixture tickets: the owner's and the reader's DSN."""
    cluster = postgres_database.cluster
    owner = cluster.dsn(OWNER, scratch)
    with psycopg.connect(owner) as connection:
        import_records(connection, fixture_records(), grant_to=READER)
    return {"owner": owner, "reader": cluster.dsn(READER, scratch)}


@pytest.fixture
def jwks(tmp_path: Path) -> tuple[str, str]:
    """A JWKS file and a token for alpha signed by its key."""
    idp = Issuer("live")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return str(path), idp.sign(claims("alpha", "live-user"))


def test_stdio_on_sqlite_sees_apply_without_restart(sqlite_db: Path, feed: Path) -> None:
    server = StdioServer("--db", str(sqlite_db))
    try:
        _sees_every_change(server, feed, "--db", str(sqlite_db))
    finally:
        assert server.stop() == 0


def test_stdio_on_postgres_sees_apply_without_restart(pg: dict[str, str], feed: Path) -> None:
    server = StdioServer("--postgres", pg["reader"])
    try:
        _sees_every_change(server, feed, "--postgres", pg["owner"])
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_http_sees_apply_without_restart(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    feed: Path,
    jwks: tuple[str, str],
    kind: str,
) -> None:
    if kind == "sqlite":
        db: Path = request.getfixturevalue("sqlite_db")
        serve_store, apply_target = ["--db", str(db)], ["--db", str(db)]
    else:
        dsns: dict[str, str] = request.getfixturevalue("pg")
        serve_store, apply_target = ["--postgres", dsns["reader"]], ["--postgres", dsns["owner"]]
    server = HttpServer(tmp_path / "server", jwks[0], "--stateless", *serve_store)
    try:
        _sees_every_change(HttpCaller(server, jwks[1]), feed, *apply_target)
    finally:
        assert server.stop() == 0, server.stderr()


def test_sqlite_reads_never_wait_for_a_running_apply(sqlite_db: Path, tmp_path: Path) -> None:
    # A feed applied batch after batch from an open pipe, while the server answers: every
    # call succeeds (no "locked"), and each sees a whole number of batches.
    server = StdioServer("--db", str(sqlite_db))
    writer = subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", "apply", "-", "--db", str(sqlite_db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stdin = cast(BinaryIO, writer.stdin)
    answers: list[dict[str, Any]] = []
    try:
        for version in range(1, 40):
            title = f"round {version}"
            lines = [
                {
                    "op": "upsert",
                    "key": f"alpha:TKT-{n}",
                    "version": version,
                    "ticket": {"id": f"TKT-{n}", "title": title, "status": "open"},
                }
                for n in range(200, 300)
            ]
            stdin.write("".join(_line(line) for line in lines).encode())
            stdin.flush()
            got = cast("dict[str, Any]", server.call("search_tickets", {"query": "round"}))
            ids = [ticket["id"] for ticket in got["tickets"]]
            assert (got["ok"], ids) in (
                (True, []),  # before the first batch is committed
                (True, [f"TKT-{n}" for n in range(200, 205)]),
            )
            answers.append(got)
    finally:
        stdin.close()
        assert writer.wait(timeout=REPLY_TIMEOUT) == 0
        assert server.stop() == 0
    assert len(answers) == 39
