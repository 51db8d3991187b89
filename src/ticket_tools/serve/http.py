"""One MCP endpoint for every tenant: the tools over Streamable HTTP, behind bearer tokens.

Needs the `mcp` extra. Each request carries an OAuth access token (a JWT from the
identity provider); `JwtVerifier` checks it and the trusted context of every tool call
is built from that request's token alone (`context_from_token`), through the same
tool-call path as stdio (`mcp_server.build_server`). A request without a valid token is
answered 401 with a `WWW-Authenticate: Bearer` header naming this server's
protected-resource metadata (RFC 9728), which the server also serves.

A session is bound to the token's (client, issuer, subject) that opened it; with
`stateless` there are no sessions at all, so any replica can answer any request.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware

from ticket_tools.catalog import REGISTRY
from ticket_tools.cli.inputs import os_reason
from ticket_tools.execute import Context
from ticket_tools.outcome import Outcome
from ticket_tools.registry import ToolRegistry
from ticket_tools.serve.audit import AuditLog
from ticket_tools.serve.bodies import MAX_BODY_BYTES, limit_bodies
from ticket_tools.serve.connections import ConnectionLimits, guarded_protocol
from ticket_tools.serve.direct import DirectPath, direct_enabled
from ticket_tools.serve.limits import rate_limited
from ticket_tools.serve.protocol import correct_protocol, transport_security
from ticket_tools.serve.replica import Replica, ReplicaOptions
from ticket_tools.serve.server import CallObserver, RequestRef, ToolCalls, server_for
from ticket_tools.serve.sessions import SessionLimits, bound_sessions
from ticket_tools.serve.spans import SpansError
from ticket_tools.serve.spans import start as start_spans
from ticket_tools.serve.tokens import JwksError, JwtVerifier, KeySet, TokenRules, context_from_token
from ticket_tools.store import Records, TicketStore

MCP_PATH = "/mcp"
LISTEN_BACKLOG = 2048  # uvicorn's own default


class ServeError(Exception):
    """The server cannot start: a one-line reason for the command line."""


@dataclass(frozen=True)
class HttpOptions:
    """How to listen and whom to trust, from `ticket-tools serve http`."""

    host: str
    """The address to bind; 127.0.0.1 unless a proxy in front needs more."""
    port: int
    """The port to bind; 0 lets the OS choose (the chosen one is printed)."""
    jwks: str
    """A JWKS file path or https URL: the identity provider's public signing keys."""
    rules: TokenRules
    """Issuer, audience, tenant claim and read scope every token is checked against."""
    stateless: bool = False
    """No server-side sessions: every request stands alone."""
    allowed_hosts: tuple[str, ...] = ()
    """Host header values accepted besides HOST:PORT (DNS-rebinding protection)."""
    resource_url: str | None = None
    """This endpoint's public URL (default http://HOST:PORT/mcp), named in the metadata."""
    audit_log: Path | None = None
    """Where audit lines go; None: stderr."""
    replica: ReplicaOptions = field(default_factory=ReplicaOptions)
    """Store workers and deadline, rate limits, drain, metrics address (docs/operations.md)."""
    sessions: SessionLimits = field(default_factory=SessionLimits)
    """Session caps per subject and per tenant, and the idle timeout (not with `stateless`)."""
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    """The header-read deadline and the cap on open connections."""


def request_context(rules: TokenRules) -> Context:
    """Return the trusted context of the call being served, from its request's verified token."""
    return context_from_token(get_access_token(), rules)


def build_app(
    store: Records | TicketStore,
    verifier: JwtVerifier,
    options: HttpOptions,
    *,
    netloc: str,
    audit: AuditLog,
    replica: Replica,
    registry: ToolRegistry = REGISTRY,
    spans: CallObserver | None = None,
) -> Starlette:
    """Return the ASGI app serving the tools of `registry` at MCP_PATH, bound at `netloc`.

    `spans`, when tracing is on (serve/spans.py), is told of each call after the audit log
    and the metrics.
    """
    rules = options.rules
    resource_url = options.resource_url or f"http://{netloc}{MCP_PATH}"
    try:
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(rules.issuer),
            resource_server_url=AnyHttpUrl(resource_url),
            # The verifier checks `aud` against the configured audience itself.
            validate_token_resource=False,
        )
    except ValidationError:
        raise ServeError("--issuer and --resource-url must be http(s) URLs") from None
    security = transport_security(options.host, netloc, options.allowed_hosts)

    def observe(ctx: RequestRef, name: str, outcome: Outcome | None, seconds: float) -> None:
        audit.observe(ctx, name, outcome, seconds)
        replica.metrics.observe(ctx, name, outcome, seconds)
        if spans is not None:
            spans(ctx, name, outcome, seconds)

    tool_calls = ToolCalls(
        lambda: request_context(rules),
        store,
        observe=observe,
        calls=replica.calls,
        registry=registry,
        refused=rate_limited,
    )
    server = server_for(tool_calls)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        # Tool calls answer at once and send no progress: a JSON body is enough.
        json_response=True,
        stateless_http=options.stateless,
        max_request_body_size=MAX_BODY_BYTES,  # never reached: BodyLimit refuses first
        session_idle_timeout=options.sessions.idle_seconds,
        transport_security=security,
        host=options.host,
        auth=auth,
        token_verifier=verifier,
        custom_starlette_routes=replica.routes(),
    )
    # First after the token check: nothing behind it is given a body past MAX_BODY_BYTES.
    limit_bodies(app, MCP_PATH)
    correct_protocol(app, MCP_PATH, resource_url=resource_url, rules=rules)
    # The SDK's own count of open sessions (it has no public one).
    manager = server.session_manager
    # The rate limits before the session gate: a request naming a session that is not the
    # caller's is counted as any other (the gate's 404s were a flood no limit saw).
    replica.install(app, mcp_path=MCP_PATH, sessions=lambda: len(manager._server_instances))
    if not options.stateless:
        bound_sessions(app, MCP_PATH, options.sessions, rules.tenant_claim)
    if direct_enabled():
        # Appended last: it answers after the token check, the rate limits and the gate.
        direct = Middleware(
            DirectPath, path=MCP_PATH, server=server, tool_calls=tool_calls, security=security
        )
        app.user_middleware.append(direct)
    return app


def listen(host: str, port: int) -> socket.socket:
    """Return a TCP socket listening on host:port (port 0: one the OS picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said outright: asyncio turns Nagle's algorithm off only on sockets that
    # name it (socket.create_server does not), and with it on, every response on a
    # kept-alive connection waited ~40 ms for the client's delayed ACK.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(LISTEN_BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


def open_audit_log(path: Path) -> TextIO:
    """Open `path` to append audit lines: a regular file (a symlink to one is followed).

    Opened without waiting: a FIFO nobody reads held start-up in open() forever, and any
    file that is not regular (a FIFO, a device, a socket) is refused with the rule.
    """
    refused = ServeError(
        f"cannot open {path}: the audit log must be a regular file "
        "(without --audit-log it is stderr)"
    )
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o666)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO with no reader: O_NONBLOCK's answer
            raise refused from None
        raise ServeError(f"cannot open {path}: {os_reason(error)}") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise refused
    os.set_blocking(descriptor, True)
    return open(descriptor, "a", encoding="utf-8")


def serve_http(
    options: HttpOptions, store: Records | TicketStore, *, registry: ToolRegistry = REGISTRY
) -> None:
    """Serve the tools of `registry` over Streamable HTTP until SIGINT or SIGTERM has drained."""
    logging.basicConfig(level=logging.WARNING, format="ticket-tools: %(levelname)s %(message)s")
    try:
        keys = KeySet(options.jwks)
    except JwksError as error:
        raise ServeError(f"cannot load the JWKS: {error}") from None
    try:
        listener = listen(options.host, options.port)
    except OSError as error:
        raise ServeError(
            f"cannot listen on {options.host}:{options.port}: {os_reason(error)}"
        ) from None
    with ExitStack() as stack:
        stack.enter_context(listener)
        port = listener.getsockname()[1]
        host = f"[{options.host}]" if ":" in options.host else options.host
        netloc = f"{host}:{port}"
        stream: TextIO = sys.stderr
        if options.audit_log is not None:
            stream = stack.enter_context(open_audit_log(options.audit_log))
        audit = AuditLog(stream, options.rules)
        try:
            spans = start_spans(os.environ)
        except SpansError as error:
            raise ServeError(str(error)) from None
        if spans is not None:
            stack.callback(spans.shutdown)  # after the drain: the last calls' spans go too
        replica = Replica(store, options.replica, tenant_claim=options.rules.tenant_claim)
        verifier = JwtVerifier(keys, options.rules)
        app = build_app(
            store,
            verifier,
            options,
            netloc=netloc,
            audit=audit,
            replica=replica,
            registry=registry,
            spans=None if spans is None else spans.observe,
        )
        try:
            replica.listen_for_metrics()
        except OSError as error:
            host, port = options.replica.metrics_address or (options.host, 0)
            shown = f"[{host}]" if ":" in host else host
            raise ServeError(
                f"cannot listen on {shown}:{port} (--metrics): {os_reason(error)}"
            ) from None
        print(
            f"ticket-tools: serving MCP on http://{netloc}{MCP_PATH}", file=sys.stderr, flush=True
        )
        # Until uvicorn takes SIGINT and SIGTERM (to drain), the caller's handlers end the
        # start-up; after it has drained, a late signal changes nothing: the status is 0.
        replica.serve(app, listener, http=guarded_protocol(options.connections))
