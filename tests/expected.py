"""What the brief says the fixture store's tickets look like from outside: id, title, status.

Written out by hand from the brief's fixture table, not derived from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

# Alpha's seven tickets, by id.
T101 = {"id": "TKT-101", "title": "Login fails after password reset", "status": "open"}
T102 = {"id": "TKT-102", "title": "CSV export times out", "status": "closed"}
T104 = {"id": "TKT-104", "title": "Settings crash", "status": "open"}
T107 = {"id": "TKT-107", "title": "Login page slow on mobile", "status": "open"}
T110 = {"id": "TKT-110", "title": "Invoice PDF missing logo", "status": "closed"}
T112 = {"id": "TKT-112", "title": "Settings page shows wrong time zone", "status": "open"}
T115 = {"id": "TKT-115", "title": "Password reset email delayed", "status": "closed"}
ALPHA_TICKETS = [T101, T102, T104, T107, T110, T112, T115]

# Beta's three tickets, by id.
BETA_T103 = {"id": "TKT-103", "title": "Refund not received", "status": "open"}
BETA_T104 = {"id": "TKT-104", "title": "Private billing issue", "status": "closed"}
BETA_T108 = {"id": "TKT-108", "title": "Login fails after SSO change", "status": "open"}

# The brief's four failure results, whole.
INVALID = {"ok": False, "code": "invalid_arguments"}
FORBIDDEN = {"ok": False, "code": "forbidden"}
NOT_FOUND = {"ok": False, "code": "not_found"}
UNKNOWN = {"ok": False, "code": "unknown_tool"}

# The brief's three trusted contexts.
ALPHA = {"tenant": "alpha", "can_read_tickets": True}
ALPHA_NO_READ = {"tenant": "alpha", "can_read_tickets": False}
BETA = {"tenant": "beta", "can_read_tickets": True}

# The registered tools, in order, as the golden declarations pin them: the one place a
# test may list them, so a new tool changes the golden files and nothing else.
_GOLDEN_DECLARATIONS = Path(__file__).parent / "golden" / "json-schema.json"
TOOL_NAMES: tuple[str, ...] = tuple(
    declaration["name"]
    for declaration in json.loads(_GOLDEN_DECLARATIONS.read_text(encoding="utf-8"))
)
UNKNOWN_TOOL_DETAIL = "unknown tool; the tools are: " + ", ".join(TOOL_NAMES)
