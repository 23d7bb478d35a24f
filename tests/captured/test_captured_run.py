"""Captured runs: records, runs, digests, likelihood facts, projections, streaming I/O."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import os
import tempfile
import tracemalloc
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import sealeval.captured.run as run_module
from sealeval._validate import thaw_json
from sealeval.canonical import digest_bytes, digest_invarlock, encode_invarlock, frozen_canonical
from sealeval.captured import (
    INVARLOCK_LIMITS,
    CapturedRunError,
    InputProjection,
    LikelihoodFacts,
    Limits,
    Record,
    Run,
    RunEncoder,
    RunHeader,
    RunReader,
    RunSummary,
    RunWriter,
    ScoreProvenance,
    Source,
    check_likelihood_binding,
    make_run,
    parse_run,
    project_record,
    read_run,
    run_digest,
    run_from_document,
    write_run,
)
from sealeval.errors import CanonicalError, OutputError, SealevalError
from support.digests import ARTIFACT, CONFIG, TOKENIZER
from support.refusals import CANARY, assert_refused, rows_for
from support.vectors import PROJECT_ROOT, load, vectors_dir

OTHER = "sha256:" + "ab" * 32
SOURCE = {"name": "acme-harness", "version": "3.1.4"}
RUN_SCHEMA = Draft202012Validator(
    json.loads(
        (PROJECT_ROOT / "contracts" / "invarlock.evaluation-run-v1.schema.json").read_text(
            encoding="utf-8"
        )
    )
)
RUN_FILES = sorted((vectors_dir() / "invarlock" / "runs").glob("*.json"))
_DROP = object()


def _record(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"id": "r1", "input": "Name the place", "expected": "Paris"}
    record["output"] = "Paris"
    record.update(changes)
    return {key: value for key, value in record.items() if value is not _DROP}


def _run(records: Any = None, **changes: Any) -> Run:
    arguments: dict[str, Any] = {"source": SOURCE, "run_id": "run-1", "artifact_digest": ARTIFACT}
    arguments.update(changes)
    return make_run([_record()] if records is None else records, **arguments)


def _facts(
    input_value: Any = "Name the place", expected: str = "Paris", **changes: Any
) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "basis": "reference_continuation",
        "logprob_sum": -2.5,
        "token_count": 2,
        "utf8_byte_count": len(expected.encode("utf-8")),
        "input_digest": digest_invarlock(input_value),
        "reference_digest": digest_invarlock(expected),
        "artifact_digest": ARTIFACT,
        "configuration_digest": CONFIG,
        "tokenizer_digest": TOKENIZER,
        "source": dict(SOURCE),
    }
    facts.update(changes)
    return {key: value for key, value in facts.items() if value is not _DROP}


def _run_document(**changes: Any) -> dict[str, Any]:
    document = _run().to_dict()
    document.update(changes)
    return {key: value for key, value in document.items() if value is not _DROP}


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _projected_record() -> Record:
    record = Record.from_mapping(
        _record(input={"messages": [{"content": "Q"}]}, context={"trace": "t-1"})
    )
    return project_record(record, {"kind": "json-pointer", "pointer": "/input/messages/0/content"})


def _tampered_binding(**changes: Any) -> dict[str, Any]:
    """A projected record's document with its binding (or input) altered."""
    document = _projected_record().to_dict()
    binding = document["context"]["input_projection"]
    for key, value in changes.items():
        if key == "input":
            document["input"] = value
        elif key == "context_extra":
            document["context"]["added"] = value
        elif value is _DROP:
            del binding[key]
        else:
            binding[key] = value
    return document


# ---------------------------------------------------------------------------
# The canonical run files of the vector set


def _reported_run_digests() -> dict[str, str]:
    """Run digests the reference bound in its comparison reports, by run file."""
    found: dict[str, str] = {}
    for case in load("invarlock/comparisons.json")["cases"]:
        report = case["expected"].get("report")
        if isinstance(report, dict):
            for side in ("baseline", "subject"):
                found[case["input"][side]] = report["bindings"][side]
    return found


# Run files that exist to make a comparison fail; each is refused with our code.
_INVALID_RUN_FILES = {
    "projected-16-tampered.subject.json": "projection_replay_mismatch",
    "text-20-duplicate-id.subject.json": "duplicate_id",
}


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda path: f"runs-{path.stem}")
def test_run_file_vector(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    RUN_SCHEMA.validate(json.loads(data))
    # Matched by the name's ending: a regenerated tree prefixes its run files.
    invalid = [code for name, code in _INVALID_RUN_FILES.items() if path.name.endswith(name)]
    if invalid:
        code = invalid[0]
        with pytest.raises(CapturedRunError) as caught:
            read_run(path)
        assert caught.value.code == code
        with pytest.raises(CapturedRunError) as streamed:
            list(RunReader(path))
        assert streamed.value.code == code
        return
    run = read_run(path)
    assert run.to_canonical() == data
    assert run.digest == digest_bytes(data) == run_digest(run) == run_digest(json.loads(data))
    assert run.canonical_size == len(data)
    reported = _reported_run_digests().get(f"runs/{path.name}")
    if reported is not None:
        assert run.digest == reported
    reader = RunReader(path, chunk_size=4096)
    streamed_records = list(reader)
    assert len(streamed_records) == len(run.records)
    assert all(a == b for a, b in zip(streamed_records, run.records, strict=True))
    assert reader.summary == RunSummary(
        run_digest=run.digest, record_count=len(run), canonical_size=len(data)
    )
    assert reader.header.run_id == run.run_id
    target = tmp_path / "run.json"
    assert write_run(run, target) == run.digest
    assert target.read_bytes() == data
    assert target.stat().st_mode & 0o777 == 0o600


def test_reported_run_digests_cover_the_run_files() -> None:
    reported = _reported_run_digests()
    assert reported, "no run digest reported by the comparison vectors"
    for relative in reported:
        assert (vectors_dir() / "invarlock" / relative).is_file()


# ---------------------------------------------------------------------------
# Cross-check against the reference's thin adapters (adapters.json)

# adapters.json belongs to the importers; the cases of the two adapters that are
# plain wrappers of this API (``invarlock``: run documents; ``jsonl``: one record
# per line) are replayed here. Importer-level cases (identity overrides, line
# parsing, missing identities) are the importers' to test.
_ADAPTER_CASES = {
    "invarlock-canonical": None,
    "invarlock-noncanonical-bytes-accepted": None,
    "invarlock-duplicate-ids": "duplicate_id",
    "invarlock-unknown-record-field": "unknown_field",
    "invarlock-non-string-metadata": "invalid_type",
    "invarlock-boolean-score": "invalid_score",
    "invarlock-null-artifact-without-service": "artifact_digest_required",
    "invarlock-id-too-long": "invalid_text",
    "invarlock-id-control-char": "invalid_text",
    "invarlock-duplicate-json-key": "duplicate_key",
    "jsonl-basic": None,
    "jsonl-blank-lines-and-crlf": None,
    "jsonl-no-final-newline": None,
    "jsonl-hosted-service-identity": None,
    "jsonl-score-provenance": None,
    "jsonl-input-projection-input": None,
    "jsonl-input-projection-context": None,
    "jsonl-input-projection-escaped-pointer": None,
    "jsonl-input-projection-unresolved": "projection_unresolved",
    "jsonl-input-projection-non-text": "projection_not_text",
    "jsonl-input-projection-leading-zero-index": "projection_unresolved",
    "jsonl-input-projection-bad-root": "projection_root",
    "jsonl-input-projection-reserved-context-key": "projection_binding_invalid",
    "jsonl-service-and-artifact": "artifact_digest_forbidden",
    "jsonl-unknown-field": "unknown_field",
    "jsonl-duplicate-id": "duplicate_id",
}


def _adapter_cases() -> list[Any]:
    selected = [
        pytest.param(case, id=f"adapters-{case['name']}")
        for case in load("invarlock/adapters.json")["cases"]
        if case["name"] in _ADAPTER_CASES
    ]
    assert len(selected) == len(_ADAPTER_CASES)
    return selected


def _import_thin(case_input: dict[str, Any]) -> Run:
    raw = case_input["file_text"].encode("utf-8")
    if case_input["adapter"] == "invarlock":
        return parse_run(raw)
    rows = [
        json.loads(line)
        for line in raw.split(b"\n")
        if line.strip(b" \t\n\x0b\x0c\r")  # blank lines are skipped (spec 11 §1.1)
    ]
    return make_run(
        rows,
        source=case_input["source"],
        run_id=case_input["run_id"],
        artifact_digest=case_input.get("artifact_digest"),
        service_identity=case_input.get("service_identity"),
        score_provenance=case_input.get("score_provenance"),
        input_projection=case_input.get("input_projection"),
        source_digest=digest_bytes(raw),
    )


@pytest.mark.parametrize("case", _adapter_cases())
def test_thin_adapter_cases(case: dict[str, Any]) -> None:
    code = _ADAPTER_CASES[case["name"]]
    expected = case["expected"]
    if code is not None:
        assert "error" in expected
        with pytest.raises((CapturedRunError, CanonicalError)) as caught:
            _import_thin(case["input"])
        assert caught.value.code == code
        return
    if set(expected) != {"run_canonical", "run", "run_digest", "source_digest", "record_count"}:
        pytest.fail("vector case shape not understood")
    run = _import_thin(case["input"])
    assert run.to_canonical() == expected["run_canonical"].encode("utf-8")
    assert run.digest == expected["run_digest"]
    assert run.source_digest == expected["source_digest"]
    assert len(run) == expected["record_count"]
    assert run.to_dict() == expected["run"]
    RUN_SCHEMA.validate(expected["run"])


# ---------------------------------------------------------------------------
# Construction, documents, digests


def test_make_run_defaults_and_keeps_null_output_and_errors() -> None:
    run = _run(
        [
            _record(id="b", output=None, error=""),
            _record(id="a", output=None, error=None),
            _record(id="c", error="timeout", output="partial"),
        ]
    )
    assert run.ids == ("b", "a", "c")
    first = run.record("b")
    assert first.output is None
    assert first.errored
    assert first.error == ""
    assert not run.record("a").errored
    assert dict(first.scores) == {}
    assert dict(first.metadata) == {}
    assert dict(first.context) == {}  # type: ignore[arg-type]
    assert run.to_dict()["source_digest"] is None
    assert run.to_dict()["score_provenance"] == {}
    assert "service_identity" not in run.to_dict()
    assert run.evaluated_subject_digest == ARTIFACT


def test_records_are_frozen_copies() -> None:
    context: dict[str, Any] = {"trace": ["a"]}
    record = Record.from_mapping(_record(context=context))
    context["trace"].append("b")
    assert thaw_json(record.context) == {"trace": ["a"]}
    with pytest.raises(TypeError):
        record.context["x"] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        record.id = "other"  # type: ignore[misc]


def test_run_equality_is_canonical() -> None:
    one = _run([_record(scores={"s": 1})])
    other = _run([_record(scores={"s": 1.0})])
    assert one != other
    assert one.records[0] != other.records[0]
    assert one == _run([_record(scores={"s": 1})])
    assert hash(one) == hash(_run([_record(scores={"s": 1})]))
    assert len({one, other}) == 2


def test_run_documents_round_trip() -> None:
    run = _run(
        [_record(likelihood=_facts()), _record(id="r2", scores={"x": 1, "y": -0.0})],
        score_provenance={
            "x": {
                "kind": "judge",
                "source": "j",
                "version": "1",
                "unit": "score",
                "rubric_digest": OTHER,
            }
        },
        source_digest=OTHER,
    )
    document = run.to_dict()
    RUN_SCHEMA.validate(document)
    assert run_from_document(document) == run
    assert parse_run(run.to_canonical()) == run
    assert parse_run(json.dumps(document, indent=2).encode()) == run
    assert run_from_document(run) is run
    assert run.records[0].likelihood is not None
    assert run.records[0].likelihood.nll_per_utf8_byte == 2.5 / 5
    assert isinstance(run.score_provenance["x"], ScoreProvenance)


def test_canonical_parts_follow_the_sorted_key_order() -> None:
    run = _run([_record(), _record(id="r2")])
    prefix, suffix = run.header.canonical_parts()
    data = run.to_canonical()
    assert data == encode_invarlock(run.to_dict())
    assert data.startswith(prefix)
    assert data.endswith(suffix)
    assert prefix.endswith(b'"records":[')
    assert suffix.startswith(b"],")
    assert suffix.endswith(b"}\n")


def test_run_from_compat_limit_refuses_before_looking_at_records() -> None:
    document = {"records": [0] * 50_001}
    with pytest.raises(CapturedRunError) as caught:
        run_from_document(document, limits=INVARLOCK_LIMITS)
    assert caught.value.code == "too_many_records"


def test_limits_validate_themselves() -> None:
    with pytest.raises(ValueError):
        Limits(max_records=0)
    with pytest.raises(ValueError):
        Limits(max_file_bytes=None)  # type: ignore[arg-type]
    assert INVARLOCK_LIMITS.max_records == 50_000


def test_projection_binding_is_replayed_and_exposed() -> None:
    record = _projected_record()
    assert record.input == "Q"
    assert record.projection is not None
    assert thaw_json(record.captured_input) == {"messages": [{"content": "Q"}]}
    assert record.projection.configuration.pointer == "/input/messages/0/content"
    assert record.projection.configuration_digest == record.projection.configuration.digest
    assert record.projection.source_input_digest == digest_invarlock(
        {"messages": [{"content": "Q"}]}
    )
    assert Record.from_document(record.to_dict()) == record
    context_projected = project_record(
        Record.from_mapping(_record(context=["not", "an", "object"], input={})),
        InputProjection("/context/0"),
    )
    assert context_projected.input == "not"
    assert set(context_projected.context) == {"input_projection"}  # type: ignore[arg-type]
    escaped = project_record(
        Record.from_mapping(_record(input={"a/b": {"c~d": "x"}})),
        InputProjection("/input/a~1b/c~0d"),
    )
    assert escaped.input == "x"


def test_likelihood_on_projected_record_binds_the_original_input() -> None:
    original = {"messages": [{"content": "Q"}]}
    run = _run(
        [_record(input=original, likelihood=_facts(input_value=original))],
        input_projection={"kind": "json-pointer", "pointer": "/input/messages/0/content"},
    )
    assert run.records[0].input == "Q"
    with pytest.raises(CapturedRunError) as caught:
        _run(
            [_record(input=original, likelihood=_facts(input_value="Q"))],
            input_projection={"kind": "json-pointer", "pointer": "/input/messages/0/content"},
        )
    assert caught.value.code == "likelihood_binding_mismatch"


def test_check_likelihood_binding_freezes_its_inputs() -> None:
    facts = LikelihoodFacts.from_document(_facts())
    check_likelihood_binding(
        facts,
        input_value="Name the place",
        expected="Paris",
        source=Source(**SOURCE),
        artifact_digest=ARTIFACT,
        service_identity=None,
    )
    with pytest.raises(CapturedRunError) as caught:
        check_likelihood_binding(
            facts,
            input_value=math.nan,
            expected="Paris",
            source=Source(**SOURCE),
            artifact_digest=ARTIFACT,
            service_identity=None,
        )
    assert caught.value.code == "invalid_json_value"
    assert facts == LikelihoodFacts.from_document(_facts())
    assert facts != LikelihoodFacts.from_document(_facts(logprob_sum=-2))


def test_frozen_encoder_matches_the_canonical_encoder() -> None:
    value = Record.from_mapping(
        _record(input={"b": [1, 1.0, -0.0, 1e16, "é\n\u2028"], "a": None, "\ue000": True})
    )
    document = value.to_dict()
    assert frozen_canonical(value._document(), error=CapturedRunError) == encode_invarlock(document)
    with pytest.raises(CapturedRunError):
        frozen_canonical({"x": math.nan}, error=CapturedRunError)


# ---------------------------------------------------------------------------
# Refusals (table-driven; every code of CapturedRunError is covered across the
# four captured test modules, see test_every_code_is_exercised)


def _provenance(**changes: Any) -> dict[str, Any]:
    provenance: dict[str, Any] = {
        "kind": "judge",
        "source": "j",
        "version": "1",
        "unit": "score",
        "rubric_digest": None,
    }
    provenance.update(changes)
    return {key: value for key, value in provenance.items() if value is not _DROP}


def _encoder_after_failure() -> None:
    encoder = RunEncoder(RunHeader(source=Source(**SOURCE), run_id="r", artifact_digest=ARTIFACT))
    with pytest.raises(CapturedRunError):
        encoder.add({"id": ""})
    encoder.add(_record())


def _encoder_without_records() -> None:
    RunEncoder(RunHeader(source=Source(**SOURCE), run_id="r", artifact_digest=ARTIFACT)).finish()


def _encoder_summary_too_early() -> None:
    _ = RunEncoder(RunHeader(source=Source(**SOURCE), run_id="r", artifact_digest=ARTIFACT)).summary


def _encoder_adds(count: int, limits: Limits) -> RunEncoder:
    encoder = RunEncoder(_run().header, limits=limits)
    for record in _many(count):
        encoder.add(record)
    return encoder


def _encoder_finish_twice() -> None:
    encoder = _encoder_adds(1, Limits())
    encoder.finish()
    encoder.finish()


def _encoder_suffix_over_size() -> None:
    size = _run().canonical_size
    encoder = _encoder_adds(1, Limits(max_canonical_bytes=size - 1))
    encoder.finish()


def _nested_objects(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def _many(count: int) -> Iterator[dict[str, Any]]:
    return (_record(id=f"r{index}") for index in range(count))


RUN_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    # records
    ("record-not-object", lambda: _run(["x"]), "invalid_type"),
    ("record-unknown-member", lambda: _run([_record(reference="x")]), "unknown_field"),
    ("record-missing-output", lambda: _run([_record(output=_DROP)]), "missing_field"),
    *rows_for(
        "invalid_text",
        record_id_empty=lambda: _run([_record(id="")]),
        record_id_129=lambda: _run([_record(id="x" * 129)]),
        record_id_control=lambda: _run([_record(id="a\tb")]),
        record_id_del=lambda: _run([_record(id="a\x7fb")]),
    ),
    ("record-id-not-string", lambda: _run([_record(id=7)]), "invalid_type"),
    *rows_for(
        "invalid_json_value",
        record_input_nan=lambda: _run([_record(input=math.nan)]),
        record_input_set=lambda: _run([_record(input={1, 2})]),
        record_context_int_key=lambda: _run([_record(context={1: "a"})]),
        record_output_surrogate=lambda: _run([_record(output="\ud800")]),
        record_input_huge_int=lambda: _run([_record(input=10**4301)]),
    ),
    ("record-input-too-deep", lambda: _run([_record(input=_nested(129))]), "too_deep"),
    ("record-scores-not-object", lambda: _run([_record(scores=[1])]), "invalid_type"),
    (
        "record-scores-101",
        lambda: _run([_record(scores={f"s{i}": i for i in range(101)})]),
        "too_many_members",
    ),
    *rows_for(
        "invalid_score",
        record_score_bool=lambda: _run([_record(scores={"s": True})]),
        record_score_string=lambda: _run([_record(scores={"s": "1"})]),
        record_score_nan=lambda: _run([_record(scores={"s": math.inf})]),
        record_score_huge_int=lambda: _run([_record(scores={"s": 10**400})]),
    ),
    ("record-metadata-number", lambda: _run([_record(metadata={"n": 1})]), "invalid_type"),
    ("record-metadata-4097", lambda: _run([_record(metadata={"n": "x" * 4097})]), "invalid_text"),
    (
        "record-metadata-101",
        lambda: _run([_record(metadata={f"k{i}": "v" for i in range(101)})]),
        "too_many_members",
    ),
    ("record-metadata-list", lambda: _run([_record(metadata=["x"])]), "invalid_type"),
    ("record-error-4097", lambda: _run([_record(error="e" * 4097)]), "invalid_text"),
    ("record-error-number", lambda: _run([_record(error=1)]), "invalid_type"),
    *rows_for(
        "invalid_json_value",
        record_scores_int_key=lambda: _run([_record(scores={1: 1})]),
        record_metadata_int_key=lambda: _run([_record(metadata={1: "a"})]),
    ),
    ("record-context-too-deep", lambda: _run([_record(context=_nested_objects(129))]), "too_deep"),
    # runs
    ("records-empty", lambda: _run([]), "no_records"),
    ("run-records-not-records", lambda: Run(_run().header, ["x"]), "invalid_type"),
    # type: ignore[list-item]
    ("run-records-text", lambda: Run(_run().header, "x"), "invalid_type"),
    # type: ignore[arg-type]
    ("run-no-records", lambda: Run(_run().header, ()), "no_records"),
    ("provenance-int-key", lambda: _run(score_provenance={1: _provenance()}), "invalid_json_value"),
    *rows_for(
        "invalid_type",
        records_not_iterable=lambda: _run(5),
        records_mapping=lambda: _run({"id": "r"}),
    ),
    *rows_for(
        "too_many_records",
        records_over_limit=lambda: _run(list(_many(3)), limits=Limits(max_records=2)),
        records_over_limit_streamed=lambda: _run(_many(3), limits=Limits(max_records=2)),
    ),
    ("records-empty-stream", lambda: _run(_many(0)), "no_records"),
    ("run-over-size-limit", lambda: _run(limits=Limits(max_canonical_bytes=100)), "too_large"),
    ("duplicate-id", lambda: _run([_record(), _record(output="x")]), "duplicate_id"),
    ("source-not-object", lambda: _run(source="acme"), "invalid_type"),
    ("source-missing-version", lambda: _run(source={"name": "a"}), "missing_field"),
    ("source-extra-member", lambda: _run(source={**SOURCE, "x": "y"}), "unknown_field"),
    *rows_for(
        "invalid_text",
        source_name_129=lambda: _run(source={**SOURCE, "name": "n" * 129}),
        run_id_empty=lambda: _run(run_id=""),
    ),
    *rows_for(
        "invalid_digest",
        artifact_uppercase=lambda: _run(artifact_digest=ARTIFACT.upper()),
        source_digest_bare_hex=lambda: _run(source_digest="ab" * 32),
    ),
    ("artifact-missing", lambda: _run(artifact_digest=None), "artifact_digest_required"),
    *rows_for(
        "invalid_type",
        provenance_not_object=lambda: _run(score_provenance=[]),
        provenance_entry_not_object=lambda: _run(score_provenance={"s": 1}),
    ),
    (
        "provenance-kind",
        lambda: _run(score_provenance={"s": _provenance(kind="llm")}),
        "invalid_constant",
    ),
    (
        "provenance-missing-rubric",
        lambda: _run(score_provenance={"s": _provenance(rubric_digest=_DROP)}),
        "missing_field",
    ),
    (
        "provenance-101",
        lambda: _run(score_provenance={f"s{i}": _provenance() for i in range(101)}),
        "too_many_members",
    ),
    (
        "provenance-rubric-uppercase",
        lambda: _run(score_provenance={"s": _provenance(rubric_digest=OTHER.upper())}),
        "invalid_digest",
    ),
    (
        "provenance-unit-empty",
        lambda: _run(score_provenance={"s": _provenance(unit="")}),
        "invalid_text",
    ),
    ("header-not-header", lambda: Run(header="h", records=()), "invalid_type"),
    # type: ignore[arg-type]
    # run documents
    ("document-not-object", lambda: run_from_document([]), "invalid_type"),
    ("document-format", lambda: run_from_document(_run_document(format="x")), "invalid_constant"),
    ("document-unknown-member", lambda: run_from_document(_run_document(extra=1)), "unknown_field"),
    (
        "document-missing-source-digest",
        lambda: run_from_document(_run_document(source_digest=_DROP)),
        "missing_field",
    ),
    (
        "document-records-object",
        lambda: run_from_document(_run_document(records={})),
        "invalid_type",
    ),
    ("document-records-empty", lambda: run_from_document(_run_document(records=[])), "no_records"),
    (
        "document-record-missing-scores",
        lambda: run_from_document(_run_document(records=[_record()])),
        "missing_field",
    ),
    *rows_for(
        "invalid_type",
        document_null_service_identity=lambda: run_from_document(
            _run_document(service_identity=None)
        ),
        document_null_likelihood=lambda: run_from_document(
            _run_document(records=[{**_run().records[0].to_dict(), "likelihood": None}])
        ),
        record_null_likelihood=lambda: _run([_record(likelihood=None)]),
    ),
    (
        "document-over-size-limit",
        lambda: run_from_document(_run_document(), limits=Limits(max_canonical_bytes=10)),
        "too_large",
    ),
    # likelihood facts: schema
    ("likelihood-not-object", lambda: _run([_record(likelihood=[1])]), "invalid_type"),
    ("likelihood-basis", lambda: _run([_record(likelihood=_facts(basis="x"))]), "invalid_constant"),
    (
        "likelihood-positive",
        lambda: _run([_record(likelihood=_facts(logprob_sum=0.5))]),
        "out_of_range",
    ),
    *rows_for(
        "invalid_type",
        likelihood_logprob_text=lambda: _run([_record(likelihood=_facts(logprob_sum="-1"))]),
        likelihood_logprob_bool=lambda: _run([_record(likelihood=_facts(logprob_sum=False))]),
    ),
    *rows_for(
        "out_of_range",
        likelihood_logprob_beyond_binary64=lambda: _run(
            [_record(likelihood=_facts(logprob_sum=-(10**400)))]
        ),
        likelihood_token_count_0=lambda: _run([_record(likelihood=_facts(token_count=0))]),
        **{
            "likelihood-token-count-0.0": lambda: _run(
                [_record(likelihood=_facts(token_count=0.0))]
            )
        },
    ),
    (
        "likelihood-token-count-float",
        lambda: _run([_record(likelihood=_facts(token_count=2.0))]),
        "not_exact_integer",
    ),
    *rows_for(
        "invalid_type",
        likelihood_token_count_text=lambda: _run([_record(likelihood=_facts(token_count="2"))]),
        likelihood_byte_count_fraction=lambda: _run(
            [_record(likelihood=_facts(utf8_byte_count=2.5))]
        ),
    ),
    *rows_for(
        "invalid_digest",
        likelihood_digest_uppercase=lambda: _run(
            [_record(likelihood=_facts(tokenizer_digest=TOKENIZER.upper()))]
        ),
        likelihood_null_service_digest=lambda: _run(
            [_record(likelihood=_facts(service_identity_digest=None))]
        ),
    ),
    (
        "likelihood-unknown-member",
        lambda: _run([_record(likelihood=_facts(extra=1))]),
        "unknown_field",
    ),
    (
        "likelihood-missing-member",
        lambda: _run([_record(likelihood=_facts(tokenizer_digest=_DROP))]),
        "missing_field",
    ),
    (
        "likelihood-source-extra-member",
        lambda: _run([_record(likelihood=_facts(source={**SOURCE, "x": "y"}))]),
        "unknown_field",
    ),
    (
        "likelihood-null-artifact-without-service",
        lambda: _run([_record(likelihood=_facts(artifact_digest=None))]),
        "artifact_digest_required",
    ),
    (
        "likelihood-artifact-with-service-digest",
        lambda: _run([_record(likelihood=_facts(service_identity_digest=OTHER))]),
        "artifact_digest_forbidden",
    ),
    (
        "likelihood-logprob-positive-int",
        lambda: _run([_record(likelihood=_facts(logprob_sum=1))]),
        "out_of_range",
    ),
    (
        "likelihood-logprob-infinite",
        lambda: LikelihoodFacts.from_document(_facts(logprob_sum=-math.inf)),
        "invalid_json_value",
    ),
    # likelihood facts: bindings
    *rows_for(
        "likelihood_reference_not_text",
        likelihood_reference_null=lambda: _run([_record(expected=None, likelihood=_facts())]),
        likelihood_reference_empty=lambda: _run([_record(expected="", likelihood=_facts())]),
    ),
    (
        "likelihood-byte-count",
        lambda: _run([_record(likelihood=_facts(utf8_byte_count=6))]),
        "likelihood_byte_count_mismatch",
    ),
    *rows_for(
        "likelihood_binding_mismatch",
        likelihood_input_digest=lambda: _run([_record(likelihood=_facts(input_value="other"))]),
        likelihood_reference_digest=lambda: _run(
            [_record(likelihood=_facts(reference_digest=OTHER))]
        ),
        likelihood_artifact_digest=lambda: _run(
            [_record(likelihood=_facts(artifact_digest=OTHER))]
        ),
        likelihood_source=lambda: _run(
            [_record(likelihood=_facts(source={**SOURCE, "version": "9"}))]
        ),
        likelihood_service_digest_on_artifact_run=lambda: _run(
            [_record(likelihood=_facts(artifact_digest=None, service_identity_digest=OTHER))]
        ),
    ),
    # input projection
    *rows_for(
        "invalid_projection",
        projection_not_object=lambda: _run(input_projection="/input"),
        projection_extra_member=lambda: _run(
            input_projection={"kind": "json-pointer", "pointer": "/input", "x": 1}
        ),
        projection_kind=lambda: InputProjection("/input", kind="jq"),
        projection_no_slash=lambda: InputProjection("input"),
        projection_bad_tilde=lambda: InputProjection("/input/a~2"),
        projection_4097=lambda: InputProjection("/input/" + "a" * 4090),
        projection_not_string=lambda: InputProjection(7),
    ),
    # type: ignore[arg-type]
    *rows_for(
        "projection_root",
        projection_root_expected=lambda: InputProjection("/expected"),
        projection_root_empty=lambda: InputProjection("/"),
    ),
    *rows_for(
        "projection_unresolved",
        projection_unresolved=lambda: _run(input_projection=InputProjection("/input/x")),
        projection_leading_zero=lambda: _run(
            [_record(input=["a"])], input_projection=InputProjection("/input/00")
        ),
        projection_index_out_of_range=lambda: _run(
            [_record(input=["a"])], input_projection=InputProjection("/input/1")
        ),
        projection_through_scalar=lambda: _run(input_projection=InputProjection("/input/0")),
    ),
    (
        "projection-not-text",
        lambda: _run([_record(input={"a": [1]})], input_projection=InputProjection("/input/a")),
        "projection_not_text",
    ),
    *rows_for(
        "projection_binding_invalid",
        projection_reserved_context_key=lambda: _run([_record(context={"input_projection": 1})]),
        projection_twice=lambda: project_record(_projected_record(), InputProjection("/input")),
    ),
    (
        "projection-record-not-record",
        lambda: project_record(_record(), InputProjection("/input")),
        "invalid_type",
    ),
    *rows_for(
        "projection_binding_invalid",
        binding_missing_member=lambda: Record.from_document(_tampered_binding(source_digest=_DROP)),
        binding_bad_configuration=lambda: Record.from_document(
            _tampered_binding(configuration={"kind": "jq"})
        ),
        binding_source_not_object=lambda: Record.from_document(_tampered_binding(source=[1])),
        binding_nested_binding=lambda: Record.from_document(
            _tampered_binding(source={"input": "Q", "context": {"input_projection": {}}})
        ),
    ),
    *rows_for(
        "projection_replay_mismatch",
        binding_configuration_digest=lambda: Record.from_document(
            _tampered_binding(configuration_digest=OTHER)
        ),
        binding_source_digest=lambda: Record.from_document(_tampered_binding(source_digest=OTHER)),
        binding_input_changed=lambda: Record.from_document(_tampered_binding(input="other")),
        binding_context_changed=lambda: Record.from_document(_tampered_binding(context_extra="x")),
        binding_pointer_no_longer_resolves=lambda: Record.from_document(
            _tampered_binding(
                configuration={"kind": "json-pointer", "pointer": "/input/missing"},
                configuration_digest=digest_invarlock(
                    {"kind": "json-pointer", "pointer": "/input/missing"}
                ),
            )
        ),
    ),
    # streaming encoder
    ("encoder-record-limit", lambda: _encoder_adds(3, Limits(max_records=2)), "too_many_records"),
    ("encoder-finish-twice", _encoder_finish_twice, "invalid_state"),
    ("encoder-suffix-over-size", _encoder_suffix_over_size, "too_large"),
    ("encoder-after-failure", _encoder_after_failure, "invalid_state"),
    ("encoder-without-records", _encoder_without_records, "no_records"),
    ("encoder-summary-too-early", _encoder_summary_too_early, "invalid_state"),
    ("encoder-header-not-header", lambda: RunEncoder("h"), "invalid_type"),
    # type: ignore[arg-type]
]


@pytest.mark.parametrize(("name", "action", "code"), RUN_REFUSALS, ids=[r[0] for r in RUN_REFUSALS])
def test_run_refusal(name: str, action: Callable[[], object], code: str) -> None:
    refused = assert_refused(action, code)
    assert isinstance(refused, CapturedRunError), name
    assert refused.code in CapturedRunError.codes


def test_refusal_fields_locate_the_record() -> None:
    with pytest.raises(CapturedRunError) as caught:
        _run([_record(), _record(id="r2", likelihood=_facts(utf8_byte_count=6))])
    assert caught.value.field == "records[1].likelihood.utf8_byte_count"
    assert (
        str(caught.value) == "records[1].likelihood.utf8_byte_count: likelihood_byte_count_mismatch"
    )
    with pytest.raises(CapturedRunError) as caught:
        _run([_record(), _record(id="")])
    assert caught.value.field == "records[1].id"
    with pytest.raises(CapturedRunError) as caught:
        _run([_record(likelihood=_facts(source={"name": "", "version": "1"}))])
    assert caught.value.field == "records[0].likelihood.source.name"


# ---------------------------------------------------------------------------
# Files: reading, writing, streaming


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _file_refusals(tmp_path: Path) -> list[tuple[str, Callable[[], object], str]]:
    canonical_run = _run([_record(), _record(id="r2")]).to_canonical()
    good = _write(tmp_path, "good.json", canonical_run)
    (tmp_path / "link.json").symlink_to(good)
    (tmp_path / "dir.json").mkdir()
    pretty = _write(tmp_path, "pretty.json", json.dumps(json.loads(canonical_run)).encode())
    truncated = _write(tmp_path, "truncated.json", canonical_run[:-20])
    trailing = _write(tmp_path, "trailing.json", canonical_run + b"x")
    reordered = canonical_run.replace(
        b'{"context":{},"error":null,', b'{"error":null,"context":{},', 1
    )
    reordered_path = _write(tmp_path, "reordered.json", reordered)
    empty_records = _write(
        tmp_path,
        "empty-records.json",
        canonical_run.split(b"[", 1)[0] + b"[" + b"]," + canonical_run.split(b"],", 1)[1],
    )
    not_utf8 = _write(tmp_path, "latin1.json", canonical_run.replace(b"Paris", b"P\xe9ris"))
    dup = _write(
        tmp_path,
        "dup.json",
        _run([_record(), _record(id="r2")]).to_canonical().replace(b'"id":"r2"', b'"id":"r1"'),
    )
    bad_separator = _write(tmp_path, "separator.json", canonical_run.replace(b"},{", b"} ,{", 1))
    bad_tail = _write(tmp_path, "tail.json", canonical_run.replace(b'"run_id"', b'"run_id" ', 1))
    tail_not_json = _write(tmp_path, "tail-json.json", canonical_run[:-2] + b"\n")

    def stream(path: Path, **options: Any) -> Callable[[], object]:
        return lambda: list(RunReader(path, **options))

    def reused() -> None:
        reader = RunReader(good)
        list(reader)
        list(reader)

    def summary_early() -> None:
        _ = RunReader(good).summary

    def header_early() -> None:
        _ = RunReader(good).header

    return [
        ("read-missing", lambda: read_run(tmp_path / "missing.json"), "not_found"),
        ("read-symlink", lambda: read_run(tmp_path / "link.json"), "not_regular_file"),
        ("read-directory", lambda: read_run(tmp_path / "dir.json"), "not_regular_file"),
        ("read-through-a-file", lambda: read_run(good / "x"), "unreadable"),
        ("read-too-large", lambda: read_run(good, limits=Limits(max_file_bytes=10)), "too_large"),
        ("stream-missing", stream(tmp_path / "missing.json"), "not_found"),
        ("stream-symlink", stream(tmp_path / "link.json"), "not_regular_file"),
        ("stream-pretty", stream(pretty), "not_canonical"),
        ("stream-truncated", stream(truncated), "not_canonical"),
        ("stream-trailing-bytes", stream(trailing), "not_canonical"),
        ("stream-member-order", stream(reordered_path), "not_canonical"),
        ("stream-not-utf8", stream(not_utf8), "not_canonical"),
        ("stream-separator", stream(bad_separator), "not_canonical"),
        ("stream-tail-whitespace", stream(bad_tail), "not_canonical"),
        ("stream-tail-not-json", stream(tail_not_json), "not_canonical"),
        ("stream-empty-records", stream(empty_records), "no_records"),
        ("stream-duplicate-id", stream(dup), "duplicate_id"),
        ("stream-record-limit", stream(good, limits=Limits(max_records=1)), "too_many_records"),
        ("stream-size-limit", stream(good, limits=Limits(max_canonical_bytes=300)), "too_large"),
        ("stream-record-too-large", stream(good, max_record_bytes=10, chunk_size=16), "too_large"),
        ("stream-reused", reused, "invalid_state"),
        ("stream-summary-early", summary_early, "invalid_state"),
        ("stream-header-early", header_early, "invalid_state"),
        (
            "write-not-a-run",
            lambda: write_run(_run().to_dict(), tmp_path / "w.json"),
            "invalid_type",
        ),  # type: ignore[arg-type]
        (
            "write-over-compat-limit",
            lambda: write_run(
                _run(list(_many(3))), tmp_path / "w.json", limits=Limits(max_records=2)
            ),
            "too_many_records",
        ),
    ]


def test_file_refusals(tmp_path: Path) -> None:
    seen = []
    for name, action, code in _file_refusals(tmp_path):
        with pytest.raises(CapturedRunError) as caught:
            action()
        assert caught.value.code == code, name
        seen.append(code)
    assert not (tmp_path / "w.json").exists()
    assert {"not_found", "not_regular_file", "unreadable", "not_canonical"} <= set(seen)


FILE_REFUSAL_CODES = frozenset(
    {
        "not_found",
        "not_regular_file",
        "unreadable",
        "too_large",
        "not_canonical",
        "no_records",
        "duplicate_id",
        "too_many_records",
        "invalid_state",
        "invalid_type",
    }
)


def test_stream_checks_likelihood_against_the_trailing_header(tmp_path: Path) -> None:
    good = _run([_record(likelihood=_facts()), _record(id="r2", likelihood=_facts())])
    path = _write(tmp_path, "l.json", good.to_canonical())
    assert [r.id for r in RunReader(path)] == ["r1", "r2"]
    # the header's source changes after the records were yielded
    changed = good.to_canonical().replace(
        b'"version":"3.1.4"},"source_digest"', b'"version":"9"},"source_digest"'
    )
    bad = _write(tmp_path, "bad.json", changed)
    reader = RunReader(bad)
    yielded = []
    with pytest.raises(CapturedRunError) as caught:
        yielded.extend(reader)
    assert caught.value.code == "likelihood_binding_mismatch"
    assert caught.value.field == "records[0].likelihood.source"
    assert len(yielded) == 2  # provisional until exhausted
    # the second record's facts disagree with the first's
    mixed = _run([_record(likelihood=_facts()), _record(id="r2")]).to_canonical()
    second = json.loads(mixed)
    second["records"][1]["likelihood"] = _facts(source={**SOURCE, "version": "9"})
    path2 = _write(tmp_path, "second.json", encode_invarlock(second))
    with pytest.raises(CapturedRunError) as caught:
        list(RunReader(path2))
    assert caught.value.field == "records[1].likelihood.source"


def test_run_writer_streams_the_same_bytes(tmp_path: Path) -> None:
    run = _run([_record(id=f"r{i}", likelihood=_facts()) for i in range(5)])
    target = tmp_path / "streamed.json"
    with RunWriter(target, run.header) as writer:
        for record in run.records:
            writer.add(record.to_dict())
        assert writer.record_count == 5
        summary = writer.finish()
    assert summary == RunSummary(
        run_digest=run.digest, record_count=5, canonical_size=run.canonical_size
    )
    assert target.read_bytes() == run.to_canonical()
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["streamed.json"]


def test_run_writer_never_publishes_a_partial_run(tmp_path: Path) -> None:
    header = _run().header
    target = tmp_path / "partial.json"
    with RunWriter(target, header) as writer:
        writer.add(_record())
        with pytest.raises(CapturedRunError) as caught:
            writer.add(_record())  # duplicate id
        assert caught.value.code == "duplicate_id"
        with pytest.raises(CapturedRunError) as caught:
            writer.add(_record(id="r2"))  # the writer is unusable after a refusal
        assert caught.value.code == "invalid_state"
    assert list(tmp_path.iterdir()) == []
    with RunWriter(target, header) as writer:
        writer.add(_record())  # left without finish()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(CapturedRunError) as caught, RunWriter(target, header) as writer:
        writer.finish()
    assert caught.value.code == "no_records"
    assert list(tmp_path.iterdir()) == []


def test_run_writer_and_write_run_refuse_existing_destinations(tmp_path: Path) -> None:
    run = _run()
    target = tmp_path / "run.json"
    target.write_bytes(b"keep")
    for action in (
        lambda: RunWriter(target, run.header),
        lambda: write_run(run, target),
        lambda: RunWriter(tmp_path / "missing" / "run.json", run.header),
    ):
        with pytest.raises(OutputError):
            action()
    assert target.read_bytes() == b"keep"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError) as caught:
        write_run(run, tmp_path / "dangling")
    assert caught.value.code == "output_exists"
    # a destination created while the writer runs is not overwritten
    racing = tmp_path / "race.json"
    with RunWriter(racing, run.header) as writer:
        writer.add(_record())
        racing.write_bytes(b"other")
        with pytest.raises(OutputError) as caught:
            writer.finish()
    assert caught.value.code == "output_exists"
    assert racing.read_bytes() == b"other"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "race.json", "run.json"]


def test_streaming_memory_does_not_grow_with_record_text(tmp_path: Path) -> None:
    header = _run().header
    count, text = 3000, "x" * 4096
    tracemalloc.start()
    try:
        with RunWriter(tmp_path / "big.json", header) as writer:
            for index in range(count):
                writer.add({"id": f"r{index}", "input": text, "expected": text, "output": None})
            summary = writer.finish()
        _, written_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        reader = RunReader(tmp_path / "big.json", chunk_size=65536)
        for _record_read in reader:
            pass
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.canonical_size > 24_000_000
    assert reader.summary == summary
    assert written_peak < 2_000_000
    assert read_peak < 2_000_000


def test_small_accessors_and_passthroughs() -> None:
    run = _run([_record(), _record(id="r2")])
    assert Run(run.header, list(run.records)) == run
    assert list(iter(run)) == list(run.records)
    assert run.artifact_digest == ARTIFACT
    assert run.record("r2").id == "r2"
    assert run != "x"
    assert run.records[0] != "x"
    assert RunEncoder(run.header).header is run.header
    facts = LikelihoodFacts.from_document(_facts())
    assert LikelihoodFacts.from_document(facts) is facts
    assert facts != "x"
    provenance = ScoreProvenance(kind="human", source="s", version="1", unit="u")
    assert _run(score_provenance={"s": provenance}).score_provenance["s"] is provenance
    assert Source.from_document(run.source) is run.source
    assert InputProjection.from_document(InputProjection("/input")) == InputProjection("/input")
    with pytest.raises(CapturedRunError) as caught:
        frozen_canonical({"x": object()}, error=CapturedRunError)
    assert caught.value.code == "invalid_json_value"


def test_integer_digit_limit_does_not_depend_on_the_host_setting() -> None:
    import sys  # noqa: PLC0415

    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(CapturedRunError) as caught:
            _run([_record(input=10**4300)])
        assert caught.value.code == "invalid_json_value"
        assert _run([_record(input=10**4299)]).records[0].input == 10**4299
    finally:
        sys.set_int_max_str_digits(previous)


def test_writer_failures_clean_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run()
    writer = RunWriter(tmp_path / "aborted.json", run.header)
    writer.abort()
    with pytest.raises(CapturedRunError) as caught:
        writer.add(_record())
    assert caught.value.code == "invalid_state"
    with pytest.raises(OutputError) as output:
        RunWriter(tmp_path / ("n" * 300), run.header)
    assert output.value.code == "output_unwritable"

    def refuse_link(*_arguments: object, **_keywords: object) -> None:
        raise PermissionError(CANARY)

    monkeypatch.setattr(os, "link", refuse_link)
    with pytest.raises(OutputError) as output:
        write_run(run, tmp_path / "run.json")
    assert output.value.code == "output_unwritable"
    assert CANARY not in str(output.value)
    assert list(tmp_path.iterdir()) == []


def _hosted_likelihood_file(tmp_path: Path, **second: Any) -> Path:
    from support.captured_service_identity import valid_identity  # noqa: PLC0415

    identity = valid_identity()
    hosted_facts = _facts(
        artifact_digest=None,
        service_identity_digest=digest_invarlock(identity),
        configuration_digest=identity["configuration_digest"],
    )
    run = _run(
        [_record(likelihood=hosted_facts), _record(id="r2", likelihood=hosted_facts)],
        artifact_digest=None,
        service_identity=identity,
    )
    document = run.to_dict()
    document["records"][1]["likelihood"].update(second)
    path = tmp_path / f"hosted-{len(list(tmp_path.iterdir()))}.json"
    path.write_bytes(encode_invarlock(document))
    return path


def test_stream_refuses_inconsistent_hosted_bindings(tmp_path: Path) -> None:
    assert len(list(RunReader(_hosted_likelihood_file(tmp_path)))) == 2
    for member in ("service_identity_digest", "configuration_digest"):
        with pytest.raises(CapturedRunError) as caught:
            list(RunReader(_hosted_likelihood_file(tmp_path, **{member: OTHER})))
        assert caught.value.code == "likelihood_binding_mismatch"
        assert caught.value.field == f"records[1].likelihood.{member}"


def test_stream_refuses_damaged_files(tmp_path: Path) -> None:
    data = _run([_record(), _record(id="r2")]).to_canonical()
    prefix_end = data.index(b"[") + 1
    damaged = {
        "mid-record": data[: prefix_end + 15],
        "huge-integer": data.replace(b'"input":"Name the place"', b'"input":1' + b"0" * 4400, 1),
        "bad-tail": data.replace(b'],"run_id"', b']}"run_id"', 1),
        "space-before-record": data[:prefix_end] + b" " + data[prefix_end:],
        "long-tail": data[:-2] + b" " * (8 * 1_048_576) + b"}\n",
    }
    for name, content in damaged.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(content)
        with pytest.raises(CapturedRunError) as caught:
            list(RunReader(path))
        expected = "too_large" if name == "long-tail" else "not_canonical"
        assert caught.value.code == expected, name


# ---------------------------------------------------------------------------
# Properties

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_IDS = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=16)
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=8,
)
_SCORES = st.dictionaries(
    _TEXT,
    st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False),
    max_size=3,
)
_RECORD = st.fixed_dictionaries(
    {"id": _IDS, "input": _VALUES, "expected": _VALUES, "output": _VALUES},
    optional={
        "scores": _SCORES,
        "metadata": st.dictionaries(_TEXT, _TEXT, max_size=3),
        "error": st.none() | _TEXT,
        "context": _VALUES,
    },
)
_RECORDS = st.lists(_RECORD, min_size=1, max_size=6, unique_by=lambda record: record["id"])


def _hosted_or_not(flag: bool) -> dict[str, Any]:
    if not flag:
        return {"artifact_digest": ARTIFACT}
    from support.captured_service_identity import valid_identity  # noqa: PLC0415

    return {"artifact_digest": None, "service_identity": valid_identity()}


@settings(max_examples=60, deadline=None)
@given(records=_RECORDS, hosted=st.booleans())
def test_round_trips(records: list[dict[str, Any]], hosted: bool) -> None:
    run = _run(records, **_hosted_or_not(hosted))
    data = run.to_canonical()
    assert data == encode_invarlock(run.to_dict())
    assert run.digest == digest_bytes(data)
    assert parse_run(data) == run
    assert run_from_document(json.loads(data)) == run
    assert run_from_document(run.to_dict()) == run
    assert run.ids == tuple(record["id"] for record in records)


@settings(max_examples=40, deadline=None)
@given(records=_RECORDS, hosted=st.booleans())
def test_streaming_equals_one_shot(records: list[dict[str, Any]], hosted: bool) -> None:
    run = _run(records, **_hosted_or_not(hosted))
    encoder = RunEncoder(run.header)
    pieces = [encoder.add(record) for record in records]
    pieces.append(encoder.finish())
    assert b"".join(pieces) == run.to_canonical()
    assert encoder.summary.run_digest == run.digest
    with tempfile.TemporaryDirectory() as directory:
        target = Path(directory) / "run.json"
        with RunWriter(target, run.header) as writer:
            for record in run.records:
                writer.add(record)
            assert writer.finish().run_digest == run.digest
        assert target.read_bytes() == run.to_canonical()
        reader = RunReader(target, chunk_size=7)
        assert tuple(reader) == run.records
        assert reader.summary.run_digest == run.digest


@settings(max_examples=40, deadline=None)
@given(records=st.lists(_RECORD, min_size=2, max_size=6, unique_by=lambda record: record["id"]))
def test_record_order_is_preserved_and_hashed(records: list[dict[str, Any]]) -> None:
    run = _run(records)
    reversed_run = _run(list(reversed(records)))
    assert run.ids == tuple(record["id"] for record in records)
    assert reversed_run.ids == tuple(reversed(run.ids))
    assert run.digest != reversed_run.digest


_MUTATIONS: dict[str, Callable[[dict[str, Any]], None]] = {
    "id": lambda r: r.update(id=r["id"] + "~"),
    "input": lambda r: r.update(input=[r["input"]]),
    "expected": lambda r: r.update(expected=[r["expected"]]),
    "output": lambda r: r.update(output=[r["output"]]),
    "scores": lambda r: r.update(scores={**r.get("scores", {}), "\ue000added": 1}),
    "metadata": lambda r: r.update(metadata={**r.get("metadata", {}), "\ue000added": ""}),
    "error": lambda r: r.update(error=None if r.get("error") is not None else ""),
    "context": lambda r: r.update(context=[r.get("context", {})]),
}


@settings(max_examples=40, deadline=None)
@given(records=_RECORDS, member=st.sampled_from(sorted(_MUTATIONS)), data=st.data())
def test_every_record_member_is_covered_by_the_digest(
    records: list[dict[str, Any]], member: str, data: st.DataObject
) -> None:
    position = data.draw(st.integers(min_value=0, max_value=len(records) - 1))
    changed = [dict(record) for record in records]
    _MUTATIONS[member](changed[position])
    if len({record["id"] for record in changed}) != len(changed):
        return  # the mutated id collided with another record's id
    assert _run(records).digest != _run(changed).digest


def test_every_member_mutation_is_listed() -> None:
    assert set(_MUTATIONS) == {
        "id",
        "input",
        "expected",
        "output",
        "scores",
        "metadata",
        "error",
        "context",
    }


# ---------------------------------------------------------------------------
# Never echo


def _canary_refusals(tmp_path: Path) -> list[Callable[[], object]]:
    canary_dir = tmp_path / CANARY
    canary_dir.mkdir()
    pretty = canary_dir / "run.json"
    pretty.write_text(json.dumps(_run([_record(id=CANARY)]).to_dict(), indent=1))
    return [
        lambda: _run([_record(id=CANARY * 5)]),
        lambda: _run([_record(id=CANARY + "\n")]),
        lambda: _run([_record(id=CANARY), _record(id=CANARY)]),
        lambda: _run([_record(input={CANARY: math.nan})]),
        lambda: _run([_record(output=CANARY + "\ud800")]),
        lambda: _run([_record(metadata={CANARY: CANARY * 200})]),
        lambda: _run([_record(scores={CANARY: CANARY})]),
        lambda: _run([_record(error=CANARY * 200)]),
        lambda: _run([_record(context={"input_projection": CANARY})]),
        lambda: _run([_record(**{CANARY: 1})]),
        lambda: _run([_record(likelihood=_facts(input_value=CANARY))]),
        lambda: _run(
            [_record(input={CANARY: 1})], input_projection=InputProjection(f"/input/{CANARY}x")
        ),
        lambda: _run(source={"name": CANARY, "version": CANARY + "\t"}),
        lambda: _run(run_id=CANARY * 5),
        lambda: _run(artifact_digest=CANARY),
        lambda: _run(score_provenance={CANARY: {"kind": CANARY}}),
        lambda: InputProjection(f"/{CANARY}"),
        lambda: read_run(canary_dir / "missing.json"),
        lambda: list(RunReader(pretty)),
        lambda: run_from_document({CANARY: CANARY}),
    ]


def test_refusals_and_reprs_never_echo(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for action in _canary_refusals(tmp_path):
        with pytest.raises(CapturedRunError) as caught:
            action()
        error = caught.value
        for text in (str(error), repr(error), *map(str, error.args)):
            assert CANARY not in text
            assert str(tmp_path) not in text
        assert error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None
    run = _run(
        [
            _record(
                id=CANARY,
                input=CANARY,
                output=CANARY,
                metadata={CANARY: CANARY},
                error=CANARY,
                context={CANARY: CANARY},
                likelihood=_facts(
                    input_value=CANARY,
                    expected=CANARY,
                    source={"name": CANARY, "version": CANARY},
                ),
                expected=CANARY,
            )
        ],
        source={"name": CANARY, "version": CANARY},
        run_id=CANARY,
        input_projection={"kind": "json-pointer", "pointer": "/input"},
        score_provenance={CANARY: _provenance(source=CANARY)},
    )
    texts = [
        repr(run),
        repr(run.header),
        repr(run.records[0]),
        repr(run.records[0].likelihood),
        repr(run.records[0].projection),
        repr(run.records[0].projection.configuration) if run.records[0].projection else "",
        repr(run.source),
        repr(run.score_provenance[CANARY]),
        str(run),
    ]
    for text in texts:
        assert CANARY not in text
    assert CANARY not in caplog.text


def test_every_code_is_exercised() -> None:
    from support.captured_case_set import CASE_SET_REFUSALS  # noqa: PLC0415
    from support.captured_export import EXPORT_REFUSALS  # noqa: PLC0415
    from support.captured_service_identity import IDENTITY_REFUSALS  # noqa: PLC0415

    exercised = {code for _, _, code in RUN_REFUSALS} | FILE_REFUSAL_CODES
    for table in (CASE_SET_REFUSALS, EXPORT_REFUSALS, IDENTITY_REFUSALS):
        exercised |= {row[-1] for row in table}
    assert exercised == set(CapturedRunError.codes)


# ---------------------------------------------------------------------------
# Fast paths: plain records (RunEncoder.add) and two-process JSONL imports


class _Str(str):
    __slots__ = ()


class _Int(int):
    pass


class _List(list):  # type: ignore[type-arg]
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


def _header(**changes: Any) -> RunHeader:
    arguments: dict[str, Any] = {"source": SOURCE, "run_id": "run-1", "artifact_digest": ARTIFACT}
    arguments.update(changes)
    return RunHeader(**arguments)


def _outcome(action: Callable[[], bytes]) -> tuple[Any, ...]:
    """``("ok", bytes)`` or ``(error class, code, field)``."""
    try:
        return ("ok", action())
    except (CapturedRunError, CanonicalError) as error:
        return (type(error), error.code, error.field)


def _record_path(records: list[Any]) -> bytes:
    """The existing path: every record built as a Record (make_run semantics)."""
    return make_run(records, source=SOURCE, run_id="run-1", artifact_digest=ARTIFACT).to_canonical()


def _encoder_path(records: list[Any]) -> bytes:
    """RunEncoder.add with the records as given (plain dicts take the fast path)."""
    encoder = RunEncoder(_header())
    pieces = [encoder.add(record) for record in records]
    pieces.append(encoder.finish())
    return b"".join(pieces)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES)
def test_plain_encoder_matches_the_canonical_encoder(value: Any) -> None:
    from sealeval._validate import plain_json  # noqa: PLC0415
    from sealeval.canonical import plain_canonical  # noqa: PLC0415

    assert plain_json(value)
    assert plain_canonical(value) == encode_invarlock(value)[:-1]


@settings(max_examples=300, deadline=None)
@given(records=_RECORDS)
def test_plain_fast_path_matches_the_record_path(records: list[dict[str, Any]]) -> None:
    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415

    for record in records:
        if isinstance(record.get("context"), dict) and "input_projection" in record["context"]:
            return  # a retained binding always takes the Record path
        plain = plain_record_bytes(record)
        assert plain is not None  # every valid plain record takes the fast path
        assert plain == (record["id"], Record.from_mapping(record).to_canonical()[:-1])
    assert _encoder_path(records) == _record_path(records)
    assert _encoder_path([Record.from_mapping(record) for record in records]) == _record_path(
        records
    )


def _deep(depth: int, inner: Any = "leaf") -> Any:
    value = inner
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# Member -> values that break (or stress) a rule of Record; each replaces the member of
# a valid random record. Valid non-plain values (read-only mappings, tuples, dict
# subclasses) must give the same bytes through either path.
_BAD_VALUES: dict[str, list[Any]] = {
    "id": [
        "",
        "x" * 129,
        "x" * 128,
        "a\x00b",
        "a\x7fb",
        "\ud800",
        "ok\udfff",
        5,
        None,
        True,
        _Str("x"),
        " ",
    ],
    "input": [
        math.nan,
        math.inf,
        -math.inf,
        "\ud800",
        {"\udc00": 1},
        {1: "x"},
        {1: "x", 2: "y"},
        {None: 1},
        {"k": [1, {"z": math.nan}]},
        _deep(128),
        _deep(129),
        _deep(127, [1]),
        _deep(128, {"k": 1}),
        object(),
        b"bytes",
        {1, 2},
        1j,
        _Str("x"),
        _Int(3),
        _List([1]),
        _Dict(a=1),
        ("tuple", ["ok"]),
        types.MappingProxyType({"b": 1, "a": [2]}),
        10**4400,
        10**4299,
        -(10**300),
        True,
        None,
        "ok",
    ],
    "scores": [
        None,
        [],
        {"a": "x"},
        {"a": True},
        {"a": None},
        {"a": math.nan},
        {"a": math.inf},
        {"a": 10**400},
        {"a": 2**1023},
        {"a": 2**1024},
        {"a": -(2**1023)},
        {1: 1.0},
        {"\ud800": 1},
        {f"s{index}": index for index in range(101)},
        {f"s{index}": index for index in range(100)},
        types.MappingProxyType({"a": 1}),
        _Dict(a=1.5),
        {"a": _Int(1)},
        {"a": 1.0, "b": 2},
    ],
    "metadata": [
        None,
        [],
        {"a": 1},
        {"a": None},
        {"a": "x" * 4097},
        {"a": "x" * 4096},
        {"a": "\ud800"},
        {"\ud800": "a"},
        {1: "x"},
        {f"m{index}": "" for index in range(101)},
        {f"m{index}": "\n" for index in range(100)},
        types.MappingProxyType({"a": "b"}),
        {"a": _Str("b")},
    ],
    "error": [5, "x" * 4097, "x" * 4096, "\ud800", "", "\x00", _Str("e"), [], None],
    "context": [
        None,
        {"input_projection": "x"},
        {"input_projection": {"configuration": {}}},
        {"a": {"input_projection": 1}},
        {"k": math.inf},
        _deep(129),
        types.MappingProxyType({"a": (1, 2)}),
    ],
}


def _mutations() -> list[tuple[str, Any]]:
    mutations = [(member, value) for member, values in _BAD_VALUES.items() for value in values]
    mutations += [
        (member, value) for member in ("expected", "output") for value in _BAD_VALUES["input"]
    ]
    return mutations


_MUTATION_LIST = _mutations()
_SHAPES: list[Callable[[dict[str, Any]], None]] = [
    lambda r: r.update(bogus=1),
    lambda r: r.pop("id"),
    lambda r: r.pop("input"),
    lambda r: r.pop("expected"),
    lambda r: r.pop("output"),
    lambda r: r.update(likelihood=None),
    lambda r: r.update(likelihood={}),
    lambda r: r.update({1: "x"}),
]


@settings(max_examples=150, deadline=None)
@given(records=_RECORDS, data=st.data())
def test_plain_fast_path_refuses_what_the_record_path_refuses(
    records: list[dict[str, Any]], data: st.DataObject
) -> None:
    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415

    position = data.draw(st.integers(min_value=0, max_value=len(records) - 1))
    changed = [dict(record) for record in records]
    if data.draw(st.booleans()):
        member, value = data.draw(st.sampled_from(_MUTATION_LIST))
        changed[position][member] = value
    else:
        data.draw(st.sampled_from(_SHAPES))(changed[position])
    if data.draw(st.booleans()) and len(changed) > 1:
        changed[-1]["id"] = changed[0].get("id")  # a duplicate id after the mutation
    expected = _outcome(lambda: _record_path(changed))
    assert _outcome(lambda: _encoder_path(changed)) == expected
    if expected[0] != "ok":
        # the fast path only accepts: whatever the Record path refuses, it leaves to it
        refused = _outcome(lambda: _record_path([changed[position]]))
        if refused[0] != "ok":
            assert plain_record_bytes(changed[position]) is None


def test_plain_fast_path_follows_the_host_integer_setting() -> None:
    import sys  # noqa: PLC0415

    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415

    previous = sys.get_int_max_str_digits()
    try:
        for setting in (0, 640, 5000, previous):
            sys.set_int_max_str_digits(setting)
            for value in (10**4300, 10**4299, 10**700, 10**639):
                record = _record(input=[value], scores={"s": 10**300})
                assert _outcome(lambda r=record: _encoder_path([r])) == _outcome(
                    lambda r=record: _record_path([r])
                )
        sys.set_int_max_str_digits(0)
        assert plain_record_bytes(_record(input=1)) is None  # the Record path checks digits
    finally:
        sys.set_int_max_str_digits(previous)


# JSONL lines: the fast decoder accepts only what the strict decoder accepts, same value.
_LINE_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)
_LINE_EDITS: list[Callable[[bytes], bytes]] = [
    lambda line: line,
    lambda line: b"  " + line,
    lambda line: line + b" \t\r",
    lambda line: line + b"x",
    lambda line: line + b"{}",
    lambda line: line[:-1],
    lambda line: b"\xef\xbb\xbf" + line,
    lambda line: line.replace(b"}", b',"a":1,"a":2}', 1),
    lambda line: line.replace(b"}", b',"n":NaN}', 1),
    lambda line: line.replace(b"}", b',"n":1e999}', 1),
    lambda line: line.replace(b"}", b',"n":Infinity}', 1),
    lambda line: line.replace(b"}", b',"s":"\\ud800"}', 1),
    lambda line: line.replace(b"}", b',"s":"\\ud83d\\ude00"}', 1),
    lambda line: line.replace(b"}", b',"s":"\\uDBFF"}', 1),
    lambda line: line.replace(b"}", b',"s":"\xff"}', 1),
    lambda line: line.replace(b"}", b',"s":"\x01"}', 1),
    lambda line: line.replace(b"}", b',"i":1' + b"0" * 5000 + b"}", 1),
    lambda line: line.replace(b"}", b',"d":' + b"[" * 127 + b"]" * 127 + b"}", 1),
    lambda line: line.replace(b"}", b',"d":' + b"[" * 128 + b"]" * 128 + b"}", 1),
    lambda line: line.replace(b"}", b',"t":"[[[[' + b"[" * 130 + b'"}', 1),
]


@settings(max_examples=400, deadline=None)
@given(value=st.dictionaries(st.text(max_size=4), _LINE_VALUES, max_size=4), data=st.data())
def test_fast_line_decoding_matches_the_strict_decoder(value: Any, data: st.DataObject) -> None:
    from sealeval.captured.importers.jsonl import _strict_row, decode_row  # noqa: PLC0415

    line = json.dumps(value, ensure_ascii=data.draw(st.booleans())).encode("utf-8")
    line = data.draw(st.sampled_from(_LINE_EDITS))(line) + b"\n"

    def outcome(decoder: Callable[[], Any]) -> tuple[Any, ...]:
        try:
            return ("ok", encode_invarlock(decoder()))
        except SealevalError as error:
            return (type(error), error.code, error.field)

    expected = outcome(lambda: _strict_row(line, "line[1]"))
    assert outcome(lambda: decode_row(line, "line[1]")) == expected
    tolerant = outcome(lambda: decode_row(line, "line[1]", lambda name: name == "n"))
    if b"NaN" not in line:
        assert tolerant == expected


def _lm_rows(count: int) -> list[dict[str, Any]]:
    rows = []
    for index in range(count):
        answer = ["Paris", "café 東京", "x"][index % 3]
        rows.append(
            {
                "doc_id": index,
                "doc": {"question": f"q{index} naïve?", "answer": answer},
                "target": answer,
                "arguments": {"gen_args_0": {"arg_0": f"Q{index}", "arg_1": {"until": ["\n"]}}},
                "resps": [[answer]],
                "filtered_resps": [answer],
                "exact_match": 1.0 if index % 2 else 0,
                "metadata": {"subtask": "alpha", "shard": str(index % 7)},
            }
        )
    return rows


def _jsonl_rows(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"case-{index}",
            "input": {"messages": [{"role": "user", "content": f"hello {index} ✓"}]},
            "expected": "yes",
            "output": None if index % 5 == 0 else "yes",
            "scores": {"bleu": index / 7, "n": index},
            "metadata": {"topic": "alpha"},
            **({"error": "upstream timeout"} if index % 5 == 0 else {}),
        }
        for index in range(count)
    ]


def _write_lines(path: Path, rows: list[Any], extra: dict[int, bytes] | None = None) -> None:
    lines = [json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n" for row in rows]
    for position, line in (extra or {}).items():
        lines.insert(position, line)
    path.write_bytes(b"".join(lines))


def _imported(
    path: Path,
    adapter: str,
    *,
    parallel: bool,
    monkeypatch: pytest.MonkeyPatch,
    adaptive: bool = False,
    **kwargs: Any,
) -> tuple[Any, ...]:
    """Import in one or two processes; ``("ok", file bytes, summary)`` or the refusal.

    One process: the importer's own ``rows`` through ``_write`` (the path every
    adapter has). Two: the line loop with the worker. Unless ``adaptive``, the
    worker encodes every batch and the parent waits for each (so that the worker's
    records are used whatever the scheduling).
    """
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    calls: list[bool] = []
    original = loop.write_lines

    def spy(*args: Any, parallel: bool) -> Any:
        calls.append(parallel)
        return original(*args, parallel=parallel)

    with monkeypatch.context() as patch:
        patch.setattr(loop, "_PARALLEL_ENABLED", parallel)
        patch.setattr(loop, "_parallel_min_bytes", 0)
        patch.setattr(loop, "_BATCH_LINES", 3)
        patch.setattr(loop, "write_lines", spy)
        if not parallel:  # the baseline: the importer's own rows() through _write
            patch.setattr(loop, "mappable", lambda _request: False)
        patch.setattr(
            loop,
            "use_worker",
            lambda request, _size: parallel and loop.mappable(request),
        )
        if not adaptive:  # the worker encodes every batch; the parent waits for each
            patch.setattr(loop, "_LEAD", 0)
            patch.setattr(loop._Board, "position", lambda _self: -1)
            patch.setattr(loop._Worker, "_encoding", lambda _self, _index: True)
        destination = path.with_name(f"{path.name}.{int(parallel)}.run.json")
        try:
            summary = importers.import_run_streaming(
                path,
                destination,
                adapter=adapter,
                source=SOURCE,
                run_id="run-1",
                artifact_digest=ARTIFACT,
                **kwargs,
            )
        except SealevalError as error:
            assert not destination.exists()
            assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
            result: tuple[Any, ...] = (type(error), error.code, error.field)
        else:
            result = ("ok", destination.read_bytes(), summary)
            destination.unlink()
    # a file whose first line another adapter reads is refused before streaming
    streamed = result[1:2] != ("adapter_mismatch",)
    assert calls == ([True] if parallel and "input_projection" not in kwargs and streamed else [])
    return result


@pytest.mark.parametrize("adapter", ["lm-eval-samples", "jsonl"])
def test_two_process_import_equals_one_process(
    adapter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = _lm_rows(40) if adapter == "lm-eval-samples" else _jsonl_rows(40)
    path = tmp_path / "source.jsonl"
    extra = {3: b"\n", 7: b"  \t\r\n", 20: b"\n"}
    if adapter == "lm-eval-samples":
        # NaN metrics (missing scores) and rows outside the fast path (likelihood facts
        # are checked by the Record path: here they are refused, at the same line)
        extra[11] = b'{"doc_id": "n1", "doc": {}, "target": "t", "arguments": {}, ' + (
            b'"filtered_resps": ["t"], "acc": NaN}\n'
        )
    else:
        extra[11] = (
            b'{"id": "p1", "input": {"a": "x"}, "expected": 1, "output": 2, "context": {}}\n'
        )
    _write_lines(path, rows, extra)
    one = _imported(path, adapter, parallel=False, monkeypatch=monkeypatch)
    two = _imported(path, adapter, parallel=True, monkeypatch=monkeypatch)
    assert one[0] == "ok"
    assert two == one
    projection = {"kind": "json-pointer", "pointer": "/input"}
    if adapter == "jsonl":
        with_projection = _imported(
            path, adapter, parallel=True, monkeypatch=monkeypatch, input_projection=projection
        )
        assert with_projection[0] != "ok" or with_projection[1] != one[1]


_LINE_FAULTS: list[bytes] = [
    b"{not json}\n",
    b'{"id": "case-3", "input": 1, "expected": 1, "output": 1}\n',  # duplicate id
    b'{"id": "z", "input": 1, "expected": 1, "output": 1, "scores": {"s": "x"}}\n',
    b'{"id": "z", "input": 1, "expected": 1, "output": 1, "bogus": 1}\n',
    b'{"id": "z", "input": 1, "expected": 1, "output": 1, "likelihood": {}}\n',
    b'{"id": "z", "input": "\\ud800", "expected": 1, "output": 1}\n',
    b'{"id": "z", "input": 1, "expected": 1, "output": NaN}\n',
    b'{"doc_id": 1, "doc": {}, "target": "t", "arguments": {}, "filtered_resps": [1, 2]}\n',
    b'{"doc_id": 1.5, "doc": {}, "target": "t", "arguments": {}, "filtered_resps": ["t"]}\n',
    b"[1]\n",
    b"\xff\n",
    b"x" * 300 + b"\n",
]


@settings(max_examples=30, deadline=None)
@given(
    adapter=st.sampled_from(["lm-eval-samples", "jsonl"]),
    fault=st.sampled_from(_LINE_FAULTS),
    position=st.integers(min_value=0, max_value=24),
    max_records=st.sampled_from([None, 17, 5]),
)
def test_two_process_import_refuses_like_one_process(
    adapter: str, fault: bytes, position: int, max_records: int | None
) -> None:
    from sealeval.captured.importers.base import ImportOptions  # noqa: PLC0415

    rows = _lm_rows(24) if adapter == "lm-eval-samples" else _jsonl_rows(24)
    limits = Limits(max_records=max_records)
    options = ImportOptions(max_line_bytes=256)
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        path = Path(directory) / "source.jsonl"
        _write_lines(path, rows, {position: fault})
        kwargs: dict[str, Any] = {"limits": limits, "options": options, "monkeypatch": patch}
        one = _imported(path, adapter, parallel=False, **kwargs)
        two = _imported(path, adapter, parallel=True, **kwargs)
    assert two == one


def test_two_process_import_refuses_a_worker_reading_other_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    other = tmp_path / "other.jsonl"
    rows = _jsonl_rows(30)
    _write_lines(path, rows)
    rows[7]["output"] = "changed"  # same records but one; the worker encodes that one
    _write_lines(other, rows)
    original = loop._work
    monkeypatch.setattr(loop, "_work", lambda fd, _path, *args: original(fd, other, *args))
    assert _imported(path, "jsonl", parallel=True, monkeypatch=monkeypatch) == (
        importers.ImportRefusalError,
        "source_changed",
        "file",
    )


def _exit_at_once(*_args: Any) -> None:
    raise SystemExit(0)


def _send_garbage(fd: int, *_args: Any) -> None:
    from multiprocessing.connection import Connection  # noqa: PLC0415

    connection = Connection(fd, readable=False)
    connection.send(("not", "a batch", []))


def _send_out_of_order(fd: int, *_args: Any) -> None:
    from multiprocessing.connection import Connection  # noqa: PLC0415

    connection = Connection(fd, readable=False)
    connection.send((5, b"", []))


@pytest.mark.parametrize("worker", [_exit_at_once, _send_garbage, _send_out_of_order])
def test_two_process_import_goes_on_alone_when_the_worker_fails(
    worker: Callable[..., None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    _write_lines(path, _lm_rows(25))
    one = _imported(path, "lm-eval-samples", parallel=False, monkeypatch=monkeypatch)
    monkeypatch.setattr(loop, "_work", worker)
    assert _imported(path, "lm-eval-samples", parallel=True, monkeypatch=monkeypatch) == one


def test_worker_batches_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's own code, run here (coverage is not collected in the forked child)."""
    import threading  # noqa: PLC0415
    from multiprocessing.connection import Connection  # noqa: PLC0415

    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415
    from sealeval.captured.importers.base import ImportOptions  # noqa: PLC0415

    monkeypatch.setattr(loop, "_BATCH_LINES", 2)
    path = tmp_path / "source.jsonl"
    _write_lines(path, _lm_rows(7), {2: b"\n", 4: b"{bad\n"})  # 9 lines, 5 batches
    read_fd, write_fd = os.pipe()
    received: list[Any] = []
    reader = Connection(read_fd, writable=False)

    def drain() -> None:
        with contextlib.suppress(EOFError):
            while True:
                received.append(reader.recv())

    thread = threading.Thread(target=drain)
    thread.start()
    importer = importers.get_importer("lm-eval-samples")
    loop._work(write_fd, path, importer, ImportOptions())  # closes write_fd
    thread.join()
    reader.close()
    assert [message[0] for message in received] == [0, 1, 2, 3, 4]  # 4: one line
    entries = [entry for message in received for entry in message[2]]
    assert None in entries  # the blank and the undecodable line
    assert all(entry is None or entry[1].startswith(b'{"context":') for entry in entries)
    # with a board: only batches _LEAD ahead of the parent's position
    board = loop._Board()
    board.publish(1)
    monkeypatch.setattr(loop, "_LEAD", 2)
    read_fd, write_fd = os.pipe()
    received.clear()
    reader = Connection(read_fd, writable=False)
    thread = threading.Thread(target=drain)
    thread.start()
    loop._work(write_fd, path, importer, ImportOptions(), board)
    thread.join()
    reader.close()
    assert [message[0] for message in received] == [3, 4]
    assert board.working() == 4


def test_two_process_gate() -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    class Stateful(loop.LinesImporter):
        name = "stateful"
        parallel_safe = False

        def detect(self, head: bytes, path: Path) -> bool:
            return False

        def map_row(self, row: dict[str, Any], where: str, options: Any) -> Any:
            return row

    assert importers.get_importer("jsonl").parallel_safe
    assert importers.get_importer("lm-eval-samples").parallel_safe
    assert not Stateful.parallel_safe
    assert loop.PARALLEL_MIN_BYTES >= 1 << 20


def test_two_process_import_edge_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sealeval.captured import importers  # noqa: PLC0415

    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n \n\t\n" * 5)
    for parallel in (False, True):
        assert _imported(blank, "jsonl", parallel=parallel, monkeypatch=monkeypatch) == (
            importers.ImportRefusalError,
            "no_records",
            "file",
        )
    # the source changes after the first pass: both processes read the new bytes
    path = tmp_path / "source.jsonl"
    _write_lines(path, _jsonl_rows(12))
    text = path.read_bytes()

    def progress(completed: int, total: int) -> None:
        if completed == len(text) and total == 2 * completed:
            path.write_bytes(text.replace(b"hello", b"jello"))

    for parallel in (False, True):
        path.write_bytes(text)
        changed = _imported(
            path, "jsonl", parallel=parallel, monkeypatch=monkeypatch, progress=progress
        )
        assert changed == (importers.ImportRefusalError, "source_changed", "file")


def test_two_process_import_checks_the_last_partial_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    other = tmp_path / "other.jsonl"
    rows = _jsonl_rows(13)  # batches of 3 lines: the 13th line alone, the worker's
    _write_lines(path, rows)
    rows[12]["output"] = "changed"
    _write_lines(other, rows)
    original = loop._work
    monkeypatch.setattr(loop, "_work", lambda fd, _path, *args: original(fd, other, *args))
    assert _imported(path, "jsonl", parallel=True, monkeypatch=monkeypatch) == (
        importers.ImportRefusalError,
        "source_changed",
        "file",
    )


def test_two_process_import_names_a_failing_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured import importers  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    _write_lines(path, _jsonl_rows(20))
    importer = importers.get_importer("jsonl")
    original = type(importer).map_row

    def map_row(self: Any, row: dict[str, Any], where: str, options: Any) -> Any:
        if row["id"] == "case-14":
            raise RuntimeError(CANARY)
        return original(self, row, where, options)

    monkeypatch.setattr(type(importer), "map_row", map_row)
    one = _imported(path, "jsonl", parallel=False, monkeypatch=monkeypatch)
    assert one == (importers.ImportRefusalError, "importer_failed", "file")
    assert _imported(path, "jsonl", parallel=True, monkeypatch=monkeypatch) == one


def test_plain_helpers_refuse_what_they_cannot_encode() -> None:
    from collections.abc import Mapping  # noqa: PLC0415

    from sealeval._validate import plain_json  # noqa: PLC0415
    from sealeval.canonical import plain_canonical  # noqa: PLC0415

    class Custom(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return {"b": 1, "a": [2]}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["b", "a"])

        def __len__(self) -> int:
            return 2

    assert plain_canonical({"x": object()}) is None
    assert plain_canonical({"x": math.nan}) is None
    assert plain_canonical({"x": "\ud800"}) is None
    assert not plain_json({"x": Custom()})
    from sealeval.captured.run import plain_record_bytes as plain  # noqa: PLC0415

    assert plain(_record(context={"input_projection": {}})) is None
    assert plain(_record(context={"other": {}})) is not None
    import sys  # noqa: PLC0415

    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415

    deep = _record(input=_deep(120))
    limit = sys.getrecursionlimit()
    try:
        sys.setrecursionlimit(60)
        assert plain_record_bytes(deep) is None  # deferred to the Record path
    finally:
        sys.setrecursionlimit(limit)
    assert plain_record_bytes(deep) is not None
    assert frozen_canonical({"x": Custom()}, error=CapturedRunError) == encode_invarlock(
        {"x": {"a": [2], "b": 1}}
    )
    encoder = RunEncoder(_header())
    encoder.add(_record())
    with pytest.raises(CapturedRunError) as caught:
        encoder._add_plain_bytes("r1", b"{}")
    assert (caught.value.code, caught.value.field) == ("duplicate_id", "records[1].id")
    with pytest.raises(CapturedRunError) as caught:
        encoder._add_plain_bytes("r2", b"{}")
    assert caught.value.code == "invalid_state"


@pytest.mark.parametrize("broken", ["pipe", "fork"])
def test_two_process_import_without_a_worker(
    broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    _write_lines(path, _lm_rows(12))
    one = _imported(path, "lm-eval-samples", parallel=False, monkeypatch=monkeypatch)

    def refused(*_args: Any) -> Any:
        raise OSError("resource temporarily unavailable")

    monkeypatch.setattr(loop.os, broken, refused)
    assert _imported(path, "lm-eval-samples", parallel=True, monkeypatch=monkeypatch) == one


def test_two_process_import_names_a_failing_progress_callback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured import importers  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    _write_lines(path, _jsonl_rows(20))
    size = path.stat().st_size

    def progress(completed: int, total: int) -> None:
        if total == 2 * size and completed > size + size // 2:
            raise RuntimeError(CANARY)

    for parallel in (False, True):
        assert _imported(
            path, "jsonl", parallel=parallel, monkeypatch=monkeypatch, progress=progress
        ) == (importers.ImportRefusalError, "importer_failed", "file")


def test_worker_batches_are_taken_skipped_or_awaited() -> None:
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415
    from multiprocessing.connection import Connection  # noqa: PLC0415

    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    read_fd, write_fd = os.pipe()
    writer = Connection(write_fd, readable=False)
    dummy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    worker = object.__new__(loop._Worker)
    worker._pid = dummy.pid
    worker._pending = None
    worker._affinity = None
    worker._board = loop._Board()
    worker._connection = Connection(read_fd, writable=False)
    try:
        # nothing ready and the worker is not on batch 1: the parent encodes it
        assert worker.batch(1) is None
        assert worker._board.position() == 1
        # the worker's batch 1 (encoded anyway, in a race) is dropped; 2 is used
        writer.send((1, b"d1", [None]))
        writer.send((2, b"d2", [("a", b"{}")]))
        assert worker.batch(2) == ([("a", b"{}")], b"d2")
        # the worker skipped 4: its batch 6 is kept for later
        writer.send((6, b"d6", []))
        assert worker.batch(4) is None
        assert worker.batch(5) is None
        assert worker.batch(6) == ([], b"d6")
        # the worker is encoding batch 7: the parent waits for it
        worker._board.work(7)
        timer = threading.Timer(0.2, lambda: writer.send((7, b"d7", [None])))
        timer.start()
        assert worker.batch(7) == ([None], b"d7")
        timer.join()
        assert worker._board.position() == 7
        # the worker ends while encoding 8: the parent stops it and goes on alone
        worker._board.work(8)
        writer.close()
        assert worker.batch(8) is None
        assert worker._pid is None
        assert worker.batch(9) is None
    finally:
        worker.close()
        dummy.kill()
        dummy.wait(timeout=30)


@pytest.mark.parametrize("slow", [False, True])
def test_two_process_import_adapts_to_a_slow_worker(
    slow: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time  # noqa: PLC0415

    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    nan_row = (
        b'{"doc_id": "n1", "doc": {}, "target": "t", "arguments": {}, '
        b'"filtered_resps": ["t"], "acc": NaN}\n'
    )
    _write_lines(path, _lm_rows(60), {9: b"\n", 30: nan_row})
    one = _imported(path, "lm-eval-samples", parallel=False, monkeypatch=monkeypatch)
    assert one[0] == "ok"
    if slow:  # the parent claims the batches the worker has not reached
        original = loop._encoded

        def slowly(*args: Any) -> Any:
            time.sleep(0.002)
            return original(*args)

        monkeypatch.setattr(loop, "_encoded", slowly)
    two = _imported(path, "lm-eval-samples", parallel=True, monkeypatch=monkeypatch, adaptive=True)
    assert two == one


def test_one_process_line_loop_equals_the_rows_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    path = tmp_path / "source.jsonl"
    _write_lines(path, _lm_rows(30), {4: b"\n", 12: b"{bad\n"})
    one = _imported(path, "lm-eval-samples", parallel=False, monkeypatch=monkeypatch)
    monkeypatch.setattr(loop, "_PARALLEL_ENABLED", False)
    destination = tmp_path / "loop.json"
    with pytest.raises(importers.ImportRefusalError) as caught:
        importers.import_run_streaming(
            path,
            destination,
            adapter="lm-eval-samples",
            source=SOURCE,
            run_id="run-1",
            artifact_digest=ARTIFACT,
        )
    assert (type(caught.value), caught.value.code, caught.value.field) == one
    _write_lines(path, _lm_rows(30), {4: b"\n"})
    one = _imported(path, "lm-eval-samples", parallel=False, monkeypatch=monkeypatch)
    summary = importers.import_run_streaming(
        path,
        destination,
        adapter="lm-eval-samples",
        source=SOURCE,
        run_id="run-1",
        artifact_digest=ARTIFACT,
    )
    assert ("ok", destination.read_bytes(), summary) == one


def test_two_process_gate_and_cpu_pinning(monkeypatch: pytest.MonkeyPatch) -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415

    calls: list[set[int]] = []
    monkeypatch.setattr(loop.os, "sched_setaffinity", lambda _pid, cpus: calls.append(cpus))
    assert loop._pin([0, 1, 2], 0) is None  # more than two CPUs: the scheduler decides
    assert loop._pin([3, 5], 1) == {3, 5}
    assert calls == [{5}]

    def refused(_pid: int, _cpus: set[int]) -> None:
        raise OSError("not permitted")

    monkeypatch.setattr(loop.os, "sched_setaffinity", refused)
    assert loop._pin([3, 5], 0) is None

    class Request:
        projection = None
        importer = importers.get_importer("jsonl")

    request: Any = Request()
    big = loop.PARALLEL_MIN_BYTES
    monkeypatch.setattr(loop.os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(loop.threading, "active_count", lambda: 1)
    monkeypatch.setattr(loop.sys, "platform", "linux")
    assert loop.use_worker(request, big)
    assert not loop.use_worker(request, big - 1)
    monkeypatch.setattr(loop.threading, "active_count", lambda: 2)
    assert not loop.use_worker(request, big)  # never fork a multi-threaded process
    monkeypatch.setattr(loop.threading, "active_count", lambda: 1)
    monkeypatch.setattr(loop.os, "sched_getaffinity", lambda _pid: {0})
    assert not loop.use_worker(request, big)
    request.importer = importers.get_importer("promptfoo-jsonl")
    monkeypatch.setattr(loop.os, "sched_getaffinity", lambda _pid: {0, 1})
    assert not loop.use_worker(request, big)  # not parallel-safe


_DEEP_VALUES = (
    st.integers(min_value=120, max_value=130).map(_deep) | _LINE_VALUES | st.just(1) | st.just(1)
)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(_DEEP_VALUES, min_size=4, max_size=4),
    lm=st.booleans(),
    ascii_only=st.booleans(),
)
def test_decoded_rows_are_trusted_only_as_the_walk_would(
    values: list[Any], lm: bool, ascii_only: bool
) -> None:
    """A row as the strict decoder made it is not walked again: same bytes, same refusals."""
    from sealeval.captured.importers.jsonl import decode_line  # noqa: PLC0415
    from sealeval.captured.importers.lm_eval_samples import harness_record  # noqa: PLC0415
    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415

    if lm:
        row: dict[str, Any] = {
            "doc_id": 7,
            "doc": values[0],
            "target": "t",
            "arguments": values[1],
            "filtered_resps": "answer",  # a string: no bracket of its own
            "extra": values[2],
        }
    else:
        row = {"id": "r", "input": values[0], "expected": values[1], "output": values[2]}
        row["context"] = values[3]
    line = json.dumps(row, ensure_ascii=ascii_only).encode("utf-8") + b"\n"
    try:
        decoded, height = decode_line(line, "line[1]")
    except SealevalError:
        return  # too deep for the decoder: never reaches a record
    record = harness_record(decoded, "line[1]") if lm else decoded
    plain = plain_record_bytes(record)
    if height is not None:
        assert plain_record_bytes(record, decoded=(decoded, height)) == plain
    expected = _outcome(lambda: _record_path([record]))
    if plain is not None:
        assert expected[0] == "ok"


def test_trusted_walk_and_worker_results_refuse_what_they_must() -> None:
    from sealeval.captured import importers  # noqa: PLC0415
    from sealeval.captured.importers import parallel as loop  # noqa: PLC0415
    from sealeval.captured.importers.base import ImportOptions  # noqa: PLC0415
    from sealeval.captured.run import plain_record_bytes  # noqa: PLC0415
    from sealeval.captured.run.fast import MAX_VALUE_DEPTH  # noqa: PLC0415

    # A record mapped from a decoded row (2 deep) reuses the row's containers.
    member: dict[str, Any] = {"a": [1], "b": {"c": 2}}
    row = {"id": "r", "input": member, "expected": 1, "output": 1}

    def record(input_value: Any) -> dict[str, Any]:
        return {"id": "r", "input": input_value, "expected": 1, "output": 1}

    reused = record({"x": member, "y": member["a"]})
    assert plain_record_bytes(reused, decoded=(row, 2)) is not None
    assert plain_record_bytes(reused, decoded=(row, 2)) == plain_record_bytes(reused)
    assert plain_record_bytes(record({"x": object()}), decoded=(row, 2)) is None
    assert plain_record_bytes(record({1: member}), decoded=(row, 2)) is None
    # A trusted row below MAX_VALUE_DEPTH - 1 wrappers fits; one more and it is walked
    # (and refused), not trusted.
    fits: Any = member
    for _ in range(MAX_VALUE_DEPTH - 2):
        fits = [fits]
    assert plain_record_bytes(record(fits), decoded=(row, 2)) is not None
    assert plain_record_bytes(record([fits]), decoded=(row, 2)) is None
    assert plain_record_bytes(record([fits])) is None

    class Listing(loop.LinesImporter):
        name = "listing"

        def detect(self, head: bytes, path: Path) -> bool:
            return False

        def map_row(self, row: dict[str, Any], where: str, options: Any) -> Any:
            return [row]

    line = b'{"id": "r", "input": 1, "expected": 1, "output": 1}\n'
    assert loop._encoded(Listing(), line, 1, ImportOptions(), None) is None
    jsonl = importers.get_importer("jsonl")
    encoded = loop._encoded(jsonl, line, 1, ImportOptions(), None)
    assert encoded is not None
    assert encoded[0] == "r"


def _frozen_shape(value: Any) -> Any:
    """The exact frozen structure of a value: types as well as contents."""
    if isinstance(value, Mapping):
        return (type(value), [(key, _frozen_shape(child)) for key, child in value.items()])
    if isinstance(value, tuple | list):
        return (type(value), [_frozen_shape(child) for child in value])
    return (type(value), value)


def _record_shape(record: Record) -> tuple[Any, ...]:
    return tuple(
        _frozen_shape(getattr(record, name))
        for name in (
            "id",
            "input",
            "expected",
            "output",
            "scores",
            "metadata",
            "error",
            "context",
            "likelihood",
            "projection",
        )
    )


@settings(max_examples=200, deadline=None)
@given(records=_RECORDS)
def test_fast_record_construction_equals_the_checked_path(records: list[dict[str, Any]]) -> None:
    """run_from_document / run_from_decoded / parse_run / RunReader build the same records."""
    from sealeval.captured.run import run_from_decoded  # noqa: PLC0415

    checked = make_run(records, source=SOURCE, run_id="run-1", artifact_digest=ARTIFACT)
    data = checked.to_canonical()
    document = json.loads(data)
    built = [
        run_from_document(document),
        run_from_decoded(document),
        parse_run(data),
        run_from_document(checked.to_dict()),
    ]
    # the checked path over the same document (key order as in the document)
    expected = [_record_shape(Record.from_document(item)) for item in document["records"]]
    for run in built[:3]:
        assert [_record_shape(record) for record in run.records] == expected
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "run.json")
        path.write_bytes(data)
        reader = RunReader(path)
        assert [_record_shape(record) for record in reader] == expected
        assert reader.summary.run_digest == checked.digest
    for run in built:
        assert run.digest == checked.digest
        assert run.canonical_size == len(data)
        assert dict(run.index) == dict(checked.index)
    assert gc.get_threshold() == _THRESHOLDS


#: The collector thresholds outside a run build (restored after each one).
_THRESHOLDS = gc.get_threshold()


def test_fast_path_keeps_refusals_and_the_collector(tmp_path: Path) -> None:
    """A duplicate id and a broken record refuse as before; collector thresholds come back."""
    records = [
        {"id": "a", "input": "x", "expected": "y", "output": "z"},
        {"id": "a", "input": "x", "expected": "y", "output": "z"},
    ]
    document = json.loads(
        make_run(
            records[:1], source=SOURCE, run_id="run-1", artifact_digest=ARTIFACT
        ).to_canonical()
    )
    document["records"] = document["records"] * 2
    with pytest.raises(CapturedRunError) as caught:
        run_from_document(document)
    assert (caught.value.code, caught.value.field) == ("duplicate_id", "records[1].id")
    assert gc.get_threshold() == _THRESHOLDS
    document["records"] = [*document["records"][:1], {**document["records"][0], "id": 7}]
    with pytest.raises(CapturedRunError) as caught:
        run_from_document(document)
    assert (caught.value.code, caught.value.field) == ("invalid_type", "records[1].id")
    document["records"] = []
    with pytest.raises(CapturedRunError) as caught:
        run_from_document(document)
    assert caught.value.code == "no_records"
    seen: list[tuple[int, ...]] = []
    original = run_module.Record._accepted

    def observed(record: dict[str, Any]) -> Record:
        seen.append(gc.get_threshold())
        return original(record)

    document["records"] = json.loads(
        make_run(records[:1], source=SOURCE, run_id="r", artifact_digest=ARTIFACT).to_canonical()
    )["records"]
    with mock.patch.object(run_module.Record, "_accepted", staticmethod(observed)):
        assert len(run_from_document(document).records) == 1
    assert seen[0][2] > _THRESHOLDS[2]  # full collections were held off while building
    assert gc.get_threshold() == _THRESHOLDS


def test_small_metadata_and_empty_members_are_shared() -> None:
    """Repeated slice tags share one read-only mapping; long values and empties as documented."""
    from sealeval._validate import EMPTY  # noqa: PLC0415

    rows = [
        {"id": f"r{index}", "input": "q", "expected": "a", "output": "a", "metadata": {"t": "x"}}
        for index in range(3)
    ]
    rows.append({"id": "long", "input": "q", "expected": "a", "output": "a"})
    rows[-1]["metadata"] = {"t": "y" * 65}
    run = make_run(rows, source=SOURCE, run_id="run-1", artifact_digest=ARTIFACT)
    parsed = parse_run(run.to_canonical())
    for built in (run, parsed):
        first, second = built.records[0], built.records[1]
        assert first.metadata is second.metadata
        assert dict(first.metadata) == {"t": "x"}
        assert first.scores is EMPTY
        assert first.context is EMPTY
        assert built.records[3].metadata is not built.records[3 - 1].metadata
        assert dict(built.records[3].metadata) == {"t": "y" * 65}
    with pytest.raises(TypeError):
        first.metadata["t"] = "z"  # type: ignore[index]
