"""The MCP adapter: serve the registered tools over stdio with the official `mcp` SDK.

Needs the `mcp` extra (in a clone, `pip install -e '.[mcp]'`); the core never imports
this module. The server uses the SDK's low-level `Server`, which forwards each
call's arguments untouched, so every check is the core's own (`run_tool`): the
same order of checks and the same results as `execute_tool`.

One process serves one authenticated session: the trusted context is fixed when
the server starts and nothing a client sends (arguments, `_meta`, other params,
the handshake) can change it. Over stdio, `mcp_stdio` answers every line the
SDK's own transport would drop.

What a client receives for `tools/call`:
- success: `structuredContent` is the result dict, and one text block holds the
  same JSON;
- invalid_arguments, forbidden, not_found: `isError: true`, `structuredContent`
  is the result dict plus the detail ({"ok": false, "code": ..., "detail": ...})
  and the text block reads "code: detail" (which argument and rule, never the
  value given), so a host that shows either one shows the rule;
- an unknown tool: a JSON-RPC error -32602 (a protocol error, as the MCP
  specification 2025-11-25 asks), whose message names the registered tools but
  never echoes the name asked for;
- the store did not answer within the deadline, or failed in a way that ends by
  itself (`workers.RETRYABLE`): `isError: true`, structuredContent
  {"ok": false, "code": "unavailable", "detail": "..."}: a tool error the model
  reads as "retry later", not a protocol error (docs/http.md says why);
- a fault inside a handler: a JSON-RPC error -32603 "Internal error"; the
  traceback goes to stderr, never to the client.

Only the store call leaves the event loop (`workers.StoreCalls`): the checks run at
once, so a call that needs no store is answered whatever the store is doing.
`tools/list` answers every tool on one page; a request naming a cursor gets -32602.

No tool declares an `outputSchema`: tools/list stays identical to the `mcp`
export of the declarations, and the result shape is already in each description.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from importlib.metadata import version
from typing import Protocol

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from ticket_tools.catalog import REGISTRY
from ticket_tools.declarations.exports import export_declarations
from ticket_tools.execute import Context, check_call
from ticket_tools.outcome import Outcome
from ticket_tools.registry import ToolRegistry
from ticket_tools.serve.stdio import stdio_transport
from ticket_tools.serve.workers import StoreCalls, StoreUnavailable, WorkerLimits
from ticket_tools.store import Records, TicketStore

SERVER_NAME = "ticket-tools"
INTERNAL_ERROR_MESSAGE = "Internal error"
UNAVAILABLE_DETAILS = {
    "draining": "this server is shutting down; retry the call (another replica will answer)",
}
UNAVAILABLE_DETAIL = "the ticket store did not answer in time; retry the call in a few seconds"
INVALID_CURSOR_MESSAGE = "Invalid cursor: tools/list has one page"

logger = logging.getLogger(__name__)

ContextSource = Callable[[], Context]
"""Return the trusted context of the call being served (over HTTP: from its verified token)."""


class RequestRef(Protocol):
    """The request a call answers: the SDK's request context, or the direct path's."""

    @property
    def request_id(self) -> types.RequestId | None:
        """The JSON-RPC id of the request."""


CallObserver = Callable[[RequestRef, str, Outcome | None, float], None]
"""Told of each call: its request, tool name, outcome (None: failed inside), seconds taken."""
Refused = Callable[[RequestRef], Outcome | None]
"""Return the outcome of a call a limit refused (over HTTP: `limits.rate_limited`), else None."""


def call_result(outcome: Outcome) -> types.CallToolResult:
    """Turn a core outcome into an MCP tool result; an unknown tool raises a protocol error.

    {"ok": True, "tickets": [...], ...} becomes structuredContent plus its JSON as text;
    {"ok": False, "code": "forbidden"} becomes an isError result reading
    "forbidden: this session may not read tickets", whose structuredContent also
    carries that detail: {"ok": False, "code": "forbidden", "detail": "this session ..."}.
    """
    result = outcome.result
    if result["ok"] is True:
        text = json.dumps(result, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=result
        )
    code = result["code"]
    message = f"{code}: {outcome.detail}"
    if code == "unknown_tool":
        raise MCPError(code=types.INVALID_PARAMS, message=message)
    # Some hosts show the model structuredContent instead of the text (pydantic-ai
    # does for errors), so the rule that failed travels in both. The detail never
    # holds a value the client sent.
    structured = {**result, "detail": outcome.detail}
    return types.CallToolResult(
        content=[types.TextContent(text=message)], structured_content=structured, is_error=True
    )


def unavailable(error: StoreUnavailable) -> Outcome:
    """Return the outcome of a call the store could not answer now: retry later."""
    detail = UNAVAILABLE_DETAILS.get(error.reason, UNAVAILABLE_DETAIL)
    return Outcome({"ok": False, "code": "unavailable"}, detail)


class ToolCalls:
    """Run one `tools/call` with the trusted context on the store; shared by every transport."""

    def __init__(
        self,
        context: Context | ContextSource,
        store: Records | TicketStore,
        *,
        observe: CallObserver | None = None,
        registry: ToolRegistry = REGISTRY,
        calls: StoreCalls | None = None,
        refused: Refused | None = None,
    ) -> None:
        self._context_of = context if callable(context) else lambda: context
        self._store = store
        self._observe = observe
        self.registry = registry
        self._calls = calls if calls is not None else StoreCalls(WorkerLimits(timeout=None))
        self._refused = refused

    async def call(self, ctx: RequestRef, name: str, args: object) -> types.CallToolResult:
        """Return the result of tool `name` on `args`; a protocol error raises `MCPError`.

        A call `refused` answers for (over its rate) gets that outcome: no tool runs and
        no observer is told, as for any request a limit refuses.
        """
        refusal = None if self._refused is None else self._refused(ctx)
        if refusal is not None:
            return call_result(refusal)
        started = time.perf_counter()
        outcome: Outcome | None = None
        try:
            checked = check_call(name, args, self._context_of(), registry=self.registry)
            if isinstance(checked, Outcome):
                outcome = checked
            else:
                store = self._store
                outcome = await self._calls.run(checked.tenant, lambda: checked.run(store))
        except StoreUnavailable as error:
            outcome = unavailable(error)
        except Exception:
            # The SDK would put str(error) on the wire; only a fixed message goes there.
            logger.exception("tool call failed inside the handler")
            raise MCPError(code=types.INTERNAL_ERROR, message=INTERNAL_ERROR_MESSAGE) from None
        finally:
            told = self._tell(ctx, name, outcome, time.perf_counter() - started)
        if not told:
            raise MCPError(code=types.INTERNAL_ERROR, message=INTERNAL_ERROR_MESSAGE)
        return call_result(outcome)

    def _tell(self, ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> bool:
        """Tell the observer of a call; return False if it failed (logged: the audit log?).

        A call whose audit line cannot be written is not answered with its result: the
        caller gets the same generic error on every path (the direct path answered a bare
        HTTP 500, the SDK's a -32603 holding the OSError's text).
        """
        if self._observe is None:
            return True
        try:
            self._observe(ctx, name, outcome, seconds)
        except Exception:
            logger.exception("a tool call's observer failed (the audit log, metrics or spans)")
            return False
        return True


def build_server(
    context: Context | ContextSource,
    store: Records | TicketStore,
    *,
    observe: CallObserver | None = None,
    registry: ToolRegistry = REGISTRY,
    calls: StoreCalls | None = None,
) -> Server:
    """Return an MCP server whose every call runs with the trusted `context` on `store`.

    `context` is either fixed for the process (stdio) or a function asked on every call;
    `registry` is the tools served (another ID width: `catalog.make_registry`); `calls`
    runs the store calls (default: worker threads without a deadline).
    """
    return server_for(ToolCalls(context, store, observe=observe, registry=registry, calls=calls))


def server_for(tool_calls: ToolCalls) -> Server:
    """Return an MCP server answering tools/list and tools/call through `tool_calls`."""
    tools = [
        types.Tool.model_validate(tool) for tool in export_declarations("mcp", tool_calls.registry)
    ]

    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # Every tool fits on one page, so no cursor names a page (the spec asks -32602).
        if params is not None and params.cursor is not None:
            raise MCPError(code=types.INVALID_PARAMS, message=INVALID_CURSOR_MESSAGE)
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # MCP makes `arguments` optional: absent means no arguments. A value that
        # is present, null included, goes to the core's checks as sent.
        args = params.arguments if "arguments" in params.model_fields_set else {}
        return await tool_calls.call(ctx, params.name, args)

    return Server(
        SERVER_NAME,
        version=version("ticket-tools"),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(
    context: Context, store: Records | TicketStore, *, registry: ToolRegistry = REGISTRY
) -> int | None:
    """Serve the tools of `registry` over stdin and stdout until the input ends.

    At the end of input every request already read is answered, then this returns None.
    SIGINT or SIGTERM stops it at once (requests in flight are not answered) and it
    returns that signal's number. Raises BrokenPipeError when stdout is closed.
    """
    logging.basicConfig(level=logging.WARNING, format="ticket-tools: %(levelname)s %(message)s")
    server = build_server(context, store, registry=registry)
    stopped_by: list[int] = []
    lost: list[BrokenPipeError] = []
    # The handlers only write here; the loop reads it and cancels. A signal that comes
    # before the loop runs is seen as soon as it does.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)

    def stop(signum: int, frame: object) -> None:
        stopped_by.append(signum)
        with suppress(OSError):  # the pipe is full (one byte is enough) or closed (ending)
            os.write(wake, b"\0")

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_when_readable, woken, tg.cancel_scope)
            try:
                # Not the SDK's stdio_server(): it never answers a line it cannot parse.
                async with stdio_transport() as (read_stream, write_stream):
                    options = server.create_initialization_options()
                    await server.run(read_stream, write_stream, options)
            except BrokenPipeError as error:
                lost.append(error)  # raised below, not inside the task group's ExceptionGroup
            tg.cancel_scope.cancel()

    try:
        # Installed before the loop starts, so that asyncio leaves SIGINT to them.
        with _stopped_by_signals(stop, stopped_by):
            anyio.run(run)
    finally:
        os.close(woken)
        os.close(wake)
    if lost:
        raise lost[0]
    return stopped_by[0] if stopped_by else None


async def _cancel_when_readable(fd: int, scope: anyio.CancelScope) -> None:
    await anyio.wait_readable(fd)
    scope.cancel()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _stopped_by_signals(
    handler: Callable[[int, object], None], stopped_by: list[int]
) -> Iterator[None]:
    """Have SIGINT and SIGTERM call `handler` in the block (the main thread only can).

    Once one came, both are ignored from the end of the block on: the process is ending
    with the first one's status, and Python's own handlers (restored at the interpreter's
    exit too) would raise KeyboardInterrupt in the middle of it or end it by the signal.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = [signal.signal(signum, handler) for signum in STOP_SIGNALS]
    try:
        yield
    finally:
        after = [signal.SIG_IGN] * len(STOP_SIGNALS) if stopped_by else previous
        for signum, handler_after in zip(STOP_SIGNALS, after, strict=True):
            signal.signal(signum, handler_after)
