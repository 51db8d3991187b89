"""`ticket-tools dev-token`: a local identity for trying `serve http` (issue 32, point 4).

The end-to-end test runs the very commands dev-token prints: the `serve http` line starts a
real server, and the curl line (and the same request from Python) calls a tool with the
token it wrote, which reads its own tenant's tickets and no other's.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

import jwt
import pytest

from testkit.server import ServerProcess
from ticket_tools.cli import dev_token, main
from ticket_tools.serve.dev_identity import DEV_ISSUER

Captured = pytest.CaptureFixture[str]
NOW = 1_790_000_000  # 2026-09-21 14:13:20 UTC
MCP = "2026-07-28"


def run(capsys: Captured, *argv: str) -> tuple[int, str, str]:
    status = main(["dev-token", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dev_token, "_now", lambda: NOW)


def curl(folder: Path, tenant: str, address: str = "127.0.0.1:8765") -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
            "name": "search_tickets",
            "arguments": {},
        },
    }
    token = shlex.quote(str(folder / f"{tenant}.token"))
    return (
        f"  curl -sS {shlex.quote(f'http://{address}/mcp')}"
        f' -H "Authorization: Bearer $(cat {token})"'
        " -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'"
        f" -H 'MCP-Protocol-Version: {MCP}' -H 'Mcp-Method: tools/call'"
        " -H 'Mcp-Name: search_tickets'"
        f" -d {shlex.quote(json.dumps(body, separators=(',', ':')))}"
    )


def test_it_writes_a_key_its_jwks_and_a_token_and_prints_the_commands(
    capsys: Captured, tmp_path: Path, frozen: None
) -> None:
    folder = tmp_path / "identity"
    status, out, err = run(capsys, "--tenant", "alpha", "--dir", str(folder))
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "For local use only: a signing key made on this machine, which nothing but a",
        "serve http started with its JWKS trusts. Keep the files to yourself.",
        f"wrote {folder}/signing-key.pem (the key), {folder}/jwks.json (its public half)",
        f"wrote {folder}/alpha.token: tenant alpha, may read tickets, "
        "until 2026-09-21 15:13 UTC (60 minutes)",
        "",
        "serve http with them:",
        f"  ticket-tools serve http 127.0.0.1:8765 --jwks {folder}/jwks.json "
        f"--issuer {DEV_ISSUER} --audience http://127.0.0.1:8765/mcp",
        "",
        "then, from another terminal, call a tool as alpha:",
        curl(folder, "alpha"),
    ]
    names = sorted(path.name for path in folder.iterdir())
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
    assert (names, modes, stat.S_IMODE(folder.stat().st_mode)) == (
        ["alpha.token", "jwks.json", "signing-key.pem"],
        {"alpha.token": 0o600, "jwks.json": 0o600, "signing-key.pem": 0o600},
        0o700,
    )
    jwks = json.loads((folder / "jwks.json").read_text())
    (entry,) = jwks["keys"]
    token = (folder / "alpha.token").read_text()
    assert token.endswith("\n")
    claims = jwt.decode(
        token.strip(),
        jwt.PyJWK(entry),
        algorithms=["ES256"],
        audience="http://127.0.0.1:8765/mcp",
        issuer=DEV_ISSUER,
        options={"verify_exp": False, "verify_iat": False},
    )
    assert (sorted(entry), entry["alg"], entry["use"], "d" in entry) == (
        ["alg", "crv", "kid", "kty", "use", "x", "y"],
        "ES256",
        "sig",
        False,
    )
    assert jwt.get_unverified_header(token.strip())["kid"] == entry["kid"]
    assert claims == {
        "iss": DEV_ISSUER,
        "aud": "http://127.0.0.1:8765/mcp",
        "sub": "dev-user",
        "tenant": "alpha",
        "scope": "tickets:read",
        "iat": NOW,
        "exp": NOW + 3600,
    }
    assert (folder / "signing-key.pem").read_text().startswith("-----BEGIN PRIVATE KEY-----\n")


def test_tokens_for_several_tenants_share_one_key(
    capsys: Captured, tmp_path: Path, frozen: None
) -> None:
    argv = ["--tenant", "alpha", "--tenant", "beta", "--tenant", "alpha", "--no-read"]
    status, out, _ = run(capsys, *argv, "--dir", str(tmp_path), "--minutes", "5",
                         "--subject", "ana", "--address", "[::1]:9000")  # fmt: skip
    lines = out.splitlines()
    assert (status, lines[3:5], lines[7], lines[9:]) == (
        0,
        [
            f"wrote {tmp_path}/alpha.token: tenant alpha, may not read tickets, "
            "until 2026-09-21 14:18 UTC (5 minutes)",
            f"wrote {tmp_path}/beta.token: tenant beta, may not read tickets, "
            "until 2026-09-21 14:18 UTC (5 minutes)",
        ],
        # Quoted: [...] is a pattern to the shell.
        f"  ticket-tools serve http '[::1]:9000' --jwks {tmp_path}/jwks.json "
        f"--issuer {DEV_ISSUER} --audience 'http://[::1]:9000/mcp'",
        [
            "then, from another terminal, call a tool as alpha:",
            curl(tmp_path, "alpha", "[::1]:9000"),
            "or as beta:",
            curl(tmp_path, "beta", "[::1]:9000"),
        ],
    )
    (entry,) = json.loads((tmp_path / "jwks.json").read_text())["keys"]
    for tenant in ("alpha", "beta"):
        claims = jwt.decode(
            (tmp_path / f"{tenant}.token").read_text().strip(),
            jwt.PyJWK(entry),
            algorithms=["ES256"],
            audience="http://[::1]:9000/mcp",
            options={"verify_exp": False, "verify_iat": False},
        )
        assert (claims["tenant"], claims["sub"], "scope" in claims, claims["exp"]) == (
            tenant,
            "ana",
            False,
            NOW + 300,
        )


def test_it_never_writes_over_a_file_unless_forced(capsys: Captured, tmp_path: Path) -> None:
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path))[0] == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    (tmp_path / "beta.token").write_text("mine")
    assert run(capsys, "--tenant", "beta", "--dir", str(tmp_path)) == (
        2,
        "",
        f"ticket-tools: {tmp_path}/signing-key.pem already exists: dev-token writes new "
        "files only (--force replaces them)\n",
    )
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == {
        **before,
        "beta.token": b"mine",
    }
    assert run(capsys, "--tenant", "beta", "--dir", str(tmp_path), "--force")[0] == 0
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    # A new key and JWKS, a new beta token; alpha's old token is left as it was.
    assert [after[name] == before.get(name, b"mine") for name in sorted(after)] == [
        True,
        False,
        False,
        False,
    ]
    assert sorted(after) == ["alpha.token", "beta.token", "jwks.json", "signing-key.pem"]


def test_forced_over_a_symlink_it_replaces_the_link_not_its_target(
    capsys: Captured, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not yours to change")
    folder = tmp_path / "identity"
    folder.mkdir()
    (folder / "alpha.token").symlink_to(target)
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder))[0] == 2
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder), "--force")[0] == 0
    assert (target.read_text(), (folder / "alpha.token").is_symlink()) == (
        "not yours to change",
        False,
    )


def test_a_folder_that_exists_keeps_its_mode(capsys: Captured, tmp_path: Path) -> None:
    tmp_path.chmod(0o750)
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path))[0] == 0
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o750


def test_a_file_it_cannot_write_leaves_nothing_behind(capsys: Captured, tmp_path: Path) -> None:
    folder = tmp_path / "identity"
    folder.mkdir()
    (folder / "alpha.token").mkdir()  # in the way: os.replace cannot put a file there
    status, out, err = run(capsys, "--tenant", "alpha", "--dir", str(folder), "--force")
    assert (status, out, err) == (
        2,
        "",
        f"ticket-tools: cannot write {folder}/alpha.token: Is a directory\n",
    )
    assert sorted(path.name for path in folder.iterdir()) == ["alpha.token"]


def test_a_name_taken_meanwhile_leaves_nothing_of_this_run(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    # Another process writes alpha.token after the check, before dev-token links its own.
    link = os.link

    def racing_link(source: Path, target: Path) -> None:
        if Path(target).name == "alpha.token":
            Path(target).write_text("theirs")
        link(source, target)

    monkeypatch.setattr("ticket_tools.cli.dev_token.os.link", racing_link)
    status, out, err = run(capsys, "--tenant", "alpha", "--dir", str(tmp_path))
    assert (status, out, err) == (
        2,
        "",
        f"ticket-tools: cannot write {tmp_path}/alpha.token: File exists\n",
    )
    assert [(path.name, path.read_text()) for path in tmp_path.iterdir()] == [
        ("alpha.token", "theirs")
    ]


def test_ctrl_c_while_placing_leaves_none_of_its_files(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    link = os.link

    def interrupted_link(source: Path, target: Path) -> None:
        if Path(target).name == "alpha.token":
            raise KeyboardInterrupt
        link(source, target)

    monkeypatch.setattr("ticket_tools.cli.dev_token.os.link", interrupted_link)
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path)) == (
        130,
        "",
        "ticket-tools: interrupted\n",
    )
    assert list(tmp_path.iterdir()) == []


TENANT_RULE = (
    "ticket-tools: --tenant: dev-token names each token file after its tenant, so here a "
    "tenant is 1 to 64 letters, digits, '.', '_' and '-', not starting with '.' or '-'\n"
)


def test_a_tenant_too_long_for_a_file_name(capsys: Captured, tmp_path: Path) -> None:
    assert run(capsys, "--tenant", "a" * 64, "--dir", str(tmp_path))[0] == 0
    assert run(capsys, "--tenant", "a" * 65, "--dir", str(tmp_path)) == (
        2,
        "",
        TENANT_RULE,
    )


@pytest.mark.parametrize("tenant", ["-x", "--force", "-", ".hidden"])
def test_a_tenant_starting_like_an_option_or_hidden_file_is_refused(
    capsys: Captured, tmp_path: Path, tenant: str
) -> None:
    # Given as --tenant=-x (`--tenant -x` is argparse's missing value, below). A file named
    # -x.token would be an option to the printed `cat` when --dir is `.`.
    assert run(capsys, f"--tenant={tenant}", "--dir", str(tmp_path)) == (2, "", TENANT_RULE)
    assert list(tmp_path.iterdir()) == []


def test_a_tenant_starting_with_a_dash_as_its_own_argument_is_a_missing_value(
    capsys: Captured, tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["dev-token", "--tenant", "-x", "--dir", str(tmp_path)])
    assert (exited.value.code, capsys.readouterr().err.splitlines()[-1]) == (
        2,
        "ticket-tools dev-token: error: argument --tenant: expected one argument",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """The umask `request.param`, for the test only."""
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o277, 0o700, 0o777], indirect=True, ids=oct)
def test_the_folder_is_made_0700_whatever_the_umask(
    capsys: Captured, tmp_path: Path, umask: int
) -> None:
    # 0700 less a umask holding 0200 was 0500: a folder its owner could not write in.
    folder = tmp_path / "identity"
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder))[0] == 0
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}
    assert (stat.S_IMODE(folder.stat().st_mode), modes) == (
        0o700,
        {"alpha.token": 0o600, "jwks.json": 0o600, "signing-key.pem": 0o600},
    )


@pytest.mark.parametrize("umask", [0o022, 0o077], indirect=True, ids=oct)
def test_missing_parents_are_made_as_mkdir_p_makes_them(
    capsys: Captured, tmp_path: Path, umask: int
) -> None:
    folder = tmp_path / "a" / "b" / "identity"
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder))[0] == 0
    modes = [stat.S_IMODE(path.stat().st_mode) for path in (folder.parent.parent, folder.parent)]
    assert (modes, stat.S_IMODE(folder.stat().st_mode)) == ([0o777 & ~umask] * 2, 0o700)


def test_ctrl_c_leaves_none_of_the_folders_it_made(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    link = os.link

    def interrupted_link(source: Path, target: Path) -> None:
        if Path(target).name == "alpha.token":
            raise KeyboardInterrupt
        link(source, target)

    monkeypatch.setattr("ticket_tools.cli.dev_token.os.link", interrupted_link)
    folder = tmp_path / "a" / "identity"
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder)) == (
        130,
        "",
        "ticket-tools: interrupted\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_folder_made_meanwhile_is_used_as_found(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    # Another process makes the folder after dev-token found it missing: kept, as theirs.
    folder = tmp_path / "identity"
    mkdir = Path.mkdir

    def racing_mkdir(path: Path, mode: int = 0o777) -> None:
        if path == folder:
            mkdir(path, 0o750)
            path.chmod(0o750)
        mkdir(path, mode)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder))[0] == 0
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750


def test_a_file_made_meanwhile_in_the_folder_s_place(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    folder = tmp_path / "identity"
    mkdir = Path.mkdir

    def racing_mkdir(path: Path, mode: int = 0o777) -> None:
        if path == folder:
            path.write_text("theirs")
        mkdir(path, mode)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    assert run(capsys, "--tenant", "alpha", "--dir", str(folder)) == (
        2,
        "",
        f"ticket-tools: cannot write {folder}: it is not a folder\n",
    )
    assert folder.read_text() == "theirs"


def test_a_folder_it_cannot_make(capsys: Captured, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path / "a-file" / "identity")) == (
        2,
        "",
        f"ticket-tools: cannot write {tmp_path}/a-file/identity: Not a directory\n",
    )


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        pytest.param(["--minutes", "0"], "argument --minutes: expected 1 to 1440", id="0"),
        pytest.param(["--minutes", "1441"], "argument --minutes: expected 1 to 1440", id="1441"),
        pytest.param(["--minutes", "1.5"], "argument --minutes: expected 1 to 1440", id="1.5"),
        pytest.param(
            ["--address", "127.0.0.1:0"],
            "argument --address: expected HOST:PORT with a port of its own, not 0 "
            "(the token's audience names it)",
            id="port-0",
        ),
        pytest.param(
            ["--address", "8765"],
            "argument --address: expected HOST:PORT, e.g. 127.0.0.1:8765",
            id="no-host",
        ),
        pytest.param(["--subject", ""], "argument --subject: must not be empty", id="subject"),
    ],
)
def test_bad_options_are_usage_errors(
    capsys: Captured, tmp_path: Path, argv: list[str], rule: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["dev-token", "--tenant", "alpha", "--dir", str(tmp_path / "d"), *argv])
    assert (exited.value.code, capsys.readouterr().err.splitlines()[-1]) == (
        2,
        f"ticket-tools dev-token: error: {rule}",
    )
    assert list(tmp_path.iterdir()) == []


def test_without_the_extra_it_names_it(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured, tmp_path: Path
) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path / "d")) == (
        2,
        "",
        "ticket-tools: dev-token needs the mcp extra: in a clone of ticket-tools, "
        "pip install -e '.[mcp]'\n",
    )
    assert list(tmp_path.iterdir()) == []


# --- End to end: the printed commands, run as printed ---


@pytest.fixture
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture
def identity(tmp_path: Path, free_port: int, capsys: Captured) -> tuple[Path, list[str]]:
    """A dev identity for alpha and beta, and the lines dev-token printed for it."""
    folder = tmp_path / "dev identity"  # a space: the printed commands quote paths
    address = f"127.0.0.1:{free_port}"
    status, out, _ = run(
        capsys, "--tenant", "alpha", "--tenant", "beta", "--dir", str(folder), "--address", address
    )
    assert status == 0
    return folder, out.splitlines()


@pytest.fixture
def server(identity: tuple[Path, list[str]], tmp_path: Path) -> Iterator[ServerProcess]:
    """`serve http` started with the printed command, as a user would paste it."""
    _, lines = identity
    command = shlex.split(lines[lines.index("serve http with them:") + 1])
    assert command[:3] == ["ticket-tools", "serve", "http"]
    process = ServerProcess(
        [sys.executable, "-m", "ticket_tools.cli", *command[1:]], tmp_path / "stderr.txt"
    )
    yield process
    assert process.stop() == 0


def _sent(curl_line: str, folder: Path) -> tuple[str, dict[str, str], bytes]:
    """Return the URL, headers and body a printed curl line sends (its $(cat ...) read)."""
    words = shlex.split(curl_line)
    url = words[2]
    headers: dict[str, str] = {}
    for flag, value in itertools.pairwise(words):
        if flag == "-H":
            name, _, text = value.partition(": ")
            headers[name] = text
    body = words[words.index("-d") + 1].encode()
    for tenant in ("alpha", "beta"):
        cat = f"$(cat {shlex.quote(str(folder / f'{tenant}.token'))})"
        token = (folder / f"{tenant}.token").read_text().strip()
        headers = {name: text.replace(cat, token) for name, text in headers.items()}
    return url, headers, body


CALL_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MCP,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
            "name": "",
            "arguments": {},
        },
    }
)


def _call(url: str, headers: dict[str, str], name: str, arguments: Mapping[str, str]) -> object:
    body = json.loads(CALL_BODY)
    body["params"]["name"] = name
    body["params"]["arguments"] = arguments
    request = urllib.request.Request(  # noqa: S310 - the loopback server
        url, data=json.dumps(body).encode(), headers={**headers, "Mcp-Name": name}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return json.loads(response.read())["result"]["structuredContent"]


def test_the_printed_commands_serve_and_call_for_that_tenant_only(
    identity: tuple[Path, list[str]], server: ServerProcess, tmp_path: Path, capsys: Captured
) -> None:
    folder, lines = identity
    as_alpha = lines[lines.index("then, from another terminal, call a tool as alpha:") + 1]
    as_beta = lines[lines.index("or as beta:") + 1]
    url, alpha_headers, body = _sent(as_alpha, folder)
    assert url == server.url
    request = urllib.request.Request(url, data=body, headers=alpha_headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        searched = json.loads(response.read())["result"]["structuredContent"]
    assert [ticket["id"] for ticket in searched["tickets"]] == [
        "TKT-101", "TKT-102", "TKT-104", "TKT-107", "TKT-110",
    ]  # fmt: skip
    # Each token reads its own tenant: both have a TKT-104, only beta a TKT-103.
    _, beta_headers, _ = _sent(as_beta, folder)
    get_104 = {"ticket_id": "TKT-104"}
    assert [
        _call(url, alpha_headers, "get_ticket", get_104),
        _call(url, beta_headers, "get_ticket", get_104),
        _call(url, alpha_headers, "get_ticket", {"ticket_id": "TKT-103"}),
    ] == [
        {"ok": True, "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"}},
        {
            "ok": True,
            "ticket": {"id": "TKT-104", "title": "Private billing issue", "status": "closed"},
        },
        {
            "ok": False,
            "code": "not_found",
            "detail": "no ticket with that ID is visible in this session",
        },
    ]
    # A token of another dev identity (another key) is refused.
    other = tmp_path / "other"
    address = url.removeprefix("http://").removesuffix("/mcp")
    assert run(capsys, "--tenant", "alpha", "--dir", str(other), "--address", address)[0] == 0
    other_token = (other / "alpha.token").read_text().strip()
    stranger = {**alpha_headers, "Authorization": f"Bearer {other_token}"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        _call(url, stranger, "get_ticket", get_104)
    assert refused.value.code == 401
    refused.value.close()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed here")
def test_the_printed_curl_line_runs_in_a_shell(
    identity: tuple[Path, list[str]], server: ServerProcess
) -> None:
    _, lines = identity
    as_alpha = lines[lines.index("then, from another terminal, call a tool as alpha:") + 1]
    done = subprocess.run(
        ["/bin/sh", "-c", as_alpha.strip()], capture_output=True, check=False, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, b"")
    result = json.loads(done.stdout)["result"]["structuredContent"]
    assert (result["ok"], [ticket["id"] for ticket in result["tickets"]]) == (
        True,
        ["TKT-101", "TKT-102", "TKT-104", "TKT-107", "TKT-110"],
    )


def test_the_token_expires_when_it_says(capsys: Captured, tmp_path: Path) -> None:
    before = int(time.time())
    assert run(capsys, "--tenant", "alpha", "--dir", str(tmp_path), "--minutes", "1")[0] == 0
    claims = jwt.decode(
        (tmp_path / "alpha.token").read_text().strip(), options={"verify_signature": False}
    )
    assert before <= claims["iat"] <= int(time.time())
    assert claims["exp"] - claims["iat"] == 60
