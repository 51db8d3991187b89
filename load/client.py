"""One simulated assistant: the official MCP client over Streamable HTTP, with its own token.

It sends its plan's calls one after another (a closed loop: the next call leaves when the
last answer arrives). When a replica stops answering, it records the failed call, moves to
the next replica and sends the same call again, so a page walk goes on from the cursor it
holds. A call answered with the internal error or `unavailable` is sent again after a
short pause. Every
loop is bounded by the phase's deadline and by MAX_CALLS.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from load.checker import INTERNAL_ERROR_CODE, Observation, is_unavailable
from load.workload import Call, ClientPlan

CALL_TIMEOUT_SECONDS = 30.0
RETRY_PAUSE_SECONDS = 0.05
# A client makes fewer calls than this in any phase (about 1 per ms at most, for 10 min).
MAX_CALLS = 1_000_000
# The MCP SDK's own client-side failures: no answer, not a server's answer.
CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


@dataclass(frozen=True)
class CallRecord:
    """One call as sent and seen, with when and which replica it went to."""

    call: Call
    seen: Observation
    started: float
    ended: float
    replica: int


@dataclass
class Client:
    """A client's identity, plan and everything it sent."""

    number: int
    tenant_index: int
    can_read: bool
    token: str
    plan: ClientPlan
    replica: int
    """The replica it sends to now (an index into the phase's URLs)."""
    records: list[CallRecord] = field(default_factory=list)
    switches: int = 0
    """How many times it moved to another replica."""
    connect_failures: int = 0
    """Sessions that could not start (the replica was already gone)."""


async def run_client(client: Client, urls: Sequence[str], until: float) -> None:
    """Send `client`'s calls to its replica until `until` (time.monotonic), moving on faults."""
    pending: Call | None = None
    while time.monotonic() < until and len(client.records) < MAX_CALLS:
        in_flight: list[tuple[Call, float]] = []
        try:
            pending = await _session(client, urls[client.replica], until, pending, in_flight)
        except Exception as error:  # a transport failure, recorded below
            kind = _leaf(error)
            if in_flight:
                call, started = in_flight[0]
                seen = Observation(failure=kind)
                ended = time.monotonic()
                client.records.append(CallRecord(call, seen, started, ended, client.replica))
                pending = call
            else:
                client.connect_failures += 1
            client.replica = (client.replica + 1) % len(urls)
            client.switches += 1
            await anyio.sleep(RETRY_PAUSE_SECONDS)


async def _session(
    client: Client,
    url: str,
    until: float,
    pending: Call | None,
    in_flight: list[tuple[Call, float]],
) -> Call | None:
    """Run one MCP session on `url`; return the call still to send when the phase ends."""
    headers = {"Authorization": f"Bearer {client.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=CALL_TIMEOUT_SECONDS) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT_SECONDS) as session,
    ):
        await session.initialize()
        while time.monotonic() < until and len(client.records) < MAX_CALLS:
            call = pending if pending is not None else client.plan.next_call()
            started = time.monotonic()
            in_flight[:] = [(call, started)]
            seen = await _call(session, call)
            in_flight.clear()
            client.records.append(CallRecord(call, seen, started, time.monotonic(), client.replica))
            no_answer = seen.protocol_code == INTERNAL_ERROR_CODE or seen.failure is not None
            if no_answer or is_unavailable(seen):
                pending = call  # no answer: the same call again, the walk keeps its cursor
                await anyio.sleep(RETRY_PAUSE_SECONDS)
                continue
            pending = None
            if seen.result is not None:
                client.plan.page_received(call, seen.result, client.replica)
    return pending


async def _call(session: ClientSession, call: Call) -> Observation:
    try:
        result = await session.call_tool(call.name, call.args)
    except MCPError as error:
        if error.error.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
            return Observation(failure=f"mcp{error.error.code}")
        return Observation(protocol_code=error.error.code, protocol_message=error.error.message)
    text = next((b.text for b in result.content if isinstance(b, types.TextContent)), None)
    return Observation(result=result.structured_content, is_error=bool(result.is_error), text=text)


def _leaf(error: BaseException) -> str:
    """Return the type name of the first non-group exception inside `error`."""
    for _ in range(100):  # exception groups nest only a few levels deep
        if not isinstance(error, BaseExceptionGroup) or not error.exceptions:
            break
        error = error.exceptions[0]
    return type(error).__name__
