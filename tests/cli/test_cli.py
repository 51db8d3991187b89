"""The ticket-tools command line, run in-process through main(argv)."""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import os
import runpy
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ticket_tools import Tool, ToolRegistry, fixture_records, tool_declarations
from ticket_tools.catalog import REGISTRY
from ticket_tools.cli import main
from ticket_tools.cli.program import build_parser
from ticket_tools.outcome import failure

Captured = pytest.CaptureFixture[str]
TOOL_NAMES = ", ".join(tool.name for tool in REGISTRY)
ROOT = Path(__file__).parents[2]


def run(argv: list[str], capsys: Captured) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_acceptance_prints_thirteen_passes(capsys: Captured) -> None:
    status, out, err = run(["acceptance"], capsys)
    lines = out.splitlines()
    assert (status, err) == (0, "")
    assert [line.split()[:2] for line in lines[:-1]] == [["PASS", f"A{n}"] for n in range(1, 14)]
    assert lines[-1] == "13 passed, 0 failed"


def test_acceptance_on_another_store_fails_with_exit_1(tmp_path: Path, capsys: Captured) -> None:
    path = tmp_path / "records.json"
    path.write_text(
        json.dumps({"alpha:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"}})
    )
    status, out, err = run(["acceptance", "--records", str(path)], capsys)
    assert (status, err) == (1, "")
    assert out.splitlines()[-1] == "5 passed, 8 failed"  # A8-A11 and A13 hold on any store


@pytest.mark.parametrize(
    ("argv", "stdin", "expected"),
    [
        pytest.param(
            ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "alpha"],
            "",
            (
                0,
                {
                    "ok": True,
                    "ticket": {"id": "TKT-104", "title": "Settings crash", "status": "open"},
                },
            ),
            id="get-alpha",
        ),
        pytest.param(
            ["call", "get_ticket", '{"ticket_id": "TKT-104"}', "--tenant", "beta"],
            "",
            (
                0,
                {
                    "ok": True,
                    "ticket": {
                        "id": "TKT-104",
                        "title": "Private billing issue",
                        "status": "closed",
                    },
                },
            ),
            id="get-beta",
        ),
        pytest.param(
            ["call", "search_tickets", "-", "--tenant", "alpha"],
            '{"status": "closed", "limit": 2}',
            (
                0,
                {
                    "ok": True,
                    "tickets": [
                        {"id": "TKT-102", "title": "CSV export times out", "status": "closed"},
                        {"id": "TKT-110", "title": "Invoice PDF missing logo", "status": "closed"},
                    ],
                    "next_cursor": "TKT-110",
                },
            ),
            id="search-args-from-stdin",
        ),
        pytest.param(
            ["call", "search_tickets", "{}", "--tenant", "alpha", "--no-read"],
            "",
            (1, {"ok": False, "code": "forbidden"}, "forbidden: this session may not read tickets"),
            id="no-read",
        ),
        pytest.param(
            ["call", "search_tickets", '{"limit": 11}', "--tenant", "alpha"],
            "",
            (
                1,
                {"ok": False, "code": "invalid_arguments"},
                "invalid_arguments: limit: an integer from 1 to 10",
            ),
            id="invalid-arguments-exit-1",
        ),
        pytest.param(
            ["call", "search_tickets", "null", "--tenant", "alpha"],
            "",
            (
                1,
                {"ok": False, "code": "invalid_arguments"},
                "invalid_arguments: the arguments must be a JSON object",
            ),
            id="json-null-args",
        ),
        pytest.param(
            ["call", "list_tickets", "{}", "--tenant", "alpha"],
            "",
            (
                1,
                {"ok": False, "code": "unknown_tool"},
                f"unknown_tool: unknown tool; the tools are: {TOOL_NAMES}",
            ),
            id="unknown-tool",
        ),
        pytest.param(
            ["call", "get_ticket", '{"ticket_id": "TKT-999"}', "--tenant", "alpha"],
            "",
            (
                1,
                {"ok": False, "code": "not_found"},
                "not_found: no ticket with that ID is visible in this session",
            ),
            id="not-found",
        ),
    ],
)
def test_call(
    monkeypatch: pytest.MonkeyPatch,
    capsys: Captured,
    argv: list[str],
    stdin: str,
    expected: tuple[int, dict[str, object]] | tuple[int, dict[str, object], str],
) -> None:
    # On failure stdout is still the contract's result alone; the rule that failed,
    # the detail a host would show the model, is one line on stderr (issue 12, item 11).
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code, printed, err = run(argv, capsys)
    status, result, *detail = expected
    assert (code, json.loads(printed), err) == (
        status,
        result,
        "".join(f"ticket-tools: {line}\n" for line in detail),
    )
    assert printed.count("\n") == 1


def test_call_with_records_file(tmp_path: Path, capsys: Captured) -> None:
    path = tmp_path / "records.json"
    records = {
        "gamma:TKT-007": {"id": "TKT-007", "title": "Ünïcode title", "status": "open", "x": 1},
    }
    path.write_text(json.dumps(records), encoding="utf-8")
    argv = ["call", "search_tickets", "{}", "--tenant", "gamma", "--records", str(path)]
    status, out, err = run(argv, capsys)
    assert (status, err) == (0, "")
    assert out == (
        '{"ok": true, "tickets": [{"id": "TKT-007", "title": "Ünïcode title", "status": "open"}], '
        '"next_cursor": null}\n'
    )


def test_declarations_prints_tool_declarations(capsys: Captured) -> None:
    status, out, err = run(["declarations"], capsys)
    assert (status, err) == (0, "")
    assert json.loads(out) == tool_declarations()


def _write(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "records.json"
    path.write_bytes(content)
    return str(path)


@pytest.mark.parametrize(
    ("argv", "err"),
    [
        pytest.param(
            ["call", "get_ticket", "{", "--tenant", "alpha"],
            "the arguments are not valid JSON: "
            "Expecting property name enclosed in double quotes (line 1, column 2)",
            id="malformed-args",
        ),
        pytest.param(
            ["call", "get_ticket", "", "--tenant", "alpha"],
            "the arguments are not valid JSON: Expecting value (line 1, column 1)",
            id="empty-args",
        ),
        pytest.param(
            ["call", "get_ticket", "[" * 100_000, "--tenant", "alpha"],
            "the arguments are not valid JSON: arrays or objects nested too deeply",
            id="deeply-nested-args",
        ),
        pytest.param(
            ["call", "search_tickets", '{"limit": ' + "9" * 5000 + "}", "--tenant", "alpha"],
            "the arguments are not valid JSON: an integer longer than 4300 digits",
            id="too-many-digits",
        ),
    ],
)
def test_malformed_arguments_exit_2(capsys: Captured, argv: list[str], err: str) -> None:
    assert run(argv, capsys) == (2, "", f"ticket-tools: {err}\n")


FIELDS_RULE = (
    "{path}: record 1 (in file order): id, title and status must be strings of valid Unicode"
)


@pytest.mark.parametrize(
    ("content", "err"),
    [
        pytest.param(
            b"{",
            "the records in {path} are not valid JSON: a syntax error",
            id="bad-json",
        ),
        pytest.param(
            b"[" * 100_000,
            "the records in {path} are not valid JSON: arrays or objects nested too deeply",
            id="deep-json",
        ),
        pytest.param(b"\xff\xfe", "cannot read {path}: it is not UTF-8 text", id="not-utf8"),
        pytest.param(b"[]", '{path}: not a JSON object of "tenant:TKT-123" -> ticket', id="array"),
        pytest.param(b'{"alpha:TKT-001": "x"}', FIELDS_RULE, id="str-ticket"),
        pytest.param(
            b'{"alpha:TKT-001": {"id": "TKT-001", "title": "t"}}',
            FIELDS_RULE,
            id="missing-status",
        ),
        pytest.param(
            b'{"alpha:TKT-001": {"id": 1, "title": "t", "status": "open"}}',
            FIELDS_RULE,
            id="id-not-string",
        ),
        pytest.param(
            b'{"alpha:TKT-001": {"id": "TKT-001", "title": "\\ud800", "status": "open"}}',
            FIELDS_RULE,
            id="lone-surrogate-title",
        ),
        # The import rules hold for --records too: both stores answer alike for one file.
        pytest.param(
            b'{"alpha:TKT-1000": {"id": "TKT-1000", "title": "t", "status": "open"}}',
            "{path}: record 1 (in file order): the id is not TKT- followed by exactly three digits",
            id="id-too-wide-to-page",
        ),
        pytest.param(
            b'{"a:b:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"}}',
            "{path}: record 1 (in file order): "
            'the key is not "tenant:" followed by the ticket\'s own id',
            id="colon-in-tenant",
        ),
        pytest.param(
            b'{"alpha:TKT-001": {"id": "TKT-001", "title": "t", "status": "open"},'
            b' "alpha:TKT-002": {"id": "TKT-002", "title": "t", "status": "open"},'
            b' "alpha:TKT-001": {"id": "TKT-001", "title": "u", "status": "open"}}',
            "{path}: record 3 (in file order): the key was given before",
            id="key-given-twice",
        ),
        pytest.param(
            b'{"alpha:TKT-001": {"id": "TKT-001", "title": "t", "status": "Open"}}',
            '{path}: record 1 (in file order): the status is not "open" or "closed"',
            id="status-capitalised",
        ),
        pytest.param(
            b'{"alpha:TKT-001": {"id": "TKT-001", "title": "t", "status": "closed"},'
            b' "alpha:TKT-002": {"id": "TKT-002", "title": "t", "status": ""}}',
            '{path}: record 2 (in file order): the status is not "open" or "closed"',
            id="status-empty",
        ),
    ],
)
@pytest.mark.parametrize("command", ["acceptance", "call"])
def test_bad_records_file_exit_2(
    tmp_path: Path, capsys: Captured, content: bytes, err: str, command: str
) -> None:
    path = _write(tmp_path, content)
    extra = ["get_ticket", "{}", "--tenant", "alpha"] if command == "call" else []
    status, out, printed = run([command, *extra, "--records", path], capsys)
    assert (status, out) == (2, "")
    assert printed == "ticket-tools: " + err.format(path=path) + "\n"


def test_missing_records_file_exit_2(tmp_path: Path, capsys: Captured) -> None:
    path = tmp_path / "missing.json"
    status, out, err = run(["acceptance", "--records", str(path)], capsys)
    assert (status, out, err) == (
        2,
        "",
        f"ticket-tools: cannot read {path}: No such file or directory\n",
    )


def test_undecodable_stdin_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xff"), encoding="utf-8"))
    assert run(["call", "get_ticket", "-", "--tenant", "alpha"], capsys) == (
        2,
        "",
        "ticket-tools: the arguments are not UTF-8 text\n",
    )


def test_python_dash_m_runs_main(monkeypatch: pytest.MonkeyPatch, capsys: Captured) -> None:
    monkeypatch.setattr("sys.argv", ["ticket_tools.cli", "declarations"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("ticket_tools.cli", run_name="__main__", alter_sys=True)
    assert exit_info.value.code == 0
    assert json.loads(capsys.readouterr().out) == tool_declarations()


def test_python_dash_m_in_a_real_process() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ticket_tools.cli", "call", "get_ticket", "-", "--tenant", "beta"],
        input=b'{"ticket_id": "TKT-108"}',
        capture_output=True,
        check=False,
        env={"PYTHONIOENCODING": "utf-8"},
    )
    assert (completed.returncode, completed.stderr) == (0, b"")
    assert json.loads(completed.stdout) == {
        "ok": True,
        "ticket": {"id": "TKT-108", "title": "Login fails after SSO change", "status": "open"},
    }


def test_undecodable_stdin_in_a_real_process() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ticket_tools.cli", "call", "get_ticket", "-", "--tenant", "alpha"],
        input=b"\xff",
        capture_output=True,
        check=False,
        env={"PYTHONIOENCODING": "utf-8"},
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == (
        2,
        b"",
        b"ticket-tools: the arguments are not UTF-8 text\n",
    )


def test_usage_errors_exit_2(capsys: Captured) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["call", "get_ticket", "{}"])  # --tenant is required
    assert exit_info.value.code == 2
    assert "--tenant" in capsys.readouterr().err


def _describe(parser: argparse.ArgumentParser) -> dict[str, object]:
    """Every option of `parser` and its subcommands, as plain data (help text included)."""
    options: list[dict[str, object]] = []
    commands: dict[str, object] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                commands[name] = {"help": helps[name], **_describe(subparser)}
            options.append({"subcommands": True, "metavar": action.metavar})
            options[-1]["required"] = action.required
            continue
        options.append(
            {
                "flags": list(action.option_strings) or action.dest,
                "help": action.help,
                "metavar": action.metavar,
                "required": action.required,
                "default": None if action.default is None else str(action.default),
                "choices": None if action.choices is None else list(action.choices),
                "type": getattr(action.type, "__name__", None),
                "store_true": isinstance(action, argparse._StoreTrueAction),
            }
        )
    groups = [
        sorted(action.dest for action in group._group_actions)
        for group in parser._mutually_exclusive_groups
    ]
    description = {"prog": parser.prog, "description": parser.description, "options": options}
    if parser.epilog is not None:
        description["epilog"] = parser.epilog
    return {**description, "exclusive": groups, "commands": commands}


def test_every_option_and_help_text_matches_the_golden_file() -> None:
    # Pinned as data rather than `--help` output, which changes between Python versions.
    # Regenerate after a deliberate change with UPDATE_GOLDEN=1, then read the diff.
    path = Path(__file__).parents[1] / "golden" / "cli-options.json"
    described = json.dumps(_describe(build_parser()), indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(described, encoding="utf-8")
        pytest.fail(f"rewrote {path.name}: read the diff, then rerun without UPDATE_GOLDEN")
    assert described == path.read_text(encoding="utf-8")


def test_an_abbreviated_option_is_unrecognized(capsys: Captured) -> None:
    # A prefix is no option: a new option can never change what an old command line meant.
    with pytest.raises(SystemExit) as exited:
        main(["acceptance", "--rec", "records.json"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "ticket-tools acceptance: error: unrecognized arguments: --rec records.json\n"
    )


def test_a_command_is_required(capsys: Captured) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        "ticket-tools: error: the following arguments are required: COMMAND\n"
    )


def test_call_prints_non_ascii_as_is(tmp_path: Path, capsys: Captured) -> None:
    records = {
        "alpha:TKT-001": {"id": "TKT-001", "title": "Échec à la connexion", "status": "open"}
    }
    path = _write(tmp_path, json.dumps(records).encode())
    status, out, err = run(
        ["call", "get_ticket", '{"ticket_id": "TKT-001"}', "--tenant", "alpha", "--records", path],
        capsys,
    )
    assert (status, err) == (0, "")
    assert out == (
        '{"ok": true, "ticket": {"id": "TKT-001", "title": "Échec à la connexion", '
        '"status": "open"}}\n'
    )


def test_declarations_print_non_ascii_as_is(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    # Today's declarations are ASCII; a description in another language must print as written.
    monkeypatch.setattr(
        "ticket_tools.cli.tools.export_declarations",
        lambda fmt, registry: [{"name": fmt, "description": "Été"}],
    )
    status, out, err = run(["declarations", "--format", "mcp"], capsys)
    assert (status, err) == (0, "")
    assert out == '[\n  {\n    "name": "mcp",\n    "description": "Été"\n  }\n]\n'


# --- Small things a new user hit (issue 12, item 11) ---


def _help(argv: list[str], capsys: Captured) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal


def test_version_prints_the_installed_version(capsys: Captured) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert (exited.value.code, capsys.readouterr().out) == (
        0,
        f"ticket-tools {importlib.metadata.version('ticket-tools')}\n",
    )


def test_version_from_a_source_tree_that_is_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr("importlib.metadata.version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == "ticket-tools (not installed)\n"


def test_call_help_lists_the_tools_and_the_exit_statuses(capsys: Captured) -> None:
    shown = _help(["call"], capsys)
    assert f"The tools: {TOOL_NAMES}." in shown
    assert shown.endswith(
        'exit status: 0 the tool returned {"ok": true, ...} '
        '1 the tool returned {"ok": false, "code": ...}; the reason is on stderr '
        "2 the command could not run: bad arguments JSON, records file or database; "
        "or stdout could not be written (a full disk) "
        "130 interrupted (Ctrl-C) "
        "141 stdout was closed before the result was written (a broken pipe)"
    )


def test_call_help_takes_the_tool_names_from_the_registry(
    monkeypatch: pytest.MonkeyPatch, capsys: Captured
) -> None:
    registry = ToolRegistry(
        [
            *REGISTRY,
            Tool("demo_only_tool", "d", (), lambda *_: failure("not_found", "never called")),
        ]
    )
    monkeypatch.setattr("ticket_tools.cli.tools.REGISTRY", registry)
    assert f"The tools: {TOOL_NAMES}, demo_only_tool." in _help(["call"], capsys)


def test_import_help_describes_a_path(capsys: Captured) -> None:
    assert (
        'RECORDS_FILE the path of a records JSON file: an object of "tenant:TKT-123" -> ticket'
        in _help(["import"], capsys)
    )


def test_the_sample_records_file_is_the_fixture_store() -> None:
    sample = ROOT / "examples" / "records.json"
    assert json.loads(sample.read_text(encoding="utf-8")) == fixture_records()


def test_acceptance_passes_on_the_sample_records_file(capsys: Captured) -> None:
    status, out, err = run(
        ["acceptance", "--records", str(ROOT / "examples" / "records.json")], capsys
    )
    assert (status, out.splitlines()[-1], err) == (0, "13 passed, 0 failed", "")


def test_the_licence_file_is_the_mit_licence_pyproject_declares() -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = "MIT"' in pyproject
    assert licence.splitlines()[0] == "MIT License"
    assert "Permission is hereby granted, free of charge," in licence


# --- No traceback: undecodable input, a closed pipe, Ctrl-C (issue 12, item 4) ---


def test_arguments_that_are_not_utf8_on_the_command_line_exit_2(capsys: Captured) -> None:
    # Linux hands Python a non-UTF-8 argument as lone surrogates (surrogateescape).
    argv = ["call", "search_tickets", '{"query": "\udcff"}', "--tenant", "alpha"]
    assert run(argv, capsys) == (2, "", "ticket-tools: the arguments are not UTF-8 text\n")


def test_a_tenant_that_is_not_utf8_is_refused(capsys: Captured) -> None:
    # It read nothing, and exited 0 (issue 32: refused at launch, as every tenant no call
    # could read; tests/cli/test_cli_messages.py has the rest).
    assert run(["call", "search_tickets", "{}", "--tenant", "\udcff"], capsys) == (
        2,
        "",
        "ticket-tools: --tenant must be UTF-8 text\n",
    )


def test_undecodable_stdin_in_the_c_locale_exits_2() -> None:
    # In the C locale Python reads stdin with surrogateescape: the bytes came through as
    # a lone surrogate, the call answered, and the exit status was 0.
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ticket_tools.cli",
            "call",
            "search_tickets",
            "-",
            "--tenant",
            "alpha",
        ],
        input=b'{"query": "\xff"}',
        capture_output=True,
        check=False,
        env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""},
    )
    assert (completed.returncode, completed.stdout, completed.stderr) == (
        2,
        b"",
        b"ticket-tools: the arguments are not UTF-8 text\n",
    )


def test_a_closed_pipe_is_one_line_and_exit_141() -> None:
    # `ticket-tools declarations | head -1`, with the reader already gone: every write fails.
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as stdout:
        completed = subprocess.run(
            [sys.executable, "-m", "ticket_tools.cli", "declarations"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            check=False,
        )
    assert (completed.returncode, completed.stderr) == (
        141,
        b"ticket-tools: stdout was closed before the output was written\n",
    )


def test_ctrl_c_during_serve_is_one_line_and_exit_130() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "ticket_tools.cli", "serve", "stdio", "--tenant", "alpha"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    server.stdin.write(json.dumps(initialize).encode() + b"\n")
    server.stdin.flush()
    # An answer means the server is up and waiting for the next request.
    assert json.loads(server.stdout.readline())["id"] == 1
    server.send_signal(signal.SIGINT)
    out, err = server.communicate(timeout=60)
    assert (server.returncode, out, err) == (130, b"", b"ticket-tools: interrupted\n")
