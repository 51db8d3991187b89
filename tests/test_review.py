"""REVIEW.md: the answer is marked off, at most 5,000 characters, in the brief's order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# The hand-in's build reads the answer with the same function.
from scripts.build_take_home import BEGIN, END, review_answer

ROOT = Path(__file__).resolve().parents[1]
# The brief's box: "0 / 5000".
MAX_ANSWER_CHARACTERS = 5000
# What each comment must hold besides its line and its fixture input.
PARTS = ("**Why it matters:**", "**Fix:**", "**Test:**")


def test_the_answer_fits_the_box() -> None:
    answer = review_answer((ROOT / "REVIEW.md").read_text(encoding="utf-8"))
    assert 4000 < len(answer) <= MAX_ANSWER_CHARACTERS


def test_the_answer_holds_the_parts_in_order() -> None:
    answer = review_answer((ROOT / "REVIEW.md").read_text(encoding="utf-8"))
    headings = re.findall(r"(?m)^#{2,3} (.+)$", answer)
    assert [heading.split(":")[0] for heading in headings] == [
        "Review",
        "1. The cursor chooses the tenant",
        "2. Results are the stored objects",
        "3. Only `status` is validated",
        "Also noticed",
        "Done well",
        "One trade-off I made under the cap, defended",
    ]
    for number in "123":
        comment = answer.partition(f"### {number}.")[2].partition("###")[0]
        missing = [part for part in PARTS if part not in comment]
        assert (number, missing) == (number, [])


def test_what_follows_the_answer_is_labelled_preparation() -> None:
    after = (ROOT / "REVIEW.md").read_text(encoding="utf-8").partition(END)[2]
    assert re.findall(r"(?m)^#{1,3} .+$", after) == ["## Preparation (not part of the answer)"]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("no markers", id="none"),
        pytest.param(f"{END} x {BEGIN}", id="reversed"),
        pytest.param(f"{BEGIN} a {END} {BEGIN} b {END}", id="two-answers"),
    ],
)
def test_the_markers_must_be_one_pair(text: str) -> None:
    with pytest.raises(ValueError, match="exactly one answer"):
        review_answer(text)
