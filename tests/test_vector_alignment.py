"""scripts/vectors/alignment.py: how regenerated vectors keep their tampers, without a reference.

The openmed regenerators carry tampered copies of a reference output (adjudication audit
packets, candidate-runner packets) over to the regenerated output, and rewrite the commit
ids a candidate-runner case states for new repositories. Both are pure; they are checked
here on small documents: an untouched copy becomes the new output, every kind of tamper the
vector files plant survives, and commit ids change in every form a case writes them.
"""

from __future__ import annotations

import random
import sys
from types import ModuleType
from typing import Any

import pytest

from support.scripts import load_script
from support.vectors import PROJECT_ROOT

FOLDER = PROJECT_ROOT / "scripts" / "vectors"


def _load(name: str) -> ModuleType:
    return load_script(name, FOLDER / f"{name}.py")


@pytest.fixture(scope="module")
def alignment() -> ModuleType:
    _load("renaming")  # alignment imports renaming as the scripts do
    return _load("alignment")


def _digest(draw: random.Random) -> str:
    return "sha256:" + draw.randbytes(32).hex()


def _rendering(seed: int, order: list[int]) -> dict[str, Any]:
    """A small packet set: packets in ``order``, each with two aliased candidates."""
    draw = random.Random(seed)
    commitment = _digest(draw)
    packets = [
        {
            "case_ref": f"case-{index}",
            "mapping_commitment": commitment,
            "candidates": [
                {"alias": "candidate-a", "content": f"text {seed} {index} a"},
                {"alias": "candidate-b", "content": f"text {seed} {index} b"},
            ],
        }
        for index in order
    ]
    return {"packets": packets, "mapping_commitment": commitment}


@pytest.fixture
def twin() -> tuple[dict[str, Any], dict[str, Any]]:
    """A rendering and its regeneration (other texts, digests and packet order)."""
    return _rendering(1, [2, 0, 1]), _rendering(2, [1, 2, 0])


def _carry(alignment: ModuleType, given: Any, old: Any, new: Any, seed: int = 7) -> Any:
    renaming = sys.modules["renaming"]
    return alignment.Transplant(renaming.DigestRenamer(seed)).value(given, old, new)


def test_an_untouched_copy_becomes_the_regenerated_output(
    alignment: ModuleType, twin: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = twin
    assert _carry(alignment, old, old, new) == new
    assert (
        _carry(alignment, old["packets"][1], old["packets"][1], new["packets"][1])
        == (new["packets"][1])
    )


def test_a_reordering_or_a_missing_item_stays_so(
    alignment: ModuleType, twin: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = twin
    packets = old["packets"]
    reordered = _carry(alignment, packets[::-1], packets, new["packets"])
    assert reordered == new["packets"][::-1]
    assert reordered != new["packets"]
    assert _carry(alignment, packets[:-1], packets, new["packets"]) == new["packets"][:-1]
    assert _carry(alignment, [], packets, new["packets"]) == []


def test_a_swapped_column_stays_swapped_and_an_edited_text_stays_edited(
    alignment: ModuleType, twin: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = twin
    tampered = [dict(item) for item in old["packets"][0]["candidates"]]
    tampered[0]["content"], tampered[1]["content"] = tampered[1]["content"], tampered[0]["content"]
    carried = _carry(
        alignment, tampered, old["packets"][0]["candidates"], new["packets"][0]["candidates"]
    )
    fresh = new["packets"][0]["candidates"]
    assert [item["alias"] for item in carried] == [item["alias"] for item in fresh]
    assert [item["content"] for item in carried] == [fresh[1]["content"], fresh[0]["content"]]
    edited = [dict(item) for item in old["packets"][0]["candidates"]]
    edited[1]["content"] = "edited by hand"
    carried = _carry(alignment, edited, old["packets"][0]["candidates"], fresh)
    assert carried == [fresh[0], {"alias": fresh[1]["alias"], "content": "edited by hand"}]


def test_a_replaced_digest_gets_a_fresh_one_and_a_malformed_one_is_kept(
    alignment: ModuleType, twin: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = twin
    replaced = {**old, "mapping_commitment": "sha256:" + "0" * 64}
    carried = _carry(alignment, replaced, old, new)
    assert carried["packets"] == new["packets"]
    digest = carried["mapping_commitment"]
    assert digest not in (replaced["mapping_commitment"], new["mapping_commitment"])
    assert sys.modules["renaming"].DIGEST.fullmatch(digest)
    assert carried == _carry(alignment, replaced, old, new)  # seeded: the same bytes again
    malformed = {**old, "mapping_commitment": old["mapping_commitment"].upper()}
    assert (
        _carry(alignment, malformed, old, new)["mapping_commitment"]
        == (malformed["mapping_commitment"])
    )


def test_commit_ids_change_in_every_form_a_case_writes_them(alignment: ModuleType) -> None:
    draw = random.Random(3)
    head, first, unknown = (draw.randbytes(20).hex() for _ in range(3))
    new_head, new_first = (draw.randbytes(20).hex() for _ in range(2))
    commits = {head: new_head, first: new_first}
    text = (
        f"--source-sha {head} {first} {head.upper()} {head[:12]} {unknown} sha256:{head}{head[:24]}"
    )
    renamed = alignment.rename_commits(text, commits)
    assert renamed.split()[:6] == [
        "--source-sha",
        new_head,
        new_first,
        new_head.upper(),
        new_head[:12],
        unknown,
    ]
    assert renamed.split()[6] == f"sha256:{head}{head[:24]}"  # inside a digest: not a commit id
    assert alignment.rename_commits(text, {}) == text
