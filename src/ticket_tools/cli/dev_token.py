"""`ticket-tools dev-token`: a local identity for trying `serve http` (docs/http.md).

It writes a signing key, its JWKS and a short-lived token per tenant, then prints the
`serve http` command that trusts them and a `curl` call that uses a token. For local use
only, and guarded so: every file is created 0600 (the folder 0700 when made here, whatever
the umask, and removed again with the files if the run fails), none
is written over unless `--force` (and then replaced whole, a symlink itself rather than
what it points to), a token lives an hour unless told otherwise and a day at most, and
its issuer is a name that resolves nowhere (`serve.dev_identity.DEV_ISSUER`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import itertools
import json
import os
import re
import secrets
import shlex
import time
from pathlib import Path

from ticket_tools.cli.command import CommandError, Commands
from ticket_tools.cli.inputs import check_tenant, os_reason
from ticket_tools.cli.serve import EXTRA, _host_port, _not_empty, require_mcp

DEFAULT_DIR = Path("dev-identity")
DEFAULT_ADDRESS = "127.0.0.1:8765"
DEFAULT_MINUTES = 60
# A token outliving a day of work is one nobody remembers having made.
MAX_MINUTES = 24 * 60
KEY_FILE = "signing-key.pem"
JWKS_FILE = "jwks.json"
FILE_MODE = 0o600  # the key and the tokens are secrets; the JWKS is kept alike
FOLDER_MODE = 0o700
# Each token file is named after its tenant, so a tenant here is a plain file name: not
# hidden, and never taken for an option (`cat -x.token` in the printed curl line, --dir .).
FILE_NAME = re.compile("[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
# The request the printed curl line sends: 2026-07-28's stand-alone form, which `serve
# http` answers with sessions and without, in one POST.
PROTOCOL = "2026-07-28"


def add_commands(commands: Commands) -> None:
    """Add `dev-token`."""
    dev = commands.add_parser(
        "dev-token",
        help="for local use: write a signing key, its JWKS and tokens to try serve http with",
        description="For local use only: write a new signing key, its JWKS and a short-lived\n"
        "token for each tenant into one folder, then print the serve http command that\n"
        f"trusts them and a curl call that uses a token (docs/http.md).\n\n{EXTRA}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dev.add_argument(
        "--tenant",
        action="append",
        required=True,
        help="the tenant a token reads; repeat it for a token per tenant (FOLDER/TENANT.token)",
    )
    dev.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        metavar="FOLDER",
        help=f"where to write the files (default: {DEFAULT_DIR}, made 0700 if missing)",
    )
    dev.add_argument(
        "--address",
        type=_fixed_address,
        default=DEFAULT_ADDRESS,
        metavar="HOST:PORT",
        help=f"where serve http will listen: the tokens' audience is http://HOST:PORT/mcp "
        f"(default: {DEFAULT_ADDRESS})",
    )
    dev.add_argument(
        "--minutes",
        type=_minutes,
        default=DEFAULT_MINUTES,
        metavar="N",
        help=f"how long each token is valid, 1 to {MAX_MINUTES} (default: {DEFAULT_MINUTES})",
    )
    dev.add_argument(
        "--subject",
        type=_not_empty,
        metavar="NAME",
        help="the tokens' sub, the user they stand for (default: dev-user)",
    )
    dev.add_argument(
        "--no-read", action="store_true", help="tokens without the read scope (tickets:read)"
    )
    dev.add_argument(
        "--force", action="store_true", help="replace files of these names already in FOLDER"
    )
    dev.set_defaults(run=_run_dev_token)


def _fixed_address(text: str) -> tuple[str, int]:
    host, port = _host_port(text)
    if port == 0:
        raise argparse.ArgumentTypeError(
            "expected HOST:PORT with a port of its own, not 0 (the token's audience names it)"
        )
    return host, port


def _minutes(text: str) -> int:
    if re.fullmatch("[0-9]{1,4}", text) is None or not 1 <= int(text) <= MAX_MINUTES:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_MINUTES}")
    return int(text)


def _now() -> int:
    return int(time.time())


def _run_dev_token(options: argparse.Namespace) -> int:
    tenants = list(dict.fromkeys(check_tenant(tenant) for tenant in options.tenant))
    if any(FILE_NAME.fullmatch(tenant) is None for tenant in tenants):
        raise CommandError(
            "--tenant: dev-token names each token file after its tenant, so here a tenant is "
            "1 to 64 letters, digits, '.', '_' and '-', not starting with '.' or '-'"
        )
    require_mcp("dev-token")
    from ticket_tools.serve.dev_identity import DEV_ISSUER, DevIdentity  # noqa: PLC0415

    folder: Path = options.dir
    host, port = options.address
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    audience = f"http://{netloc}/mcp"
    identity = DevIdentity.new()
    now, seconds = _now(), options.minutes * 60
    subject = {} if options.subject is None else {"subject": options.subject}
    tokens = {
        tenant: identity.token(
            tenant, audience, now=now, seconds=seconds, can_read=not options.no_read, **subject
        )
        for tenant in tenants
    }
    files = {
        folder / KEY_FILE: identity.private_pem(),
        folder / JWKS_FILE: json.dumps(identity.jwks(), indent=2).encode() + b"\n",
        **{folder / f"{tenant}.token": f"{token}\n".encode() for tenant, token in tokens.items()},
    }
    _write_files(folder, files, replace=options.force)

    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now + seconds))
    may = "may not read" if options.no_read else "may read"
    print("For local use only: a signing key made on this machine, which nothing but a")
    print("serve http started with its JWKS trusts. Keep the files to yourself.")
    print(f"wrote {folder / KEY_FILE} (the key), {folder / JWKS_FILE} (its public half)")
    for tenant in tenants:
        print(
            f"wrote {folder / tenant}.token: tenant {tenant}, {may} tickets, "
            f"until {until} ({options.minutes} minutes)"
        )
    serve = ["ticket-tools", "serve", "http", netloc, "--jwks", str(folder / JWKS_FILE)]
    serve += ["--issuer", DEV_ISSUER, "--audience", audience]
    print(f"\nserve http with them:\n  {shlex.join(serve)}\n")
    for number, tenant in enumerate(tenants):
        lead = "then, from another terminal, call a tool as" if number == 0 else "or as"
        print(f"{lead} {tenant}:\n  {_curl(audience, folder / f'{tenant}.token')}")
    return 0


def _curl(url: str, token: Path) -> str:
    """Return a curl command that calls search_tickets {} at `url` with the token in `token`."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
            "name": "search_tickets",
            "arguments": {},
        },
    }
    # The token is read when the line runs, never printed: $(...) quotes afresh inside "".
    return (
        f'curl -sS {shlex.quote(url)} -H "Authorization: Bearer $(cat {shlex.quote(str(token))})"'
        " -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'"
        f" -H 'MCP-Protocol-Version: {PROTOCOL}' -H 'Mcp-Method: tools/call'"
        " -H 'Mcp-Name: search_tickets'"
        f" -d {shlex.quote(json.dumps(body, separators=(',', ':')))}"
    )


def _write_files(folder: Path, files: dict[Path, bytes], *, replace: bool) -> None:
    """Write every file, 0600, or none: CommandError in one line naming the first fault.

    Each is written whole beside its place and then linked into it (refused if the name
    exists) or, with `replace`, renamed over it; so no file is ever half-written, and an
    existing name is refused before anything is written.
    """
    made = _make_folder(folder)  # made by this run: removed again unless every file is placed
    placed: list[Path] = []  # linked by this run: removed again unless every one is
    asides = {path: path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp") for path in files}
    target, done = folder, False
    try:
        _check_places(files, replace=replace)
        for target, data in files.items():
            _write_new(asides[target], data)
        for target, aside in asides.items():
            if replace:
                aside.replace(target)
            else:
                os.link(aside, target)
                placed.append(target)
        done = True
    except OSError as error:
        raise CommandError(f"cannot write {target}: {os_reason(error)}") from None
    finally:
        # Also on Ctrl-C: a run that did not finish leaves none of its files.
        for path in [] if done else placed:
            path.unlink()
        for aside in asides.values():
            with contextlib.suppress(FileNotFoundError):  # renamed into place, or never made
                aside.unlink()
        _remove([] if done else made)


def _make_folder(folder: Path) -> list[Path]:
    """Make `folder` 0700 and its missing parents as `mkdir -p` does; return those made.

    The folder is made 0700 in one step, whatever the umask (0700 less a umask of 0277
    was 0500, a folder its owner could not write in), so it is never seen with another
    mode. One already there, or made meanwhile by another process, is used as found.
    """
    missing = list(
        itertools.takewhile(lambda path: not os.path.lexists(path), [folder, *folder.parents])
    )
    made: list[Path] = []
    done = False
    try:
        for path in reversed(missing):
            if _make(path, FOLDER_MODE if path == folder else None):
                made.append(path)
        if not folder.is_dir():
            raise CommandError(f"cannot write {folder}: it is not a folder")
        done = True
    except OSError as error:
        raise CommandError(f"cannot write {path}: {os_reason(error)}") from None
    finally:
        _remove([] if done else made)  # also on Ctrl-C
    return made


def _make(path: Path, mode: int | None) -> bool:
    """Make the folder `path` (`mode` exactly, or as the umask has it); False if it was there."""
    # The umask is the process's: this command runs no other thread meanwhile.
    previous = None if mode is None else os.umask(0o777 & ~mode)
    try:
        path.mkdir(0o777 if mode is None else mode)
    except FileExistsError:
        return False
    finally:
        if previous is not None:
            os.umask(previous)
    return True


def _remove(folders: list[Path]) -> None:
    """Remove the folders this run made, innermost first, where nothing else was put."""
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _check_places(files: dict[Path, bytes], *, replace: bool) -> None:
    """Refuse a name already taken (a folder even with `replace`)."""
    for path in files:
        if path.is_dir() and not path.is_symlink():
            raise CommandError(f"cannot write {path}: {os.strerror(errno.EISDIR)}")
        if not replace and os.path.lexists(path):
            raise CommandError(
                f"{path} already exists: dev-token writes new files only (--force replaces them)"
            )


def _write_new(path: Path, data: bytes) -> None:
    """Write `data` to the new file `path`, mode 0600 whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "wb") as stream:
        os.fchmod(fd, FILE_MODE)
        stream.write(data)
