"""`--id-digits N`: every command that takes a store or serves, end to end on real servers.

Six-digit tickets are imported into SQLite and PostgreSQL, served by a real `serve http`
and `serve stdio` process each, and walked page by page through the official MCP client;
a store of another width refuses to open with one line, exit 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from conftest import OWNER, READER, PostgresDatabase
from testkit.server import NO_RATE_LIMITS, HttpServer
from testkit.tokens import Issuer, claims
from ticket_tools.cli import main
from ticket_tools.declarations.exports import FORMATS, ExportFormat, export_declarations
from ticket_tools.declarations.widths import make_registry
from ticket_tools.stores.postgres.schema import describe
from tool_cases import ID_ARGUMENTS
from wide_ids import SIX, numbered_records, widened

Captured = pytest.CaptureFixture[str]

# Enough tickets for a walk of many pages past TKT-000999, the brief's last id.
COUNT = 1_500
LIMIT = 10
ALPHA_IDS = [f"TKT-{number:06d}" for number in range(COUNT)]
SIX_RULE = "a ticket ID: TKT- followed by exactly six digits, such as TKT-000104"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("id-digits")


@pytest.fixture(scope="module")
def records_file(folder: Path) -> Path:
    """alpha's COUNT numbered tickets and the fixture's beta, ids of six digits."""
    beta = {key: ticket for key, ticket in widened(SIX).items() if key.startswith("beta:")}
    path = folder / "six.json"
    path.write_text(json.dumps(numbered_records(SIX, COUNT) | beta), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def six_db(folder: Path, records_file: Path) -> Path:
    path = folder / "six.sqlite"
    assert main(["import", str(records_file), "--db", str(path), "--id-digits", "6"]) == 0
    return path


@pytest.fixture(scope="module")
def six_postgres(postgres_database: PostgresDatabase, records_file: Path) -> str:
    """A database of its own holding the six-digit records; the reader's DSN."""
    import psycopg  # noqa: PLC0415 - the fixture's own extra

    cluster = postgres_database.cluster
    with psycopg.connect(postgres_database.superuser, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE six OWNER {OWNER}")
    owner = cluster.dsn(OWNER, "six")
    status = main(
        ["import", str(records_file), "--postgres", owner, "--grant-to", READER, "--id-digits", "6"]
    )
    assert status == 0
    return cluster.dsn(READER, "six")


@pytest.fixture(scope="module")
def issuer(folder: Path) -> Issuer:
    idp = Issuer("idp")
    (folder / "jwks.json").write_text(json.dumps(idp.jwks()), encoding="utf-8")
    return idp


def _store(kind: str, request: pytest.FixtureRequest) -> list[str]:
    if kind == "sqlite":
        return ["--db", str(request.getfixturevalue("six_db"))]
    return ["--postgres", request.getfixturevalue("six_postgres")]


def _width_refusal(kind: str, request: pytest.FixtureRequest, width: str) -> str:
    """The one line a six-digit store gives a command started with another width."""
    option, value = _store(kind, request)
    source = value if option == "--db" else describe(value)
    return f"ticket-tools: {source} holds ticket IDs of 6 digits, not {width}: use --id-digits 6\n"


# --- The option itself ---


@pytest.mark.parametrize("value", ["2", "19", "0", "six", "6.0", "", " 6"])
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["declarations"], id="declarations"),
        pytest.param(["call", "get_ticket", "{}", "--tenant", "alpha"], id="call"),
        pytest.param(["import", "records.json", "--db", "x.sqlite"], id="import"),
        pytest.param(["serve", "stdio", "--tenant", "alpha"], id="serve-stdio"),
    ],
)
def test_a_width_outside_three_to_eighteen_is_a_usage_error(
    command: list[str], value: str, capsys: Captured
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--id-digits", value])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "argument --id-digits: expected an integer from 3 to 18\n"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_declarations_say_six_digits(fmt: ExportFormat, capsys: Captured) -> None:
    assert main(["declarations", "--format", fmt, "--id-digits", "6"]) == 0
    printed = capsys.readouterr().out
    assert printed == (
        json.dumps(export_declarations(fmt, make_registry(SIX)), indent=2, ensure_ascii=False)
        + "\n"
    )
    assert printed.count('"pattern": "^TKT-[0-9]{6}$"') == 2


@pytest.mark.parametrize("flags", [[], ["--id-digits", "3"]], ids=["default", "three"])
def test_declarations_of_three_digits_are_the_golden_file(
    flags: list[str], capsys: Captured
) -> None:
    golden = Path(__file__).parents[1] / "golden" / "json-schema.json"
    assert main(["declarations", *flags]) == 0
    assert capsys.readouterr().out == golden.read_text(encoding="utf-8")


# --- import and call, on both stores ---


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_acceptance_on_a_six_digit_store_says_its_calls_need_three(
    kind: str, request: pytest.FixtureRequest, capsys: Captured
) -> None:
    # acceptance has no --id-digits: the brief's calls are TKT- and three digits.
    option, value = _store(kind, request)
    source = value if option == "--db" else describe(value)
    capsys.readouterr()
    assert (main(["acceptance", option, value]), capsys.readouterr()) == (
        2,
        (
            "",
            f"ticket-tools: {source} holds ticket IDs of 6 digits: "
            "acceptance runs the brief's calls, whose IDs have 3\n",
        ),
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_call_reads_six_digit_tickets(
    kind: str, request: pytest.FixtureRequest, capsys: Captured
) -> None:
    store = _store(kind, request)
    capsys.readouterr()
    args = json.dumps({"cursor": "TKT-000997", "limit": 3})
    status = main(["call", "search_tickets", args, "--tenant", "alpha", *store, "--id-digits", "6"])
    assert (status, json.loads(capsys.readouterr().out)) == (
        0,
        {
            "ok": True,
            "tickets": [
                {"id": "TKT-000998", "title": "Ticket 998", "status": "open"},
                {"id": "TKT-000999", "title": "Ticket 999", "status": "closed"},
                {"id": "TKT-001000", "title": "Ticket 1000", "status": "open"},
            ],
            "next_cursor": "TKT-001000",
        },
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_three_digit_id_is_the_wrong_width(
    kind: str, request: pytest.FixtureRequest, capsys: Captured
) -> None:
    store = _store(kind, request)
    capsys.readouterr()
    args = '{"ticket_id": "TKT-104"}'
    status = main(["call", "get_ticket", args, "--tenant", "beta", *store, "--id-digits", "6"])
    assert (status, capsys.readouterr()) == (
        1,
        (
            '{"ok": false, "code": "invalid_arguments"}\n',
            f"ticket-tools: invalid_arguments: ticket_id: {SIX_RULE}\n",
        ),
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("digits", [[], ["--id-digits", "7"]], ids=["default", "seven"])
def test_a_store_of_another_width_is_one_line_and_exit_2(
    kind: str, digits: list[str], request: pytest.FixtureRequest, capsys: Captured
) -> None:
    store = _store(kind, request)
    capsys.readouterr()
    status = main(
        ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "a", *store, *digits]
    )
    width = digits[1] if digits else "3"
    assert (status, capsys.readouterr()) == (2, ("", _width_refusal(kind, request, width)))


def test_records_file_of_six_digits(records_file: Path, capsys: Captured) -> None:
    args = '{"ticket_id": "TKT-000104"}'
    six = ["call", "get_ticket", args, "--tenant", "beta", "--records", str(records_file)]
    assert main([*six, "--id-digits", "6"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "ticket": {"id": "TKT-000104", "title": "Private billing issue", "status": "closed"},
    }
    assert main(six) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {records_file}: record 1 (in file order): "
        "the id is not TKT- followed by exactly three digits\n",
    )


def test_import_refuses_a_record_of_another_width(
    tmp_path: Path, records_file: Path, capsys: Captured
) -> None:
    db = tmp_path / "seven.sqlite"
    assert main(["import", str(records_file), "--db", str(db), "--id-digits", "7"]) == 2
    assert capsys.readouterr() == (
        "",
        f"ticket-tools: {records_file}: record 1 (in file order): "
        "the id is not TKT- followed by exactly seven digits\n",
    )
    assert list(tmp_path.iterdir()) == []


# --- Real servers: serve http and serve stdio, SQLite and PostgreSQL ---


async def _walk(session: ClientSession) -> tuple[list[object], list[str], dict[str, object]]:
    """List the tools' ID patterns, walk every alpha page, read the last ticket."""
    listed = await session.list_tools()
    patterns = [
        tool.input_schema["properties"][argument]["pattern"]
        for tool in listed.tools
        for argument in ID_ARGUMENTS[tool.name]
    ]
    ids: list[str] = []
    cursor: object = None
    while True:
        args = {"limit": LIMIT} if cursor is None else {"limit": LIMIT, "cursor": cursor}
        page = (await session.call_tool("search_tickets", args)).structured_content
        assert page is not None
        ids += [ticket["id"] for ticket in page["tickets"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    last = await session.call_tool("get_ticket", {"ticket_id": ALPHA_IDS[-1]})
    assert last.structured_content is not None
    return patterns, ids, last.structured_content


EXPECTED_WALK = (
    ["^TKT-[0-9]{6}$", "^TKT-[0-9]{6}$"],
    ALPHA_IDS,
    {"ok": True, "ticket": {"id": "TKT-001499", "title": "Ticket 1499", "status": "closed"}},
)


@asynccontextmanager
async def _http_session(url: str, bearer: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_serve_http_pages_every_six_digit_ticket(
    kind: str, request: pytest.FixtureRequest, folder: Path, issuer: Issuer
) -> None:
    store = _store(kind, request)
    # The walk pages as fast as it can, faster than the per-subject rate an agent gets.
    server = HttpServer(
        folder / f"http-{kind}",
        str(folder / "jwks.json"),
        *store,
        *NO_RATE_LIMITS,
        "--id-digits",
        "6",
    )
    try:
        async with _http_session(server.url, issuer.sign(claims("alpha", "alice"))) as session:
            assert await _walk(session) == EXPECTED_WALK
    finally:
        assert server.stop() == 0


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_serve_stdio_pages_every_six_digit_ticket(
    kind: str, request: pytest.FixtureRequest
) -> None:
    store = _store(kind, request)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ticket_tools.cli",
            "serve",
            "stdio",
            "--tenant",
            "alpha",
            *store,
            "--id-digits",
            "6",
        ],
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert await _walk(session) == EXPECTED_WALK


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_serve_with_the_wrong_width_refuses_to_start(
    kind: str, request: pytest.FixtureRequest, folder: Path, issuer: Issuer, capsys: Captured
) -> None:
    store = _store(kind, request)
    capsys.readouterr()
    stdio = ["serve", "stdio", "--tenant", "alpha", *store]
    http = [
        "serve",
        "http",
        "127.0.0.1:0",
        "--jwks",
        str(folder / "jwks.json"),
        "--issuer",
        "https://i.example/",
        "--audience",
        "a",
        *store,
    ]
    refusal = ("", _width_refusal(kind, request, "3"))
    assert [(main(command), capsys.readouterr()) for command in (stdio, http)] == [
        (2, refusal),
        (2, refusal),
    ]
