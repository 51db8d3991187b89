"""One replica behind a load balancer: its store workers, limits, probes, metrics and drain.

`Replica` puts them around the SDK's Streamable HTTP app: the probe and metrics routes,
the `FairShare` middleware after the token check, the background store probe in the
app's lifespan; `serve` runs uvicorn so that SIGTERM drains:

1. `/readyz` answers 503 at once, and every new MCP request 503 with `Retry-After`;
2. the tool calls in flight finish, for at most `grace_seconds`; past it, those still
   waiting on the store fail as unavailable (retry on another replica);
3. then uvicorn stops: the listener closes, open responses get SHUTDOWN_SECONDS to end,
   and the process exits with status 0. A second SIGTERM or SIGINT ends the grace at once.

The whole drain ends within `grace_seconds` + 1 s (what a pod's termination grace period
is sized on): two of uvicorn's 0.1 s ticks, SHUTDOWN_SECONDS, and the interpreter's exit,
which `serve` makes cheap by freezing the heap first.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import anyio
import prometheus_client
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from ticket_tools.serve.connections import MAX_HEADER_BYTES, GuardedServer
from ticket_tools.serve.limits import FairShare, RateLimits
from ticket_tools.serve.metrics import Metrics
from ticket_tools.serve.probes import DEFAULT_MAX_STALENESS_SECONDS, Readiness
from ticket_tools.serve.workers import StoreCalls, WorkerLimits
from ticket_tools.store import Records, TicketStore

DEFAULT_GRACE_SECONDS = 3.0
"""How long a drain waits for calls in flight: past the store deadline (2 s), so a call
that started before SIGTERM ends by itself; well inside Kubernetes' 30 s."""
SHUTDOWN_SECONDS = 0.5
"""After the drain, open responses (an SSE stream) get this long: with two 0.1 s ticks and
the exit, the drain stays within the grace plus 1 s."""


@dataclass(frozen=True)
class ReplicaOptions:
    """The store workers, rate limits, drain and metrics address of one replica."""

    workers: WorkerLimits = field(default_factory=WorkerLimits)
    """Store worker threads, each tenant's share of them, and the deadline per store call."""
    rates: RateLimits = field(default_factory=RateLimits)
    """Calls per second per tenant and per token subject."""
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    """How long SIGTERM waits for the calls in flight (`--grace`)."""
    metrics_address: tuple[str, int] | None = None
    """Serve /metrics on this HOST, PORT of its own instead of the MCP listener."""
    max_staleness_seconds: float = DEFAULT_MAX_STALENESS_SECONDS
    """Past this many seconds behind its primary, the store is not ready (`--max-staleness`)."""
    titles_cleaned: int = 0
    """Titles of `--records` the clean-text rules changed at load (`stores.text`)."""


class Replica:
    """The operational side of one HTTP server: what the load balancer and Prometheus see."""

    def __init__(
        self, store: Records | TicketStore, options: ReplicaOptions, *, tenant_claim: str
    ) -> None:
        self.options = options
        self.metrics = Metrics()
        self.metrics.titles_cleaned.inc(options.titles_cleaned)
        self.calls = StoreCalls(options.workers, on_store_error=self.metrics.store_error)
        self.readiness = Readiness(store, self.calls, max_staleness=options.max_staleness_seconds)
        self._tenant_claim = tenant_claim
        self._drain_ends: float | None = None
        self._on_shutdown: list[Callable[[], None]] = []
        self._metrics_server: Any = None  # prometheus_client's WSGI server, when it has one

    def routes(self) -> list[Route]:
        """Return the probe routes, and /metrics unless it has an address of its own."""
        routes = [
            Route("/healthz", self.readiness.healthz, methods=["GET"]),
            Route("/readyz", self.readiness.readyz, methods=["GET"]),
        ]
        if self.options.metrics_address is None:
            routes.append(Route("/metrics", self.metrics.endpoint, methods=["GET"]))
        return routes

    def install(self, app: Starlette, *, mcp_path: str, sessions: Callable[[], int]) -> None:
        """Put the rate limits after the app's token check, and the probe in its lifespan."""
        # Appended, not add_middleware (which puts it first): it must read the verified token.
        app.user_middleware.append(
            Middleware(
                FairShare,
                path=mcp_path,
                limits=self.options.rates,
                tenant_claim=self._tenant_claim,
                draining=lambda: self.readiness.draining,
                refused=self.metrics.refused,
            )
        )
        self.metrics.watch(
            in_flight=lambda: self.calls.in_flight,
            busy=lambda: self.calls.busy,
            sessions=sessions,
            ready=self.readiness.ready,
            staleness=lambda: self.readiness.staleness,
        )
        app_lifespan = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[Any]:
            async with app_lifespan(app) as state, anyio.create_task_group() as group:
                group.start_soon(self.readiness.probe_forever)
                yield state
                group.cancel_scope.cancel()
            self.calls.close()
            for stop in self._on_shutdown:
                stop()
            # The app has stopped serving; the process exits next. Tearing down the interpreter
            # frees the SDK stack's objects one by one and collects their cycles: 0.25-0.4 s
            # on an idle 2-core machine, over a second under load, after the grace. Frozen,
            # the collector skips them and the OS takes the memory back; the exit handlers
            # (the store's pool, coverage) still run.
            gc.freeze()

        app.router.lifespan_context = lifespan

    def begin_drain(self) -> None:
        """Turn /readyz to 503 and refuse new MCP requests; let the calls in flight finish."""
        self.readiness.draining = True
        self._drain_ends = time.monotonic() + self.options.grace_seconds

    def end_grace(self) -> None:
        """End the drain's grace now: calls still waiting are answered unavailable."""
        self._drain_ends = time.monotonic()

    def drained(self) -> bool:
        """Say whether the drain is over: no call in flight (those past the grace are cut off)."""
        if self._drain_ends is None:
            return False
        if time.monotonic() >= self._drain_ends:
            self.calls.cut_off()
        return self.calls.in_flight == 0

    def listen_for_metrics(self) -> None:
        """Serve /metrics on its own address, if it has one; an OSError if it cannot listen.

        Called before the server says it is serving: a port in use was a traceback after
        "serving MCP on ..." had been printed.
        """
        if self.options.metrics_address is None:
            return
        host, port = self.options.metrics_address
        self._metrics_server, _ = prometheus_client.start_http_server(
            port, host, registry=self.metrics.registry
        )
        # Stopped with the app (its lifespan's end), still inside uvicorn's run.
        self._on_shutdown.append(self._metrics_server.shutdown)
        self._on_shutdown.append(self._metrics_server.server_close)

    def serve(
        self, app: Starlette, listener: socket.socket, *, http: type[asyncio.Protocol]
    ) -> None:
        """Run `app` on `listener` until SIGTERM or SIGINT has drained it.

        `http` is uvicorn's HTTP protocol class to use (`connections.guarded_protocol`);
        /metrics on its own address is served from `listen_for_metrics` on.
        """
        config = uvicorn.Config(
            app,
            http=http,
            log_level="warning",
            access_log=False,
            # Annotated int, but handed to asyncio.wait_for, which takes any seconds.
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,  # type: ignore[arg-type]
            # Without httptools: h11's own bound on unparsed input, the header limit's size.
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        )
        if self._metrics_server is not None and self.options.metrics_address is not None:
            host = self.options.metrics_address[0]
            shown = f"[{host}]" if ":" in host else host
            print(
                f"ticket-tools: serving metrics on http://{shown}:"
                f"{self._metrics_server.server_port}/metrics",
                file=sys.stderr,
                flush=True,
            )
        _DrainingServer(config, self).run(sockets=[listener])


class _DrainingServer(GuardedServer):
    """uvicorn's server (guarded), except that the first SIGTERM or SIGINT drains first."""

    def __init__(self, config: uvicorn.Config, replica: Replica) -> None:
        super().__init__(config)
        self._replica = replica

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Take SIGINT and SIGTERM for the drain, and keep them past it.

        uvicorn puts the caller's handlers back once it has stopped (the CLI's, which end the
        command with 130 or 143); kept, a signal after the drain ends a grace already over,
        and the exit status stays 0. Off the main thread no handler can be set.
        """
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, self.handle_exit)
        yield

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin the drain on the first signal; a second one ends its grace at once."""
        # Only flags here: the next tick (on the event loop, not in a signal handler)
        # cuts off what still waits.
        if self._replica.readiness.draining:
            self._replica.end_grace()
        else:
            self._replica.begin_drain()

    async def on_tick(self, counter: int) -> bool:
        """Stop serving once the drain is over (uvicorn asks every 0.1 s)."""
        if self._replica.drained():
            self.should_exit = True
        return await super().on_tick(counter)
