"""Every process the run starts, a hard time budget, and cleanup whatever happens.

`Supervisor` is a context manager. Inside it, SIGINT, SIGTERM and SIGHUP raise
`Interrupted`, and so does the budget running out (a SIGALRM timer); leaving the block
by any path stops every process it started (SIGTERM to the process group, then SIGKILL),
runs the registered cleanups (the PostgreSQL cluster's stop) newest first, and removes its
temporary folder. If that cleanup itself hangs, a watchdog thread kills every process
group and every adopted pid HARD_GRACE_SECONDS after the budget and exits the process.
(SIGKILL of the harness itself cannot be caught; nothing can clean up after that.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType

STOP_GRACE_SECONDS = 5.0  # from SIGTERM to SIGKILL
HARD_GRACE_SECONDS = 60.0  # from the budget to the watchdog's kill
HARD_EXIT_STATUS = 124  # what timeout(1) exits with
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(message: str) -> None:
    """Print a progress line of the run on stderr."""
    print(f"load: {message}", file=sys.stderr, flush=True)


class Interrupted(BaseException):
    """A signal or the end of the time budget: stop now, clean up, report what was measured.

    A BaseException, so that no `except Exception` in a client swallows it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Supervisor:
    """Own the run's processes, folder and deadline."""

    def __init__(self, budget_seconds: float, *, prefix: str = "ticket-load-") -> None:
        self.budget_seconds = budget_seconds
        self.deadline = time.monotonic() + budget_seconds
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        self._processes: list[subprocess.Popen[bytes]] = []
        self._adopted: list[int] = []
        self._cleanups: list[Callable[[], object]] = []
        self._previous: dict[int, object] = {}
        self._watchdog = threading.Timer(budget_seconds + HARD_GRACE_SECONDS, self._hard_stop)
        self._watchdog.daemon = True
        self.started_pids: list[int] = []
        """Every pid started or adopted, for the leftover check after cleanup."""
        self.stop_reason: str | None = None
        """Why the run was asked to stop, once it was."""
        self._hook: Callable[[], object] | None = None

    def __enter__(self) -> Supervisor:
        for number in (*SIGNALS, signal.SIGALRM):
            self._previous[int(number)] = signal.signal(number, self._on_signal)
        signal.setitimer(signal.ITIMER_REAL, self.budget_seconds)
        self._watchdog.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for number in SIGNALS:
            signal.signal(number, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup
        try:
            self.cleanup()
        finally:
            self._watchdog.cancel()
            for restored, handler in self._previous.items():
                signal.signal(restored, handler)  # type: ignore[arg-type]

    def remaining(self) -> float:
        """Return the seconds left in the budget."""
        return self.deadline - time.monotonic()

    def start(
        self,
        args: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a process in its own process group, stderr and stdout to `log`."""
        with log.open("ab") as out:
            process = subprocess.Popen(  # noqa: S603 - the run's own commands
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=None if env is None else dict(env),
                start_new_session=True,
            )
        self._processes.append(process)
        self.started_pids.append(process.pid)
        return process

    def adopt(self, pid: int) -> None:
        """Watch a process this run caused but did not start (a daemonised server)."""
        self._adopted.append(pid)
        self.started_pids.append(pid)

    def on_cleanup(self, cleanup: Callable[[], object]) -> None:
        """Run `cleanup` when the block is left (newest first); its failure is ignored."""
        self._cleanups.append(cleanup)

    def stop(self, process: subprocess.Popen[bytes], *, kill: bool = False) -> None:
        """Stop a started process and its group: SIGTERM then SIGKILL, or SIGKILL at once."""
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # anything the process left in its group

    def cleanup(self) -> None:
        """Stop every process, run the cleanups, remove the folder."""
        for process in reversed(self._processes):
            self.stop(process)
        while self._cleanups:
            cleanup = self._cleanups.pop()
            with contextlib.suppress(Exception):
                cleanup()
        for pid in self._adopted:
            _kill_tree(pid)
        shutil.rmtree(self.folder, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Return the pids started or adopted by this run that are still alive."""
        return [pid for pid in self.started_pids if alive(pid)]

    def interrupt_with(self, hook: Callable[[], object] | None) -> None:
        """While `hook` is set, a stop request calls it instead of raising; `check` raises later.

        An exception raised from a signal handler lands in whatever an event loop runs at
        that moment; inside async code the hook cancels the work cleanly instead.
        """
        self._hook = hook

    def check(self) -> None:
        """Raise Interrupted if a stop was requested while the hook was set."""
        if self.stop_reason is not None:
            raise Interrupted(self.stop_reason)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        if number == signal.SIGALRM:
            reason = f"the time budget of {self.budget_seconds:.0f} s ran out"
        else:
            reason = f"stopped by {signal.Signals(number).name}"
        self.stop_reason = reason
        if self._hook is not None:
            self._hook()
            return
        raise Interrupted(reason)

    def _hard_stop(self) -> None:
        for process in self._processes:
            _signal_group(process.pid, signal.SIGKILL)
        for pid in self._adopted:
            _kill_tree(pid)
        shutil.rmtree(self.folder, ignore_errors=True)
        os._exit(HARD_EXIT_STATUS)


def _signal_group(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, number)


def _kill_tree(pid: int) -> None:
    """SIGKILL `pid` and its children (a server's workers), if still there."""
    for victim in [pid, *children(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)


def _stat_fields(pid: int) -> list[str] | None:
    """Return the fields of /proc/PID/stat after the command name, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def alive(pid: int) -> bool:
    """Return whether `pid` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """Return the user+system CPU seconds `pid` has used (0.0 if it is gone).

    With `reaped`, add those of its children that have exited and been waited for (a
    server's finished workers).
    """
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14), in ticks.
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def rss_kib(pid: int) -> int | None:
    """Return the resident set size of `pid` in KiB, or None if it is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def children(pid: int) -> list[int]:
    """Return the pids whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None and fields[1] == str(pid):
                found.append(int(entry.name))
    return found


def machine_cpu() -> tuple[float, float]:
    """Return the machine's (busy, total) CPU seconds since boot, over all cores."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in first]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / CLK_TCK, sum(ticks) / CLK_TCK
