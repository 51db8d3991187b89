"""The ticket-tools command line: run the acceptance table, make one call, print declarations."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from ticket_tools.acceptance import run_acceptance
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli.progress import ProgressBar
from ticket_tools.execute import run_tool
from ticket_tools.exports import FORMATS, export_declarations
from ticket_tools.fixtures import fixture_records
from ticket_tools.store import Records, StoreError, TicketStore
from ticket_tools.stores.records import RecordsError, is_text, record_rows
from ticket_tools.stores.sqlite.importer import write_database
from ticket_tools.stores.sqlite.store import SQLiteStore

# Below this many tickets an import is too quick for a progress bar to help.
PROGRESS_MIN_TICKETS = 50_000
# Where --postgres is read from when not given, so a password need not be on a command line.
POSTGRES_ENV = "TICKET_TOOLS_POSTGRES"
# What a shell reports for a process stopped by SIGINT (Ctrl-C) or SIGPIPE: 128 + signal.
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

CALL_EPILOG = """exit status:
  0    the tool returned {"ok": true, ...}
  1    the tool returned {"ok": false, "code": ...}; the reason is on stderr
  2    the command could not run: bad arguments JSON, records file or database
  130  interrupted (Ctrl-C)
  141  stdout was closed before the result was written (a broken pipe)"""


class CommandError(Exception):
    """An expected failure: printed as one line on stderr, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    options = parser.parse_args(argv)
    try:
        status: int = options.run(options)
        # Buffered output reaches a pipe here, so that a closed one is caught below.
        sys.stdout.flush()
    except (CommandError, StoreError) as error:
        return _fail(str(error), 2)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader went away (`| head -1`). Point stdout at /dev/null, or Python's
        # own flush at exit fails again and prints a second message.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return _fail("stdout was closed before the output was written", EXIT_BROKEN_PIPE)
    return status


def _fail(message: str, status: int) -> int:
    print(f"ticket-tools: {message}", file=sys.stderr)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ticket-tools", description="Read-only help-desk ticket tools for a model."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    acceptance = commands.add_parser(
        "acceptance", help="run the brief's 13 acceptance calls and print each result"
    )
    _add_store_options(acceptance)
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
    _add_store_options(call)
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
    declarations.set_defaults(run=_run_declarations)

    serve = commands.add_parser(
        "serve",
        help="serve the tools to assistant hosts over MCP: stdio for one session (--tenant), "
        "or Streamable HTTP for every tenant (--http)",
        description="Serve the tools to assistant hosts over MCP: stdio for one session "
        "(--tenant), or Streamable HTTP for every tenant, identity from each request's "
        "verified token (--http). Needs the mcp extra: pip install 'ticket-tools[mcp]'.",
    )
    serve.add_argument("--tenant", help="the trusted tenant of the session (stdio)")
    serve.add_argument(
        "--no-read", action="store_true", help="serve a session without read permission (stdio)"
    )
    _add_store_options(serve)
    _add_http_options(serve)
    serve.set_defaults(run=_run_serve)

    load = commands.add_parser(
        "import",
        help="copy a records JSON file into a new SQLite database or an empty PostgreSQL table",
    )
    load.add_argument(
        "records",
        type=Path,
        metavar="RECORDS_FILE",
        help='the path of a records JSON file: an object of "tenant:TKT-123" -> ticket',
    )
    target = load.add_mutually_exclusive_group()
    target.add_argument("--db", type=Path, metavar="FILE", help="the database file to create")
    target.add_argument(
        "--postgres",
        metavar="DSN",
        help=f"a PostgreSQL database to fill, connecting as the table's owner "
        f"(default: ${POSTGRES_ENV})",
    )
    load.add_argument(
        "--grant-to",
        metavar="ROLE",
        help="with --postgres: the reader role to give SELECT on the tickets table",
    )
    load.set_defaults(run=_run_import)
    return parser


def _add_store_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--records",
        type=Path,
        metavar="FILE",
        help='a records JSON file: an object of "tenant:TKT-123" -> ticket '
        "(default: the built-in fixture store)",
    )
    source.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        help="an SQLite ticket database made by `ticket-tools import`, opened read-only",
    )
    source.add_argument(
        "--postgres",
        metavar="DSN",
        help="a PostgreSQL ticket database, connecting as the reader role "
        f"(default: ${POSTGRES_ENV}, unless --records or --db is given)",
    )


def _open_store(options: argparse.Namespace) -> Records | TicketStore:
    if options.db is not None:
        return SQLiteStore.open(options.db)
    if options.records is not None:
        return _load_records(options.records)
    dsn = _postgres_dsn(options)
    if dsn is None:
        return fixture_records()
    _require_postgres()
    from ticket_tools.stores.postgres.store import PostgresStore  # noqa: PLC0415

    return PostgresStore.open(dsn)


def _postgres_dsn(options: argparse.Namespace) -> str | None:
    dsn: str | None = options.postgres or os.environ.get(POSTGRES_ENV) or None
    return dsn


def _require_postgres() -> None:
    # Asked before importing the PostgreSQL store: psycopg is an optional extra, and
    # the core never needs it.
    if (
        importlib.util.find_spec("psycopg") is None
        or importlib.util.find_spec("psycopg_pool") is None
    ):
        raise CommandError("--postgres needs psycopg: pip install 'ticket-tools[postgres]'")


def _run_acceptance(options: argparse.Namespace) -> int:
    failures = run_acceptance(_open_store(options), sys.stdout)
    return 1 if failures else 0


def _run_call(options: argparse.Namespace) -> int:
    text = _read_stdin() if options.args == "-" else options.args
    args = _parse_json(text, "the arguments")
    context = {"tenant": options.tenant, "can_read_tickets": not options.no_read}
    outcome = run_tool(options.name, args, context, _open_store(options))
    print(json.dumps(outcome.result, ensure_ascii=False))
    if outcome.detail is None:
        return 0
    # stdout stays the contract's result; the rule that failed goes beside it.
    print(f"ticket-tools: {outcome.result['code']}: {outcome.detail}", file=sys.stderr)
    return 1


def _run_declarations(options: argparse.Namespace) -> int:
    print(json.dumps(export_declarations(options.format), indent=2, ensure_ascii=False))
    return 0


def _read_stdin() -> str:
    try:
        return sys.stdin.read()
    except UnicodeDecodeError:
        # JSON is UTF-8: undecodable bytes are malformed JSON, not a crash.
        raise CommandError("the arguments are not valid JSON (UnicodeDecodeError)") from None


def _version() -> str:
    try:
        return importlib.metadata.version("ticket-tools")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "(not installed)"


def _run_serve(options: argparse.Namespace) -> int:
    # Imported here: the MCP SDK is an optional extra, and every other command
    # runs on the standard library alone.
    # Asked before importing, so that a fault inside mcp_server is not mistaken
    # for a missing extra.
    if importlib.util.find_spec("mcp") is None:
        raise CommandError("serve needs the MCP SDK: pip install 'ticket-tools[mcp]'")
    from ticket_tools.serve import server as mcp_server  # noqa: PLC0415

    if options.http is not None:
        return _run_serve_http(options)
    if _http_only_options(options):
        raise CommandError(f"{', '.join(_http_only_options(options))}: only with --http HOST:PORT")
    if options.tenant is None:
        raise CommandError("serve needs --tenant (stdio) or --http HOST:PORT")
    context = {"tenant": options.tenant, "can_read_tickets": not options.no_read}
    mcp_server.serve(context, _open_store(options))
    return 0


# `serve --http`: what each option sets, for the checks that they come together.
_HTTP_ONLY = {
    "--jwks": "jwks",
    "--issuer": "issuer",
    "--audience": "audience",
    "--tenant-claim": "tenant_claim",
    "--read-scope": "read_scope",
    "--stateless": "stateless",
    "--allowed-host": "allowed_host",
    "--resource-url": "resource_url",
    "--audit-log": "audit_log",
}


def _add_http_options(parser: argparse.ArgumentParser) -> None:
    http = parser.add_argument_group(
        "HTTP", "one endpoint for every tenant: each request's bearer token says whose tickets"
    )
    http.add_argument(
        "--http",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve MCP over Streamable HTTP on this address (port 0: one the OS picks)",
    )
    http.add_argument(
        "--jwks", metavar="FILE_OR_URL", help="the identity provider's JWKS: a file or https URL"
    )
    http.add_argument("--issuer", metavar="ISS", help="the `iss` every token must carry")
    http.add_argument("--audience", metavar="AUD", help="the `aud` every token must carry")
    http.add_argument(
        "--tenant-claim", metavar="NAME", help="the claim naming the tenant (default: tenant)"
    )
    http.add_argument(
        "--read-scope",
        metavar="SCOPE",
        help="the scope that grants reading tickets (default: tickets:read)",
    )
    http.add_argument(
        "--stateless",
        action="store_true",
        help="keep no sessions, so any replica can answer any request",
    )
    http.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host header to accept besides HOST:PORT, e.g. tickets.example.com (repeatable)",
    )
    http.add_argument(
        "--resource-url",
        metavar="URL",
        help="this endpoint's public URL, for the metadata (default: http://HOST:PORT/mcp)",
    )
    http.add_argument(
        "--audit-log",
        type=Path,
        metavar="FILE",
        help="append the audit log (one JSON line per tool call) here (default: stderr)",
    )


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or re.fullmatch("[0-9]{1,5}", port) is None or int(port) > 65535:
        raise argparse.ArgumentTypeError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def _http_only_options(options: argparse.Namespace) -> list[str]:
    return [
        flag for flag, name in _HTTP_ONLY.items() if getattr(options, name) not in (None, False)
    ]


def _run_serve_http(options: argparse.Namespace) -> int:
    if options.tenant is not None or options.no_read:
        raise CommandError(
            "over --http each request's token gives the tenant and permission: "
            "drop --tenant and --no-read"
        )
    missing = [
        flag
        for flag in ("--jwks", "--issuer", "--audience")
        if not getattr(options, _HTTP_ONLY[flag])
    ]
    if missing:
        raise CommandError(f"--http needs {', '.join(missing)}")
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve import tokens  # noqa: PLC0415 - the optional extra

    named = {"tenant_claim": options.tenant_claim, "read_scope": options.read_scope}
    rules = tokens.TokenRules(
        issuer=options.issuer,
        audience=options.audience,
        **{name: value for name, value in named.items() if value is not None},
    )
    settings = http_server.HttpOptions(
        host=options.http[0],
        port=options.http[1],
        jwks=options.jwks,
        rules=rules,
        stateless=options.stateless,
        allowed_hosts=tuple(options.allowed_host or ()),
        resource_url=options.resource_url,
        audit_log=options.audit_log,
    )
    try:
        http_server.serve_http(settings, _open_store(options))
    except http_server.ServeError as error:
        raise CommandError(str(error)) from None
    return 0


def _run_import(options: argparse.Namespace) -> int:
    dsn = None if options.db is not None else _postgres_dsn(options)
    if dsn is None and options.db is None:
        raise CommandError(f"import needs --db FILE or --postgres DSN (or ${POSTGRES_ENV})")
    if dsn is None and options.grant_to is not None:
        raise CommandError("--grant-to applies to --postgres only")
    write = _sqlite_importer(options.db) if dsn is None else _postgres_importer(dsn, options)
    # Checked once, by the import itself, before anything is written.
    records = cast(Records, _read_records(options.records))
    bar = None
    if (
        sys.stderr.isatty()
        and isinstance(records, Mapping)
        and len(records) >= PROGRESS_MIN_TICKETS
    ):
        bar = ProgressBar(sys.stderr, "importing")
    try:
        count, target = write(records, None if bar is None else bar.update)
    except RecordsError as error:
        raise CommandError(f"{options.records}: {error}") from None
    finally:
        if bar is not None:
            bar.finish()
    print(f"imported {count} tickets into {target}")
    return 0


Importer = Callable[[Records, Callable[[int, int], None] | None], tuple[int, str]]
"""Write records somewhere; return the ticket count and where they went."""


def _sqlite_importer(path: Path) -> Importer:
    def write(records: Records, progress: Callable[[int, int], None] | None) -> tuple[int, str]:
        try:
            return write_database(path, records, on_progress=progress), str(path)
        except FileExistsError:
            raise CommandError(f"{path} already exists; import only creates new files") from None
        except OSError as error:
            raise CommandError(f"cannot write {path}: {_os_reason(error)}") from None

    return write


def _postgres_importer(dsn: str, options: argparse.Namespace) -> Importer:
    _require_postgres()  # before reading a large file: the extra may be missing
    from ticket_tools.stores.postgres.importer import (  # noqa: PLC0415
        TableNotEmptyError,
        import_dsn,
    )
    from ticket_tools.stores.postgres.schema import describe  # noqa: PLC0415

    target = describe(dsn)

    def write(records: Records, progress: Callable[[int, int], None] | None) -> tuple[int, str]:
        try:
            count = import_dsn(dsn, records, grant_to=options.grant_to, on_progress=progress)
        except TableNotEmptyError:
            raise CommandError(
                f"{target} already holds tickets; import only fills an empty table"
            ) from None
        return count, target

    return write


def _parse_json(text: str, what: str) -> object:
    # A command line or stdin that is not UTF-8 decodes (surrogateescape) to lone
    # surrogates: not JSON text, whatever the locale.
    if not is_text(text):
        raise CommandError(f"{what} are not valid JSON (UnicodeDecodeError)")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        # RecursionError: json.loads gives up on very deep nesting.
        raise CommandError(f"{what} are not valid JSON ({type(error).__name__})") from None


def _read_records(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as error:
        raise CommandError(f"cannot read {path}: {_os_reason(error)}") from None
    return _parse_json(text, f"the records in {path}")


def _load_records(path: Path) -> Records:
    records = _read_records(path)
    # The rules import applies, so that --records and --db answer alike for one file.
    try:
        record_rows(records)
    except RecordsError as error:
        raise CommandError(f"{path}: {error}") from None
    return cast(Records, records)


def _os_reason(error: OSError) -> str:
    """Say what went wrong in the system's words ("No such file or directory")."""
    return error.strerror or type(error).__name__
