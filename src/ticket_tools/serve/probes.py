"""`/healthz` and `/readyz`, as Kubernetes probes read them, and the drain that SIGTERM starts.

- `/healthz`: 200 while the process serves HTTP (a liveness probe: restart if it fails).
- `/readyz`: 200 while the store answered its last probe within the deadline, at most
  PROBE_FRESH_SECONDS ago, no more than `max_staleness` seconds behind its primary, and no
  drain is on; else 503 (a readiness probe: send no traffic here meanwhile). The probe runs
  in the background every PROBE_INTERVAL_SECONDS on a store worker (it reads the key of the
  empty tenant, which no ticket can have, then the store's staleness), and the endpoint only
  reads its last result, so it answers at once during a stall.

Neither needs a token; both answer a fixed JSON body that holds no tenant's data.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse

from ticket_tools.serve.workers import StoreCalls, StoreUnavailable
from ticket_tools.store import DictStore, Records, TicketStore
from ticket_tools.stores.staleness import staleness_seconds

PROBE_INTERVAL_SECONDS = 1.0
PROBE_FRESH_SECONDS = 5.0
"""A probe result older than this is no answer: the probe itself is stuck past its deadline."""
PROBE_TENANT = ""  # a key no stored ticket has: tenants are non-empty (records rules)
DEFAULT_MAX_STALENESS_SECONDS = 30.0
"""How far behind its primary the store may be and still be ready (`--max-staleness`).

PostgreSQL's own default `max_standby_streaming_delay`: the longest a standby lets replay
wait for its queries by default. A standby within its normal behaviour stays inside it; past
it the replay is stuck, paused or cut off, and a replica reading there should take no calls.
"""

logger = logging.getLogger(__name__)


class Readiness:
    """The store probe's last result, the drain flag, and the two probe endpoints."""

    def __init__(
        self,
        store: Records | TicketStore,
        calls: StoreCalls,
        *,
        max_staleness: float = DEFAULT_MAX_STALENESS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store if isinstance(store, TicketStore) else DictStore(store)
        self._calls = calls
        self._max_staleness = max_staleness
        self._clock = clock
        self._answered_at: float | None = None
        self._failing = False
        self.staleness = math.nan
        """Seconds the store was behind its primary at the last probe that answered (NaN: none)."""
        self.draining = False

    def ready(self) -> bool:
        """Say whether /readyz answers 200 now."""
        return self._why_not() is None

    def _why_not(self) -> str | None:
        if self.draining:
            return "draining"
        last = self._answered_at
        if self._failing or last is None or self._clock() - last > PROBE_FRESH_SECONDS:
            return "store unavailable"
        return "store stale" if self._stale() else None

    def _stale(self) -> bool:
        return self.staleness > self._max_staleness

    def _ask(self) -> float:
        self._store.get(PROBE_TENANT, PROBE_TENANT)
        return staleness_seconds(self._store)

    async def probe(self) -> None:
        """Ask the store once, within the deadline; remember whether it answered, and its lag."""
        try:
            staleness = await self._calls.run(None, self._ask)
        except Exception as error:
            if not self._failing:
                reason = error.reason if isinstance(error, StoreUnavailable) else "error"
                logger.warning("the store did not answer its readiness probe (%s)", reason)
            self._failing = True
            return
        if self._failing:
            logger.warning("the store answers its readiness probe again")
        self._failing = False
        self._answered_at = self._clock()
        was_stale = self._stale()
        self.staleness = staleness
        if self._stale() != was_stale:
            logger.warning(
                "the store is within --max-staleness of its primary again"
                if was_stale
                else "the store is behind its primary past --max-staleness"
            )

    async def probe_forever(self) -> None:
        """Probe the store every PROBE_INTERVAL_SECONDS until cancelled."""
        while True:
            await self.probe()
            await anyio.sleep(PROBE_INTERVAL_SECONDS)

    async def healthz(self, request: Request) -> JSONResponse:
        """Answer 200: the process serves."""
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        """Answer 200 when ready, else 503 saying which of a drain, the store or its lag is why."""
        why_not = self._why_not()
        if why_not is None:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": why_not}, status_code=503)
