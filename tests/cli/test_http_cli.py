"""`ticket-tools serve --http`: the options, and each reason it cannot start, in-process."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from testkit.tokens import AUDIENCE, ISSUER, Issuer
from ticket_tools import fixture_records
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


def _http(jwks: str, *extra: str, address: str = "127.0.0.1:0") -> list[str]:
    return [
        "serve",
        "--http",
        address,
        "--jwks",
        jwks,
        "--issuer",
        ISSUER,
        "--audience",
        AUDIENCE,
        *extra,
    ]


def test_serve_needs_a_tenant_or_http(capsys: Captured) -> None:
    assert _fails(capsys, ["serve"]) == (
        "ticket-tools: serve needs --tenant (stdio) or --http HOST:PORT\n"
    )


def test_http_options_need_http(capsys: Captured) -> None:
    argv = ["serve", "--tenant", "a", "--jwks", "j", "--stateless", "--allowed-host", "h"]
    assert _fails(capsys, argv) == (
        "ticket-tools: --jwks, --stateless, --allowed-host: only with --http HOST:PORT\n"
    )


@pytest.mark.parametrize("flag", [["--tenant", "alpha"], ["--no-read"]])
def test_http_takes_no_tenant(capsys: Captured, jwks: str, flag: list[str]) -> None:
    assert _fails(capsys, _http(jwks, *flag)) == (
        "ticket-tools: over --http each request's token gives the tenant and permission: "
        "drop --tenant and --no-read\n"
    )


def test_http_needs_the_token_rules(capsys: Captured) -> None:
    assert _fails(capsys, ["serve", "--http", "127.0.0.1:0", "--issuer", ISSUER]) == (
        "ticket-tools: --http needs --jwks, --audience\n"
    )


@pytest.mark.parametrize("address", ["8765", ":8765", "host:", "host:x", "host:65536", "h:١٢"])
def test_a_bad_address_is_a_usage_error(capsys: Captured, address: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--http", address])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "argument --http: expected HOST:PORT, e.g. 127.0.0.1:8765\n"
    )


def test_an_unreadable_jwks(capsys: Captured, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    assert _fails(capsys, _http(str(missing))) == (
        f"ticket-tools: cannot load the JWKS: cannot read {missing}: FileNotFoundError\n"
    )


def test_an_address_in_use(capsys: Captured, jwks: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert _fails(capsys, _http(jwks, address=f"127.0.0.1:{port}")) == (
            f"ticket-tools: cannot listen on 127.0.0.1:{port}: OSError\n"
        )


def test_an_audit_log_that_cannot_be_opened(capsys: Captured, jwks: str, tmp_path: Path) -> None:
    assert _fails(capsys, _http(jwks, "--audit-log", str(tmp_path))) == (
        f"ticket-tools: cannot open {tmp_path}: IsADirectoryError\n"
    )


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


def test_the_options_reach_the_server(
    monkeypatch: pytest.MonkeyPatch, jwks: str, tmp_path: Path
) -> None:
    from ticket_tools.serve import http as http_server  # noqa: PLC0415 - the optional extra
    from ticket_tools.serve.tokens import TokenRules  # noqa: PLC0415

    served: list[tuple[http_server.HttpOptions, object]] = []
    monkeypatch.setattr(
        http_server, "serve_http", lambda options, store: served.append((options, store))
    )
    records = tmp_path / "records.json"
    org_ticket = '{"org:TKT-001": {"id": "TKT-001", "title": "T", "status": "open"}}'
    records.write_text(org_ticket, "utf-8")
    extra = [
        "--tenant-claim", "org", "--read-scope", "helpdesk.read", "--stateless",
        "--allowed-host", "a.example", "--allowed-host", "b.example:8443",
        "--resource-url", "https://a.example/mcp", "--audit-log", str(tmp_path / "audit"),
        "--records", str(records),
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
        ),
        (
            http_server.HttpOptions(
                host="127.0.0.1", port=0, jwks=jwks, rules=TokenRules(ISSUER, AUDIENCE)
            ),
            fixture_records(),
        ),
    ]
