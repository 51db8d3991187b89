"""Hypothesis strategies for the fuzz run (test_fuzz.py): stores with canaries, untrusted calls.

Self-contained on purpose: nothing here depends on another strategies module.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hypothesis import strategies as st

from ticket_tools import Arg, Tool
from ticket_tools.catalog import REGISTRY
from ticket_tools.stores.ids import ID_FORMAT
from ticket_tools.tickets import STATUSES

# Tenants that prefix each other ("alpha", "alphabet"), differ only in case, or are not ASCII.
FUZZ_TENANTS = ("alpha", "alphabet", "beta", "Alpha", "b", "ünï")
# Tenants a session can name that own no ticket in any generated store.
FUZZ_ABSENT_TENANTS = ("gamma", "alph", "alpha:beta")
# Titles are built from these words: mixed case, LIKE wildcards, a backslash, letters whose
# case mapping changes length or needs Unicode rules, and a character outside the BMP.
FUZZ_TITLE_WORDS = ("Login", "fails", "SETTINGS", "crash", "refund", "%", "_", "\\", "É", "ß", "İ")
FUZZ_TITLE_WORDS_MORE = ("😀", "reset", "page", "Ünïcode")
# A narrow range of ticket numbers, so tenants often share IDs (both have TKT-104).
FUZZ_FIRST_NUMBER = 100
FUZZ_LAST_NUMBER = 112
# Every internal value (and one internal key) contains this marker; no title or valid
# argument ever does, so the marker anywhere in a result is a leak.
STORE_CANARY = "CANARY-S"
# Every deliberately invalid argument text (unknown keys, bad values, bad tool names)
# contains this marker: seen in a result or a failure detail, it is an echo.
ARG_CANARY = "CANARY-A"
FUZZ_INTERNAL_FIELDS = ("internal_note", "assignee_email", f"{STORE_CANARY}-key", "ID")

Expectation = Literal["valid", "invalid", "unknown"]
"""What the generator knows about a call's arguments: valid, surely invalid, or either."""


@dataclass(frozen=True)
class FuzzCall:
    """One generated call: the name and arguments the model sends, the trusted context."""

    name: object
    args: object
    context: dict[str, object]
    expect: Expectation


@dataclass(frozen=True)
class FuzzCase:
    """A generated multi-tenant store and one call per registered tool, plus one free name."""

    records: dict[str, dict[str, object]]
    calls: tuple[FuzzCall, ...]


def _ticket_id(number: int) -> str:
    return f"TKT-{number:03d}"


def _pick(draw: st.DrawFn, items: Sequence[str]) -> str:
    """Draw one of `items` by index: cheaper than building a sampled_from per draw."""
    return items[draw(st.integers(0, len(items) - 1))]


# Each title is one to three words; drawing an index into all of them is one choice, not six.
_TITLES = tuple(
    " ".join(words)
    for size in (1, 2, 3)
    for words in itertools.product(FUZZ_TITLE_WORDS + FUZZ_TITLE_WORDS_MORE, repeat=size)
)
_STORED_TICKETS = st.lists(
    st.tuples(
        st.sampled_from(FUZZ_TENANTS),
        st.integers(FUZZ_FIRST_NUMBER, FUZZ_LAST_NUMBER),
        st.integers(0, len(_TITLES) - 1),
        st.sampled_from(STATUSES),
        # Which internal fields the ticket carries, one bit each.
        st.integers(0, 2 ** len(FUZZ_INTERNAL_FIELDS) - 1),
    ),
    max_size=16,
    unique_by=lambda ticket: ticket[:2],
)


@st.composite
def canary_records(draw: st.DrawFn) -> dict[str, dict[str, object]]:
    """Draw a store of up to 16 tickets over several tenants, with canary internal fields."""
    records: dict[str, dict[str, object]] = {}
    for serial, (tenant, number, title, status, fields) in enumerate(draw(_STORED_TICKETS)):
        # The serial makes every title unique, so a returned ticket names its stored tenant.
        stored: dict[str, object] = {
            "id": _ticket_id(number),
            "title": f"{_TITLES[title]} #{serial}",
            "status": status,
        }
        for bit, field in enumerate(FUZZ_INTERNAL_FIELDS):
            if fields >> bit & 1:
                stored[field] = f"{STORE_CANARY}-{serial}-{field}"
        records[f"{tenant}:{_ticket_id(number)}"] = stored
    return records


_PERCENT = st.integers(0, 99)


def _chance(draw: st.DrawFn, percent: int) -> bool:
    """Draw True about `percent` times in a hundred."""
    return draw(_PERCENT) < percent


_CONTEXT_TENANTS = st.sampled_from(FUZZ_TENANTS + FUZZ_ABSENT_TENANTS)
_ODD_CONTEXTS = st.one_of(
    st.fixed_dictionaries(
        {
            "tenant": _CONTEXT_TENANTS,
            "can_read_tickets": st.sampled_from((False, None, 1, "true", "True", 0)),
        }
    ),
    st.fixed_dictionaries({"tenant": _CONTEXT_TENANTS}),
    st.fixed_dictionaries(
        {"tenant": st.sampled_from(("", None, 5, ("alpha",))), "can_read_tickets": st.just(True)}
    ),
    st.fixed_dictionaries({"can_read_tickets": st.just(True)}),
)


def _context(draw: st.DrawFn, store_tenants: Sequence[str]) -> dict[str, object]:
    """Draw a trusted context: mostly a tenant of the store that may read, else any odd shape."""
    if _chance(draw, 20):
        return draw(_ODD_CONTEXTS)
    if store_tenants and _chance(draw, 75):
        return {"tenant": _pick(draw, store_tenants), "can_read_tickets": True}
    return {"tenant": draw(_CONTEXT_TENANTS), "can_read_tickets": True}


def fuzz_json_values(texts: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[object]:
    """Draw any JSON-like value: NaN, infinities, huge integers and nesting included."""
    text = st.text(max_size=12) if texts is None else texts
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.integers(min_value=-(10**100), max_value=10**100),
        st.floats(),
        text,
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(text, children, max_size=4)
        ),
        max_leaves=12,
    )


def _arg_canaries() -> st.SearchStrategy[str]:
    return st.integers(0, 999).map(lambda n: f"{ARG_CANARY}-{n}")


# Strategies are built once and reused: building one per draw costs more than drawing.
_JSON_VALUES = fuzz_json_values()
_ARG_CANARIES = _arg_canaries()
_CANARY_JSON_VALUES = fuzz_json_values(_ARG_CANARIES | st.text(max_size=8))


def _as_is(text: str) -> str:
    return text


_CASE_CHANGES: tuple[Callable[[str], str], ...] = (_as_is, str.lower, str.upper, str.swapcase)
_WAYS_TO_CASE = st.sampled_from(_CASE_CHANGES)
_AROUND_IDS = st.integers(FUZZ_FIRST_NUMBER - 1, FUZZ_LAST_NUMBER + 1).map(_ticket_id)
_EDGE_IDS = st.sampled_from(("TKT-000", "TKT-999"))


def _title_substring(draw: st.DrawFn, titles: Sequence[str], low: int, high: int) -> str:
    """Draw a piece of a stored title, in any case, of `low` to `high` code points."""
    title = _pick(draw, titles)
    start = draw(st.integers(0, len(title)))
    text = title[start : start + draw(st.integers(0, high))]
    changed = draw(_WAYS_TO_CASE)(text)
    # A case change can change the length ("ß".upper() is "SS"); keep what is valid.
    for candidate in (changed, text):
        if low <= len(candidate) <= high:
            return candidate
    return "a" * max(low, 1)


@functools.cache
def _plain_valid_values(arg: Arg) -> st.SearchStrategy[object]:
    """Draw values `arg` accepts, without looking at the store."""
    if arg.type == "integer":
        low = arg.minimum if arg.minimum is not None else -(10**6)
        high = arg.maximum if arg.maximum is not None else 10**6
        integers = st.integers(low, high)
        # JSON has one number type: an integral float such as 5.0 is a valid integer.
        return st.one_of(integers, integers, integers.map(float))
    if arg.enum:
        return st.sampled_from(arg.enum)
    if arg.pattern == ID_FORMAT.pattern:
        return st.one_of(_AROUND_IDS, _EDGE_IDS)
    if arg.pattern is not None:
        return st.from_regex(f"(?a:{arg.pattern})", fullmatch=True).filter(
            lambda text: arg.parse(text) is not None
        )
    return st.text(min_size=arg.min_length or 0, max_size=arg.max_length or 50)


def _valid_value(draw: st.DrawFn, arg: Arg, ids: Sequence[str], titles: Sequence[str]) -> object:
    """Draw a value `arg` accepts, biased toward ones that hit the store's tickets."""
    from_store = _chance(draw, 70)
    if from_store and arg.pattern == ID_FORMAT.pattern and ids:
        return _pick(draw, ids)
    if from_store and arg.type == "string" and arg.pattern is None and not arg.enum and titles:
        high = arg.max_length if arg.max_length is not None else 1_000
        return _title_substring(draw, titles, arg.min_length or 0, high)
    return draw(_plain_valid_values(arg))


@functools.cache
def _invalid_values(arg: Arg) -> st.SearchStrategy[object]:
    """Draw values `arg` surely rejects: wrong JSON types, off-by-one bounds, the traps."""
    canary = _ARG_CANARIES
    wrong_type: list[object] = [None, [], {}, [1], {"a": 1}]
    if arg.type == "integer":
        low = arg.minimum if arg.minimum is not None else 0
        high = arg.maximum if arg.maximum is not None else 0
        traps: list[object] = [True, False, "5", str(low), 1.5, math.nan, math.inf, -math.inf]
        bounds: list[object] = []
        if arg.minimum is not None:
            bounds += [low - 1, float(low - 1), -(10**100)]
        if arg.maximum is not None:
            bounds += [high + 1, float(high + 1), 10**100]
        return st.one_of(st.sampled_from(wrong_type + traps + bounds), canary)
    strings: list[object] = [5, 5.0, True, *wrong_type]
    if arg.min_length:
        strings.append("")
    if arg.max_length is not None:
        strings.append("x" * (arg.max_length + 1))
    if arg.enum:
        first = arg.enum[0]
        strings += [first.upper(), first.title(), f" {first}", f"{first}\n", [first]]
    if arg.pattern == ID_FORMAT.pattern:
        strings += [
            "TKT-\u0661\u0660\u0664",  # Arabic-Indic digits: `\d` would accept them
            "TKT-\uff11\uff10\uff14",  # fullwidth digits
            "TKT-104\n",  # `$` would accept a trailing newline
            "tkt-104",
            "TKT-1040",
            "TKT-10",
            " TKT-104",
            "TKT-10a",
            "TKT104",
        ]
    if arg.enum or arg.pattern is not None:
        return st.one_of(st.sampled_from(strings), canary)
    if arg.max_length is not None:
        # Padded past the bound, so that a canary is never a valid free-text value.
        padding = "-" * (arg.max_length + 1)
        return st.one_of(st.sampled_from(strings), canary.map(lambda text: text + padding))
    return st.sampled_from(strings)


@functools.cache
def _unknown_keys(tool: Tool) -> st.SearchStrategy[str]:
    names = {arg.name for arg in tool.arguments}
    fixed = ("tenant", "Tenant", "can_read_tickets", "__proto__", "ticket_id", "limit", "")
    spelled = [f"{name}\n" for name in names] + [name.upper() for name in names]
    candidates = tuple(key for key in (*fixed, *spelled) if key not in names)
    # "tenant" on its own branch: the argument a model is likeliest to try.
    return st.one_of(st.just("tenant"), st.sampled_from(candidates), _ARG_CANARIES)


def _valid_args(
    draw: st.DrawFn, tool: Tool, ids: Sequence[str], titles: Sequence[str]
) -> dict[str, object]:
    args: dict[str, object] = {}
    for arg in tool.arguments:
        if arg.required or draw(st.booleans()):
            args[arg.name] = _valid_value(draw, arg, ids, titles)
    return args


_BREAKAGE_TENANTS = st.sampled_from(FUZZ_TENANTS + FUZZ_ABSENT_TENANTS)
_NOT_OBJECTS = st.one_of(
    st.lists(_JSON_VALUES, max_size=3),
    st.text(max_size=8),
    _ARG_CANARIES,
    st.none(),
    st.integers(),
    st.floats(),
    st.booleans(),
)


def _broken_args(draw: st.DrawFn, tool: Tool, ids: Sequence[str], titles: Sequence[str]) -> object:
    """Draw arguments that break exactly one rule, on top of an otherwise valid object."""
    args = _valid_args(draw, tool, ids, titles)
    required = [arg.name for arg in tool.arguments if arg.required and arg.name in args]
    ways = ["unknown_key", "not_object", "wrapped"]
    if tool.arguments:
        ways.append("bad_value")
    if required:
        ways.append("missing")
    way = _pick(draw, ways)
    if way == "unknown_key":
        args[draw(_unknown_keys(tool))] = draw(_BREAKAGE_TENANTS | _JSON_VALUES)
    elif way == "bad_value":
        arg = tool.arguments[draw(st.integers(0, len(tool.arguments) - 1))]
        args[arg.name] = draw(_invalid_values(arg))
    elif way == "missing":
        del args[_pick(draw, required)]
    elif way == "wrapped":
        return [args]
    else:
        return draw(_NOT_OBJECTS)
    return args


@functools.cache
def _any_args(tool: Tool) -> st.SearchStrategy[object]:
    """Draw any JSON value, and objects with the tool's own keys holding any JSON value."""
    names = [arg.name for arg in tool.arguments]
    own_keys = st.dictionaries(
        st.sampled_from(names) if names else st.text(max_size=4), _JSON_VALUES, max_size=3
    )
    return st.one_of(_CANARY_JSON_VALUES, own_keys)


def _tool_call(
    draw: st.DrawFn,
    tool: Tool,
    name: object,
    ids_by_tenant: Mapping[object, Sequence[str]],
    titles: Sequence[str],
) -> FuzzCall:
    """Draw a call to `tool`: valid arguments one time in two, so success paths run."""
    context = _context(draw, [tenant for tenant in ids_by_tenant if type(tenant) is str])
    # IDs of the session's own tenant first, so that get_ticket often finds its ticket.
    ids = ids_by_tenant.get(context.get("tenant")) or ids_by_tenant.get(None, ())
    chance = draw(_PERCENT)
    expect: Expectation = "valid" if chance < 50 else "invalid" if chance < 75 else "unknown"
    args: object
    if expect == "valid":
        args = _valid_args(draw, tool, ids, titles)
    elif expect == "invalid":
        args = _broken_args(draw, tool, ids, titles)
    else:
        args = draw(_any_args(tool))
    return FuzzCall(name=name, args=args, context=context, expect=expect)


# Names that are almost a tool's, attribute names of a dict, and values that are not strings.
_FREE_NAMES = st.one_of(
    st.sampled_from(tuple(tool.name for tool in REGISTRY)),
    st.sampled_from(
        (
            "Get_Ticket",
            " get_ticket",
            "get_ticket\n",
            "search_tickets ",
            "SEARCH_TICKETS",
            "list_tickets",
            "__class__",
            "__init__",
            "keys",
            "get",
            "",
        )
    ),
    _ARG_CANARIES,
    st.sampled_from((None, 5, ["get_ticket"], ("search_tickets",), {"name": "get_ticket"})),
)
_FREE_NAME_ARGS = st.one_of(st.just({}), _any_args(next(iter(REGISTRY))))


# Calls per registered tool in one generated example: the store is drawn once for them all.
FUZZ_ROUNDS = 5


@st.composite
def fuzz_cases(draw: st.DrawFn) -> FuzzCase:
    """Draw a store, then FUZZ_ROUNDS rounds of one call to each tool and one free name."""
    records = draw(canary_records())
    ids_by_tenant: dict[object, list[str]] = {None: []}
    for key, stored in records.items():
        ids_by_tenant.setdefault(key.rpartition(":")[0], []).append(str(stored["id"]))
        ids_by_tenant[None].append(str(stored["id"]))
    tenants = [tenant for tenant in ids_by_tenant if type(tenant) is str]
    titles = [str(stored["title"]) for stored in records.values()]
    calls: list[FuzzCall] = []
    for _ in range(FUZZ_ROUNDS):
        calls += [_tool_call(draw, tool, tool.name, ids_by_tenant, titles) for tool in REGISTRY]
        name = draw(_FREE_NAMES)
        named = REGISTRY.get(name)
        if named is not None:
            calls.append(_tool_call(draw, named, name, ids_by_tenant, titles))
        else:
            args = draw(_FREE_NAME_ARGS)
            calls.append(FuzzCall(name, args, _context(draw, tenants), "unknown"))
    return FuzzCase(records=records, calls=tuple(calls))
