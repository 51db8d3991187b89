"""The tools at the command line: `acceptance`, `call` and `declarations`."""

from __future__ import annotations

import argparse
import json
import sys

from ticket_tools.catalog import REGISTRY
from ticket_tools.cli.acceptance import run_acceptance
from ticket_tools.cli.command import CommandError, Commands
from ticket_tools.cli.inputs import check_tenant, parse_json, read_stdin
from ticket_tools.cli.stores import (
    add_id_digits_option,
    add_store_options,
    id_format_of,
    open_store,
)
from ticket_tools.declarations.exports import FORMATS, export_declarations
from ticket_tools.declarations.widths import make_registry
from ticket_tools.execute import run_tool
from ticket_tools.stores.records import IdWidthError

CALL_EPILOG = """exit status:
  0    the tool returned {"ok": true, ...}
  1    the tool returned {"ok": false, "code": ...}; the reason is on stderr
  2    the command could not run: bad arguments JSON, records file or database;
       or stdout could not be written (a full disk)
  130  interrupted (Ctrl-C)
  141  stdout was closed before the result was written (a broken pipe)"""


def add_commands(commands: Commands) -> None:
    """Add `acceptance`, `call` and `declarations`."""
    acceptance = commands.add_parser(
        "acceptance", help="run the brief's 13 acceptance calls and print each result"
    )
    add_store_options(acceptance)
    acceptance.set_defaults(run=_run_acceptance)

    tools = ", ".join(tool.name for tool in REGISTRY)
    call = commands.add_parser(
        "call",
        help="run one tool call and print its JSON result",
        description=f"Run one tool call and print its JSON result.\nThe tools: {tools}.",
        epilog=CALL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    call.add_argument("name", help=f"the tool name, as the model would send it: {tools}")
    call.add_argument("args", help="the arguments as a JSON value; - reads them from stdin")
    call.add_argument("--tenant", required=True, help="the trusted tenant of the session")
    call.add_argument(
        "--no-read", action="store_true", help="run as a session without read permission"
    )
    add_store_options(call)
    add_id_digits_option(call)
    call.set_defaults(run=_run_call)

    declarations = commands.add_parser(
        "declarations", help="print the tool declarations the model receives, as JSON"
    )
    declarations.add_argument(
        "--format",
        choices=FORMATS,
        default="json-schema",
        help="the model API whose tool format to print (default: json-schema)",
    )
    add_id_digits_option(declarations)
    declarations.set_defaults(run=_run_declarations)


def _run_acceptance(options: argparse.Namespace) -> int:
    try:
        store = open_store(options)
    except IdWidthError as error:
        # The brief's 13 calls name TKT- and three digits; no --id-digits would make them fit.
        raise CommandError(
            f"{error.source} holds ticket IDs of {error.made_for} digits: "
            "acceptance runs the brief's calls, whose IDs have 3"
        ) from None
    failures = run_acceptance(store, sys.stdout)
    return 1 if failures else 0


def _run_call(options: argparse.Namespace) -> int:
    tenant = check_tenant(options.tenant)
    text = read_stdin() if options.args == "-" else options.args
    args = parse_json(text, "the arguments")
    context = {"tenant": tenant, "can_read_tickets": not options.no_read}
    id_format = id_format_of(options)
    store = open_store(options, id_format)
    outcome = run_tool(options.name, args, context, store, registry=make_registry(id_format))
    print(json.dumps(outcome.result, ensure_ascii=False))
    if outcome.detail is None:
        return 0
    # stdout stays the contract's result; the rule that failed goes beside it.
    print(f"ticket-tools: {outcome.result['code']}: {outcome.detail}", file=sys.stderr)
    return 1


def _run_declarations(options: argparse.Namespace) -> int:
    registry = make_registry(id_format_of(options))
    print(json.dumps(export_declarations(options.format, registry), indent=2, ensure_ascii=False))
    return 0
