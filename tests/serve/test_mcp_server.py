"""The MCP adapter, through the official SDK client over a real stdio subprocess.

Each trusted context gets one server process for the whole module (starting one
costs a second or more, most of it importing the SDK); the calls below are what a host would send.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from importlib.metadata import version
from typing import Any, BinaryIO, TextIO, cast

import mcp_types as types
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

import ticket_tools.serve
from expected import UNKNOWN_TOOL_DETAIL
from ticket_tools import execute_tool, fixture_records, run_tool
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli import main
from ticket_tools.cli.acceptance import ALPHA, ALPHA_NO_READ, BETA, CALLS, AcceptanceCall
from ticket_tools.declarations.exports import export_declarations
from ticket_tools.filters import TicketFilter
from ticket_tools.outcome import Outcome
from ticket_tools.serve import server as mcp_server
from ticket_tools.serve.server import build_server, call_result
from ticket_tools.store import DictStore, Records, TicketStore
from ticket_tools.tickets import Ticket

pytestmark = pytest.mark.anyio

RECORDS = fixture_records()
ALPHA_TITLES = {str(t["title"]) for key, t in RECORDS.items() if key.startswith("alpha:")}
BETA_TITLES = {str(t["title"]) for key, t in RECORDS.items() if key.startswith("beta:")}
ONLY_ARGUMENTS_SEARCH = (
    "invalid_arguments: the only arguments accepted are: status, query, limit, cursor"
)
MALFORMED_CALL_COUNT = 1_000
HUGE = 200_000  # characters: far past every length bound, still one JSON-RPC line

SERVER_ARGS = {
    "alpha": ("--tenant", "alpha"),
    "alpha-no-read": ("--tenant", "alpha", "--no-read"),
    "beta": ("--tenant", "beta"),
    "gamma-from-file": ("--tenant", "gamma", "--records"),  # the file's path is appended
}
GAMMA_RECORDS = {
    "gamma:TKT-001": {"id": "TKT-001", "title": "Gamma only", "status": "open", "note": "inner"},
    "alpha:TKT-002": {"id": "TKT-002", "title": "Alpha in the file", "status": "open"},
}


def _session_key(call: AcceptanceCall) -> str:
    """Name the server started for the call's trusted context."""
    keys = {("alpha", True): "alpha", ("alpha", False): "alpha-no-read", ("beta", True): "beta"}
    return keys[(str(call.context["tenant"]), call.context["can_read_tickets"] is True)]


@pytest.fixture(scope="module")
def errlog() -> Iterator[TextIO]:
    """Collect every server's stderr, to check what the servers log there."""
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        yield log


@pytest.fixture(scope="module")
async def sessions(
    errlog: TextIO, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, ClientSession]]:
    """Start one `ticket-tools serve` process per trusted context, each with a live session."""
    records_file = tmp_path_factory.mktemp("records") / "gamma.json"
    records_file.write_text(json.dumps(GAMMA_RECORDS), encoding="utf-8")
    # The whole environment is passed on: the SDK would otherwise keep only a
    # few variables, and coverage measures the subprocess through its own.
    env = dict(os.environ)
    async with AsyncExitStack() as stack:
        opened: dict[str, ClientSession] = {}
        for key, args in SERVER_ARGS.items():
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "ticket_tools.cli", "serve", "stdio", *args],
                env=env,
            )
            if args[-1] == "--records":
                params.args.append(str(records_file))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            opened[key] = session
        yield opened


def _unknown_tool(error: types.ErrorData) -> dict[str, object]:
    assert (error.code, error.message, error.data) == (
        types.INVALID_PARAMS,
        f"unknown_tool: {UNKNOWN_TOOL_DETAIL}",
        None,
    )
    return {"ok": False, "code": "unknown_tool"}


async def _contract_result(session: ClientSession, name: str, args: Any) -> dict[str, object]:
    """Call a tool as a host would; read what the client sees back as the contract's dict.

    Also checks the text block each kind of answer carries beside it, and for a
    failure the detail the structured content carries beside the contract's dict.
    """
    try:
        result = await session.call_tool(name, args)
    except MCPError as error:
        return _unknown_tool(error.error)
    structured = cast("dict[str, object]", result.structured_content)
    [block] = result.content
    assert isinstance(block, types.TextContent)
    if result.is_error:
        contract = {key: value for key, value in structured.items() if key != "detail"}
        assert contract == {"ok": False, "code": contract["code"]}
        assert block.text == f"{contract['code']}: {structured['detail']}"
        return contract
    assert structured["ok"] is True
    assert json.loads(block.text) == structured
    return structured


async def test_list_tools_is_the_mcp_export(sessions: dict[str, ClientSession]) -> None:
    listed = await sessions["alpha"].list_tools()
    declared = [
        tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed.tools
    ]
    assert declared == export_declarations("mcp")
    assert listed.next_cursor is None


@pytest.mark.parametrize("call", [pytest.param(call, id=call.label) for call in CALLS])
async def test_acceptance_call_through_mcp(
    sessions: dict[str, ClientSession], call: AcceptanceCall
) -> None:
    got = await _contract_result(sessions[_session_key(call)], call.name, call.args)
    assert got == execute_tool(call.name, call.args, call.context, fixture_records())
    assert got == call.expected


@pytest.mark.parametrize(
    ("session_key", "filters", "pages"),
    [
        pytest.param(
            "alpha",
            {"limit": 2},
            [
                ["TKT-101", "TKT-102"],
                ["TKT-104", "TKT-107"],
                ["TKT-110", "TKT-112"],
                ["TKT-115"],
            ],
            id="alpha-limit-2",
        ),
        pytest.param(
            "alpha",
            {"status": "open", "limit": 1},
            [["TKT-101"], ["TKT-104"], ["TKT-107"], ["TKT-112"]],
            id="alpha-open-limit-1",
        ),
        pytest.param("beta", {"limit": 1}, [["TKT-103"], ["TKT-104"], ["TKT-108"]], id="beta"),
    ],
)
async def test_page_walk_follows_next_cursor(
    sessions: dict[str, ClientSession],
    session_key: str,
    filters: dict[str, object],
    pages: list[list[str]],
) -> None:
    context = {"alpha": ALPHA, "beta": BETA}[session_key]
    walked: list[list[str]] = []
    args = dict(filters)
    while True:
        got = await _contract_result(sessions[session_key], "search_tickets", args)
        assert got == execute_tool("search_tickets", args, context, fixture_records())
        tickets = cast("list[Ticket]", got["tickets"])
        walked.append([ticket["id"] for ticket in tickets])
        if got["next_cursor"] is None:
            break
        args = {**filters, "cursor": got["next_cursor"]}
    assert walked == pages


@pytest.mark.parametrize(
    ("session_key", "name", "args", "result", "text"),
    [
        pytest.param(
            "alpha",
            "search_tickets",
            {"limit": 11},
            {"ok": False, "code": "invalid_arguments"},
            "invalid_arguments: limit: an integer from 1 to 10",
            id="invalid_arguments",
        ),
        pytest.param(
            "alpha-no-read",
            "get_ticket",
            {"ticket_id": "TKT-104"},
            {"ok": False, "code": "forbidden"},
            "forbidden: this session may not read tickets",
            id="forbidden",
        ),
        pytest.param(
            "beta",
            "get_ticket",
            {"ticket_id": "TKT-101"},
            {"ok": False, "code": "not_found"},
            "not_found: no ticket with that ID is visible in this session",
            id="not_found",
        ),
    ],
)
async def test_failure_is_an_error_result_the_model_can_read(
    sessions: dict[str, ClientSession],
    *,
    session_key: str,
    name: str,
    args: dict[str, object],
    result: dict[str, object],
    text: str,
) -> None:
    detail = text.removeprefix(f"{result['code']}: ")
    assert await sessions[session_key].call_tool(name, args) == types.CallToolResult(
        content=[types.TextContent(text=text)],
        structured_content={**result, "detail": detail},
        is_error=True,
    )


@pytest.mark.parametrize(
    ("name", "args", "text"),
    [
        pytest.param(
            "search_tickets", {"tenant": "beta"}, ONLY_ARGUMENTS_SEARCH, id="search-other-tenant"
        ),
        pytest.param(
            "search_tickets",
            {"status": "open", "tenant": "alpha"},
            ONLY_ARGUMENTS_SEARCH,
            id="search-same-tenant",
        ),
        pytest.param(
            "get_ticket",
            {"ticket_id": "TKT-104", "tenant": "beta"},
            "invalid_arguments: the only arguments accepted are: ticket_id",
            id="get-other-tenant",
        ),
    ],
)
async def test_tenant_argument_is_rejected(
    sessions: dict[str, ClientSession], name: str, args: dict[str, object], text: str
) -> None:
    result = await sessions["alpha"].call_tool(name, args)
    assert result.is_error is True
    assert result.structured_content == {
        "ok": False,
        "code": "invalid_arguments",
        "detail": text.removeprefix("invalid_arguments: "),
    }
    assert result.content == [types.TextContent(text=text)]


async def test_beta_server_never_returns_an_alpha_title(
    sessions: dict[str, ClientSession],
) -> None:
    beta = sessions["beta"]
    ids = sorted({str(ticket["id"]) for ticket in RECORDS.values()})
    words = sorted({word.lower() for title in ALPHA_TITLES for word in title.split()})
    calls: list[tuple[str, dict[str, object]]] = [
        ("search_tickets", {"limit": 10}),
        ("search_tickets", {"cursor": "TKT-100", "limit": 10, "tenant": "alpha"}),
    ]
    calls += [("get_ticket", {"ticket_id": ticket_id}) for ticket_id in ids]
    calls += [("search_tickets", {"query": word, "limit": 10}) for word in words]
    seen_titles: set[str] = set()
    for name, args in calls:
        result = await beta.call_tool(name, args)
        [block] = result.content
        assert isinstance(block, types.TextContent)
        assert not any(title in block.text for title in ALPHA_TITLES)
        structured = cast("dict[str, Any]", result.structured_content)
        # A failure's structured content also holds the detail, which the text shows too.
        got = {key: value for key, value in structured.items() if key != "detail"}
        assert got == execute_tool(name, args, BETA, fixture_records())
        tickets = got.get("tickets", [got["ticket"]] if "ticket" in got else [])
        seen_titles.update(ticket["title"] for ticket in tickets)
    assert seen_titles == BETA_TITLES


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        pytest.param(
            "search_tickets",
            {},
            {
                "ok": True,
                "tickets": [{"id": "TKT-001", "title": "Gamma only", "status": "open"}],
                "next_cursor": None,
            },
            id="search",
        ),
        pytest.param(
            "get_ticket", {"ticket_id": "TKT-002"}, {"ok": False, "code": "not_found"}, id="alpha"
        ),
    ],
)
async def test_server_reads_the_records_file(
    sessions: dict[str, ClientSession],
    name: str,
    args: dict[str, object],
    expected: dict[str, object],
) -> None:
    assert await _contract_result(sessions["gamma-from-file"], name, args) == expected


def _malformed_calls() -> list[tuple[str, Any]]:
    """Return MALFORMED_CALL_COUNT calls a confused or hostile model could send."""
    huge = "x" * HUGE
    nested: object = "TKT-101"
    for _ in range(100):
        nested = [nested]
    kinds: list[tuple[str, Any]] = [
        # Wrong types.
        ("search_tickets", {"limit": "5"}),
        ("search_tickets", {"limit": True}),
        ("search_tickets", {"limit": 5.5}),
        ("search_tickets", {"limit": 10**30}),
        ("search_tickets", {"status": 1}),
        ("search_tickets", {"status": ["open"]}),
        ("search_tickets", {"query": None}),
        ("search_tickets", {"query": {"text": "login"}}),
        ("search_tickets", {"cursor": 104}),
        ("search_tickets", {"cursor": nested}),
        ("get_ticket", {"ticket_id": ["TKT-101"]}),
        ("get_ticket", {"ticket_id": None}),
        ("get_ticket", {"ticket_id": "TKT-\u0661\u0660\u0661"}),
        ("get_ticket", {"ticket_id": "TKT-101\n"}),
        ("get_ticket", {}),
        # Extra keys.
        ("search_tickets", {"tenant": "beta"}),
        ("search_tickets", {"status": "open", "can_read_tickets": True}),
        ("get_ticket", {"ticket_id": "TKT-104", "ticket_id ": "TKT-104"}),
        ("get_ticket", {"ticket_id": "TKT-104", huge: 1}),
        # Huge strings.
        ("search_tickets", {"query": huge}),
        ("search_tickets", {"cursor": huge}),
        ("get_ticket", {"ticket_id": huge}),
        # Unknown tools.
        ("list_tickets", {}),
        ("GET_TICKET", {"ticket_id": "TKT-104"}),
        ("get_ticket ", {"ticket_id": "TKT-104"}),
        ("", {}),
        (huge, {}),
    ]
    return [kinds[i % len(kinds)] for i in range(MALFORMED_CALL_COUNT)]


async def test_malformed_calls_never_break_the_server(
    sessions: dict[str, ClientSession], errlog: TextIO
) -> None:
    alpha = sessions["alpha"]
    for name, args in _malformed_calls():
        expected = run_tool(name, args, ALPHA, RECORDS)
        code = expected.result["code"]
        if code == "unknown_tool":
            with pytest.raises(MCPError) as raised:
                await alpha.call_tool(name, args)
            assert (raised.value.code, raised.value.message) == (
                types.INVALID_PARAMS,
                f"unknown_tool: {expected.detail}",
            )
            continue
        result = await alpha.call_tool(name, args)
        assert result.is_error is True
        assert result.structured_content == {**expected.result, "detail": expected.detail}
        assert result.content == [types.TextContent(text=f"{code}: {expected.detail}")]
    # The same process still answers, and answers right.
    await alpha.send_ping()
    got = await _contract_result(alpha, "get_ticket", {"ticket_id": "TKT-101"})
    assert got == {
        "ok": True,
        "ticket": {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"},
    }
    errlog.seek(0)
    assert "Traceback" not in errlog.read()


# Raw JSON-RPC lines: what the SDK client refuses to send, a host still might.

INVALID_PARAMS_REPLY = {"code": -32602, "message": "Invalid request parameters", "data": ""}
RAW_EXCHANGES: tuple[tuple[object, object], ...] = (
    (
        {"id": 2, "method": "tools/call", "params": {"name": "search_tickets", "arguments": [1]}},
        {"id": 2, "error": INVALID_PARAMS_REPLY},
    ),
    (
        {"id": 3, "method": "tools/call", "params": {"name": 5, "arguments": {}}},
        {"id": 3, "error": INVALID_PARAMS_REPLY},
    ),
    (
        {"id": 4, "method": "tools/call", "params": {"name": "get_ticket", "arguments": None}},
        {
            "id": 4,
            "result": {
                "content": [
                    {
                        "type": "text",
                        "text": "invalid_arguments: the arguments must be a JSON object",
                    }
                ],
                "structuredContent": {
                    "ok": False,
                    "code": "invalid_arguments",
                    "detail": "the arguments must be a JSON object",
                },
                "isError": True,
            },
        },
    ),
    (
        {"id": 5, "method": "tools/call", "params": {"name": "get_ticket", "arguments": {}}},
        {
            "id": 5,
            "result": {
                "content": [
                    {
                        "type": "text",
                        "text": "invalid_arguments: ticket_id: required, a ticket ID: TKT- "
                        "followed by exactly three digits, such as TKT-104",
                    }
                ],
                "structuredContent": {
                    "ok": False,
                    "code": "invalid_arguments",
                    "detail": "ticket_id: required, a ticket ID: TKT- "
                    "followed by exactly three digits, such as TKT-104",
                },
                "isError": True,
            },
        },
    ),
)
REPLY_TIMEOUT = 60.0  # seconds: only reached when the server hangs


def _send(server: subprocess.Popen[bytes], message: object) -> None:
    assert server.stdin is not None
    if isinstance(message, dict):
        message = json.dumps({"jsonrpc": "2.0", **message})
    server.stdin.write(f"{message}\n".encode())


def _reply(server: subprocess.Popen[bytes]) -> object:
    # The servers run with bufsize=0: readline() then reads no further than the line,
    # so select() on the pipe is never fooled by a reply already sitting in a buffer.
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], REPLY_TIMEOUT)
    assert ready, "the server did not answer"
    return json.loads(server.stdout.readline())


def test_raw_json_rpc_lines(errlog: TextIO) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        bufsize=0,
    )
    with server:
        _send(
            server,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            },
        )
        assert _reply(server) == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "ticket-tools", "version": version("ticket-tools")},
            },
        }
        _send(server, {"method": "notifications/initialized"})
        for message, expected in RAW_EXCHANGES:
            _send(server, message)
            assert _reply(server) == {"jsonrpc": "2.0", **cast("dict[str, object]", expected)}
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(timeout=REPLY_TIMEOUT) == 0


# Every channel of a request is untrusted: only the command line sets the session.

INJECTED = {"tenant": "beta", "can_read_tickets": True, "context": BETA}
"""What a hostile client puts in every channel it can find, hoping to read beta's tickets."""
MODERN_META = {
    types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
    types.CLIENT_CAPABILITIES_META_KEY: {"experimental": {"tenant": {"name": "beta"}}},
    types.CLIENT_INFO_META_KEY: {"name": "beta", "version": "0"},
    **INJECTED,
}
# The channels, each a change to a tools/call message (a plain JSON-RPC dict).
CHANNELS: dict[str, Callable[[dict[str, Any]], None]] = {
    "none": lambda message: None,
    "params-_meta": lambda message: message["params"].update(_meta=dict(INJECTED)),
    "params-fields": lambda message: message["params"].update(INJECTED),
    "message-fields": lambda message: message.update(INJECTED),
    "progress-token": lambda message: message["params"].update(_meta={"progressToken": "beta"}),
    "request-id": lambda message: message.update(id="beta"),
    "arguments-_meta": lambda message: message["params"]["arguments"].update(_meta=INJECTED),
    "modern-envelope": lambda message: message["params"].update(_meta=dict(MODERN_META)),
}
# Sent before the call, on the same connection.
EARLIER_MESSAGES: dict[str, list[dict[str, object]]] = {
    "none": [],
    "notifications": [
        {"method": "notifications/initialized", "params": {"_meta": INJECTED, **INJECTED}},
        {"method": "notifications/roots/list_changed", "params": INJECTED},
        {"method": "notifications/beta", "params": INJECTED},
    ],
    "second-initialize": [
        {
            "id": "again",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"experimental": {"tenant": {"name": "beta"}}},
                "clientInfo": {"name": "beta", "version": "0"},
                "_meta": INJECTED,
                **INJECTED,
            },
        }
    ],
}
PROBES: dict[str, list[tuple[str, dict[str, object]]]] = {
    # get_ticket TKT-103 is beta's alone; search_tickets {} is a tenant's first page.
    "alpha": [("get_ticket", {"ticket_id": "TKT-103"}), ("search_tickets", {})],
    "alpha-no-read": [("get_ticket", {"ticket_id": "TKT-104"})],
}
HANDSHAKE = {
    "id": "hello",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"experimental": {"tenant": {"name": "beta"}}, "roots": {}},
        "clientInfo": {"name": "beta", "title": "beta", "version": "0"},
        "_meta": INJECTED,
        **INJECTED,
    },
    **INJECTED,
}


def _reply_to(server: subprocess.Popen[bytes], request_id: object) -> dict[str, Any]:
    """Read replies until the one to `request_id`; return it."""
    while (reply := cast("dict[str, Any]", _reply(server)))["id"] != request_id:
        pass
    return reply


@pytest.fixture(scope="module")
def raw_servers(errlog: TextIO) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Raw alpha servers, each past a handshake that claims to be beta in every field."""
    servers: dict[str, subprocess.Popen[bytes]] = {}
    with ExitStack() as stack:
        for key in PROBES:
            servers[key] = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", *SERVER_ARGS[key]],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errlog,
                    bufsize=0,
                )
            )
            _send(servers[key], HANDSHAKE)
            hello = _reply_to(servers[key], "hello")
            assert hello["result"]["serverInfo"]["name"] == "ticket-tools"
            _send(servers[key], {"method": "notifications/initialized"})
        yield servers
        for server in servers.values():
            cast("BinaryIO", server.stdin).close()
            assert server.wait(timeout=REPLY_TIMEOUT) == 0


@pytest.mark.parametrize("earlier", sorted(EARLIER_MESSAGES))
@pytest.mark.parametrize("channel", sorted(set(CHANNELS) - {"modern-envelope"}))
@pytest.mark.parametrize("session_key", sorted(PROBES))
def test_no_channel_changes_the_session(
    raw_servers: dict[str, subprocess.Popen[bytes]], session_key: str, channel: str, earlier: str
) -> None:
    server = raw_servers[session_key]
    context = {"alpha": ALPHA, "alpha-no-read": ALPHA_NO_READ}[session_key]
    for earlier_message in EARLIER_MESSAGES[earlier]:
        _send(server, earlier_message)
    for name, args in PROBES[session_key]:
        message: dict[str, Any] = {
            "id": f"{channel}-{earlier}",
            "method": "tools/call",
            "params": {"name": name, "arguments": dict(args)},
        }
        CHANNELS[channel](message)
        _send(server, message)
        structured = _reply_to(server, message["id"])["result"]["structuredContent"]
        sent = message["params"]["arguments"]
        expected = execute_tool(name, sent, context, fixture_records())
        assert {key: value for key, value in structured.items() if key != "detail"} == expected


@pytest.mark.parametrize("session_key", sorted(PROBES))
def test_the_probes_tell_the_sessions_apart(session_key: str) -> None:
    context = {"alpha": ALPHA, "alpha-no-read": ALPHA_NO_READ}[session_key]
    for name, args in PROBES[session_key]:
        as_beta = execute_tool(name, args, BETA, fixture_records())
        assert execute_tool(name, args, context, fixture_records()) != as_beta


@pytest.mark.parametrize("session_key", sorted(PROBES))
def test_a_modern_envelope_does_not_change_the_session(errlog: TextIO, session_key: str) -> None:
    # The 2026-07-28 protocol has no handshake: each request carries the client's
    # info and capabilities in its `_meta`, and the first one opens the connection.
    context = {"alpha": ALPHA, "alpha-no-read": ALPHA_NO_READ}[session_key]
    server = subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", *SERVER_ARGS[session_key]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        bufsize=0,
    )
    with server:
        for number, (name, args) in enumerate(PROBES[session_key]):
            message: dict[str, Any] = {
                "id": number,
                "method": "tools/call",
                "params": {"name": name, "arguments": dict(args)},
            }
            CHANNELS["modern-envelope"](message)
            _send(server, message)
            reply = _reply_to(server, number)
            assert reply["result"]["resultType"] == "complete"
            structured = reply["result"]["structuredContent"]
            expected = execute_tool(name, args, context, fixture_records())
            assert {key: value for key, value in structured.items() if key != "detail"} == expected
        cast("BinaryIO", server.stdin).close()
        assert server.wait(timeout=REPLY_TIMEOUT) == 0


# The call handler in-process: what a subprocess cannot easily be made to do.


class SearchFailsStore(DictStore):
    """The fixture store, except that every search fails, as a database behind it might."""

    def find(self, tenant: str, where: TicketFilter, *, limit: int | None) -> list[Ticket]:
        raise RuntimeError("secret connection string")


async def test_handler_fault_is_a_generic_error_and_the_server_keeps_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = build_server(ALPHA, SearchFailsStore(fixture_records()))
    # In process, over the SDK's in-memory JSON-RPC transport.
    async with Client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("search_tickets", {})
        after = await client.call_tool("get_ticket", {"ticket_id": "TKT-104"})
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        types.INTERNAL_ERROR,
        "Internal error",
        None,
    )
    assert after.structured_content == CALLS[0].expected
    [record] = [r for r in caplog.records if r.name == "ticket_tools.serve.server"]
    assert record.getMessage() == "tool call failed inside the handler"
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "secret connection string"


def _observer_failing(ctx: object, name: str, outcome: object, seconds: float) -> None:
    raise OSError(28, "No space left on device")  # the audit log on a full disk


async def test_an_observer_that_fails_is_the_generic_error_and_the_server_keeps_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The SDK put the OSError's text on the wire; the direct path (test_http_direct.py)
    # answered a bare HTTP 500.
    server = build_server(ALPHA, fixture_records(), observe=_observer_failing)
    async with Client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("get_ticket", {"ticket_id": "TKT-104"})
        listed = await client.list_tools()
    assert (raised.value.code, raised.value.message, raised.value.data) == (
        types.INTERNAL_ERROR,
        "Internal error",
        None,
    )
    assert [tool.name for tool in listed.tools] == [tool.name for tool in REGISTRY]
    [record] = [r for r in caplog.records if r.name == "ticket_tools.serve.server"]
    assert record.getMessage() == (
        "a tool call's observer failed (the audit log, metrics or spans)"
    )
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "[Errno 28] No space left on device"


async def _call_handler(
    store: Records | TicketStore, params: dict[str, object]
) -> types.CallToolResult | types.InputRequiredResult:
    """Run the tools/call handler directly, with params no SDK client would send."""
    server = build_server(ALPHA, store)
    entry = server.get_request_handler("tools/call")
    assert entry is not None
    # The handler never reads the request context: the trusted context is fixed at start.
    ctx = cast("ServerRequestContext[Any, Any]", None)
    result = await entry.handler(ctx, types.CallToolRequestParams.model_validate(params))
    return cast("types.CallToolResult", result)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param(
            {"name": "search_tickets"},
            types.CallToolResult(
                content=[types.TextContent(text=json.dumps(CALLS[1].expected))],
                structured_content=CALLS[1].expected,
            ),
            id="absent-is-no-arguments",
        ),
        pytest.param(
            {"name": "search_tickets", "arguments": None},
            types.CallToolResult(
                content=[
                    types.TextContent(text="invalid_arguments: the arguments must be a JSON object")
                ],
                structured_content={
                    "ok": False,
                    "code": "invalid_arguments",
                    "detail": "the arguments must be a JSON object",
                },
                is_error=True,
            ),
            id="null-is-invalid",
        ),
    ],
)
async def test_arguments_member(params: dict[str, object], expected: types.CallToolResult) -> None:
    assert await _call_handler(fixture_records(), params) == expected


# The serve command.


def test_serve_without_the_mcp_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes an import fail as if the package were absent; the
    # submodules already imported are blocked too, or `mcp.server` would be found.
    for module in [name for name in sys.modules if name == "mcp" or name.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, "ticket_tools.serve.server")
    monkeypatch.delattr(ticket_tools.serve, "server")
    assert main(["serve", "stdio", "--tenant", "alpha"]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "ticket-tools: serve needs the mcp extra: in a clone of ticket-tools, "
        "pip install -e '.[mcp]'\n",
    )


# --- In-process checks of the adapter's own functions. The subprocess servers above run
# the installed code, so these are what reach call_result, build_server and serve directly.


def test_success_text_keeps_non_ascii_as_is() -> None:
    ticket = {"id": "TKT-001", "title": "Échec à la connexion", "status": "open"}
    result = call_result(Outcome({"ok": True, "ticket": ticket}))
    assert result.content == [
        types.TextContent(
            text='{"ok": true, "ticket": {"id": "TKT-001", "title": "Échec à la connexion", '
            '"status": "open"}}'
        )
    ]
    assert (result.structured_content, result.is_error) == ({"ok": True, "ticket": ticket}, False)


def test_unknown_tool_outcome_is_an_invalid_params_error() -> None:
    outcome = Outcome({"ok": False, "code": "unknown_tool"}, "unknown tool; the tools are: x")
    with pytest.raises(MCPError) as raised:
        call_result(outcome)
    assert (raised.value.code, raised.value.message) == (
        types.INVALID_PARAMS,
        "unknown_tool: unknown tool; the tools are: x",
    )


def test_server_names_itself_and_its_version() -> None:
    server = build_server(ALPHA, fixture_records())
    assert (server.name, server.version) == ("ticket-tools", version("ticket-tools"))


def test_serve_raises_broken_pipe_when_the_transport_loses_stdout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The transport raises it once stdout cannot be written (the client is gone); serve()
    # raises it bare, outside its task group, so the command line's handler reports 141.
    @asynccontextmanager
    async def lost_stdout() -> AsyncIterator[tuple[str, str]]:
        yield ("stdin", "stdout")
        raise BrokenPipeError(32, "Broken pipe")

    class FakeServer:
        def create_initialization_options(self) -> str:
            return "options"

        async def run(self, read: object, write: object, options: object) -> None:
            return None

    monkeypatch.setattr(mcp_server, "build_server", lambda *args, **kwargs: FakeServer())
    monkeypatch.setattr(mcp_server, "stdio_transport", lost_stdout)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(mcp_server.serve, BETA, fixture_records())
        with pytest.raises(BrokenPipeError) as raised:
            future.result()
    assert (raised.value.errno, raised.value.strerror) == (32, "Broken pipe")


def test_serve_logs_to_stderr_and_runs_the_session_over_stdio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, object] = {}

    class FakeServer:
        def create_initialization_options(self) -> str:
            return "options"

        async def run(self, read: object, write: object, options: object) -> None:
            seen["run"] = (read, write, options)

    def fake_build_server(context: object, store: object, *, registry: object) -> FakeServer:
        seen["built"] = (context, store, registry)
        return FakeServer()

    @asynccontextmanager
    async def fake_stdio_transport() -> AsyncIterator[tuple[str, str]]:
        yield ("stdin", "stdout")

    monkeypatch.setattr(mcp_server, "build_server", fake_build_server)
    monkeypatch.setattr(mcp_server, "stdio_transport", fake_stdio_transport)

    def fake_basic_config(**kwargs: object) -> None:
        seen["logging"] = kwargs

    monkeypatch.setattr(logging, "basicConfig", fake_basic_config)
    records = fixture_records()
    # In a thread of its own: this module's fixtures keep an event loop open in
    # this one, and with sniffio installed anyio.run() refuses to start a second.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(mcp_server.serve, BETA, records).result()
    assert seen == {
        "logging": {"level": logging.WARNING, "format": "ticket-tools: %(levelname)s %(message)s"},
        "built": (BETA, records, REGISTRY),
        "run": ("stdin", "stdout", "options"),
    }
