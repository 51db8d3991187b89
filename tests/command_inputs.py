"""The real command, held at each kind of wait so a test can signal it there.

Shared by the input walks of the command line (tests/cli/test_apply_inputs.py,
test_import_inputs.py, test_cli_signals.py): each runs `ticket-tools` as a subprocess,
since signals, closed descriptors and FIFOs only mean something to a real process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

import psycopg

# Only reached when something is broken: how long a test waits for the process or a state.
WAIT_SECONDS = 60.0
# Both ways the command is started: `python -m ticket_tools`, and the installed script.
ENTRY_POINTS = {
    "module": [sys.executable, "-m", "ticket_tools"],
    "script": [str(Path(sys.executable).with_name("ticket-tools"))],
}
COMMAND = ENTRY_POINTS["module"]
# A module the command line imports after its handlers are installed and the package
# before them does not (nor the interpreter, nor coverage's start-up).
SHADOWED_MODULE = "argparse"
# A module the brief's package imports (store.py) and the interpreter, coverage's start-up
# and the installed script's first module (`ticket_tools_start`) do not: held there, the
# script is in the package's import, before `main` (test_cli_signals.py checks this).
PACKAGE_MODULE = "heapq"

Signals = tuple[int, ...]
"""Signals sent one after the other, 1 ms apart: `(SIGINT,)`, `(SIGINT, SIGINT)`."""


@dataclass(frozen=True)
class Ended:
    """How a process ended: its status (negative: killed by that signal), stdout, stderr."""

    status: int
    out: str
    err: str


def send(process: subprocess.Popen[bytes], signals: Signals) -> None:
    """Send each signal, 1 ms apart (two Ctrl-C in a row)."""
    for number, signum in enumerate(signals):
        if number:
            time.sleep(0.001)
        process.send_signal(signum)


def ended(process: subprocess.Popen[bytes], err: str | None = None) -> Ended:
    """Wait for the exit, stdin left as it is (open: no end of the feed races a signal).

    `err`: stderr as read elsewhere (a terminal's), when it is not a pipe.
    """
    process.wait(timeout=WAIT_SECONDS)
    out_data = process.stdout.read() if process.stdout is not None else b""
    err_data = process.stderr.read() if process.stderr is not None else b""
    return Ended(process.returncode, out_data.decode(), err_data.decode() if err is None else err)


def at_eof(process: subprocess.Popen[bytes]) -> Ended:
    """Close the process's stdin (the end of its input), then wait for its exit."""
    stdin_of(process).close()
    return ended(process)


def wait_until(condition: Callable[[], bool]) -> None:
    """Poll `condition` until it holds; fail the test if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def blocked_in_open(pid: int) -> None:
    """Wait until a command opening a FIFO no writer has opened sleeps there.

    Nothing else it does before sleeps (its files are read from the page cache), so its
    first sleep (state S, seen twice) is that open.
    """

    def state() -> str:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]

    def asleep() -> bool:
        if state() != "S":
            return False
        time.sleep(0.01)
        return state() == "S"

    wait_until(asleep)


# The stand-in: its import waits reading a FIFO that is never written (an import that hangs).
# It waits in slices, as the command's own waits do (cli/lines.py): a signal that lands
# after the open and before a single blocking read would interrupt nothing, and its
# handler would run only when the read returned (at the block's end, after the test).
_HELD_MODULE = """import os, select
held = os.open(__file__.removesuffix(".py") + ".fifo", os.O_RDONLY)
while not select.select([held], [], [], 0.1)[0]:
    pass
raise ImportError("held in its import, then let go")
"""


@contextlib.contextmanager
def held_in_imports(folder: Path, module: str = SHADOWED_MODULE) -> Iterator[Callable[[], None]]:
    """Hold a command started with `shadowing_env(folder)` in its imports; yield the wait.

    `module` is a stand-in in `folder` whose import opens a FIFO and waits on it (this end
    is held open, silent). The yielded function returns once the command is there; the
    FIFO is closed at the block's end.
    """
    (folder / f"{module}.py").write_text(_HELD_MODULE)
    fifo = folder / f"{module}.fifo"
    os.mkfifo(fifo)
    writer: list[int] = []

    def reached() -> bool:
        try:
            # Succeeds once a reader is in open(): the import (it then blocks in read()).
            writer.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return False
        return True

    try:
        yield lambda: wait_until(reached)
    finally:
        for fd in writer:
            os.close(fd)


def shadowing_env(folder: Path) -> dict[str, str]:
    """The environment of a command whose SHADOWED_MODULE import is `held_in_imports`."""
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def subcommands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    """Return every runnable command the parser holds, as `serve stdio`."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += subcommands(child, (*prefix, name))
    return found or [" ".join(prefix)]


class Terminal:
    """A pseudo-terminal for a command's stderr: what it says only to a person is read here."""

    def __init__(self) -> None:
        self.controller, self.side = pty.openpty()
        self.text = ""

    def started(self) -> None:
        """Close this process's copy of the command's side (call after Popen)."""
        os.close(self.side)

    def read_until(self, text: str) -> None:
        """Read until `text` has been written; fail the test if it never is."""
        deadline = time.monotonic() + WAIT_SECONDS
        while text not in self.text.replace("\r\n", "\n"):
            assert time.monotonic() < deadline, f"never written: {text!r} in {self.text!r}"
            self._read(deadline - time.monotonic())

    def rest(self) -> str:
        """Read to the end (the command has exited); return all it wrote, lines ending in \\n."""
        with contextlib.suppress(OSError):  # EIO: the other side is closed
            while self._read(0.5):
                pass
        os.close(self.controller)
        return self.text.replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.controller], [], [], max(0.0, timeout))
        if not ready:
            return False
        data = os.read(self.controller, 1 << 16)
        self.text += data.decode()
        return bool(data)


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, Callable[[], None]]]:
    """A TCP listener on 127.0.0.1 that takes connections and never answers: a hung server.

    Yields its `host=... port=...` DSN part and the wait for a client's connection.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def connected() -> None:
        listener.settimeout(WAIT_SECONDS)
        accepted.append(listener.accept()[0])

    try:
        yield f"host=127.0.0.1 port={listener.getsockname()[1]}", connected
    finally:
        for connection in accepted:
            connection.close()
        listener.close()


_started: list[subprocess.Popen[bytes]] = []


def reap() -> None:
    """Kill what a failed test left running, and close its pipes (an autouse fixture's end)."""
    for process in _started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT_SECONDS)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    _started.clear()


def start(
    args: Sequence[str],
    *,
    command: Sequence[str] = COMMAND,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] | None = subprocess.PIPE,
    stderr: int | IO[bytes] | None = subprocess.PIPE,
    env: dict[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `ticket-tools ARGS`; `reap` ends it if the test does not."""
    process = subprocess.Popen(
        [*command, *args],
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        pass_fds=pass_fds,
        preexec_fn=preexec_fn,  # noqa: PLW1509 - a limit or umask, no threads meanwhile
    )
    _started.append(process)
    return process


def closing(*fds: int) -> Callable[[], None]:
    """Return a preexec_fn closing `fds` in the child: `<&-`, `>&-`, `2>&-`."""

    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


def stdin_of(process: subprocess.Popen[bytes]) -> IO[bytes]:
    """Return the pipe to a process's stdin."""
    return cast(IO[bytes], process.stdin)


SIGNALS = {
    "int": (signal.SIGINT,),
    "term": (signal.SIGTERM,),
    "int-int": (signal.SIGINT, signal.SIGINT),
    "term-term": (signal.SIGTERM, signal.SIGTERM),
    "term-int": (signal.SIGTERM, signal.SIGINT),
}
"""The signal sequences a wait is tried with, by test id."""

INTERRUPTED = "ticket-tools: interrupted\n"
TERMINATED = "ticket-tools: terminated (SIGTERM)\n"


def outcomes(signals: str, out: str = "") -> tuple[Ended, ...]:
    """Return how a command that nothing drains may end after the signals `signals` names.

    The first one decides; the later ones change nothing. Of two different ones sent 1 ms
    apart, which one the interpreter handles first depends on whether the process ran in
    between (when both are pending, SIGINT's handler runs first): either is right.
    """
    ends = {
        signal.SIGINT: Ended(130, out, INTERRUPTED),
        signal.SIGTERM: Ended(143, out, TERMINATED),
    }
    sent = SIGNALS[signals]
    return tuple(dict.fromkeys(ends[signum] for signum in sent))


def lock_waiters(dsn: str) -> int:
    """Return how many sessions wait for an advisory lock (a writers' lock) on `dsn`."""
    with psycopg.connect(dsn) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return int(row[0]) if row else 0
