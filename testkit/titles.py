"""Help-desk ticket titles for a big tenant, with words planted at known rates and places.

What the title index's tests, `benchmarks/bench_big_tenant.py` and `make load`'s bad day
search: titles of four to nine words from a help desk's vocabulary (a few non-ASCII
ones, a number now and then), generated from a seed, so that every run holds the same
tickets; and words that no vocabulary word holds, planted where the searches expect them:

| word | where |
|---|---|
| COMMON ("printer") | a quarter of the titles |
| ONE_IN_A_HUNDRED ("invoice") | one title in a hundred |
| RARE ("kerberos") | RARE_AT: three titles, spread over the tenant |
| RARE_SHORT ("qz") | RARE_AT shifted: three titles |
| RARE_NON_ASCII ("größe") | RARE_AT shifted again: three titles |
| ABSENT ("zeppelin") | none |

Every ticket is closed but RARE_STATUS_AT's four, open.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

WORDS = (  # noqa: SIM905 - a sentence of words reads better than 250 quoted ones
    "login password reset email vpn laptop monitor keyboard mouse network wifi slow crash "
    "error fails broken cannot access account locked update install license software "
    "hardware screen battery charger phone mobile app settings sync calendar meeting outlook "
    "teams share drive folder file upload download backup restore server database timeout "
    "latency page report dashboard export import csv pdf billing refund payment card order "
    "shipping delivery address profile avatar notification alert sound camera microphone "
    "headset audio video zoom call chat message spam filter firewall proxy certificate "
    "expired renew token session cookie browser chrome firefox safari edge cache clear "
    "history bookmark tab window desktop shortcut icon menu button click scroll freeze hang "
    "reboot restart shutdown power office room floor desk chair badge door visitor guest "
    "request approve reject ticket issue problem question help support urgent asap please "
    "again still not working new old user admin manager team group role permission denied "
    "forbidden unauthorized missing wrong incorrect duplicate blank empty full storage quota "
    "space disk memory cpu usage high low after before during when while since with without "
    "from into onto the and for on in at to of my our your their this that is are was were "
    "has have had will would should could"
).split()
NON_ASCII = ("données", "Müller", "café", "Straße", "naïve", "東京", "設定", "ログイン", "ÉCOLE")
COMMON = "printer"
ONE_IN_A_HUNDRED = "invoice"
RARE = "kerberos"
RARE_SHORT = "qz"
RARE_NON_ASCII = "größe"
ABSENT = "zeppelin"


def rare_at(count: int) -> tuple[int, int, int]:
    """Return where RARE is planted in a tenant of `count` tickets: three of them, spread."""
    return (count // 7, count // 2, count - 5)


def rare_status_at(count: int) -> tuple[int, int, int, int]:
    """Return the numbers of the four open tickets of a tenant of `count`."""
    return (count // 5, count // 3 + 1, count // 2 + 1, count - 2)


def title(rng: random.Random) -> str:
    """Return one title of four to nine vocabulary words (a non-ASCII one, a number, at times)."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 9))]
    if rng.random() < 0.03:
        words.insert(rng.randrange(len(words) + 1), rng.choice(NON_ASCII))
    if rng.random() < 0.3:
        words.append(f"#{rng.randrange(100_000)}")
    text = " ".join(words)
    return text[0].upper() + text[1:]


def tickets(
    count: int, *, width: int, seed: str = "big tenant", first: int = 0
) -> Iterator[tuple[str, str, str]]:
    """Yield (id, title, status) of `count` tickets numbered from `first`, ids of `width` digits.

    The words of the module's table are planted by position within the `count` (so a
    tenant of 10^6 and one of 10^7 each hold three RARE titles).
    """
    rng = random.Random(seed)  # noqa: S311 - test data, not a secret
    rare = set(rare_at(count))
    short = {number + 1 for number in rare}
    non_ascii = {number + 2 for number in rare}
    opened = set(rare_status_at(count))
    for number in range(count):
        words = title(rng).split(" ")
        if rng.random() < 0.25:
            words.insert(rng.randrange(len(words) + 1), COMMON)
        if rng.random() < 0.01:
            words.insert(rng.randrange(len(words) + 1), ONE_IN_A_HUNDRED)
        planted = (
            RARE.capitalize()
            if number in rare
            else RARE_SHORT.upper()
            if number in short
            else RARE_NON_ASCII.capitalize()
            if number in non_ascii
            else None
        )
        if planted is not None:
            words.insert(1, planted)
        status = "open" if number in opened else "closed"
        yield f"TKT-{first + number:0{width}d}", " ".join(words), status
