"""cli.signals in this process: the first signal raises, later ones pass, a drain wakes.

The real command is signalled at each of its waits in test_cli_signals.py,
test_apply_inputs.py and test_import_inputs.py; here each rule is seen on its own.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from ticket_tools.cli import signals

# Only reached when something is broken: how long a test waits for the grace to end.
WAIT_SECONDS = 10.0


@pytest.fixture
def installed() -> Iterator[None]:
    restore = signals.install()
    try:
        yield
    finally:
        restore()


def _raise(signum: int) -> None:
    """Send `signum` to this process and give the interpreter the chance to run its handler."""
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # a handler runs at the next bytecode: within this sleep


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    ("signum", "raised"),
    [
        pytest.param(signal.SIGINT, KeyboardInterrupt, id="sigint"),
        pytest.param(signal.SIGTERM, signals.Terminated, id="sigterm"),
    ],
)
def test_the_first_signal_raises_and_later_ones_pass(
    signum: int, raised: type[BaseException]
) -> None:
    with pytest.raises(raised) as caught:
        _raise(signum)
    assert type(caught.value) is raised
    _raise(signal.SIGINT)
    _raise(signal.SIGTERM)  # nothing raised: the command is already unwinding


def test_the_previous_handlers_are_put_back() -> None:
    before = [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)]
    restore = signals.install()
    assert signal.getsignal(signal.SIGINT) is not before[0]
    restore()
    assert [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)] == before


def test_nothing_is_installed_off_the_main_thread() -> None:
    before = signal.getsignal(signal.SIGTERM)
    restores = []
    thread = threading.Thread(target=lambda: restores.append(signals.install()))
    thread.start()
    thread.join()
    restores[0]()
    thread = threading.Thread(target=signals.ignore)  # nor ignored from there
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) is before


def test_ignore_leaves_every_signal_to_the_kernel_to_drop() -> None:
    restore = signals.install()
    try:
        signals.ignore()
        handlers = [signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)]
        _raise(signal.SIGINT)
    finally:
        restore()
    assert handlers == [signal.SIG_IGN, signal.SIG_IGN]


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


@pytest.mark.usefixtures("installed")
def test_sigterm_while_draining_wakes_instead_and_a_second_one_passes() -> None:
    with signals.draining() as wake_fd:
        assert not _readable(wake_fd)
        _raise(signal.SIGTERM)
        _raise(signal.SIGTERM)
        assert (_readable(wake_fd), os.read(wake_fd, 10)) == (True, b"T")
        with pytest.raises(KeyboardInterrupt):  # Ctrl-C still ends the drain
            _raise(signal.SIGINT)


@pytest.mark.usefixtures("installed")
def test_a_batch_that_outlasts_the_grace_is_ended() -> None:
    with signals.draining(), pytest.raises(signals.Terminated), signals.finishing():  # noqa: PT012
        _raise(signal.SIGTERM)
        time.sleep(WAIT_SECONDS)  # a wait for the store that never ends by itself


@pytest.mark.usefixtures("installed")
def test_the_drains_last_batch_has_the_grace_from_its_start() -> None:
    with signals.draining(), pytest.raises(signals.Terminated):  # noqa: PT012
        _raise(signal.SIGTERM)  # between two batches: only wakes
        with signals.finishing():
            time.sleep(WAIT_SECONDS)


@pytest.mark.usefixtures("installed")
def test_a_batch_that_ends_within_the_grace_is_left_alone() -> None:
    with signals.draining() as wake_fd:
        with signals.finishing():
            _raise(signal.SIGTERM)  # 0.05 s: well within the grace
        time.sleep(signals.GRACE_SECONDS + 0.2)  # the timer was disarmed with the batch
        assert os.read(wake_fd, 10) == b"T"


@pytest.mark.usefixtures("installed")
def test_a_late_alarm_after_the_batch_changes_nothing() -> None:
    with signals.draining(), signals.finishing():
        _raise(signal.SIGTERM)
    _raise(signal.SIGALRM)  # as if the timer fired just as the batch ended
