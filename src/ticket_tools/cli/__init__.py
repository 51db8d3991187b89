"""The `ticket-tools` command line."""

from ticket_tools.cli.commands import main

__all__ = ["main"]
