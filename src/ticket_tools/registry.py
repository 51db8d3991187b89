"""Tools and the registry that finds them by exact name."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ticket_tools.arguments import Arg, Arguments
from ticket_tools.outcome import Outcome
from ticket_tools.store import TicketStore

Handler = Callable[[Arguments, str, TicketStore], Outcome]
"""Runs a tool with checked arguments, the trusted tenant and the store."""


@dataclass(frozen=True)
class Tool:
    """One tool: what the model reads about it, its arguments, and what runs it."""

    name: str
    """The exact name the model calls."""
    description: str
    """When to use the tool and what it returns, written for the model."""
    arguments: tuple[Arg, ...]
    """The argument declaration: source of both the runtime check and the schema."""
    handler: Handler
    """Called only after the arguments parsed and read permission was granted."""


class ToolRegistry:
    """An exact-name, case-sensitive map from tool name to tool."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register `tool`; a name registered twice is a programming error."""
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: object) -> Tool | None:
        """Return the tool registered under exactly `name`, or None for anything else."""
        # Only a real str is looked up: an unhashable name would raise, and a str
        # subclass could redefine equality.
        if type(name) is not str:
            return None
        return self._tools.get(name)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())
