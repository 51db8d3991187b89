"""`serve stdio` and `serve http`: the tools over MCP, one subcommand per transport.

Each transport's parser holds only its own options: the session's tenant and permission
are given to `serve stdio`, while `serve http` takes them from each request's verified
token, so it has no `--tenant` to mistake for a restriction.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
import signal
import sys
from pathlib import Path
from typing import Any

from ticket_tools.cli.command import CommandError, Commands
from ticket_tools.cli.inputs import check_tenant, positive_seconds
from ticket_tools.cli.stores import (
    add_id_digits_option,
    add_store_options,
    id_format_of,
    open_store,
)
from ticket_tools.declarations.widths import make_registry

MCP_INSTALL = "in a clone of ticket-tools, pip install -e '.[mcp]'"
# On a line of its own, as written (RawDescriptionHelpFormatter): argparse would otherwise
# wrap the command to the terminal's width, splitting it where a copy must not.
EXTRA = "Needs the mcp extra; in a clone of ticket-tools:\n  pip install -e '.[mcp]'"
RAW = argparse.RawDescriptionHelpFormatter


def add_commands(commands: Commands) -> None:
    """Add `serve` and its transports, `serve stdio` and `serve http`."""
    serve = commands.add_parser(
        "serve",
        help="serve the tools to assistant hosts over MCP: stdio for one session, "
        "or Streamable HTTP for every tenant",
        description="Serve the tools to assistant hosts over MCP: `serve stdio` for one\n"
        "session (the tenant given here), or `serve http` for every tenant, identity\n"
        f"from each request's verified token.\n\n{EXTRA}",
        formatter_class=RAW,
    )
    transports = serve.add_subparsers(required=True, metavar="TRANSPORT")

    stdio = transports.add_parser(
        "stdio",
        help="one session over stdin and stdout, for a host that starts the server itself",
        description="Serve one session over stdin and stdout, for an assistant host that\n"
        f"starts the server itself; the tenant and permission are given here.\n\n{EXTRA}",
        formatter_class=RAW,
    )
    stdio.add_argument("--tenant", required=True, help="the trusted tenant of the session")
    stdio.add_argument(
        "--no-read", action="store_true", help="serve a session without read permission"
    )
    add_store_options(stdio)
    add_id_digits_option(stdio)
    stdio.set_defaults(run=_run_stdio)

    http = transports.add_parser(
        "http",
        help="Streamable HTTP for every tenant: each request's bearer token says whose tickets",
        description="Serve MCP over Streamable HTTP, one endpoint for every tenant: each\n"
        "request's verified bearer token gives its tenant and permission. To try it\n"
        "locally, `ticket-tools dev-token` makes a key, its JWKS and tokens.\n\n"
        f"{EXTRA}",
        formatter_class=RAW,
    )
    http.add_argument(
        "address",
        type=_host_port,
        metavar="HOST:PORT",
        help="the address to listen on, e.g. 127.0.0.1:8765 (port 0: one the OS picks)",
    )
    tokens = http.add_argument_group(
        "tokens", "every request's bearer token is checked against these"
    )
    tokens.add_argument(
        "--jwks",
        required=True,
        type=_not_empty,
        metavar="FILE_OR_URL",
        help="the identity provider's JWKS: a file or https URL",
    )
    tokens.add_argument(
        "--issuer",
        required=True,
        type=_not_empty,
        metavar="ISS",
        help="the `iss` every token must carry",
    )
    tokens.add_argument(
        "--audience",
        required=True,
        type=_not_empty,
        metavar="AUD",
        help="the `aud` every token must carry",
    )
    tokens.add_argument(
        "--tenant-claim", metavar="NAME", help="the claim naming the tenant (default: tenant)"
    )
    tokens.add_argument(
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
    limits = http.add_argument_group(
        "limits", "what one token holder or one client may take (docs/http.md has the defaults)"
    )
    limits.add_argument(
        "--max-sessions-per-subject",
        type=_count,
        metavar="N",
        help="open sessions one token subject may hold; more get HTTP 429 (default: 32)",
    )
    limits.add_argument(
        "--max-sessions-per-tenant",
        type=_count,
        metavar="N",
        help="open sessions one tenant may hold; more get HTTP 429 (default: 1000)",
    )
    limits.add_argument(
        "--session-idle-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="end a session with no request for this long (default: 300)",
    )
    limits.add_argument(
        "--header-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="close a connection whose request headers, or a request's body, take longer "
        "than this (default: 10)",
    )
    limits.add_argument(
        "--max-connections",
        type=_count,
        metavar="N",
        help="open connections allowed; more get HTTP 503 and are closed "
        "(default: the open-file limit less 128)",
    )
    add_store_options(http)
    add_id_digits_option(http)
    _add_replica_options(http)
    http.set_defaults(run=_run_http)


def _add_replica_options(parser: argparse.ArgumentParser) -> None:
    replica = parser.add_argument_group(
        "replica", "limits, drain and metrics of one replica (see docs/operations.md)"
    )
    replica.add_argument(
        "--store-timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="deadline of one store call, waiting included; past it the call fails as "
        "unavailable (default: 2)",
    )
    replica.add_argument(
        "--store-workers",
        type=_count,
        metavar="N",
        help="threads running store calls, and PostgreSQL connections (default: 4)",
    )
    replica.add_argument(
        "--tenant-calls",
        type=_count,
        metavar="N",
        help="store calls one tenant may run at once; its others wait (default: 2)",
    )
    replica.add_argument(
        "--tenant-rate",
        type=_rate,
        metavar="CALLS_PER_S",
        help="tool calls per second per tenant, bursts of 2 s of it (other requests: 5 times "
        "as many); a call over it is answered rate_limited (default: 100; 0: no limit)",
    )
    replica.add_argument(
        "--subject-rate",
        type=_rate,
        metavar="CALLS_PER_S",
        help="tool calls per second per token subject, as --tenant-rate (default: 20; 0: no limit)",
    )
    replica.add_argument(
        "--grace",
        type=positive_seconds,
        metavar="SECONDS",
        help="on SIGTERM, how long calls in flight may finish before the exit (default: 3)",
    )
    replica.add_argument(
        "--max-staleness",
        type=positive_seconds,
        metavar="SECONDS",
        help="answer /readyz 503 while the store reads a standby this far behind its "
        "primary (default: 30)",
    )
    replica.add_argument(
        "--metrics",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve /metrics on this address of its own (default: on the MCP listener)",
    )


def _count(text: str) -> int:
    if re.fullmatch("[0-9]{1,6}", text) is None or int(text) == 0:
        raise argparse.ArgumentTypeError("expected a whole number of at least 1")
    return int(text)


def _rate(text: str) -> float:
    # Digits and at most three decimals, as serve/limits.py's RateLimits bounds a rate: 0
    # (off), or 0.001 (a refusal's wait of at most 1,000 s) to 999999.999. float() took
    # "1e-320", whose every refusal then failed (an infinite wait), and "inf" or "nan".
    if re.fullmatch("[0-9]{1,6}([.][0-9]{1,3})?", text) is None:
        raise argparse.ArgumentTypeError(
            "expected calls per second from 0.001 to 999999.999, 0 for no limit"
        )
    return float(text)


_SESSION_OPTIONS = {
    "--max-sessions-per-subject": "max_sessions_per_subject",
    "--max-sessions-per-tenant": "max_sessions_per_tenant",
    "--session-idle-timeout": "session_idle_timeout",
}


def _given(options: argparse.Namespace, **fields: str) -> dict[str, Any]:
    """Return {field: value} for each option given on the command line (the rest: defaults)."""
    given = {field: getattr(options, name) for field, name in fields.items()}
    return {field: value for field, value in given.items() if value is not None}


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or re.fullmatch("[0-9]{1,5}", port) is None or int(port) > 65535:
        raise argparse.ArgumentTypeError("expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def _not_empty(text: str) -> str:
    # An empty issuer or audience would be no rule at all: refused like a missing one.
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def require_mcp(command: str = "serve") -> None:
    """Raise CommandError saying how to install the mcp extra, if it is missing."""
    # Asked before importing: the MCP SDK is an optional extra, every other command
    # runs on the standard library alone, and a fault inside the server modules must
    # not be mistaken for a missing extra.
    if importlib.util.find_spec("mcp") is None:
        raise CommandError(f"{command} needs the mcp extra: {MCP_INSTALL}")


def _run_stdio(options: argparse.Namespace) -> int:
    tenant = check_tenant(options.tenant)
    require_mcp()
    from ticket_tools.serve import server as mcp_server  # noqa: PLC0415 - the optional extra

    # Python sets a closed standard stream to None (`sys.__stdout__`: `sys.stdout` has a
    # stand-in that fails on write, `cli.streams`); the transport must never use it.
    for name, stream in (("stdin", sys.__stdin__), ("stdout", sys.__stdout__)):
        if stream is None:
            raise CommandError(f"serve stdio: {name} is closed; the host must connect it")
    context = {"tenant": tenant, "can_read_tickets": not options.no_read}
    id_format = id_format_of(options)
    store = open_store(options, id_format)
    stopped_by = mcp_server.serve(context, store, registry=make_registry(id_format))
    if stopped_by is None:
        return 0
    message, status = _STOPPED[stopped_by]
    print(f"ticket-tools: {message}", file=sys.stderr)
    return status


# serve stdio's exits on a signal, as a shell reports a process it stopped: 128 + signal.
_STOPPED: dict[int, tuple[str, int]] = {
    signal.SIGINT: ("interrupted", 128 + signal.SIGINT),
    signal.SIGTERM: ("terminated (SIGTERM)", 128 + signal.SIGTERM),
}


def _run_http(options: argparse.Namespace) -> int:
    if options.stateless:
        given = [flag for flag, name in _SESSION_OPTIONS.items() if getattr(options, name)]
        if given:
            raise CommandError(f"{', '.join(given)}: not with --stateless, which keeps no sessions")
    require_mcp()
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve import tokens  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.connections import ConnectionLimits  # noqa: PLC0415 - the extra
    from ticket_tools.serve.sessions import SessionLimits  # noqa: PLC0415 - the extra

    named = {"tenant_claim": options.tenant_claim, "read_scope": options.read_scope}
    rules = tokens.TokenRules(
        issuer=options.issuer,
        audience=options.audience,
        **{name: value for name, value in named.items() if value is not None},
    )
    from ticket_tools.serve import limits, replica, workers  # noqa: PLC0415 - the optional extra

    worker_limits = workers.WorkerLimits(
        **_given(
            options, timeout="store_timeout", workers="store_workers", tenant_calls="tenant_calls"
        )
    )
    rates = _given(options, tenant_rate="tenant_rate", subject_rate="subject_rate")
    replica_options = replica.ReplicaOptions(
        workers=worker_limits,
        rates=limits.RateLimits(**rates),
        grace_seconds=options.grace or replica.DEFAULT_GRACE_SECONDS,
        metrics_address=options.metrics,
        **_given(options, max_staleness_seconds="max_staleness"),
    )
    host, port = options.address
    settings = http_server.HttpOptions(
        host=host,
        port=port,
        jwks=options.jwks,
        rules=rules,
        stateless=options.stateless,
        allowed_hosts=tuple(options.allowed_host or ()),
        resource_url=options.resource_url,
        audit_log=options.audit_log,
        replica=replica_options,
        sessions=SessionLimits(
            **_given(
                options,
                per_subject="max_sessions_per_subject",
                per_tenant="max_sessions_per_tenant",
                idle_seconds="session_idle_timeout",
            )
        ),
        connections=ConnectionLimits(
            **_given(options, header_timeout="header_timeout", max_connections="max_connections")
        ),
    )
    id_format = id_format_of(options)
    # The PostgreSQL store gives up when the server does, with one connection per worker.
    cleaned: list[int] = [0]
    store = open_store(
        options,
        id_format,
        timeout=worker_limits.timeout,
        connections=worker_limits.workers,
        on_titles_cleaned=cleaned.append,
    )
    replica_options = dataclasses.replace(replica_options, titles_cleaned=cleaned[-1])
    settings = dataclasses.replace(settings, replica=replica_options)
    try:
        http_server.serve_http(settings, store, registry=make_registry(id_format))
    except http_server.ServeError as error:
        raise CommandError(str(error)) from None
    return 0
