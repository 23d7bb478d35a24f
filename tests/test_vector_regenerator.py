"""scripts/vectors/renaming.py: the renaming behind `make vectors-alt`, without a reference venv.

`make vectors-alt` (docs/vectors.md) regenerates vector files with the references themselves,
which needs their venvs and minutes, so it is not part of the suite. What can be checked
without them is checked here on a tiny case: the renaming is seeded and consistent, keeps
distinct names distinct, keeps a well-formed digest well-formed and a malformed one as it
was, and a renamed, shortened run is still a run our reader accepts with the new identities.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sealeval.captured.importers import load_run
from sealeval.captured.run import parse_run, run_digest
from sealeval.strict_yaml import load_strict_yaml
from support.scripts import load_script
from support.vectors import PROJECT_ROOT, load, vectors_dir

SCRIPT = PROJECT_ROOT / "scripts" / "vectors" / "renaming.py"


@pytest.fixture(scope="module")
def renaming() -> ModuleType:
    return load_script("vectors_renaming", SCRIPT)


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


def _native_sides() -> list[tuple[Path, dict[str, Any]]]:
    """Every side of a pack request that reads another evaluator's file (not an invarlock run)."""
    found = []
    for case in load("invarlock/packs.json")["cases"]:
        request = vectors_dir() / "invarlock" / case["input"]["request_dir"]
        authored = load_strict_yaml((request / "request.yaml").read_bytes())
        for side in ("baseline", "subject"):
            declared = authored["comparison"][side]
            if declared["adapter"] != "invarlock":
                found.append((request / declared["path"], declared))
    return found


def _loaded(path: Path, declared: dict[str, Any]) -> Any:
    options = {key: declared[key] for key in _LOAD_OPTIONS if key in declared}
    return load_run(path, declared["adapter"], **options)


_LOAD_OPTIONS = (
    "source",
    "run_id",
    "artifact_digest",
    "service_identity",
    "score_provenance",
    "input_projection",
)


def test_every_evaluator_format_of_the_packs_is_renamed(renaming: ModuleType) -> None:
    # packs.json regenerates a pack only if the renaming knows both sides' formats.
    adapters = {declared["adapter"] for _path, declared in _native_sides()}
    assert adapters
    assert adapters <= set(renaming.NATIVE_FORMATS)


def test_renamed_evaluator_files_are_runs_with_the_new_ids(
    renaming: ModuleType, tmp_path: Path
) -> None:
    rewriter, ids = renaming.Rewriter(7), renaming.IntegerIds(7)
    sides = _native_sides()
    for index, (path, declared) in enumerate(sides):
        adapter = declared["adapter"]
        data = path.read_bytes()
        integer = renaming.NATIVE_FORMATS[adapter][2] is int
        rename = ids.integer_id if integer else rewriter.record_id
        # Renaming nothing gives the same bytes: the file's layout is kept.
        assert renaming.rename_native(adapter, data, lambda value: value) == data
        count = renaming.native_record_count(adapter, data)
        size = renaming.bounded_size(rewriter, count, 0)
        target = tmp_path / f"{index}{path.suffix}"
        target.write_bytes(renaming.rename_native(adapter, data, rename, size))
        old, new = _loaded(path, declared), _loaded(target, declared)
        assert len(old.records) == count
        assert len(new.records) == size
        expected = [
            str(rename(int(record.id))) if integer else rename(record.id)
            for record in old.records[:size]
        ]
        assert [record.id for record in new.records] == expected
        assert len({record.id for record in new.records}) == size  # distinct ids stay distinct
        assert all(a.id != b.id for a, b in zip(old.records, new.records, strict=False))
        for before, after in zip(old.to_dict()["records"], new.to_dict()["records"], strict=False):
            drop = ("id", "context")  # the context quotes the upstream record, id included
            assert {k: v for k, v in after.items() if k not in drop} == {
                k: v for k, v in before.items() if k not in drop
            }
        assert new.source_digest != old.source_digest


@pytest.mark.parametrize(
    ("adapter", "data"),
    [
        pytest.param("jsonl", b'{"id": "a"}\n\n{"id": "b"}\n', id="blank-line-inside-jsonl"),
        pytest.param("jsonl", b'{"key": "a"}\n', id="record-without-id"),
        pytest.param("jsonl", b'{"id": 1}\n', id="id-of-another-type"),
        pytest.param("lm-eval-samples", b'{"doc_id": true}\n', id="bool-is-not-an-int-id"),
        pytest.param("jsonl", b'{ "id" : "a" }\n', id="layout-not-reproduced"),
        pytest.param("evaluator-native-json", b'{"id": "a"}', id="not-a-list"),
        pytest.param("evaluator-native-json", b'[\n  {"id": "a"}\n]', id="indented-list"),
    ],
)
def test_unknown_evaluator_layouts_are_refused(
    renaming: ModuleType, adapter: str, data: bytes
) -> None:
    # The regenerator copies such a pack unchanged rather than change what it tests.
    with pytest.raises(renaming.UnknownLayoutError):
        renaming.rename_native(adapter, data, renaming.Rewriter(3).record_id)


def test_integer_ids_are_seeded_consistent_and_distinct(renaming: ModuleType) -> None:
    olds = list(range(40))
    first = renaming.IntegerIds(3)
    news = [first.integer_id(old) for old in olds]
    assert all(type(new) is int and new >= 0 for new in news)
    assert len(set(news)) == len(olds)
    assert all(new != old for old, new in zip(olds, news, strict=True))
    assert [first.integer_id(old) for old in olds] == news
    again, other = renaming.IntegerIds(3), renaming.IntegerIds(4)
    assert [again.integer_id(old) for old in olds] == news
    assert [other.integer_id(old) for old in olds] != news


@pytest.mark.parametrize(
    ("count", "floor"), [(12, 10), (12, 12), (12, 20), (8, 10), (20, 0), (2, 0), (200, 150)]
)
def test_bounded_sizes_keep_the_policy_floor(renaming: ModuleType, count: int, floor: int) -> None:
    size = renaming.bounded_size(renaming.Rewriter(11), count, floor)
    if count < floor:  # already too few: shrinks like any run
        assert size == renaming.Rewriter(11).size(count)
    elif count < 3 or max(count // 2 + 1, floor) >= count:
        assert size == count
    else:
        assert max(count // 2 + 1, floor) <= size < count


def _derived_id_cases(renaming: ModuleType) -> list[dict[str, Any]]:
    """adapters.json's loaded runs whose format derives record ids from an integer member."""
    return [
        case
        for case in load("invarlock/adapters.json")["cases"]
        if case["input"]["adapter"] in renaming.DERIVED_ID_FORMATS and "run" in case["expected"]
    ]


def _case_file(given: dict[str, Any]) -> bytes:
    if "file_b64" in given:
        return base64.b64decode(given["file_b64"])
    return str(given["file_text"]).encode("utf-8")


def test_derived_ids_follow_their_renamed_integers(renaming: ModuleType, tmp_path: Path) -> None:
    # adapters.json renames lm-eval's doc_id, Inspect's integer id and promptfoo's testIdx:
    # the ids our reader derives must follow, and nothing else of a record may change.
    found = _derived_id_cases(renaming)
    assert {case["input"]["adapter"] for case in found} == set(renaming.DERIVED_ID_FORMATS)
    ids = renaming.IntegerIds(7)
    renamed_formats: set[str] = set()
    for index, case in enumerate(found):
        given = case["input"]
        adapter, data = given["adapter"], _case_file(given)
        assert renaming.rename_integer_members(adapter, data, lambda value: value) == data
        pairs: dict[int, int] = {}

        def rename(old: int, pairs: dict[int, int] = pairs) -> int:
            pairs[old] = ids.integer_id(old)
            return pairs[old]

        renamed = renaming.rename_integer_members(adapter, data, rename)
        if pairs:
            renamed_formats.add(adapter)
        declared = {key: given[key] for key in _LOAD_OPTIONS if key in given}
        paths = [tmp_path / f"{index}-old", tmp_path / f"{index}-new"]
        paths[0].write_bytes(data)
        paths[1].write_bytes(renamed)
        old, new = (_loaded(path, {**declared, "adapter": adapter}) for path in paths)
        assert len(new.records) == len(old.records)
        expected = []
        for record in old.records:
            head, colon, tail = record.id.partition(":")
            derived = (
                head.isdigit()
                and int(head) in pairs
                and (colon == "") == (adapter != "promptfoo-jsonl")
            )
            expected.append(f"{pairs[int(head)]}{colon}{tail}" if derived else record.id)
        assert [record.id for record in new.records] == expected
        assert (expected != [record.id for record in old.records]) == bool(pairs)
        for before, after in zip(old.to_dict()["records"], new.to_dict()["records"], strict=True):
            drop = ("id", "context")  # the context quotes the upstream record, id included
            assert {k: v for k, v in after.items() if k not in drop} == {
                k: v for k, v in before.items() if k not in drop
            }
    assert renamed_formats == set(renaming.DERIVED_ID_FORMATS)


@pytest.mark.parametrize(
    ("adapter", "data", "renamed"),
    [
        pytest.param("lm-eval-samples", b'{"doc_id": true}\n', None, id="bool-is-kept"),
        pytest.param("inspect-json", b'{"samples": [{"id": 1.5}]}', None, id="float-is-kept"),
        pytest.param("promptfoo-jsonl", b'{"prompt": "p"}', None, id="missing-member-is-kept"),
        pytest.param(
            "inspect-json",
            b'{"samples": [{"id": "s"}, {"id": 3}]}\n',
            b'{"samples": [{"id": "s"}, {"id": 4}]}\n',
            id="only-integers-renamed",
        ),
    ],
)
def test_derived_id_members_other_than_integers_are_kept(
    renaming: ModuleType, adapter: str, data: bytes, renamed: bytes | None
) -> None:
    # A refusal case (a float id, a missing doc_id) must stay the refusal it was.
    result = renaming.rename_integer_members(adapter, data, lambda value: value + 1)
    assert result == (data if renamed is None else renamed)


@pytest.mark.parametrize(
    ("adapter", "data"),
    [
        pytest.param("lm-eval-samples", b'{"doc_id": 1}\n\n{"doc_id": 2}\n', id="blank-line"),
        pytest.param("promptfoo-jsonl", b'{"testIdx": 0,}\n', id="not-json"),
        pytest.param("promptfoo-jsonl", b'{"testIdx": 0}\n\xff\n', id="not-utf8"),
        pytest.param("lm-eval-samples", b'{ "doc_id" : 1 }\n', id="layout-not-reproduced"),
        pytest.param("inspect-json", b'[{"id": 1}]', id="not-an-object"),
        pytest.param("inspect-json", b'{"samples": {"id": 1}}', id="samples-not-a-list"),
    ],
)
def test_derived_id_files_of_unknown_layout_are_refused(
    renaming: ModuleType, adapter: str, data: bytes
) -> None:
    # The regenerator copies such a case unchanged rather than change what it tests.
    with pytest.raises(renaming.UnknownLayoutError):
        renaming.rename_integer_members(adapter, data, lambda value: value + 1)
