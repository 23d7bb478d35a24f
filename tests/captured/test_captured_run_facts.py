"""Run facts: a run's facts without its records, equal to what the held run gives."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.case_set import case_set_of_run
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack_reader import EvidencePackError, read_evidence_pack
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.request import normalize_captured_request
from sealeval.captured.run import Limits, Run, read_run
from sealeval.captured.run_facts import RunFacts, read_run_facts
from sealeval.errors import SealevalError
from support.vectors import cases, decode_input, load, pack_folder, vectors_dir

V = vectors_dir() / "invarlock"


def _runs() -> list[Path]:
    found = sorted({*V.glob("runs/*.json"), *V.glob("packs/*/evidence/records/*.json")})
    assert len(found) >= 4
    return found


def _streamed(run: Run, policy: ComparisonPolicy | None, **kwargs: Any) -> RunFacts:
    kwargs.setdefault("keep_ids", True)
    return read_run_facts(io.BytesIO(run.to_canonical()), policy=policy, **kwargs)


def _outcome(act: Any) -> tuple[str, ...]:
    try:
        return ("ok", act().canonical_bytes.decode("utf-8"))
    except SealevalError as error:
        return (type(error).__name__, error.code, str(error.field))


@pytest.mark.parametrize("case", cases("invarlock/requests.json"))
def test_outlines_bind_a_request_exactly_like_runs(case: dict[str, Any]) -> None:
    """Every request vector: same normalized bytes or same refusal with held runs and outlines.

    The vectors include pinned case sets, declared input projections and
    declared identities, each accepted and refused.
    """
    inputs = decode_input(case["input"], arrays_as_tuples=False)
    if set(inputs) != {"authored", "baseline", "subject", "policy"}:
        return  # a normalized-request case: no run involved
    runs = [read_run(V / inputs[side]) for side in ("baseline", "subject")]
    try:
        policy: ComparisonPolicy | None = ComparisonPolicy(inputs["policy"])
    except SealevalError:
        policy = None

    def held() -> Any:
        return normalize_captured_request(inputs["authored"], *runs, inputs["policy"])

    def streamed() -> Any:
        outlines = [_streamed(run, policy) for run in runs]
        return normalize_captured_request(inputs["authored"], *outlines, inputs["policy"])

    def in_memory() -> Any:
        outlines = [RunFacts.of_run(run, policy) for run in runs]
        return normalize_captured_request(inputs["authored"], *outlines, inputs["policy"])

    expected = _outcome(held)
    assert "error" in case["expected"] or expected[0] == "ok"
    assert _outcome(streamed) == expected
    assert _outcome(in_memory) == expected


def test_request_vectors_exercise_the_outline_checks() -> None:
    """The equivalence above covers the checks an outline answers on its own."""
    codes = set()
    for case in load("invarlock/requests.json")["cases"]:
        message = case["expected"].get("error", {}).get("message", "")
        codes.update(
            code
            for code, text in (
                ("case_set", "planned case set"),
                ("projection", "input projection differs"),
            )
            if text in message
        )
    assert codes == {"case_set", "projection"}


def _policy(run: Run, *, pinned: bool) -> ComparisonPolicy:
    """A vector pack's policy with one slice selecting the run's first record's metadata."""
    document = json.loads(
        (pack_folder("text-20-exact-signed") / "evidence/inputs/policy.json").read_bytes()
    )
    document.pop("expected_case_set_digest", None)
    metadata = dict(run.records[0].metadata)
    where = dict(list(metadata.items())[:1]) or {"absent-key": "x"}
    document["slices"] = [{"name": "first", "where": where}]
    if pinned:
        document["expected_case_set_digest"] = case_set_of_run(run).digest
    return ComparisonPolicy(document)


@pytest.mark.parametrize(
    "path", _runs(), ids=lambda path: str(path.relative_to(V)).replace("/", ":")
)
def test_outline_facts_equal_the_held_run(path: Path) -> None:
    try:
        run = read_run(path)
    except CapturedRunError as error:  # a tampered run: the outline refuses it alike
        refused = (error.code, error.field)
        with path.open("rb") as handle, pytest.raises(CapturedRunError) as caught:
            read_run_facts(handle, policy=None)
        assert (caught.value.code, caught.value.field) == refused
        return
    for pinned in (False, True):
        policy = _policy(run, pinned=pinned)
        streamed = _streamed(run, policy)
        held = RunFacts.of_run(run, policy)
        for outline in (streamed, held):
            assert (outline.digest, outline.canonical_size) == (run.digest, run.canonical_size)
            assert outline.record_count == len(outline) == len(run.records)
            assert outline.ids == frozenset(run.index)
            assert outline.header.canonical_parts() == run.header.canonical_parts()
            assert (outline.run_id, outline.source, outline.service_identity) == (
                run.run_id,
                run.source,
                run.service_identity,
            )
            assert outline.evaluated_subject_digest == run.evaluated_subject_digest
            assert (outline.artifact_digest, outline.source_digest) == (
                run.artifact_digest,
                run.source_digest,
            )
            assert outline.score_provenance == run.score_provenance
            matched = sum(1 for record in run.records if policy.slices[0].matches(record.metadata))
            assert outline.slice_counts == (matched,)
            assert outline.unprojected == any(record.projection is None for record in run.records)
            assert all(record_id in outline for record_id in run.index)
            assert "no-such-id\x00" not in outline
            assert 7 not in outline
            assert repr(outline) == f"RunFacts(records={len(run)}, digest={run.digest!r})"
        assert streamed.case_set_digest == held.case_set_digest == policy.expected_case_set_digest
    assert _streamed(run, None).slice_counts == ()


def test_outline_without_ids_keeps_none_and_refuses_membership() -> None:
    run = read_run(_runs()[0])
    outline = _streamed(run, None, keep_ids=False)
    assert outline.ids is None
    with pytest.raises(CapturedRunError) as caught:
        outline.has_id(run.records[0].id)
    assert (caught.value.code, caught.value.field) == ("invalid_type", "ids")


def test_facts_read_from_a_descriptor_reread_the_same_file(tmp_path: Path) -> None:
    """A descriptor is kept: later passes re-read it; closed, nothing can be re-read."""
    run = read_run(_runs()[0])
    path = tmp_path / "run.json"
    path.write_bytes(run.to_canonical())
    fd = os.open(path, os.O_RDONLY)
    facts = read_run_facts(fd, policy=None)
    path.unlink()  # later passes read the descriptor, never the name
    assert facts.rereadable
    assert facts.case_set_digest is None
    with facts.open() as handle:
        assert handle.read() == run.to_canonical()
    assert b"".join(facts.iter_canonical()) == run.to_canonical()
    policy = _policy(run, pinned=True)
    assert facts.case_set_for(policy) == policy.expected_case_set_digest
    facts.close()
    facts.close()  # idempotent
    assert not facts.rereadable
    for act in (facts.open, lambda: facts.case_set_for(policy)):
        with pytest.raises(CapturedRunError) as caught:
            act()
        assert (caught.value.code, caught.value.field) == ("invalid_type", "run")
    held = RunFacts.of_run(run, None)
    assert not held.rereadable
    with pytest.raises(CapturedRunError):
        list(held.iter_canonical())


def test_a_refused_descriptor_is_left_open_for_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(b'{"format": 1}')
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(CapturedRunError):
            read_run_facts(fd, policy=None)
        assert os.fstat(fd).st_size == len(b'{"format": 1}')
    finally:
        os.close(fd)


def test_projection_equality_needs_every_record_projected_alike() -> None:
    run = read_run(_runs()[0])
    outline = _streamed(run, None)
    assert outline.unprojected
    assert not outline.projections_equal({"pointer": "/input"})


def test_outline_run_refuses_what_the_run_reader_refuses() -> None:
    run = read_run(_runs()[0])
    data = run.to_canonical()
    for bad, code in (
        (data.replace(b'{"', b'{ "', 1), "not_canonical"),
        (data[: len(data) // 2], None),
    ):
        with pytest.raises(CapturedRunError) as caught:
            read_run_facts(io.BytesIO(bad), policy=None)
        assert code is None or caught.value.code == code
    with pytest.raises(CapturedRunError) as caught:
        read_run_facts(io.BytesIO(data), policy=None, limits=Limits(max_records=1))
    assert caught.value.code == "too_many_records"


def test_reader_refuses_an_unknown_run_form(tmp_path: Path) -> None:
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(tmp_path, runs="records")
    assert (caught.value.code, caught.value.field) == ("invalid_field", "runs")


def test_the_deprecated_outline_name_is_the_one_facts_type() -> None:
    import sealeval.captured.pack_reader as reader_module  # noqa: PLC0415
    import sealeval.captured.request as request_module  # noqa: PLC0415

    assert reader_module.RunOutline is RunFacts
    assert request_module.RunFacts is RunFacts
    assert "RunOutline" in reader_module.__all__


def test_a_file_rewritten_in_place_is_not_the_facts_case_set(tmp_path: Path) -> None:
    first, second = (read_run(path) for path in _runs()[:2])
    assert first.digest != second.digest
    path = tmp_path / "run.json"
    path.write_bytes(first.to_canonical())
    facts = read_run_facts(os.open(path, os.O_RDONLY), policy=None)
    try:
        with path.open("r+b") as handle:  # the same file (inode), other bytes
            handle.truncate(0)
            handle.write(second.to_canonical())
        with pytest.raises(CapturedRunError) as caught:
            facts.case_set_for(_policy(first, pinned=True))
        assert (caught.value.code, caught.value.field) == ("case_set_mismatch", "run")
    finally:
        facts.close()
