"""The entry point: one shared order of checks, then the tool's handler."""

from __future__ import annotations

from collections.abc import Mapping

from ticket_tools.arguments import ArgError, parse_arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Outcome, failure
from ticket_tools.registry import ToolRegistry
from ticket_tools.store import DictStore, Records, TicketStore

Context = Mapping[str, object]
"""Trusted, from the authenticated session: {"tenant": str, "can_read_tickets": bool}."""


def run_tool(
    name: object,
    args: object,
    context: Context,
    records: Records | TicketStore,
    *,
    registry: ToolRegistry = REGISTRY,
) -> Outcome:
    """Run one untrusted tool call; return the result and, on failure, a safe detail.

    Checks, in order, returning at the first failure: unknown_tool, then
    invalid_arguments (the tool's own rules), then forbidden; then the handler.
    `name` is a tool only as a plain `str`; `args` are arguments only as a plain
    `dict` with plain `str` keys, what JSON produces: anything else, subclasses
    included, is invalid_arguments, never an exception (`parse_arguments`).
    """
    tool = registry.get(name)
    if tool is None:
        available = ", ".join(tool.name for tool in registry)
        return failure("unknown_tool", f"unknown tool; the tools are: {available}")
    parsed = parse_arguments(tool.arguments, args)
    if isinstance(parsed, ArgError):
        return failure("invalid_arguments", parsed.detail)
    tenant = _readable_tenant(context)
    if tenant is None:
        return failure("forbidden", "this session may not read tickets")
    store = records if isinstance(records, TicketStore) else DictStore(records)
    return tool.handler(parsed, tenant, store)


def execute_tool(
    name: object,
    args: object,
    context: Context,
    records: Records | TicketStore,
) -> dict[str, object]:
    """Run one untrusted tool call and return the contract's result dict."""
    return run_tool(name, args, context, records).result


def _readable_tenant(context: Context) -> str | None:
    """Return the session's tenant if it may read tickets; fail closed on anything odd."""
    if not isinstance(context, Mapping) or context.get("can_read_tickets") is not True:
        return None
    tenant = context.get("tenant")
    if type(tenant) is not str or not tenant:
        return None
    return tenant
