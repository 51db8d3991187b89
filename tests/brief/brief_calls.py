"""The one way the brief suite calls the adapter: `call`, which checks what every call must keep.

Every test in this folder, and `make run`, calls the adapter through `call` (`execute_tool`;
`run_tool` when a test brings its own registry), so on every call, whatever the test asserts:

- `records` and `args` are unchanged afterwards (compared with deep copies taken before,
  the records' insertion order included);
- every returned ticket is one of the caller's own: exactly the three public fields of the
  ticket stored under the context's tenant + ":" + its id;
- no title stored for another tenant appears anywhere in the result (so no call by alpha
  ever returns a beta title, and none by beta an alpha title).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ticket_tools import DictStore, ToolRegistry, execute_tool, fixture_records, run_tool

Records = dict[str, dict[str, str]]
PUBLIC_FIELDS = ("id", "title", "status")


def call(
    name: object,
    args: object,
    context: Mapping[str, object],
    records: Records | None = None,
    *,
    through_store: bool = False,
    registry: ToolRegistry | None = None,
) -> dict[str, object]:
    """Run one call on `records` (a fresh fixture store when omitted); check it; return it.

    `through_store` hands `execute_tool` the records as a DictStore, the TicketStore a
    database store would replace; `registry` runs the call on another registry.
    """
    if records is None:
        records = fixture_records()
    records_before = copy.deepcopy(records)
    args_before = copy.deepcopy(args)
    source = DictStore(records) if through_store else records
    if registry is None:
        result = execute_tool(name, args, context, source)
    else:
        result = run_tool(name, args, context, source, registry=registry).result
    assert records == records_before, "the call modified records"
    assert list(records) == list(records_before), "the call reordered records"
    assert args == args_before, "the call modified args"
    check_only_own_tickets(result, context, records)
    return result


def detail(name: object, args: object, context: Mapping[str, object]) -> str | None:
    """Return the sentence `run_tool` gives a host beside the result `call` checks."""
    result = call(name, args, context)
    outcome = run_tool(name, args, context, fixture_records())
    assert outcome.result == result
    return outcome.detail


def check_only_own_tickets(
    result: Mapping[str, object], context: Mapping[str, object], records: Records
) -> None:
    """Fail unless every ticket in `result` is the public view of one of the caller's own."""
    tenant = context.get("tenant")
    shown = [result["ticket"]] if "ticket" in result else result.get("tickets", [])
    assert isinstance(shown, list)
    for ticket in shown:
        key = f"{tenant}:{ticket['id']}"
        assert key in records, f"{key} is not stored: the ticket is not the caller's"
        assert ticket == {field: records[key][field] for field in PUBLIC_FIELDS}
    # A key belongs to the tenant before its last ":" (README, "Deviation from the brief").
    own_titles = {t["title"] for k, t in records.items() if k.rpartition(":")[0] == tenant}
    other_titles = {t["title"] for t in records.values()} - own_titles
    text = repr(result)
    leaked = sorted(title for title in other_titles if title in text)
    assert not leaked, f"another tenant's titles reached {tenant}: {leaked}"
