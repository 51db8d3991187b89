"""The `ticket-tools` command line: `main` (entry.py), and one module per command family."""

from ticket_tools.cli.entry import main

__all__ = ["main"]
