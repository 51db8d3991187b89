"""index_writes: what a batch's changes of title and status edit in the index, exactly."""

from __future__ import annotations

from ticket_tools.stores.grams import END, decode, encode, status_gram
from ticket_tools.stores.index_writes import ContainerEdit, Indexed, TicketChange, index_edits

GRAMS_OF_AB = {"ab" + END, "b" + END * 2}
GRAMS_OF_B = {"b" + END * 2}


OPEN = status_gram("open")


def test_a_new_ticket_adds_its_grams_an_unchanged_ticket_nothing() -> None:
    edits = index_edits(
        [
            TicketChange("alpha", "TKT-004097", None, Indexed("ab", "open")),
            TicketChange("alpha", "TKT-000001", Indexed("same", "open"), Indexed("same", "open")),
        ]
    )
    assert {key: (e.added, e.removed) for key, e in edits.containers.items()} == {
        ("alpha", gram, 1): ({1}, set()) for gram in {*GRAMS_OF_AB, OPEN}
    }
    assert edits.counts == {("alpha", gram): 1 for gram in {*GRAMS_OF_AB, OPEN}}


def test_a_changed_title_moves_only_the_grams_that_differ_a_delete_drops_them() -> None:
    edits = index_edits(
        [
            TicketChange("alpha", "TKT-000002", Indexed("ab", "open"), Indexed("b", "open")),
            TicketChange("beta", "TKT-000003", Indexed("b", "open"), None),
        ]
    )
    assert {key: (e.added, e.removed) for key, e in edits.containers.items()} == {
        ("alpha", "ab" + END, 0): (set(), {2}),
        ("beta", "b" + END * 2, 0): (set(), {3}),
        ("beta", OPEN, 0): (set(), {3}),
    }
    assert edits.counts == {
        ("alpha", "ab" + END): -1,
        ("beta", "b" + END * 2): -1,
        ("beta", OPEN): -1,
    }


def test_a_changed_status_alone_moves_the_status_gram() -> None:
    edits = index_edits(
        [TicketChange("alpha", "TKT-000002", Indexed("ab", "open"), Indexed("ab", "closed"))]
    )
    assert {key: (e.added, e.removed) for key, e in edits.containers.items()} == {
        ("alpha", OPEN, 0): (set(), {2}),
        ("alpha", status_gram("closed"), 0): ({2}, set()),
    }
    assert edits.counts == {("alpha", OPEN): -1, ("alpha", status_gram("closed")): 1}


def test_an_edit_applied_to_a_container() -> None:
    edit = ContainerEdit(added={5, 1}, removed={3})
    assert list(decode(edit.applied(encode([2, 3, 9])))) == [1, 2, 5, 9]
    assert list(decode(edit.applied(None))) == [1, 5]
    assert ContainerEdit(removed={3}).applied(encode([3])) == b""
    # An offset put in twice, or taken out where it is not, changes nothing.
    assert ContainerEdit(added={2}, removed={7}).applied(encode([2])) == encode([2])
