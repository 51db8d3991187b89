"""The `ticket-tools` command line: `main` (program.py) and one module per command family."""

from ticket_tools.cli.program import main

__all__ = ["main"]
