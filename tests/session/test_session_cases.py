"""Comparison-case value types and the evaluation case digest (spec 33, 30 §3)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sealeval.canonical import encode_openmed
from sealeval.session.cases import (
    CaseError,
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    evaluation_case_digest,
    evaluation_case_payload,
    is_reference,
    is_text,
)
from support.refusals import CANARY, assert_refused_as, codes_of, refusal_table, rows_for
from support.vectors import cases, decode_input

DIGEST = "sha256:" + "ab" * 32
GOOD_EVIDENCE = (SourceEvidence(evidence_ref="ev-1", content="Evidence text"),)
GOOD_OUTPUTS = {"alpha": "Output alpha", "beta": "Output beta"}


def build_case(document: dict[str, Any]) -> ComparisonCase:
    """Build a case from a vector-style document (evidence items as documents)."""
    return ComparisonCase(
        case_ref=document["case_ref"],
        source_evidence=tuple(
            SourceEvidence.from_dict(item) for item in document["source_evidence"]
        ),
        candidate_outputs=document["candidate_outputs"],
    )


# ---------------------------------------------------------------------------
# Vectors: every case_digest case of adjudication.json (the adjudication test
# module runs the whole file, these included).

_DIGEST_CASES = [
    param
    for param in cases("openmed/adjudication.json")
    if param.values[0]["input"]["op"] == "case_digest"
]


def test_case_digest_vectors_are_present() -> None:
    assert len(_DIGEST_CASES) >= 4


@pytest.mark.parametrize("case", _DIGEST_CASES)
def test_case_digest_vectors(case: dict[str, Any]) -> None:
    given_input = decode_input(case["input"])
    expected = case["expected"]
    built = build_case(given_input["case"])
    assert evaluation_case_digest(built) == expected["digest"]
    if "payload_canonical" in expected:
        assert encode_openmed(evaluation_case_payload(built)) == expected["payload_canonical"]


def test_case_digest_is_independent_of_output_insertion_order() -> None:
    first = ComparisonCase(
        case_ref="c", source_evidence=GOOD_EVIDENCE, candidate_outputs=GOOD_OUTPUTS
    )
    second = ComparisonCase(
        case_ref="c",
        source_evidence=GOOD_EVIDENCE,
        candidate_outputs=dict(reversed(GOOD_OUTPUTS.items())),
    )
    assert evaluation_case_digest(first) == evaluation_case_digest(second)


def test_case_digest_depends_on_evidence_order() -> None:
    evidence = (
        SourceEvidence(evidence_ref="a", content="one"),
        SourceEvidence(evidence_ref="b", content="two"),
    )
    first = ComparisonCase(case_ref="c", source_evidence=evidence, candidate_outputs=GOOD_OUTPUTS)
    second = ComparisonCase(
        case_ref="c", source_evidence=evidence[::-1], candidate_outputs=GOOD_OUTPUTS
    )
    assert evaluation_case_digest(first) != evaluation_case_digest(second)


# ---------------------------------------------------------------------------
# Refusals, one row per rule; every code of CaseError is exercised.


def _case(**changes: Any) -> ComparisonCase:
    fields: dict[str, Any] = {
        "case_ref": "case-1",
        "source_evidence": GOOD_EVIDENCE,
        "candidate_outputs": GOOD_OUTPUTS,
    }
    fields.update(changes)
    return ComparisonCase(**fields)


def _criterion(**changes: Any) -> RubricCriterion:
    fields: dict[str, Any] = {
        "criterion_ref": "grounding",
        "question": "Is it grounded?",
        "minimum_score": 1,
        "maximum_score": 5,
    }
    fields.update(changes)
    return RubricCriterion(**fields)


def _conflict(**changes: Any) -> ConflictOfInterestMetadata:
    fields: dict[str, Any] = {"reviewer_ref": "reviewer-7", "declaration_digest": DIGEST}
    fields.update(changes)
    return ConflictOfInterestMetadata(**fields)


class _StrSub(str):
    __slots__ = ()


class _Hostile(Mapping[str, Any]):
    """A mapping whose every access raises with the canary in the message."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(CANARY)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(CANARY)

    def __len__(self) -> int:
        return 2


class _Twice(Mapping[str, str]):
    """A mapping that yields one key twice."""

    def __getitem__(self, key: str) -> str:
        return "text"

    def __iter__(self) -> Iterator[str]:
        return iter(("a", "a"))

    def __len__(self) -> int:
        return 2


REFUSALS = refusal_table(
    # SourceEvidence
    *rows_for(
        "evidence_ref: invalid_reference",
        evidence_ref_empty=lambda: SourceEvidence(evidence_ref="", content="x"),
        evidence_ref_leading_dash=lambda: SourceEvidence(evidence_ref="-x", content="x"),
        evidence_ref_too_long=lambda: SourceEvidence(evidence_ref="a" * 129, content="x"),
        evidence_ref_space=lambda: SourceEvidence(evidence_ref="a b", content="x"),
        evidence_ref_trailing_newline=lambda: SourceEvidence(evidence_ref="a\n", content="x"),
        evidence_ref_non_ascii=lambda: SourceEvidence(evidence_ref="\u00e9", content="x"),
        evidence_ref_str_subclass=lambda: SourceEvidence(evidence_ref=_StrSub("a"), content="x"),
        evidence_ref_int=lambda: SourceEvidence(evidence_ref=1, content="x"),
    ),
    *rows_for(
        "content: invalid_text",
        content_empty=lambda: SourceEvidence(evidence_ref="e", content=""),
        content_blank=lambda: SourceEvidence(evidence_ref="e", content=" \t\n"),
        content_unicode_blank=lambda: SourceEvidence(evidence_ref="e", content="\u2003\u3000"),
        content_too_long=lambda: SourceEvidence(evidence_ref="e", content="x" * 1_000_001),
        content_lone_surrogate=lambda: SourceEvidence(evidence_ref="e", content="bad \ud800"),
        content_bytes=lambda: SourceEvidence(evidence_ref="e", content=b"bytes"),
    ),
    *rows_for(
        "source_evidence: invalid_document",
        evidence_doc_not_mapping=lambda: SourceEvidence.from_dict(["content"]),
        evidence_doc_missing_key=lambda: SourceEvidence.from_dict({"content": "x"}),
        evidence_doc_extra_key=lambda: SourceEvidence.from_dict(
            {"content": "x", "evidence_ref": "e", "x": 1}
        ),
    ),
    # RubricCriterion
    (
        "criterion-ref",
        lambda: _criterion(criterion_ref="bad ref"),
        "criterion_ref: invalid_reference",
    ),
    *rows_for(
        "question: invalid_text",
        question_blank=lambda: _criterion(question=" "),
        question_too_long=lambda: _criterion(question="q" * 501),
    ),
    *rows_for(
        "score_range: invalid_range",
        score_bool_min=lambda: _criterion(minimum_score=True),
        score_bool_max=lambda: _criterion(maximum_score=True, minimum_score=0),
        score_float=lambda: _criterion(maximum_score=5.0),
        score_negative=lambda: _criterion(minimum_score=-1, maximum_score=2),
        score_above_ten=lambda: _criterion(minimum_score=8, maximum_score=11),
        score_empty_range=lambda: _criterion(minimum_score=3, maximum_score=3),
        score_inverted=lambda: _criterion(minimum_score=4, maximum_score=2),
        score_span_five=lambda: _criterion(minimum_score=0, maximum_score=5),
    ),
    (
        "criterion-doc",
        lambda: RubricCriterion.from_dict({"criterion_ref": "c"}),
        "criterion: invalid_document",
    ),
    # ConflictOfInterestMetadata
    ("reviewer-ref", lambda: _conflict(reviewer_ref="r/1"), "reviewer_ref: invalid_reference"),
    *rows_for(
        "declaration_digest: invalid_digest",
        declaration_uppercase=lambda: _conflict(declaration_digest="sha256:" + "AB" * 32),
        declaration_newline=lambda: _conflict(declaration_digest=DIGEST + "\n"),
    ),
    *rows_for(
        "conflict_status: invalid_status",
        status_unknown=lambda: _conflict(status="pending"),
        status_case=lambda: _conflict(status="Cleared"),
        status_none=lambda: _conflict(status=None),
    ),
    (
        "conflict-doc-status-missing",
        lambda: ConflictOfInterestMetadata.from_dict(
            {"reviewer_ref": "r", "declaration_digest": DIGEST}
        ),
        "conflict_of_interest: invalid_document",
    ),
    # ComparisonCase
    ("case-ref", lambda: _case(case_ref="case 1"), "case_ref: invalid_reference"),
    *rows_for(
        "source_evidence: invalid_sequence",
        evidence_empty=lambda: _case(source_evidence=()),
        evidence_not_sequence=lambda: _case(source_evidence=GOOD_EVIDENCE[0]),
        evidence_iterator=lambda: _case(source_evidence=iter(GOOD_EVIDENCE)),
        evidence_item_document=lambda: _case(
            source_evidence=({"evidence_ref": "e", "content": "x"},)
        ),
    ),
    (
        "evidence-duplicate",
        lambda: _case(source_evidence=GOOD_EVIDENCE * 2),
        "source_evidence: duplicate_reference",
    ),
    (
        "outputs-not-mapping",
        lambda: _case(candidate_outputs=[("a", "x"), ("b", "y")]),
        "candidate_outputs: invalid_mapping",
    ),
    *rows_for(
        "candidate_outputs: invalid_count",
        outputs_one=lambda: _case(candidate_outputs={"a": "x"}),
        outputs_twenty_seven=lambda: _case(candidate_outputs={f"c{i}": "x" for i in range(27)}),
    ),
    *rows_for(
        "candidate_identity: invalid_reference",
        identity_grammar=lambda: _case(candidate_outputs={"a": "x", "b c": "y"}),
        identity_not_str=lambda: _case(candidate_outputs={"a": "x", 2: "y"}),
    ),
    *rows_for(
        "candidate_output: invalid_text",
        output_blank=lambda: _case(candidate_outputs={"a": "x", "b": "\n"}),
        output_none=lambda: _case(candidate_outputs={"a": "x", "b": None}),
    ),
    *rows_for(
        "candidate_outputs: invalid_mapping",
        outputs_hostile_mapping=lambda: _case(candidate_outputs=_Hostile()),
        outputs_key_twice=lambda: _case(candidate_outputs=_Twice()),
    ),
    (
        "evidence-doc-hostile-mapping",
        lambda: SourceEvidence.from_dict(_Hostile()),
        "source_evidence: invalid_document",
    ),
    *rows_for(
        "case: invalid_case",
        digest_not_a_case=lambda: evaluation_case_digest({"case_ref": "c"}),
        payload_not_a_case=lambda: evaluation_case_payload("c"),
    ),
)


@pytest.mark.parametrize(("action", "message"), REFUSALS)
def test_refusals(action: Callable[[], object], message: str) -> None:
    assert_refused_as(action, message, CaseError)


def test_every_code_is_exercised() -> None:
    assert codes_of(REFUSALS) == set(CaseError.codes)


def test_error_class_is_wired_to_its_module() -> None:
    assert CaseError.module == "sealeval.session.cases"
    assert CaseError.field_in_message is True
    assert str(CaseError("invalid_text", "content")) == "content: invalid_text"


# ---------------------------------------------------------------------------
# Accepted edges


@pytest.mark.parametrize(
    ("low", "high"),
    [(0, 1), (0, 4), (6, 10), (9, 10), (1, 5)],
)
def test_score_range_edges_are_accepted(low: int, high: int) -> None:
    criterion = _criterion(minimum_score=low, maximum_score=high)
    assert criterion.to_dict()["minimum_score"] == low


def test_text_and_reference_edges_are_accepted() -> None:
    assert is_reference("a" * 128)
    assert is_reference("A0._:-z")
    assert is_text("x" * 1_000_000)
    assert is_text(" x ")
    assert is_text("\u00e9\U0001f600")
    assert _criterion(question="q" * 500).question == "q" * 500
    assert _case(candidate_outputs={f"c{i}": "x" for i in range(26)}).candidate_identities


def test_conflict_status_defaults_to_cleared_and_recused_flag() -> None:
    assert _conflict().status == "cleared"
    assert not _conflict().recused
    assert _conflict(status="recused").recused


def test_documents_round_trip() -> None:
    evidence = GOOD_EVIDENCE[0]
    assert SourceEvidence.from_dict(evidence.to_dict()) == evidence
    criterion = _criterion()
    assert RubricCriterion.from_dict(criterion.to_dict()) == criterion
    conflict = _conflict(status="recused")
    assert ConflictOfInterestMetadata.from_dict(conflict.to_dict()) == conflict
    assert list(criterion.to_dict()) == sorted(criterion.to_dict())


# ---------------------------------------------------------------------------
# Immutability


def test_case_is_immutable_and_copies_its_inputs() -> None:
    outputs = dict(GOOD_OUTPUTS)
    evidence = list(GOOD_EVIDENCE)
    built = ComparisonCase(case_ref="c", source_evidence=evidence, candidate_outputs=outputs)
    before = evaluation_case_digest(built)
    outputs["alpha"] = "changed"
    evidence.append(SourceEvidence(evidence_ref="z", content="z"))
    assert evaluation_case_digest(built) == before
    assert isinstance(built.source_evidence, tuple)
    with pytest.raises(TypeError):
        built.candidate_outputs["alpha"] = "x"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.case_ref = "other"  # type: ignore[misc]
    payload = evaluation_case_payload(built)
    payload["candidate_outputs"]["alpha"] = "x"
    assert evaluation_case_digest(built) == before


# ---------------------------------------------------------------------------
# Never echo


def test_canary_never_reaches_errors_reprs_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    actions: list[Callable[[], object]] = [
        lambda: SourceEvidence(evidence_ref=CANARY + " x", content=CANARY),
        lambda: SourceEvidence(evidence_ref="e", content=" " * 3 + "\ud800" + CANARY),
        lambda: SourceEvidence.from_dict({CANARY: CANARY}),
        lambda: _criterion(criterion_ref=CANARY + "!", question=CANARY),
        lambda: _criterion(question=CANARY * 20),
        lambda: _criterion(minimum_score=CANARY, maximum_score=CANARY),
        lambda: _conflict(reviewer_ref=CANARY + "/"),
        lambda: _conflict(declaration_digest=CANARY),
        lambda: _conflict(status=CANARY),
        lambda: ConflictOfInterestMetadata.from_dict({CANARY: 1}),
        lambda: _case(case_ref=CANARY + " "),
        lambda: _case(candidate_outputs={CANARY + " ": CANARY, "b": "x"}),
        lambda: _case(candidate_outputs={CANARY: CANARY}),
        lambda: _case(candidate_outputs={CANARY: " ", "b": "x"}),
        lambda: _case(source_evidence=(SourceEvidence(evidence_ref=CANARY, content=CANARY),) * 2),
        lambda: evaluation_case_digest(CANARY),  # type: ignore[arg-type]
    ]
    for action in actions:
        with pytest.raises(CaseError) as caught:
            action()
        error = caught.value
        for text in (str(error), repr(error), *map(str, error.args)):
            assert CANARY not in text
        assert error.__cause__ is None
    accepted = [
        SourceEvidence(evidence_ref=CANARY, content=CANARY),
        _criterion(criterion_ref=CANARY, question=CANARY),
        _conflict(reviewer_ref=CANARY),
        _case(
            case_ref=CANARY,
            source_evidence=(SourceEvidence(evidence_ref=CANARY, content=CANARY),),
            candidate_outputs={CANARY: CANARY, CANARY + "2": CANARY},
        ),
    ]
    for value in accepted:
        assert CANARY not in repr(value)
        assert CANARY not in str(value)
    assert CANARY not in caplog.text


# ---------------------------------------------------------------------------
# Properties

_refs = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)
_texts = st.text(min_size=1, max_size=40).filter(is_text)


@given(
    case_ref=_refs,
    evidence=st.dictionaries(_refs, _texts, min_size=1, max_size=4),
    outputs=st.dictionaries(_refs, _texts, min_size=2, max_size=6),
)
def test_case_digest_covers_every_field(
    case_ref: str, evidence: dict[str, str], outputs: dict[str, str]
) -> None:
    built = ComparisonCase(
        case_ref=case_ref,
        source_evidence=tuple(
            SourceEvidence(evidence_ref=r, content=c) for r, c in evidence.items()
        ),
        candidate_outputs=outputs,
    )
    digest = evaluation_case_digest(built)
    assert digest == evaluation_case_digest(
        ComparisonCase(
            case_ref=case_ref,
            source_evidence=built.source_evidence,
            candidate_outputs=dict(outputs),
        )
    )
    first_identity = next(iter(outputs))
    changed_outputs = {**outputs, first_identity: outputs[first_identity] + "!"}
    variants = [
        ComparisonCase(
            case_ref=case_ref + "x",
            source_evidence=built.source_evidence,
            candidate_outputs=outputs,
        ),
        ComparisonCase(
            case_ref=case_ref,
            source_evidence=built.source_evidence,
            candidate_outputs=changed_outputs,
        ),
        ComparisonCase(
            case_ref=case_ref,
            source_evidence=(
                SourceEvidence(
                    evidence_ref=built.source_evidence[0].evidence_ref,
                    content=built.source_evidence[0].content + "!",
                ),
                *built.source_evidence[1:],
            ),
            candidate_outputs=outputs,
        ),
    ]
    for variant in variants:
        assert evaluation_case_digest(variant) != digest


@given(value=st.text(max_size=30))
def test_is_text_matches_its_definition(value: str) -> None:
    try:
        value.encode("utf-8")
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    assert is_text(value) == (bool(value.strip()) and encodable)
