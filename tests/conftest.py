"""Shared fixtures: the stores every contract suite runs against, and hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, settings

from ticket_tools import Records, TicketStore
from ticket_tools.sqlite_store import SQLiteStore

settings.register_profile("default", max_examples=200, deadline=None)
# `make fuzz`: the deep run over many generated calls.
settings.register_profile(
    "deep",
    max_examples=100_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# `make mutate`: the default profile's examples, the same every run (so a score can be
# reproduced), without shrinking: a mutant needs a failing example, not the smallest one.
settings.register_profile(
    "mutation",
    parent=settings.get_profile("default"),
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

StoreFactory = Callable[[Records], Records | TicketStore]

STORE_FACTORIES: dict[str, StoreFactory] = {
    # The contract's own shape: execute_tool wraps the plain dict in a DictStore.
    "dict": lambda records: records,
    # The same records in an in-memory SQLite table (internal fields dropped at import).
    "sqlite": SQLiteStore.from_records,
}


@pytest.fixture(params=sorted(STORE_FACTORIES), scope="session")
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """Turn a records dict into each kind of store the contract suites must hold for."""
    return STORE_FACTORIES[request.param]
