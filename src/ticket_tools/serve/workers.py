"""Store calls off the event loop: worker threads, a fair share per tenant, a deadline per call.

A store call (PostgreSQL, SQLite, a large dict) blocks the thread that makes it, so it
runs on a worker thread and the event loop keeps answering everything that needs no
store (`tools/list`, an unknown tool, invalid arguments, forbidden) at once. The
workers are bounded (one per store connection), and one tenant may hold at most
`tenant_calls` of them, so a tenant whose calls are slow waits behind its own calls,
not anyone else's.

A call that has no answer within the deadline (waiting for a worker included) fails
as `StoreUnavailable`. A thread cannot be killed: an overrunning one keeps its worker
(and its tenant's share) until the store answers, so a stalled store holds at most
`workers` threads, and calls beyond them wait for a worker, then fail at their own
deadline. A store whose own timeouts agree with the deadline (PostgreSQL's
statement_timeout and pool timeout, as `serve http` opens it) frees them soon after.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import Literal, NoReturn, TypeVar

import anyio

from ticket_tools.stores.failure import FailureReason, StoreFailure

T = TypeVar("T")

DEFAULT_STORE_TIMEOUT = 2.0
"""Seconds a store call may take, waiting for a worker included: well past a page's few
milliseconds, well under the time a host waits before giving up on a tool."""
DEFAULT_WORKERS = 4  # PostgresStore's own default pool size: one worker per connection
DEFAULT_TENANT_CALLS = 2  # half the default workers: another tenant always finds two free

RETRYABLE: tuple[FailureReason, ...] = ("locked", "unavailable")
"""Store failures that end by themselves (a lock released, a server back): retry later.
The others ("missing", "schema", "privileged") need an operator: they stay internal errors."""

UnavailableReason = Literal["timeout", "locked", "unavailable", "draining"]
"""Why a call was not answered: its deadline passed, the store failed in a way that ends
by itself, or the server is draining and its grace period ran out."""


class StoreUnavailable(Exception):  # noqa: N818 - it names the condition the client is told
    """The store did not answer this call in time, or cannot now: the call may be retried."""

    def __init__(self, reason: UnavailableReason) -> None:
        super().__init__(reason)
        self.reason: UnavailableReason = reason


@dataclass(frozen=True)
class WorkerLimits:
    """How many store calls run at once, for how long, and how many per tenant."""

    workers: int = DEFAULT_WORKERS
    """Worker threads for store calls: the store's connections (`--store-connections`)."""
    tenant_calls: int = DEFAULT_TENANT_CALLS
    """Of those, how many one tenant may hold at once; its further calls wait their turn."""
    timeout: float | None = DEFAULT_STORE_TIMEOUT
    """Seconds a store call may take, waiting included; None: no deadline (stdio)."""

    def __post_init__(self) -> None:
        for name in ("workers", "tenant_calls"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1")
        if self.timeout is not None and not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")


def _ignore(reason: str) -> None:
    """Count nothing: the readiness probe's failures show in /readyz instead."""


class StoreCalls:
    """Run store calls on bounded worker threads, a share per tenant, each within the deadline."""

    def __init__(
        self,
        limits: WorkerLimits,
        *,
        on_store_error: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.limits = limits
        self._workers = anyio.CapacityLimiter(limits.workers)
        self._tenants: dict[str, anyio.CapacityLimiter] = {}
        # Not anyio.to_thread: when a wait for it is cancelled it gives its limiter back
        # at once, although the thread still runs, so it cannot bound overrunning threads.
        # Not a ThreadPoolExecutor: its threads are joined at exit, so a thread stuck on a
        # stalled store would hold the exit after a drain.
        # One thread more than the workers: the readiness probe's, so that a probe waiting
        # on a stalled store never takes a tenant's worker (it still waits for a connection).
        self._probe = anyio.CapacityLimiter(1)
        self._pool = _DaemonPool(limits.workers + 1)
        self._on_store_error = on_store_error
        self._cancels: set[anyio.CancelScope] = set()
        self._cut_off = False
        self.in_flight = 0
        """Tenants' calls inside `run` now: waiting for a worker or on one."""

    @property
    def busy(self) -> int:
        """Return how many workers are held now, overrunning threads included."""
        return int(self._workers.borrowed_tokens)

    async def run(self, tenant: str | None, work: Callable[[], T]) -> T:
        """Run `work` on a worker thread as one of `tenant`'s calls (None: the server's own).

        Raises StoreUnavailable past the deadline, for a retryable StoreFailure, and
        after `cut_off`; any other exception from `work` propagates.
        """
        if self._cut_off:
            raise StoreUnavailable("draining")
        counted = tenant is not None  # a tenant's call, not the readiness probe
        report = self._on_store_error if counted else _ignore
        self.in_flight += counted
        try:
            with self._cancellable():
                with anyio.fail_after(self.limits.timeout):
                    return await self._call(tenant, work)
            raise StoreUnavailable("draining")  # reached only when `cut_off` cancelled it
        except TimeoutError:
            report("timeout")
            raise StoreUnavailable("timeout") from None
        except StoreFailure as error:
            report(error.reason)
            if error.reason in RETRYABLE:
                raise StoreUnavailable("unavailable") from None
            raise
        finally:
            self.in_flight -= counted

    def close(self) -> None:
        """Let the worker threads end once their calls do (they never outlive the store's)."""
        self._pool.close()

    def cut_off(self) -> None:
        """Fail every call still waiting, and every later one, as unavailable (end of a drain)."""
        self._cut_off = True
        for scope in list(self._cancels):
            scope.cancel()

    @contextmanager
    def _cancellable(self) -> Iterator[None]:
        with anyio.CancelScope() as scope:
            self._cancels.add(scope)
            try:
                yield
            finally:
                self._cancels.discard(scope)

    async def _call(self, tenant: str | None, work: Callable[[], T]) -> T:
        borrower = object()
        share = self._share(tenant)
        held: list[anyio.CapacityLimiter] = []
        loop = asyncio.get_running_loop()
        done = anyio.Event()

        def release() -> None:
            for limiter in held:
                limiter.release_on_behalf_of(borrower)
            if tenant is not None and share is not None:
                self._forget_idle(tenant, share)

        def answered() -> None:
            release()
            done.set()

        answer: list[Callable[[], T]] = []

        def in_thread() -> None:
            try:
                value = work()
                answer.append(lambda: value)
            except Exception as error:  # raised again in the caller's task
                answer.append(partial(_raise, error))
            finally:
                # The slots go back when the store answers, not when the caller stops
                # waiting: an overrunning thread still holds its store connection.
                with suppress(RuntimeError):  # the loop closed: nothing waits any more
                    loop.call_soon_threadsafe(answered)

        try:
            for limiter in (self._probe,) if share is None else (share, self._workers):
                await limiter.acquire_on_behalf_of(borrower)
                held.append(limiter)
        except BaseException:
            release()
            raise
        # Submitted with no await in between: once the slots are held, the work runs and
        # gives them back, whatever happens to this task. A held worker means an idle
        # thread (or one about to be), so the pool never queues behind a stalled call.
        self._pool.submit(in_thread)
        await done.wait()
        return answer[0]()

    def _forget_idle(self, tenant: str, share: anyio.CapacityLimiter) -> None:
        # A tenant's limiter lives while it has calls: the map never grows with past tenants.
        idle = share.borrowed_tokens == 0 and share.statistics().tasks_waiting == 0
        if idle and self._tenants.get(tenant) is share:
            del self._tenants[tenant]

    def _share(self, tenant: str | None) -> anyio.CapacityLimiter | None:
        if tenant is None:
            return None
        share = self._tenants.get(tenant)
        if share is None:
            share = self._tenants[tenant] = anyio.CapacityLimiter(self.limits.tenant_calls)
        return share


def _raise(error: Exception) -> NoReturn:
    raise error


class _DaemonPool:
    """At most `size` daemon threads running submitted jobs; the process never waits for them."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._pending = 0

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on an idle thread, or a new one while fewer than `size` run."""
        with self._lock:
            self._pending += 1
            start = self._pending > self._idle and self._threads < self._size
            self._threads += start
        if start:
            threading.Thread(target=self._serve, name="ticket-tools-store", daemon=True).start()
        self._jobs.put(job)

    def close(self) -> None:
        """Let every thread end once it is idle."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(None)

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
                self._pending -= 1
            if job is None:
                return
            job()
