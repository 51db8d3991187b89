"""Work beside the victim in a process of its own: another tenant's flood, the machine's lag."""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from load.bad_day.report import Figures
from load.bad_day.rpc import CLIENT_TIMEOUT_SECONDS, running
from load.stats import ms
from load.supervise import SIGNALS

LAG_SLEEP_SECONDS = 0.005

T = TypeVar("T")


@contextmanager
def elsewhere(
    jobs: Sequence[Callable[[threading.Event], object]], collect: Callable[[], T]
) -> Iterator[list[T]]:
    """Run the jobs on threads of a forked process until the block ends; yield [collect()].

    Another tenant's flood runs in a process of its own: beside the victim's clients, its
    threads would make them wait for this process's GIL (5 ms a switch), a delay that is
    the load generator's, not the server's.
    """
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)

    def child() -> None:
        for number in SIGNALS:  # the supervisor's handlers are the parent's
            signal.signal(number, signal.SIG_DFL)
        with running(jobs):
            stop.wait()
        sender.send(collect())

    process = context.Process(target=child, daemon=True)
    process.start()
    got: list[T] = []
    try:
        yield got
    finally:
        stop.set()
        if receiver.poll(CLIENT_TIMEOUT_SECONDS):
            got.append(receiver.recv())
        process.join(timeout=CLIENT_TIMEOUT_SECONDS)
        if process.is_alive():
            process.kill()
        if not got:
            raise RuntimeError("the load process beside the victim sent no figures")


def lagging() -> contextlib.AbstractContextManager[list[Figures]]:
    """Measure the machine's scheduling delay (`Lag`) in a process of its own meanwhile."""
    lag = Lag()
    return elsewhere([lag.run], lag.figures)


class Lag:
    """How late a process that only sleeps LAG_SLEEP_SECONDS at a time wakes: the machine's
    scheduling delay, the floor under any latency measured beside it."""

    def __init__(self) -> None:
        self.late: list[float] = []

    def run(self, stop: threading.Event) -> None:
        """Sleep and measure the oversleep until stopped."""
        while not stop.is_set():
            started = time.perf_counter()
            time.sleep(LAG_SLEEP_SECONDS)
            self.late.append(time.perf_counter() - started - LAG_SLEEP_SECONDS)

    def figures(self) -> Figures:
        """Return the oversleep's p50, p99 and max in milliseconds."""
        late = self.late
        return {"p50": ms(late, 50), "p99": ms(late, 99), "max": ms(late, 100)}
