"""`/healthz` and `/readyz`, as Kubernetes probes read them, and the drain that SIGTERM starts.

- `/healthz`: 200 while the process serves HTTP (a liveness probe: restart if it fails).
- `/readyz`: 200 while the store answered its last probe within the deadline, at most
  PROBE_FRESH_SECONDS ago, and no drain is on; else 503 (a readiness probe: send no
  traffic here meanwhile). The probe runs in the background every PROBE_INTERVAL_SECONDS
  on a store worker (it reads the key of the empty tenant, which no ticket can have), and
  the endpoint only reads its last result, so it answers at once during a stall.

Neither needs a token; both answer a fixed JSON body that holds no tenant's data.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse

from ticket_tools.serve.workers import StoreCalls, StoreUnavailable
from ticket_tools.store import DictStore, Records, TicketStore

PROBE_INTERVAL_SECONDS = 1.0
PROBE_FRESH_SECONDS = 5.0
"""A probe result older than this is no answer: the probe itself is stuck past its deadline."""
PROBE_TENANT = ""  # a key no stored ticket has: tenants are non-empty (records rules)

logger = logging.getLogger(__name__)


class Readiness:
    """The store probe's last result, the drain flag, and the two probe endpoints."""

    def __init__(
        self,
        store: Records | TicketStore,
        calls: StoreCalls,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store if isinstance(store, TicketStore) else DictStore(store)
        self._calls = calls
        self._clock = clock
        self._answered_at: float | None = None
        self._failing = False
        self.draining = False

    def ready(self) -> bool:
        """Say whether /readyz answers 200 now."""
        last = self._answered_at
        fresh = last is not None and self._clock() - last <= PROBE_FRESH_SECONDS
        return fresh and not self._failing and not self.draining

    async def probe(self) -> None:
        """Ask the store once, within the deadline; remember whether it answered."""
        try:
            await self._calls.run(None, lambda: self._store.get(PROBE_TENANT, PROBE_TENANT))
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

    async def probe_forever(self) -> None:
        """Probe the store every PROBE_INTERVAL_SECONDS until cancelled."""
        while True:
            await self.probe()
            await anyio.sleep(PROBE_INTERVAL_SECONDS)

    async def healthz(self, request: Request) -> JSONResponse:
        """Answer 200: the process serves."""
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> JSONResponse:
        """Answer 200 when ready, else 503 saying which of the store or a drain is why."""
        if self.ready():
            return JSONResponse({"status": "ready"})
        status = "draining" if self.draining else "store unavailable"
        return JSONResponse({"status": status}, status_code=503)
