"""Run the command line as `python -m ticket_tools.cli`."""

import sys

from ticket_tools.cli import main

sys.exit(main())
