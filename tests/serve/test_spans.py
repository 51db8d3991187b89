"""One span per tool call, by the MCP semantic conventions, only when OTEL_* ask for it.

In-process, `CallSpans` records on a provider whose exporter is the SDK's
InMemorySpanExporter: exact names, attributes, status and parent. Then two `serve http`
processes (the direct path, and the SDK's by the switch) run with their exporter replaced
by an in-memory one that writes its spans to a file when the server stops: both paths give
the same spans. Without the `otel` extra (its packages made unimportable) the server starts
and answers, and refuses to start when the variables ask for spans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from http_support import PROTOCOL, open_session, post, rpc
from testkit.server import ServerProcess, serve_http_command
from testkit.tokens import Issuer, claims
from ticket_tools.catalog import REGISTRY
from ticket_tools.outcome import Outcome
from ticket_tools.serve import spans
from ticket_tools.serve.direct import SWITCH
from ticket_tools.serve.spans import CallSpans, SpansError, start, wanted

# The install hint, as the server words it: from a clone (the package is not published).
HINT = "in a clone of ticket-tools, pip install -e '.[mcp,otel]'"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER_TRACEPARENT = f"00-{OTHER_TRACE}-b7ad6b7169203331-01"
BASE = {
    "mcp.method.name": "tools/call",
    "gen_ai.operation.name": "execute_tool",
    "network.transport": "tcp",
    "network.protocol.name": "http",
}
OK = Outcome({"ok": True, "ticket": {"id": "TKT-104", "title": "secret title"}})
NOT_FOUND = Outcome({"ok": False, "code": "not_found"}, "no ticket TKT-999 here")
UNKNOWN = Outcome({"ok": False, "code": "unknown_tool"}, "the tools are get_ticket, ...")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({}, (), id="nothing-set"),
        pytest.param({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",), id="otlp"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}, ("otlp", "console"), id="list"
        ),
        pytest.param({"OTEL_TRACES_EXPORTER": "none"}, (), id="none"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
            (),
            id="none-beats-endpoint",
        ),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ("otlp",), id="endpoint"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
            ("otlp",),
            id="traces-endpoint",
        ),
        pytest.param({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, (), id="blank-endpoint"),
        pytest.param(
            {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, (), id="sdk-disabled"
        ),
        pytest.param(
            {"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"},
            ("console",),
            id="sdk-not-disabled",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("otlp",),
            id="protocol-http",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            ("console",),
            id="protocol-without-otlp",
        ),
    ],
)
def test_wanted(environ: dict[str, str], expected: tuple[str, ...]) -> None:
    assert wanted(environ) == expected


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "zipkin"},
            "OTEL_TRACES_EXPORTER names otlp, console or none; not 'zipkin'",
            id="unknown-exporter",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "otlp,none"},
            "OTEL_TRACES_EXPORTER names otlp, console or none; not 'none'",
            id="none-in-a-list",
        ),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTLP spans go over http/protobuf only",
            id="grpc",
        ),
        pytest.param(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
            },
            None,
            id="endpoint-ignores-protocol",
        ),
    ],
)
def test_wanted_refuses(environ: dict[str, str], message: str | None) -> None:
    if message is None:  # an endpoint alone means otlp; the protocol is then the exporter's
        assert wanted(environ) == ("otlp",)
        return
    with pytest.raises(SpansError) as raised:
        wanted(environ)
    assert str(raised.value) == message


def test_start_off_is_none() -> None:
    assert start({}) is None


@pytest.mark.parametrize(
    ("environ", "service"),
    [
        pytest.param({"OTEL_TRACES_EXPORTER": "console"}, "ticket-tools", id="default-name"),
        pytest.param(
            {"OTEL_TRACES_EXPORTER": "console,otlp", "OTEL_SERVICE_NAME": "desk"},
            "desk",
            id="service-name",
        ),
    ],
)
def test_start(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], service: str) -> None:
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    started = start(environ)
    assert started is not None
    try:
        assert started.provider.resource.attributes["service.name"] == service
        assert started.provider.resource.attributes["service.version"] == "0.1.0"
    finally:
        started.shutdown()


def test_exporters() -> None:
    console = spans.exporter("console")
    otlp = spans.exporter("otlp")
    assert (type(console), type(otlp)) == (ConsoleSpanExporter, OTLPSpanExporter)
    otlp.shutdown()


@pytest.mark.parametrize(
    ("blocked", "environ", "message"),
    [
        pytest.param(
            "opentelemetry.sdk.resources",
            {"OTEL_TRACES_EXPORTER": "console"},
            f"OTEL_* variables ask for spans: {HINT}",
            id="no-sdk",
        ),
        pytest.param(
            "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            {"OTEL_TRACES_EXPORTER": "otlp"},
            f"OTLP spans need the OTLP exporter: {HINT}",
            id="no-otlp-exporter",
        ),
    ],
)
def test_start_without_the_extra(
    monkeypatch: pytest.MonkeyPatch, blocked: str, environ: dict[str, str], message: str
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)  # import raises ImportError
    with pytest.raises(SpansError) as raised:
        start(environ)
    assert str(raised.value) == message


def _ctx(
    request_id: object = 1,
    meta: dict[str, object] | None = None,
    headers: dict[str, str] | None = None,
    protocol: str | None = "2026-07-28",
) -> Any:
    fields: dict[str, object] = {"request_id": request_id, "meta": meta}
    if headers is not None:
        fields["request"] = SimpleNamespace(headers=headers)
    if protocol is not None:
        fields["protocol_version"] = protocol
    return SimpleNamespace(**fields)


def _error(code: str) -> dict[str, str]:
    return {"error.type": code, "rpc.response.status_code": code}


OBSERVED = [
    pytest.param(
        _ctx(7, {"traceparent": TRACEPARENT}),
        "get_ticket",
        OK,
        ("tools/call get_ticket", {**BASE, "gen_ai.tool.name": "get_ticket",
         "jsonrpc.request.id": "7", "mcp.protocol.version": "2026-07-28"},
         (StatusCode.UNSET, None), TRACE),
        id="ok-meta-traceparent",
    ),
    pytest.param(
        _ctx("s-1", None, {"traceparent": TRACEPARENT}, protocol="2025-11-25"),
        "get_ticket",
        NOT_FOUND,
        ("tools/call get_ticket", {**BASE, "gen_ai.tool.name": "get_ticket",
         "jsonrpc.request.id": "s-1", "mcp.protocol.version": "2025-11-25",
         "error.type": "tool_error"}, (StatusCode.ERROR, "not_found"), TRACE),
        id="tool-error-header-traceparent",
    ),
    pytest.param(
        _ctx("x" * 80, {"traceparent": OTHER_TRACEPARENT}, {"traceparent": TRACEPARENT}),
        "Search_Tickets",
        UNKNOWN,
        ("tools/call", {**BASE, "jsonrpc.request.id": "x" * 64,
         "mcp.protocol.version": "2026-07-28", **_error("-32602")},
         (StatusCode.ERROR, "unknown_tool: the tools are get_ticket, ..."), OTHER_TRACE),
        id="unknown-tool-meta-wins",
    ),
    pytest.param(
        _ctx(None, {"traceparent": "00-zz"}, {"traceparent": TRACEPARENT}, protocol=None),
        "search_tickets",
        None,
        ("tools/call search_tickets", {**BASE, "gen_ai.tool.name": "search_tickets",
         **_error("-32603")}, (StatusCode.ERROR, "Internal error"), None),
        id="internal-error-bad-meta-traceparent",
    ),
    pytest.param(
        _ctx(2, {}, {"accept": "application/json"}),
        "search_tickets",
        OK,
        ("tools/call search_tickets", {**BASE, "gen_ai.tool.name": "search_tickets",
         "jsonrpc.request.id": "2", "mcp.protocol.version": "2026-07-28"},
         (StatusCode.UNSET, None), None),
        id="no-traceparent",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("ctx", "name", "outcome", "expected"), OBSERVED)
def test_a_call_span(ctx: Any, name: str, outcome: Outcome | None, expected: object) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    CallSpans(provider).observe(ctx, name, outcome, 0.25)
    (span,) = exporter.get_finished_spans()
    assert _summary(span)[:4] == expected
    assert span.kind is SpanKind.SERVER
    assert span.end_time is not None
    assert span.start_time is not None
    assert span.end_time - span.start_time == 250_000_000
    if _summary(span)[3] is not None:
        assert span.parent is not None
        assert span.parent.is_remote
        assert span.context.trace_id == span.parent.trace_id


def test_tracestate_travels() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    meta: dict[str, object] = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
    CallSpans(provider).observe(_ctx(1, meta), "get_ticket", OK, 0.0)
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert (f"{span.parent.span_id:016x}", span.parent.trace_state.to_header()) == (
        PARENT,
        "rojo=00f067aa0ba902b7",
    )


def _summary(span: ReadableSpan) -> tuple[object, ...]:
    parent = None if span.parent is None else f"{span.parent.trace_id:032x}"
    return (
        span.name,
        dict(span.attributes or {}),
        (span.status.status_code, span.status.description),
        parent,
    )


# The server, its exporter replaced by one that writes its spans to SPANS_OUT when it stops.
LAUNCH = """
import json, os, sys
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ticket_tools.serve import spans

class Dump(InMemorySpanExporter):
    def shutdown(self):
        with open(os.environ["SPANS_OUT"], "w", encoding="utf-8") as out:
            for span in self.get_finished_spans():
                parent = None if span.parent is None else f"{span.parent.trace_id:032x}"
                line = [span.name, str(span.kind), dict(span.attributes), parent,
                        str(span.status.status_code), span.status.description]
                out.write(json.dumps(line) + "\\n")
        super().shutdown()

spans.exporter = lambda name: Dump()
from ticket_tools.cli import main
sys.exit(main(sys.argv[1:]))
"""
# The `mcp` extra without the `otel` one: the SDK and the exporters cannot be imported.
BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ImportError(f"{name} hidden by the test")
sys.meta_path.insert(0, Block())
from ticket_tools.serve import http
sys.argv[0] = "ticket-tools"
from ticket_tools.cli import main
code = main(sys.argv[1:])
assert not [m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exp"))]
sys.exit(code)
"""
UNLIMITED = ("--tenant-rate", "0", "--subject-rate", "0")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "spans", "version": "1"},
}


def _command(code: str, jwks: Path, *extra: str) -> list[str]:
    mode = extra or ("--stateless",)
    return [sys.executable, "-c", code, *serve_http_command(jwks, *mode)[3:]]


def _call(url: str, token: str, name: str, request_id: object, **extra: Any) -> dict[str, Any]:
    meta = {**META, **extra.pop("meta", {})}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"_meta": meta, "name": name, "arguments": extra.pop("arguments", {})},
    }
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": name, **extra.pop("headers", {})}  # fmt: skip
    status, _, answer = post(url, json.dumps(body).encode(), token, headers)
    result: dict[str, Any] = json.loads(answer)
    return {"status": status, **result}


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("spans")
    issuer = Issuer("idp")
    (folder / "jwks.json").write_text(json.dumps(issuer.jwks()), encoding="utf-8")
    return folder / "jwks.json", issuer.sign(claims("alpha", "agent-1"))


SERVER_SPANS = [
    ["tools/call get_ticket", "SpanKind.SERVER", {**BASE, "gen_ai.tool.name": "get_ticket",
     "jsonrpc.request.id": "7", "mcp.protocol.version": "2026-07-28"}, TRACE, "StatusCode.UNSET",
     None],
    ["tools/call get_ticket", "SpanKind.SERVER", {**BASE, "gen_ai.tool.name": "get_ticket",
     "jsonrpc.request.id": "h-1", "mcp.protocol.version": "2026-07-28",
     "error.type": "tool_error"}, OTHER_TRACE, "StatusCode.ERROR", "not_found"],
    ["tools/call", "SpanKind.SERVER", {**BASE, "jsonrpc.request.id": "9",
     "mcp.protocol.version": "2026-07-28", **_error("-32602")}, None, "StatusCode.ERROR",
     f"unknown_tool: unknown tool; the tools are: {', '.join(t.name for t in REGISTRY)}"],
]  # fmt: skip


@pytest.mark.parametrize("path", ["direct", "sdk"])
def test_both_paths_send_the_same_spans(tmp_path: Path, idp: tuple[Path, str], path: str) -> None:
    jwks, token = idp
    out = tmp_path / "spans.jsonl"
    env = {"OTEL_TRACES_EXPORTER": "console", "SPANS_OUT": str(out)}
    if path == "sdk":
        env[SWITCH] = "sdk"
    server = ServerProcess(_command(LAUNCH, jwks), tmp_path / "stderr.txt", env=env)
    try:
        ok = _call(server.url, token, "get_ticket", 7, meta={"traceparent": TRACEPARENT},
                   arguments={"ticket_id": "TKT-104"})  # fmt: skip
        missing = _call(server.url, token, "get_ticket", "h-1",
                        headers={"traceparent": OTHER_TRACEPARENT},
                        arguments={"ticket_id": "TKT-999"})  # fmt: skip
        unknown = _call(server.url, token, "Search_Tickets", 9)
    finally:
        assert server.stop() == 0, server.stderr()
    assert (ok["status"], ok["result"]["isError"]) == (200, False)
    assert (missing["status"], missing["result"]["isError"]) == (200, True)
    assert (unknown["status"], unknown["error"]["code"]) == (400, -32602)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == SERVER_SPANS


def test_a_session_call_has_its_span(tmp_path: Path, idp: tuple[Path, str]) -> None:
    jwks, token = idp
    out = tmp_path / "spans.jsonl"
    env = {"OTEL_TRACES_EXPORTER": "console", "SPANS_OUT": str(out)}
    server = ServerProcess(_command(LAUNCH, jwks, *UNLIMITED), tmp_path / "stderr.txt", env=env)
    try:
        sid = open_session(server.url, token)
        body = rpc("tools/call", {"name": "search_tickets", "arguments": {"limit": 1}}, 5)
        headers = {"Mcp-Session-Id": sid, "traceparent": TRACEPARENT}
        status, _, answer = post(server.url, body, token, headers)
    finally:
        assert server.stop() == 0, server.stderr()
    assert (status, json.loads(answer)["result"]["isError"]) == (200, False)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    attributes = {**BASE, "gen_ai.tool.name": "search_tickets", "jsonrpc.request.id": "5",
                  "mcp.protocol.version": PROTOCOL}  # fmt: skip
    assert lines == [
        [
            "tools/call search_tickets",
            "SpanKind.SERVER",
            attributes,
            TRACE,
            "StatusCode.UNSET",
            None,
        ]
    ]


def test_without_the_extra_the_server_answers(tmp_path: Path, idp: tuple[Path, str]) -> None:
    jwks, token = idp
    server = ServerProcess(_command(BLOCK, jwks), tmp_path / "stderr.txt")
    try:
        answer = _call(server.url, token, "get_ticket", 3, meta={"traceparent": TRACEPARENT},
                       arguments={"ticket_id": "TKT-104"})  # fmt: skip
    finally:
        assert server.stop() == 0, server.stderr()
    ticket = {"id": "TKT-104", "title": "Settings crash", "status": "open"}
    assert answer["status"] == 200
    assert answer["result"]["structuredContent"] == {"ok": True, "ticket": ticket}


def test_without_the_extra_spans_asked_for_refuse_to_start(
    tmp_path: Path, idp: tuple[Path, str]
) -> None:
    jwks, _ = idp
    done = subprocess.run(
        _command(BLOCK, jwks),
        env={**os.environ, "OTEL_TRACES_EXPORTER": "otlp"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr.splitlines()[-1:]) == (
        2,
        [f"ticket-tools: OTEL_* variables ask for spans: {HINT}"],
    )


ROOT_ONLY = """
import pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} hidden by the test")
sys.meta_path.insert(0, Block())
import ticket_tools
names = [m.name for m in pkgutil.iter_modules(ticket_tools.__path__) if not m.ispkg]
for name in names:
    __import__(f"ticket_tools.{name}")
print(len(names), sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_the_root_package_never_imports_opentelemetry() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ROOT_ONLY], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    count, imported = done.stdout.split(" ", 1)
    # Every root module was imported: as many as the package folder holds, but __init__.
    package = Path(spans.__file__).parents[1]
    on_disk = len([path for path in package.glob("*.py") if path.name != "__init__.py"])
    assert (int(count), imported.strip()) == (on_disk, "[]")
