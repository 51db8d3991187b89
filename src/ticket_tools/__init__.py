"""Read-only help-desk ticket tools for a language-model assistant."""

from ticket_tools.arguments import Arg, ArgError
from ticket_tools.catalog import tool_declarations
from ticket_tools.execute import Context, execute_tool, run_tool
from ticket_tools.filters import TicketFilter
from ticket_tools.fixtures import fixture_records
from ticket_tools.outcome import Code, Outcome
from ticket_tools.registry import Tool, ToolRegistry
from ticket_tools.store import DictStore, Records, TicketStore
from ticket_tools.tickets import Ticket

__all__ = [
    "Arg",
    "ArgError",
    "Code",
    "Context",
    "DictStore",
    "Outcome",
    "Records",
    "Ticket",
    "TicketFilter",
    "TicketStore",
    "Tool",
    "ToolRegistry",
    "execute_tool",
    "fixture_records",
    "run_tool",
    "tool_declarations",
]
