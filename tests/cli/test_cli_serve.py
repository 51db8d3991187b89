"""`ticket-tools serve stdio` and `serve http`: the options of each, and why each cannot start."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from testkit.tokens import AUDIENCE, ISSUER, Issuer
from ticket_tools import Tool, ToolRegistry, fixture_records
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli import main

Captured = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def jwks(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A valid JWKS file."""
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(Issuer("cli").jwks()), encoding="utf-8")
    return str(path)


def _fails(capsys: Captured, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def _usage_error(capsys: Captured, argv: list[str]) -> str:
    """Return the last line argparse printed for a usage error (exit 2, after the usage)."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    captured = capsys.readouterr()
    assert (exited.value.code, captured.out) == (2, "")
    return captured.err.splitlines()[-1]


def _http(jwks: str, *extra: str, address: str = "127.0.0.1:0") -> list[str]:
    return ["serve", "http", address, "--jwks", jwks, "--issuer", ISSUER, "--audience", AUDIENCE,
            *extra]  # fmt: skip


# --- serve stdio: one session, its tenant and permission given here ---


@pytest.mark.parametrize(
    ("flags", "context"),
    [
        pytest.param([], {"tenant": "beta", "can_read_tickets": True}, id="may-read"),
        pytest.param(["--no-read"], {"tenant": "beta", "can_read_tickets": False}, id="no-read"),
    ],
)
def test_stdio_hands_the_session_and_store_to_the_mcp_server(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    flags: list[str],
    context: dict[str, object],
) -> None:
    from ticket_tools.serve import server as mcp_server  # noqa: PLC0415 - the optional extra

    served: list[tuple[object, object, list[Tool]]] = []

    def serve(context: object, store: object, *, registry: ToolRegistry) -> None:
        served.append((context, store, list(registry)))

    monkeypatch.setattr(mcp_server, "serve", serve)
    records = {"beta:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"}}
    path = tmp_path / "records.json"
    path.write_text(json.dumps(records), "utf-8")
    assert main(["serve", "stdio", "--tenant", "beta", *flags, "--records", str(path)]) == 0
    assert served == [(context, records, list(REGISTRY))]


def test_serve_needs_a_transport(capsys: Captured) -> None:
    assert _usage_error(capsys, ["serve"]) == (
        "ticket-tools serve: error: the following arguments are required: TRANSPORT"
    )


def test_stdio_needs_a_tenant(capsys: Captured) -> None:
    assert _usage_error(capsys, ["serve", "stdio", "--no-read"]) == (
        "ticket-tools serve stdio: error: the following arguments are required: --tenant"
    )


def test_http_options_belong_to_serve_http(capsys: Captured) -> None:
    argv = ["serve", "stdio", "--tenant", "a", "--jwks", "j", "--stateless"]
    assert _usage_error(capsys, argv) == (
        "ticket-tools serve stdio: error: unrecognized arguments: --jwks j --stateless"
    )


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["serve", "stdio", "--tenant", "alpha"], id="stdio"),
        pytest.param(_http("jwks.json"), id="http"),
    ],
)
def test_serve_without_the_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, argv: list[str]
) -> None:
    found: list[str] = []
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name: found.append(name) if name == "mcp" else None
    )
    assert (_fails(capsys, argv), found) == (
        "ticket-tools: serve needs the mcp extra: in a clone of ticket-tools, "
        "pip install -e '.[mcp]'\n",
        ["mcp"],
    )


@pytest.mark.parametrize("transport", [[], ["stdio"], ["http"]])
def test_serve_help_says_how_to_install_the_extra_on_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, transport: list[str]
) -> None:
    # A narrow terminal: argparse wraps descriptions to it, and split the command before.
    monkeypatch.setenv("COLUMNS", "40")
    with pytest.raises(SystemExit) as exited:
        main(["serve", *transport, "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert exited.value.code == 0
    at = lines.index("Needs the mcp extra; in a clone of ticket-tools:")
    assert lines[at + 1] == "  pip install -e '.[mcp]'"


# --- serve http: every tenant, identity from each request's verified token ---


@pytest.mark.parametrize("flag", [["--tenant", "alpha"], ["--no-read"]])
def test_http_takes_no_tenant(capsys: Captured, jwks: str, flag: list[str]) -> None:
    assert _usage_error(capsys, _http(jwks, *flag)) == (
        f"ticket-tools serve http: error: unrecognized arguments: {' '.join(flag)}"
    )


def test_http_needs_the_token_rules(capsys: Captured) -> None:
    assert _usage_error(capsys, ["serve", "http", "127.0.0.1:0", "--issuer", ISSUER]) == (
        "ticket-tools serve http: error: the following arguments are required: --jwks, --audience"
    )


@pytest.mark.parametrize("flag", ["--jwks", "--issuer", "--audience"])
def test_an_empty_token_rule_is_refused(capsys: Captured, jwks: str, flag: str) -> None:
    assert _usage_error(capsys, [*_http(jwks), flag, ""]) == (
        f"ticket-tools serve http: error: argument {flag}: must not be empty"
    )


@pytest.mark.parametrize("address", ["8765", ":8765", "host:", "host:x", "host:65536", "h:١٢"])
def test_a_bad_address_is_a_usage_error(capsys: Captured, jwks: str, address: str) -> None:
    assert _usage_error(capsys, _http(jwks, address=address)) == (
        "ticket-tools serve http: error: "
        "argument HOST:PORT: expected HOST:PORT, e.g. 127.0.0.1:8765"
    )


def test_an_unreadable_jwks(capsys: Captured, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert _fails(capsys, _http(str(missing))) == (
        f"ticket-tools: cannot load the JWKS: cannot read {missing}: No such file or directory\n"
    )


def test_an_address_in_use(capsys: Captured, jwks: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert _fails(capsys, _http(jwks, address=f"127.0.0.1:{port}")) == (
            f"ticket-tools: cannot listen on 127.0.0.1:{port}: Address already in use\n"
        )


@pytest.mark.parametrize(
    ("host", "shown", "family"),
    [("127.0.0.1", "127.0.0.1", socket.AF_INET), ("::1", "[::1]", socket.AF_INET6)],
)
def test_a_metrics_address_in_use_is_one_line_before_serving(
    capsys: Captured, jwks: str, host: str, shown: str, family: socket.AddressFamily
) -> None:
    # It was a traceback after "serving MCP on ..." had been printed.
    with socket.create_server((host, 0), family=family) as taken:
        port = taken.getsockname()[1]
        assert _fails(capsys, _http(jwks, "--metrics", f"{shown}:{port}")) == (
            f"ticket-tools: cannot listen on {shown}:{port} (--metrics): Address already in use\n"
        )


def test_an_audit_log_that_cannot_be_opened(capsys: Captured, jwks: str, tmp_path: Path) -> None:
    assert _fails(capsys, _http(jwks, "--audit-log", str(tmp_path))) == (
        f"ticket-tools: cannot open {tmp_path}: Is a directory\n"
    )


def test_an_audit_log_that_is_a_fifo_is_refused_at_once(
    capsys: Captured, jwks: str, tmp_path: Path
) -> None:
    # open() waited for a reader that never came: the server never started, and said nothing.
    fifo = tmp_path / "audit.fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):  # a FIFO nobody reads, a device
        assert _fails(capsys, _http(jwks, "--audit-log", str(path))) == (
            f"ticket-tools: cannot open {path}: the audit log must be a regular file "
            "(without --audit-log it is stderr)\n"
        )


def test_an_audit_log_through_a_symlink_to_a_regular_file_is_taken(
    monkeypatch: pytest.MonkeyPatch, jwks: str, tmp_path: Path
) -> None:
    from ticket_tools.serve import replica  # noqa: PLC0415 - the optional extra

    target, link = tmp_path / "audit.jsonl", tmp_path / "audit-link"
    target.write_text("kept\n", encoding="utf-8")
    link.symlink_to(target)
    served: list[str] = []
    monkeypatch.setattr(replica.Replica, "serve", lambda *_, **__: served.append("served"))
    assert main(_http(jwks, "--audit-log", str(link))) == 0
    assert (served, target.read_text(encoding="utf-8")) == (["served"], "kept\n")


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--issuer", "idp-without-scheme"], id="issuer"),
        pytest.param(["--resource-url", "tickets.example/mcp"], id="resource-url"),
    ],
)
def test_urls_that_are_not_urls(capsys: Captured, jwks: str, extra: list[str]) -> None:
    assert _fails(capsys, _http(jwks, *extra)) == (
        "ticket-tools: --issuer and --resource-url must be http(s) URLs\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            ["--max-sessions-per-subject", "0"], "a whole number of at least 1", id="zero"
        ),
        pytest.param(["--max-sessions-per-tenant", "-3"], "a whole number of at least 1", id="neg"),
        pytest.param(["--max-connections", "1.5"], "a whole number of at least 1", id="fraction"),
        pytest.param(
            ["--session-idle-timeout", "0"], "a number of seconds above 0, e.g. 2.5", id="idle-0"
        ),
        pytest.param(
            ["--header-timeout", "inf"], "a number of seconds above 0, e.g. 2.5", id="inf"
        ),
        pytest.param(
            ["--header-timeout", "1e3"], "a number of seconds above 0, e.g. 2.5", id="exponent"
        ),
    ],
)
def test_a_bad_limit_is_a_usage_error(
    capsys: Captured, jwks: str, extra: list[str], message: str
) -> None:
    assert _usage_error(capsys, _http(jwks, *extra)) == (
        f"ticket-tools serve http: error: argument {extra[0]}: expected {message}"
    )


def test_session_limits_are_refused_with_stateless(capsys: Captured, jwks: str) -> None:
    extra = ["--stateless", "--max-sessions-per-subject", "2", "--session-idle-timeout", "9"]
    assert _fails(capsys, _http(jwks, *extra)) == (
        "ticket-tools: --max-sessions-per-subject, --session-idle-timeout: "
        "not with --stateless, which keeps no sessions\n"
    )


def test_the_limits_reach_the_server(monkeypatch: pytest.MonkeyPatch, jwks: str) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.connections import ConnectionLimits  # noqa: PLC0415
    from ticket_tools.serve.sessions import SessionLimits  # noqa: PLC0415

    served: list[http_server.HttpOptions] = []
    monkeypatch.setattr(
        http_server, "serve_http", lambda options, store, **_: served.append(options)
    )
    extra = [
        "--max-sessions-per-subject", "4", "--max-sessions-per-tenant", "40",
        "--session-idle-timeout", "90.5", "--header-timeout", "2.5", "--max-connections", "300",
    ]  # fmt: skip
    assert main(_http(jwks, *extra)) == 0
    assert main(_http(jwks, "--max-connections", "7")) == 0
    assert [(o.sessions, o.connections) for o in served] == [
        (SessionLimits(4, 40, 90.5), ConnectionLimits(2.5, 300)),
        (SessionLimits(), ConnectionLimits(max_connections=7)),
    ]


def test_the_options_reach_the_server(
    monkeypatch: pytest.MonkeyPatch, jwks: str, tmp_path: Path
) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.tokens import TokenRules  # noqa: PLC0415

    served: list[tuple[http_server.HttpOptions, object, list[Tool]]] = []

    def serve_http(
        options: http_server.HttpOptions, store: object, *, registry: ToolRegistry
    ) -> None:
        served.append((options, store, list(registry)))

    monkeypatch.setattr(http_server, "serve_http", serve_http)
    records = tmp_path / "records.json"
    org_ticket = '{"org:TKT-001": {"id": "TKT-001", "title": "T", "status": "open"}}'
    records.write_text(org_ticket, "utf-8")
    extra = [
        "--tenant-claim", "org", "--read-scope", "helpdesk.read", "--stateless",
        "--allowed-host", "a.example", "--allowed-host", "b.example:8443",
        "--resource-url", "https://a.example/mcp", "--audit-log", str(tmp_path / "audit"),
        "--records", str(records), "--id-digits", "3",
    ]  # fmt: skip
    assert main(_http(jwks, *extra, address="[::1]:8765")) == 0
    assert main(_http(jwks)) == 0
    assert served == [
        (
            http_server.HttpOptions(
                host="::1",
                port=8765,
                jwks=jwks,
                rules=TokenRules(ISSUER, AUDIENCE, tenant_claim="org", read_scope="helpdesk.read"),
                stateless=True,
                allowed_hosts=("a.example", "b.example:8443"),
                resource_url="https://a.example/mcp",
                audit_log=tmp_path / "audit",
            ),
            {"org:TKT-001": {"id": "TKT-001", "title": "T", "status": "open"}},
            list(REGISTRY),
        ),
        (
            http_server.HttpOptions(
                host="127.0.0.1", port=0, jwks=jwks, rules=TokenRules(ISSUER, AUDIENCE)
            ),
            fixture_records(),
            list(REGISTRY),
        ),
    ]


def test_the_replica_options_reach_the_server(monkeypatch: pytest.MonkeyPatch, jwks: str) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.limits import RateLimits  # noqa: PLC0415
    from ticket_tools.serve.replica import ReplicaOptions  # noqa: PLC0415
    from ticket_tools.serve.workers import WorkerLimits  # noqa: PLC0415

    served: list[object] = []
    monkeypatch.setattr(
        http_server, "serve_http", lambda options, store, **_: served.append(options.replica)
    )
    extra = [
        "--store-timeout", "0.5", "--store-workers", "8", "--tenant-calls", "3",
        "--tenant-rate", "0", "--subject-rate", "2.5", "--grace", "10",
        "--metrics", "127.0.0.1:9108", "--max-staleness", "4.5",
    ]  # fmt: skip
    assert main(_http(jwks, *extra)) == 0
    assert served == [
        ReplicaOptions(
            workers=WorkerLimits(workers=8, tenant_calls=3, timeout=0.5),
            rates=RateLimits(tenant_rate=0, subject_rate=2.5),
            grace_seconds=10,
            metrics_address=("127.0.0.1", 9108),
            max_staleness_seconds=4.5,
        )
    ]


def test_the_rates_at_their_bounds_reach_the_server(
    monkeypatch: pytest.MonkeyPatch, jwks: str
) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.limits import RateLimits  # noqa: PLC0415

    served: list[object] = []
    monkeypatch.setattr(
        http_server, "serve_http", lambda options, store, **_: served.append(options.replica)
    )
    assert main(_http(jwks, "--tenant-rate", "0.001", "--subject-rate", "999999.999")) == 0
    assert [replica.rates for replica in served] == [  # type: ignore[attr-defined]
        RateLimits(tenant_rate=0.001, subject_rate=999999.999)
    ]


RATE_RULE = "expected calls per second from 0.001 to 999999.999, 0 for no limit"


@pytest.mark.parametrize(
    ("flag", "value", "rule"),
    [
        pytest.param(
            "--store-timeout", "0", "expected a number of seconds above 0, e.g. 2.5", id="timeout-0"
        ),
        pytest.param(
            "--grace", "inf", "expected a number of seconds above 0, e.g. 2.5", id="grace-inf"
        ),
        pytest.param(
            "--grace", "soon", "expected a number of seconds above 0, e.g. 2.5", id="grace-word"
        ),
        pytest.param(
            "--max-staleness",
            "0",
            "expected a number of seconds above 0, e.g. 2.5",
            id="max-staleness-0",
        ),
        pytest.param(
            "--max-staleness",
            "-1",
            "expected a number of seconds above 0, e.g. 2.5",
            id="max-staleness-negative",
        ),
        pytest.param(
            "--store-workers", "0", "expected a whole number of at least 1", id="workers-0"
        ),
        pytest.param(
            "--tenant-calls", "1.5", "expected a whole number of at least 1", id="calls-1.5"
        ),
        *(
            pytest.param(flag, value, RATE_RULE, id=f"{flag[2:]}-{value}")
            for flag, value in [
                ("--tenant-rate", "-1"),
                ("--subject-rate", "many"),
                # A refusal's wait was infinite (every refusal a 500) or 301 digits long.
                ("--subject-rate", "1e-320"),
                ("--tenant-rate", "1e-300"),
                ("--subject-rate", "0.0001"),
                ("--subject-rate", "1e308"),
                ("--tenant-rate", "1000000"),
                ("--tenant-rate", "inf"),
                ("--subject-rate", "nan"),
                ("--subject-rate", "1e3"),
                ("--subject-rate", " 2"),
            ]
        ),
    ],
)
def test_a_bad_replica_option_is_a_usage_error(
    capsys: Captured, jwks: str, flag: str, value: str, rule: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(_http(jwks, flag, value))
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"argument {flag}: {rule}\n")
