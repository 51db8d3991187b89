"""The bad day's parts 3 and 5: the store stalled (table locked, database stopped), and
SIGTERM while a call waits on a locked table."""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from load.bad_day.day import (
    GET,
    IDLE_BASELINE_SECONDS,
    NO_STORE,
    PROFILE_VARIABLE,
    RECOVERY_WAIT_SECONDS,
    SIGTERM_ROUNDS,
    SIGTERM_STORE_TIMEOUT,
    STALL_SECONDS,
    Day,
    Server,
)
from load.bad_day.elsewhere import lagging
from load.bad_day.report import Figures
from load.bad_day.rpc import (
    CLIENT_TIMEOUT_SECONDS,
    Client,
    Loop,
    answer_code,
    codes,
    round_robin,
    running,
    summary,
    until_status,
)


def stall(day: Day, server: Server, kind: str) -> None:
    """Calls that need no store, store calls and /readyz while the store stalls."""
    token = day.token("q", f"stall-{kind}")
    idle = [Loop(Client(server.url, token), message) for _, message in NO_STORE]
    round_robin(idle, IDLE_BASELINE_SECONDS)
    no_store = [Loop(Client(server.url, token), message) for _, message in NO_STORE]
    getters = [Loop(Client(server.url, token), GET) for _ in range(2)]
    flips: list[float] = []
    with running([loop.run for loop in getters]):
        time.sleep(0.5)  # both getters answered from the store, before the stall
        profiler = _profile(day, server, f"stall-{kind}")
        with _stalled(day, kind) as began:

            def watch() -> None:
                if until_status(server.base, 503, STALL_SECONDS) is not None:
                    flips.append(time.perf_counter() - began[0])

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            with lagging() as lagged:
                round_robin(no_store, STALL_SECONDS - (time.perf_counter() - began[0]))
            watcher.join()
            stall_ended = time.perf_counter()
        back = until_status(server.base, 200, RECOVERY_WAIT_SECONDS)
        if profiler is not None:
            profiler.wait(timeout=CLIENT_TIMEOUT_SECONDS)
    during = [
        (sent, seconds, code)
        for loop in getters
        for sent, seconds, code in loop.answers
        if sent >= began[0] and sent + seconds <= stall_ended
    ]
    failed = [seconds for _, seconds, code in during if code == "unavailable"]
    idle_times = [t for loop in idle for t in loop.times]
    stalled_times = [t for loop in no_store for t in loop.times]
    figures: Figures = {
        "seconds": round(stall_ended - began[0], 1),
        "no_store_idle": summary(idle_times, IDLE_BASELINE_SECONDS),
        "no_store_stalled": summary(stalled_times, STALL_SECONDS),
        "machine_lag_ms": lagged[0],
        "no_store_by_call": {
            label: summary(loop.times, STALL_SECONDS)
            for (label, _), loop in zip(NO_STORE, no_store, strict=True)
        },
        "no_store_codes": codes(idle + no_store),
        "store_calls_failed": len(failed),
        "store_fail_median_s": None if not failed else round(statistics.median(failed), 2),
        "store_fail_max_s": None if not failed else round(max(failed), 2),
        "store_codes": dict(sorted(Counter(code for _, _, code in during).items())),
        "getter_codes": codes(getters),
        "readyz_503_after_s": None if not flips else round(flips[0], 2),
        "readyz_200_after_s": None if back is None else round(back, 2),
    }
    day.figures[f"stall_{kind}"] = figures


def _profile(day: Day, server: Server, name: str) -> subprocess.Popen[bytes] | None:
    """With PROFILE_VARIABLE set, sample the replica with py-spy for the stall's length."""
    folder = os.environ.get(PROFILE_VARIABLE)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not folder or not Path(spy).is_file():
        return None
    Path(folder).mkdir(parents=True, exist_ok=True)
    output = Path(folder).resolve() / f"{name}.txt"
    command = [spy, "record", "--pid", str(server.process.pid), "--duration"]
    command += [str(int(STALL_SECONDS)), "--rate", "200", "--format", "raw", "--threads"]
    command += ["--nonblocking", "--output", str(output)]
    day.say(f"profiling the replica into {output}")
    return day.supervisor.start(command, log=day.supervisor.folder / f"{name}.py-spy.log")


@contextmanager
def _stalled(day: Day, kind: str) -> Iterator[list[float]]:
    """Lock the table or stop the cluster; yield [when it began]; undo it at the end."""
    if kind == "lock":
        with psycopg.connect(day.superuser) as lock:
            lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
            try:
                yield [time.perf_counter()]
            finally:
                lock.rollback()
        return
    day.cluster.stop()
    try:
        yield [time.perf_counter()]
    finally:
        day.cluster.start()


# --- 5: SIGTERM during a stall ----------------------------------------------------------


def sigterm(day: Day) -> None:
    """SIGTERM with one call waiting on a locked table: exit time and status, the answer."""
    rounds = [_sigterm_round(day, number) for number in range(SIGTERM_ROUNDS)]
    exits = [float(r["exit_s"]) for r in rounds]
    day.figures["sigterm"] = {
        "rounds": rounds,
        "exit_median_s": statistics.median(exits),
        "exit_max_s": max(exits),
    }


def _sigterm_round(day: Day, number: int) -> Figures:
    server = day.server(
        f"sigterm-{number}", "--stateless", "--store-timeout", SIGTERM_STORE_TIMEOUT
    )
    client = Client(server.url, day.token("q", f"drain-{number}"))
    one: list[tuple[int, bytes]] = []

    def wait_on_the_lock() -> None:
        status, body, _, _ = client.post(GET)
        one.append((status, body))

    try:
        with psycopg.connect(day.superuser) as lock:
            lock.execute("LOCK TABLE tickets IN ACCESS EXCLUSIVE MODE")
            thread = threading.Thread(target=wait_on_the_lock, daemon=True)
            thread.start()
            time.sleep(0.5)  # the call waits on the lock
            started = time.perf_counter()
            server.process.send_signal(signal.SIGTERM)
            status = server.process.wait(timeout=CLIENT_TIMEOUT_SECONDS)
            exited = time.perf_counter() - started
            thread.join(timeout=CLIENT_TIMEOUT_SECONDS)
            lock.rollback()
    finally:
        server.stop()
    answer = answer_code(*one[0]) if one else "no answer"
    return {"exit_s": round(exited, 2), "status": status, "answer": answer}
