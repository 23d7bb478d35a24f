"""scripts/vectors/renaming.py: the renaming behind `make vectors-alt`, without a reference venv.

`make vectors-alt` (docs/vectors.md) regenerates vector files with the references themselves,
which needs their venvs and minutes, so it is not part of the suite. What can be checked
without them is checked here on a tiny case: the renaming is seeded and consistent, keeps
distinct names distinct, keeps a well-formed digest well-formed and a malformed one as it
was, and a renamed, shortened run is still a run our reader accepts with the new identities.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sealeval.captured.run import parse_run, run_digest
from support.vectors import PROJECT_ROOT, load, vectors_dir

SCRIPT = PROJECT_ROOT / "scripts" / "vectors" / "renaming.py"


@pytest.fixture(scope="module")
def renaming() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vectors_renaming", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _tiny_run() -> tuple[Path, dict[str, object]]:
    """The smallest run a comparison case of the shared vectors names."""
    relatives = {
        case["input"][side]
        for case in load("invarlock/comparisons.json")["cases"]
        for side in ("baseline", "subject")
    }
    paths = [vectors_dir() / "invarlock" / relative for relative in sorted(relatives)]
    path = min(paths, key=lambda item: (item.stat().st_size, item.name))
    return path, json.loads(path.read_text("utf-8"))


def test_record_ids_are_seeded_consistent_and_distinct(renaming: ModuleType) -> None:
    olds = [f"case-{index}" for index in range(50)]
    first = renaming.Rewriter(3)
    news = [first.record_id(old) for old in olds]
    assert len(set(news)) == len(olds)
    assert not set(news) & set(olds)
    assert [first.record_id(old) for old in olds] == news  # the same in every run and case
    again, other = renaming.Rewriter(3), renaming.Rewriter(4)
    assert [again.record_id(old) for old in olds] == news
    assert [other.record_id(old) for old in olds] != news
    assert first.run_id("a-run") != "a-run"
    assert first.metric("exact") != "exact"


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 20, 200])
def test_sizes_shrink_within_bounds(renaming: ModuleType, count: int) -> None:
    size = renaming.Rewriter(11).size(count)
    if count < 3:
        assert size == count
    else:
        assert count // 2 < size < count


def test_digests_renamed_well_formed_and_malformed_kept(renaming: ModuleType) -> None:
    good = ["sha256:" + format(index, "x") * 64 for index in range(1, 6)]
    malformed = ["SHA256:" + "a" * 64, "sha256:" + "A" * 64, "sha256:" + "a" * 63, "a" * 64]
    document = {"components": {str(i): value for i, value in enumerate(good)}, "bad": malformed}
    renamer = renaming.DigestRenamer(5)
    renamed = renamer.rename(document)
    new = list(renamed["components"].values())
    assert all(renaming.DIGEST.fullmatch(value) for value in new)
    assert len(set(new)) == len(good)
    assert not set(new) & set(good)
    assert renamed["bad"] == malformed
    assert renamer.rename(good) == new  # consistent within one file
    assert renaming.DigestRenamer(5).rename(document) == renamed  # seeded
    kept = renaming.DigestRenamer(5).rename(good, keep=lambda value: value == good[0])
    assert kept[0] == good[0]
    assert kept[1:] != good[1:]


def test_renamed_run_is_a_run_with_the_new_identities(renaming: ModuleType) -> None:
    path, document = _tiny_run()
    rewriter = renaming.Rewriter(7)
    records = document["records"]
    assert isinstance(records, list)
    size = rewriter.size(len(records))
    renamed = rewriter.run(document, size)
    text = renaming.canonical_text(renamed)
    run = parse_run(text.encode("utf-8"))
    assert len(run.records) == size
    assert run.run_id == rewriter.run_id(str(document["run_id"]))
    assert [record.id for record in run.records] == [
        rewriter.record_id(record["id"]) for record in records[:size]
    ]
    assert run_digest(run) != run_digest(parse_run(path.read_bytes()))
    # The canonical text the regenerator writes is the canonical form our reader re-encodes.
    assert renaming.canonical_text(document).encode("utf-8") == path.read_bytes()
    old_strings = renaming.strings_in(records)
    assert not {record.id for record in run.records} & old_strings
