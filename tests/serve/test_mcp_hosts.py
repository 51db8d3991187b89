"""Other hosts' MCP clients against `ticket-tools serve`: each shows the model why a call failed.

openai-agents (`agents.mcp.MCPServerStdio`) gives the model an error result's text;
pydantic-ai (`MCPToolset` over a fastmcp `StdioTransport`) gives it the error result's
`structuredContent`. Both must carry the rule that failed. No model, no network: the
tools are listed and called directly, and one agent run uses pydantic-ai's offline
`FunctionModel`. The official SDK client is in test_mcp_server.py.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any, cast

import pytest
from agents import RunContextWrapper
from agents.mcp import MCPServerStdio, MCPUtil
from agents.strict_schema import ensure_strict_json_schema
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelRetry, UnexpectedModelBehavior
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from expected import ALPHA, ALPHA_NO_READ, T101, T104, T107, T112
from ticket_tools import execute_tool, fixture_records
from ticket_tools.declarations.exports import export_declarations

pytestmark = pytest.mark.anyio

SERVE = ["-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"]
SESSIONS = {"alpha": SERVE, "alpha-no-read": [*SERVE, "--no-read"]}
CONTEXTS = {"alpha": ALPHA, "alpha-no-read": ALPHA_NO_READ}
SUCCESS = ("search_tickets", {"status": "open", "limit": 2})
# For a server subprocess to start and answer `initialize`: importing the SDK on a loaded
# 2-core machine takes seconds (pydantic-ai's own default, 5 s, timed out there).
START_SECONDS = 60
# (session, tool, arguments, code, detail): one of each failure a model can correct.
FAILURES = [
    pytest.param(
        "alpha",
        "search_tickets",
        {"limit": 11},
        "invalid_arguments",
        "limit: an integer from 1 to 10",
        id="invalid_arguments",
    ),
    pytest.param(
        "alpha-no-read",
        "get_ticket",
        {"ticket_id": "TKT-104"},
        "forbidden",
        "this session may not read tickets",
        id="forbidden",
    ),
    pytest.param(
        "alpha",
        "get_ticket",
        {"ticket_id": "TKT-103"},
        "not_found",
        "no ticket with that ID is visible in this session",
        id="not_found",
    ),
]


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """The whole environment, so coverage measures the server subprocesses too."""
    return dict(os.environ)


@pytest.fixture(scope="module")
async def agents_servers(env: dict[str, str]) -> AsyncIterator[dict[str, MCPServerStdio]]:
    """One openai-agents stdio client per session, connected."""
    async with AsyncExitStack() as stack:
        servers = {}
        for key, args in SESSIONS.items():
            server = MCPServerStdio(
                {"command": sys.executable, "args": args, "env": env},
                name=f"tickets-{key}",
                client_session_timeout_seconds=START_SECONDS,
            )
            servers[key] = await stack.enter_async_context(server)
        yield servers


@pytest.fixture(scope="module")
async def toolsets(env: dict[str, str]) -> AsyncIterator[dict[str, MCPToolset[None]]]:
    """One pydantic-ai MCPToolset per session over a fastmcp stdio transport, connected."""
    async with AsyncExitStack() as stack:
        toolsets: dict[str, MCPToolset[None]] = {}
        for key, args in SESSIONS.items():
            transport = StdioTransport(command=sys.executable, args=args, env=env)
            toolset = MCPToolset(transport, init_timeout=START_SECONDS)
            toolsets[key] = await stack.enter_async_context(toolset)
        yield toolsets


# --- openai-agents


async def test_agents_lists_the_mcp_export(agents_servers: dict[str, MCPServerStdio]) -> None:
    tools = await agents_servers["alpha"].list_tools()
    listed = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    assert listed == export_declarations("mcp")


async def _agents_model_sees(server: MCPServerStdio, name: str, args: dict[str, object]) -> Any:
    """What openai-agents hands the model for one call (its tool output)."""
    [tool] = [tool for tool in await server.list_tools() if tool.name == name]
    return await MCPUtil.invoke_mcp_tool(server, tool, RunContextWrapper(None), json.dumps(args))


@pytest.mark.parametrize(("session", "name", "args", "code", "detail"), FAILURES)
async def test_agents_model_sees_the_failing_rule(
    agents_servers: dict[str, MCPServerStdio],
    *,
    session: str,
    name: str,
    args: dict[str, object],
    code: str,
    detail: str,
) -> None:
    seen = await _agents_model_sees(agents_servers[session], name, args)
    assert seen == {"type": "text", "text": f"{code}: {detail}"}


async def test_agents_model_sees_a_result_as_json(
    agents_servers: dict[str, MCPServerStdio],
) -> None:
    name, args = SUCCESS
    seen = await _agents_model_sees(agents_servers["alpha"], name, args)
    expected = execute_tool(name, args, ALPHA, fixture_records())
    assert seen == {"type": "text", "text": json.dumps(expected)}


def test_agents_strict_conversion_makes_every_search_argument_required() -> None:
    # The trap docs/mcp.md names: MCPServerStdio(..., convert_schemas_to_strict=True) hands
    # the model this schema, so it can never ask for the first page without a filter.
    search = next(d for d in export_declarations("mcp") if d["name"] == "search_tickets")
    schema = cast("dict[str, Any]", search["inputSchema"])
    strict = ensure_strict_json_schema(copy.deepcopy(schema))
    assert schema["required"] == []
    assert strict["required"] == ["status", "query", "limit", "cursor"]


# --- pydantic-ai


async def test_pydantic_ai_lists_the_mcp_export(toolsets: dict[str, MCPToolset[None]]) -> None:
    tools = await toolsets["alpha"].client.list_tools()
    listed = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    assert listed == export_declarations("mcp")


@pytest.mark.parametrize(("session", "name", "args", "code", "detail"), FAILURES)
async def test_pydantic_ai_model_sees_the_failing_rule(
    toolsets: dict[str, MCPToolset[None]],
    *,
    session: str,
    name: str,
    args: dict[str, object],
    code: str,
    detail: str,
) -> None:
    # pydantic-ai turns an error result into a retry whose message the model reads:
    # the structuredContent when there is one, so the detail must be in it.
    with pytest.raises(ModelRetry) as raised:
        await toolsets[session].direct_call_tool(name, args)
    shown = {"ok": False, "code": code, "detail": detail}
    assert raised.value.message == json.dumps(shown, separators=(",", ":"))


async def test_pydantic_ai_returns_a_result_as_the_dict(
    toolsets: dict[str, MCPToolset[None]],
) -> None:
    name, args = SUCCESS
    got = await toolsets["alpha"].direct_call_tool(name, args)
    assert got == execute_tool(name, args, ALPHA, fixture_records())


async def test_pydantic_ai_plain_test_model_cannot_make_a_ticket_id(
    toolsets: dict[str, MCPToolset[None]],
) -> None:
    # The trap docs/mcp.md names: TestModel() fills each string argument with text that
    # breaks the ID pattern, so its get_ticket call fails until the retries run out.
    agent = Agent(TestModel(), toolsets=[toolsets["alpha"]])
    with pytest.raises(UnexpectedModelBehavior) as raised:
        await agent.run("Read a ticket")
    assert str(raised.value).startswith("Tool 'get_ticket' exceeded max retries count of 1.")


# --- One agent run: pydantic-ai's offline FunctionModel drives the tools through MCP.


def _scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Act as a model would: try, read why it failed, correct itself, page, answer."""
    returned = [
        part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)
    ]
    if not returned:
        return ModelResponse(
            parts=[ToolCallPart("search_tickets", {"status": "open", "limit": 20})]
        )
    last = returned[-1]
    if last.outcome == "retried":
        # pydantic-ai hands back the failure as a retry; obey the rule it names.
        detail = json.loads(cast("str", last.content))["detail"]
        assert detail == "limit: an integer from 1 to 10"
        return ModelResponse(parts=[ToolCallPart("search_tickets", {"status": "open", "limit": 2})])
    cursor = cast("dict[str, Any]", last.content)["next_cursor"]
    if cursor is not None:
        args = {"status": "open", "limit": 2, "cursor": cursor}
        return ModelResponse(parts=[ToolCallPart("search_tickets", args)])
    pages = [cast("dict[str, Any]", part.content) for part in returned if part.outcome == "success"]
    ids = [ticket["id"] for page in pages for ticket in page["tickets"]]
    return ModelResponse(parts=[TextPart(f"open: {', '.join(ids)}")])


async def test_agent_run_corrects_itself_from_the_failing_rule(env: dict[str, str]) -> None:
    toolset: MCPToolset[None] = MCPToolset(
        StdioTransport(command=sys.executable, args=SERVE, env=env), init_timeout=START_SECONDS
    )
    seen_tools: list[dict[str, object]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen_tools[:] = [
            {"name": tool.name, "parameters": tool.parameters_json_schema}
            for tool in info.function_tools
        ]
        return _scripted_model(messages, info)

    agent = Agent(FunctionModel(model), toolsets=[toolset])
    async with agent:
        result = await agent.run("Which open tickets do we have?")
    assert result.output == "open: TKT-101, TKT-104, TKT-107, TKT-112"
    assert seen_tools == [
        {"name": d["name"], "parameters": d["inputSchema"]} for d in export_declarations("mcp")
    ]
    returned = [
        (part.outcome, part.content)
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returned == [
        (
            "retried",
            '{"ok":false,"code":"invalid_arguments","detail":"limit: an integer from 1 to 10"}',
        ),
        ("success", {"ok": True, "tickets": [T101, T104], "next_cursor": "TKT-104"}),
        ("success", {"ok": True, "tickets": [T107, T112], "next_cursor": None}),
    ]
