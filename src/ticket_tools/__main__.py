"""Run the product's command line as `python -m ticket_tools` (the same as `ticket-tools`).

The CLI is an optional layer above the brief, so it is imported only when this module runs:
importing the package, or this module, loads none of it (tests/test_import_wall.py).
"""

if __name__ == "__main__":
    import sys

    from ticket_tools.cli import main

    sys.exit(main())
