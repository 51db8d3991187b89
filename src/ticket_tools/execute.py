"""The entry point: one shared order of checks, then the tool's handler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ticket_tools.arguments import ArgError, Arguments, parse_arguments
from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Outcome, failure
from ticket_tools.registry import Tool, ToolRegistry
from ticket_tools.store import DictStore, Records, TicketStore

Context = Mapping[str, object]
"""Trusted, from the authenticated session: {"tenant": str, "can_read_tickets": bool}."""


@dataclass(frozen=True)
class CheckedCall:
    """A call that passed every check: what is left is to run its handler on a store."""

    tool: Tool
    """The registered tool asked for."""
    arguments: Arguments
    """The arguments, parsed by the tool's own declaration."""
    tenant: str
    """The trusted tenant the call reads, from the context."""

    def run(self, records: Records | TicketStore) -> Outcome:
        """Run the handler on `records`: the one step of a call that reads the store."""
        store = records if isinstance(records, TicketStore) else DictStore(records)
        return self.tool.handler(self.arguments, self.tenant, store)


def check_call(
    name: object,
    args: object,
    context: Context,
    *,
    registry: ToolRegistry = REGISTRY,
) -> Outcome | CheckedCall:
    """Check one untrusted tool call without reading the store: a failure, or the call to run.

    Checks, in order, returning at the first failure: unknown_tool, then
    invalid_arguments (the tool's own rules), then forbidden. `name` is a tool only
    as a plain `str`; `args` are arguments only as a plain `dict` with plain `str`
    keys, what JSON produces: anything else, subclasses included, is
    invalid_arguments, never an exception (`parse_arguments`).
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
    return CheckedCall(tool, parsed, tenant)


def run_tool(
    name: object,
    args: object,
    context: Context,
    records: Records | TicketStore,
    *,
    registry: ToolRegistry = REGISTRY,
) -> Outcome:
    """Run one untrusted tool call; return the result and, on failure, a safe detail.

    The checks of `check_call`, in its order, then the handler on `records`.
    """
    checked = check_call(name, args, context, registry=registry)
    return checked if isinstance(checked, Outcome) else checked.run(records)


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
