"""A command that leaves a daemon thread behind ends without the interpreter's teardown.

The teardown frees the thread states, and a daemon thread waking during it (a store call's
busy wait or a read returning) could end `serve` with SIGSEGV instead of its status
(`cli/entry.py`). The exit handlers run either way; without such a thread the exit is
Python's own.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading

import pytest

from ticket_tools.cli import entry, main

# Runs `ticket-tools acceptance` as the console script would, with an exit handler and an
# object freed only by the teardown, each saying so, and a daemon thread asleep if asked.
PROBE = """
import atexit, os, sys, threading, time
from ticket_tools.cli import main
class FreedByTheTeardown:
    def __del__(self, write=os.write):
        write(2, b"teardown\\n")
freed = FreedByTheTeardown()
atexit.register(lambda: print("exit handlers", file=sys.stderr, flush=True))
if sys.argv[1] == "daemon":
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
sys.argv = ["ticket-tools", "acceptance"]
sys.exit(main())
"""


@pytest.mark.parametrize(
    ("threads", "stderr"),
    [("daemon", "exit handlers\n"), ("none", "exit handlers\nteardown\n")],
    ids=["daemon", "none"],
)
def test_the_exit_handlers_run_and_the_teardown_only_without_a_daemon_thread(
    threads: str, stderr: str
) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, threads],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    lines = completed.stdout.splitlines()
    # The whole output, flushed to the pipe before the exit; the status is the command's.
    assert (completed.returncode, completed.stderr, len(lines), lines[-1]) == (
        0,
        stderr,
        14,
        "13 passed, 0 failed",
    )


def test_a_command_run_in_process_returns_with_a_daemon_thread_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # With argv given (a caller in the same process), main returns: the caller owns the exit.
    event = threading.Event()
    thread = threading.Thread(target=event.wait, daemon=True)
    thread.start()
    try:
        assert main(["acceptance"]) == 0
    finally:
        event.set()
        thread.join()
    assert capsys.readouterr().out.splitlines()[-1] == "13 passed, 0 failed"


def test_the_exit_flushes_runs_the_handlers_flushes_again_then_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In process (what the subprocess test does after coverage has saved is not measured):
    # the steps in order, with the handlers' own output flushed before the exit.
    steps: list[object] = []

    class Stream:
        def __init__(self, name: str) -> None:
            self.name = name

        def flush(self) -> None:
            steps.append(f"flush {self.name}")

    def exit_now(status: int) -> None:
        steps.append(("exit", status))
        raise SystemExit(status)  # as os._exit would, the call never returns

    monkeypatch.setattr(sys, "stdout", Stream("stdout"))
    monkeypatch.setattr(sys, "stderr", Stream("stderr"))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: steps.append("handlers"))
    monkeypatch.setattr(os, "_exit", exit_now)
    with pytest.raises(SystemExit):
        entry._exit_now(143)
    flushes = ["flush stdout", "flush stderr"]
    assert steps == [*flushes, "handlers", *flushes, ("exit", 143)]
