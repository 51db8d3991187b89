"""The generated store: TENANTS tenants of TICKETS_PER_TENANT tickets, each a pure function.

Every title ends with its tenant's name in brackets ("CSV export times out [t042]"), so a
ticket shown to the wrong tenant is recognised from the ticket alone, whatever the checker
expected. The import file and the checker's records come from the same function.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TextIO

TENANTS = 1_000
TICKETS_PER_TENANT = 1_000  # every ticket id TKT-000..TKT-999: the whole id space
TOPICS = (
    "Login fails after password reset",
    "CSV export times out",
    "Invoice PDF missing logo",
    "Settings page crashes on save",
    "Time zone shown wrong",
    "Webhook delivered twice",
)
# Words a walk filters on: each matches one or two topics, in any case.
QUERY_WORDS = ("login", "EXPORT", "pdf", "crash", "zone", "twice", "e")
CANARY = "internal canary"


def tenant_name(index: int) -> str:
    """Return the name of tenant number `index`: t000 .. t999."""
    return f"t{index:03d}"


def ticket(tenant_index: int, number: int) -> dict[str, str]:
    """Return ticket `number` of tenant `tenant_index` as stored, internal field included."""
    tenant = tenant_name(tenant_index)
    return {
        "id": f"TKT-{number:03d}",
        "title": f"{TOPICS[(number + tenant_index) % len(TOPICS)]} [{tenant}]",
        "status": "closed" if (number * 7 + tenant_index) % 3 == 0 else "open",
        "internal_note": f"{CANARY} {tenant}",
    }


def owner_of(title: str) -> str | None:
    """Return the tenant a generated title names, or None if it names none.

    "CSV export times out [t042]" -> "t042".
    """
    head, bracket, tail = title.rpartition(" [")
    if not bracket or not head or not tail.endswith("]"):
        return None
    return tail[:-1]


@lru_cache(maxsize=256)
def tenant_records(tenant_index: int, per_tenant: int) -> dict[str, dict[str, str]]:
    """Return one tenant's slice of the store, keyed as the contract's records are.

    The tools scope every read by the trusted tenant, so `execute_tool` on this slice
    answers as on the whole store; a ticket of another tenant in a served result is then
    a mismatch and, by its title, a cross-tenant ticket. Callers must not modify it.
    """
    tenant = tenant_name(tenant_index)
    return {
        f"{tenant}:TKT-{number:03d}": ticket(tenant_index, number) for number in range(per_tenant)
    }


def write_records(out: TextIO, tenants: int, per_tenant: int) -> int:
    """Write the whole store as one records JSON object, tenant by tenant; return the count."""
    out.write("{")
    count = 0
    for tenant_index in range(tenants):
        for key, stored in tenant_records.__wrapped__(tenant_index, per_tenant).items():
            out.write(",\n" if count else "\n")
            out.write(f"{json.dumps(key)}: {json.dumps(stored)}")
            count += 1
    out.write("\n}\n")
    return count


def write_records_file(path: Path, tenants: int, per_tenant: int) -> int:
    """Write the store to `path` (a new file); return the number of tickets."""
    with path.open("x", encoding="utf-8") as out:
        return write_records(out, tenants, per_tenant)
