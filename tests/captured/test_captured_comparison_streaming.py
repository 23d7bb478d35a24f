"""compare_run_files: the streamed comparison gives compare_runs' bytes and refusals.

Every comparisons.json vector is compared both ways (report bytes, or class,
code and field of the refusal), then seeded random pairs with every per-record
outcome mixed in: unsorted ids, errors, unavailable outputs, absent score keys,
invalid references, changed inputs, slices and a pinned case set.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured import CapturedRunError, Run, make_run, read_run, write_run
from sealeval.captured.case_set import case_set_of_run
from sealeval.captured.comparison import (
    ComparisonError,
    compare_runs,
    scope_values,
    scope_values_files,
)
from sealeval.captured.comparison.streaming import compare_run_files
from sealeval.captured.comparison.table import RowSpill, RunTable
from sealeval.captured.policy import check_runtime, parse_comparison_policy
from sealeval.errors import SealevalError
from support.digests import ARTIFACT, SUBJECT_ARTIFACT
from support.vectors import cases, vectors_dir

VECTORS = "invarlock/comparisons.json"
ARTIFACTS = (ARTIFACT, SUBJECT_ARTIFACT)
PROVENANCE = {
    "kind": "measurement",
    "source": "meter",
    "version": "1",
    "unit": "score",
    "rubric_digest": None,
}


def _outcome(call: Any) -> tuple[str, ...]:
    try:
        report = call()
    except SealevalError as error:
        return (type(error).__name__, error.code, str(error.field))
    return ("report", report.canonical_bytes.decode("utf-8"))


def _budget(case_input: dict[str, Any]) -> dict[str, Any]:
    if "max_bootstrap_draws" in case_input:
        return {"max_bootstrap_draws": case_input["max_bootstrap_draws"]}
    return {}


#: Vector runs up to this size stream here (larger ones only add bootstrap time: the
#: in-memory suite covers them, and the random pairs below cover the streaming rules).
SMALL_RUN_BYTES = 100_000


def _small(param: Any) -> bool:
    case_input = param.values[0]["input"]
    root = vectors_dir() / "invarlock"
    return all(
        not isinstance(case_input.get(side), str)
        or (root / case_input[side]).stat().st_size <= SMALL_RUN_BYTES
        for side in ("baseline", "subject")
    )


@pytest.mark.parametrize("case", [param for param in cases(VECTORS) if _small(param)])
def test_small_vectors_stream_to_the_same_outcome(case: dict[str, Any]) -> None:
    case_input = case["input"]
    root = vectors_dir() / "invarlock"
    paths = (root / case_input["baseline"], root / case_input["subject"])
    options = _budget(case_input)
    streamed = _outcome(
        lambda: compare_run_files(
            baseline=paths[0], subject=paths[1], policy=case_input["policy"], **options
        )
    )
    if streamed[0] == "report":  # the reference's own bytes (the in-memory suite checks them)
        assert streamed[1] == case["expected"]["report_canonical"]
        return

    def in_memory() -> Any:
        runs = []
        for side, path in zip(("baseline", "subject"), paths, strict=True):
            try:
                runs.append(read_run(path))
            except CapturedRunError as error:  # the streamed path roots the field at the side
                field = str(error.field)
                rooted = side + field[3:] if field.startswith("run") else f"{side}.{field}"
                raise CapturedRunError(error.code, rooted) from None
        return compare_runs(
            baseline=runs[0], subject=runs[1], policy=case_input["policy"], **options
        )

    assert streamed == _outcome(in_memory)


def test_the_small_vectors_cover_reports_and_refusals() -> None:
    small = [param.values[0] for param in cases(VECTORS) if _small(param)]
    shapes = {"error" in case["expected"] for case in small}
    assert shapes == {True, False}
    kinds = {
        metric["kind"]
        for case in small
        if isinstance(case["input"]["policy"], dict)
        for metric in case["input"]["policy"].get("metrics", ())
        if isinstance(metric, dict)
    }
    assert {"normalized_nll_per_utf8_byte", "recorded", "token_f1"} <= kinds


def _metric(kind: str, **changes: Any) -> dict[str, Any]:
    metric: dict[str, Any] = {
        "name": kind,
        "kind": kind,
        "configuration": {},
        "direction": "higher",
        "unit": "score",
        "aggregation": "mean",
        "minimum_count": 1,
        "maximum_regression": 1,
        "maximum_interval_width": 2,
    }
    if kind == "token_f1":
        metric["configuration"] = {"unicode_version": "15.0.0"}
    metric.update(changes)
    return metric


def _random_pair(rng: random.Random, size: int, flaw: str = "none") -> tuple[Run, Run]:
    """Two runs over the same cases; ``flaw`` changes one record (or none)."""
    words = ("alpha", "beta", "gamma", "delta", "")
    rows: list[tuple[dict[str, Any], dict[str, Any]]] = []
    flawed = rng.randrange(size)
    for number, index in enumerate(rng.sample(range(10 * size), size)):
        # a JSON string literal: a valid reference for every kind used here
        expected = '"' + " ".join(rng.choice(words) for _ in range(rng.randint(1, 3))) + '"'
        if flaw == "reference" and number >= flawed:
            expected = "not json"
        shared: dict[str, Any] = {
            "id": f"r{index}",
            "input": f"question {index} " + "x" * rng.randint(0, 40),
            "expected": expected,
            "metadata": {"topic": rng.choice(("geo", "his"))},
        }
        sides = []
        for _ in range(2):
            record = dict(shared)
            record["output"] = rng.choice([expected, '"alpha"', None, 7, expected.upper()])
            if rng.random() < 0.1:
                record["error"] = ""
            if rng.random() < 0.9:
                record["scores"] = {"q": rng.choice([0.0, 0.5, 1.0])}
            sides.append(record)
        if number == flawed and flaw == "input":
            sides[1]["input"] = sides[1]["input"] + "!"
        if number == flawed and flaw == "id":
            sides[1]["id"] = shared["id"] + "-renamed"
        if number == flawed and flaw == "metadata":
            sides[1]["metadata"] = {"topic": "changed"}
        rows.append((sides[0], sides[1]))
    header = {"score_provenance": {"q": PROVENANCE}}
    runs = tuple(
        make_run(
            [pair[side] for pair in rows],
            source={"name": "unit", "version": "1"},
            run_id=("baseline", "subject")[side],
            artifact_digest=ARTIFACTS[side],
            **header,
        )
        for side in (0, 1)
    )
    return runs[0], runs[1]


POLICIES = [
    [_metric("exact_match"), _metric("token_f1")],
    [_metric("json_exact"), _metric("recorded", score_key="q", accepted_provenance=PROVENANCE)],
    [_metric("token_f1"), _metric("json_exact")],
]


@pytest.mark.parametrize("seed", range(32))
def test_random_pairs_stream_to_the_same_outcome(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    flaw = ("none", "input", "none", "metadata", "none", "reference", "none", "id")[seed % 8]
    baseline, subject = _random_pair(rng, rng.randint(3, 40), flaw)
    policy: dict[str, Any] = {
        "format": "invarlock/comparison-policy-v1",
        "metrics": POLICIES[seed % len(POLICIES)],
        "slices": [{"name": "geo", "where": {"topic": "geo"}}] if seed % 2 else [],
    }
    if seed % 8 in (2, 3):  # matching (no flaw) and mismatching (a changed subject)
        policy["expected_case_set_digest"] = case_set_of_run(baseline).digest
    paths = (tmp_path / "b.json", tmp_path / "s.json")
    write_run(baseline, paths[0])
    write_run(subject, paths[1])
    expected = _outcome(
        lambda: compare_runs(baseline=baseline, subject=subject, policy=policy, workers=1)
    )
    streamed = _outcome(
        lambda: compare_run_files(baseline=paths[0], subject=paths[1], policy=policy, workers=1)
    )
    assert streamed == expected


def test_handles_and_non_canonical_paths(tmp_path: Path) -> None:
    baseline, subject = _random_pair(random.Random(5), 12)
    policy = {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [_metric("exact_match")],
        "slices": [],
    }
    expected = compare_runs(baseline=baseline, subject=subject, policy=policy)
    left = baseline.to_canonical()
    right = subject.to_canonical()
    report = compare_run_files(baseline=io.BytesIO(left), subject=io.BytesIO(right), policy=policy)
    assert report.canonical_bytes == expected.canonical_bytes
    # strict JSON in another layout: read whole, same report
    path = tmp_path / "pretty.json"
    path.write_bytes(b" " + left)
    report = compare_run_files(baseline=path, subject=io.BytesIO(right), policy=policy)
    assert report.canonical_bytes == expected.canonical_bytes
    # a handle must be canonical
    with pytest.raises(CapturedRunError) as refused:
        compare_run_files(
            baseline=io.BytesIO(b" " + left), subject=io.BytesIO(right), policy=policy
        )
    assert (refused.value.code, refused.value.field) == ("not_canonical", "baseline")


def test_run_refusals_come_before_policy_refusals(tmp_path: Path) -> None:
    baseline, subject = _random_pair(random.Random(6), 4)
    write_run(subject, tmp_path / "s.json")
    with pytest.raises(CapturedRunError) as refused:
        compare_run_files(baseline=tmp_path / "absent.json", subject=tmp_path / "s.json", policy={})
    assert (refused.value.code, refused.value.field) == ("not_found", "baseline")
    write_run(baseline, tmp_path / "b.json")
    with pytest.raises(SealevalError) as policy_refused:
        compare_run_files(baseline=tmp_path / "b.json", subject=tmp_path / "s.json", policy={})
    assert not isinstance(policy_refused.value, CapturedRunError)
    # a valid run in another JSON layout is read whole before the policy is refused
    (tmp_path / "pretty.json").write_bytes(b" " + baseline.to_canonical())
    with pytest.raises(SealevalError) as policy_refused:
        compare_run_files(baseline=tmp_path / "pretty.json", subject=tmp_path / "s.json", policy={})
    assert not isinstance(policy_refused.value, CapturedRunError)
    (tmp_path / "broken.json").write_bytes(b" " + baseline.to_canonical()[:-9])
    with pytest.raises(SealevalError) as run_refused:
        compare_run_files(baseline=tmp_path / "broken.json", subject=tmp_path / "s.json", policy={})
    assert type(run_refused.value).__name__ == "CanonicalError"
    with pytest.raises(ComparisonError) as budget:
        compare_run_files(
            baseline=tmp_path / "b.json",
            subject=tmp_path / "s.json",
            policy={"format": "invarlock/comparison-policy-v1", "metrics": [], "slices": []},
            max_bootstrap_draws=-1,
        )
    assert budget.value.code == "invalid_budget"
    with pytest.raises(ComparisonError) as order:
        compare_run_files(
            baseline=tmp_path / "b.json",
            subject=tmp_path / "s.json",
            policy={},
            decision_order="width-first",
        )
    assert (order.value.code, order.value.field) == ("invalid_decision_order", "decision_order")


def test_a_table_keeps_fixed_size_columns_only() -> None:
    baseline, _subject = _random_pair(random.Random(7), 30)
    approved = parse_comparison_policy(
        {
            "format": "invarlock/comparison-policy-v1",
            "metrics": [_metric("exact_match")],
            "slices": [],
        }
    )
    with RunTable(approved, check_runtime(approved), side="baseline", rows=True) as table:
        for record in baseline.records:
            table.add(record)
        assert len(table) == len(baseline.records)
        assert len(table.identity) == 96 * len(table)
        assert len(table.columns[0].values) == len(table)
        assert table.case_set_digest() == case_set_of_run(baseline).digest
    assert table.spill is None


def test_spilled_rows_come_back_in_any_order() -> None:
    spill = RowSpill()
    rows = [bytes([65 + number]) * (400_000 + number) for number in range(5)]  # > 1 MiB
    for row in rows:
        spill.add(row)
    assert list(spill.rows([4, 0, 2])) == [rows[4], rows[0], rows[2]]
    spill.add(b"tail")
    assert list(spill.rows([5, 1])) == [b"tail", rows[1]]
    spill.close()


def _values_outcome(call: Any) -> tuple[Any, ...]:
    try:
        values = call()
    except SealevalError as error:
        return (type(error).__name__, error.code, str(error.field))
    return tuple(
        (
            item.metric.name,
            item.scope,
            item.seed,
            item.ids,
            item.baseline.tolist(),
            item.subject.tolist(),
            item.missing.tolist(),
        )
        for item in values
    )


@pytest.mark.parametrize("seed", range(16))
def test_random_pairs_give_the_same_scope_values_streamed(seed: int, tmp_path: Path) -> None:
    """``scope_values_files`` (what ``compare`` prints means from) equals ``scope_values``."""
    rng = random.Random(1000 + seed)
    flaw = ("none", "input", "none", "metadata", "none", "reference", "none", "id")[seed % 8]
    baseline, subject = _random_pair(rng, rng.randint(3, 40), flaw)
    policy: dict[str, Any] = {
        "format": "invarlock/comparison-policy-v1",
        "metrics": POLICIES[seed % len(POLICIES)],
        "slices": [{"name": "geo", "where": {"topic": "geo"}}] if seed % 2 else [],
    }
    if seed % 8 in (2, 3):
        policy["expected_case_set_digest"] = case_set_of_run(baseline).digest
    paths = (tmp_path / "b.json", tmp_path / "s.json")
    write_run(baseline, paths[0])
    write_run(subject, paths[1])
    expected = _values_outcome(
        lambda: scope_values(baseline=baseline, subject=subject, policy=policy)
    )
    streamed = _values_outcome(
        lambda: scope_values_files(baseline=paths[0], subject=paths[1], policy=policy)
    )
    assert streamed == expected
    if flaw == "none":  # unflawed pairs give values, not a refusal
        assert all(isinstance(item, tuple) for item in streamed)


def test_streamed_scope_values_refuse_runs_before_the_policy(tmp_path: Path) -> None:
    baseline, _subject = _random_pair(random.Random(7), 5, "none")
    good = tmp_path / "b.json"
    write_run(baseline, good)
    broken = tmp_path / "broken.json"
    broken.write_bytes(b"{}")
    policy = {"format": "nope"}
    streamed = _values_outcome(
        lambda: scope_values_files(baseline=good, subject=broken, policy=policy)
    )
    compared = _outcome(lambda: compare_run_files(baseline=good, subject=broken, policy=policy))
    assert streamed == compared
    assert streamed[0] == "CapturedRunError"
    assert streamed[2].startswith("subject")
