"""Blinded adjudication packets, the sealed private mapping, balance and audit (spec 33)."""

from __future__ import annotations

import builtins
import copy
import dataclasses
import hmac
import json
import logging
import pickle
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_bytes, encode_openmed
from sealeval.errors import SealevalError
from sealeval.session.adjudication import (
    AUDIT_SCHEMA,
    BALANCE_SCHEMA,
    MAPPING_SCHEMA,
    PACKET_SCHEMA,
    AdjudicationError,
    BlindedCandidate,
    BlindedPacket,
    BlindedPacketSet,
    MappingAssignment,
    MappingEntry,
    PrivateMapping,
    RandomizationKey,
    alias_for_slot,
    audit_mapping,
    balance_report,
    candidate_base_order,
    compute_mapping_commitment,
    keyed_case_order,
    keyed_hmac,
    render_blinded_packets,
    require_cleared_reviewer,
    rotated_order,
)
from sealeval.session.adjudication import render as adjudication_render
from sealeval.session.cases import (
    CaseError,
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    evaluation_case_digest,
    evaluation_case_payload,
)
from support.refusals import CANARY, assert_refused_as, codes_of, refusal_table, rows_for
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/adjudication.json"
KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
HOLDOUT = "sha256:" + "be" * 32
DECLARATION = "sha256:" + "cf" * 32


# ---------------------------------------------------------------------------
# Building inputs from vector documents


def build_case(document: dict[str, Any]) -> ComparisonCase:
    return ComparisonCase(
        case_ref=document["case_ref"],
        source_evidence=tuple(
            SourceEvidence.from_dict(item) for item in document["source_evidence"]
        ),
        candidate_outputs=document["candidate_outputs"],
    )


def render_from(given_input: dict[str, Any]) -> BlindedPacketSet:
    """Build the value objects of a render case, then render (either may refuse)."""
    return render_blinded_packets(
        packet_set_ref=given_input["packet_set_ref"],
        cases=tuple(build_case(item) for item in given_input["cases"]),
        rubric=tuple(RubricCriterion.from_dict(item) for item in given_input["rubric"]),
        conflict_of_interest=ConflictOfInterestMetadata.from_dict(
            given_input["conflict_of_interest"]
        ),
        holdout_commitment_digest=given_input["holdout_commitment_digest"],
        submission_manifest_digests=given_input["submission_manifest_digests"],
        randomization_key=given_input["randomization_key"],
    )


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _check_render(given_input: dict[str, Any], expected: dict[str, Any]) -> None:
    rendered = render_from(given_input)
    key = given_input["randomization_key"]
    assert [packet.to_json() for packet in rendered.packets] == expected["packets_canonical"]
    assert [_as_json(packet.to_dict()) for packet in rendered.packets] == expected["packets"]
    assert rendered.mapping.to_json() == expected["mapping_canonical"]
    assert _as_json(rendered.mapping.to_dict()) == expected["mapping"]
    assert rendered.balance.to_dict() == expected["balance"]
    assert audit_mapping(rendered.packets, rendered.mapping, key).to_dict() == expected["audit"]
    # The documents parse back to equal objects and the same canonical text.
    for packet, text in zip(rendered.packets, expected["packets_canonical"], strict=True):
        assert BlindedPacket.from_json(text) == packet
        assert BlindedPacket.from_json(text).to_json() == text
    assert PrivateMapping.from_json(expected["mapping_canonical"]) == rendered.mapping
    assert (
        compute_mapping_commitment(rendered.mapping, key)
        == expected["mapping"]["mapping_commitment"]
    )
    # Packets never carry identities or manifest digests.
    identities = set(given_input["submission_manifest_digests"])
    for packet in expected["packets"]:
        assert "candidate_identity" not in json.dumps(packet)
        for digest in given_input["submission_manifest_digests"].values():
            assert digest not in json.dumps(packet)
        assert {item["alias"] for item in packet["candidates"]}.isdisjoint(identities)


def _check_audit(given_input: dict[str, Any], expected: dict[str, Any]) -> None:
    key = bytes.fromhex(given_input["key_hex"])
    from_documents = audit_mapping(given_input["packets"], given_input["mapping"], key)
    assert from_documents.to_dict() == expected
    assert from_documents.to_json() == encode_openmed(expected)
    objects = tuple(BlindedPacket.from_dict(item) for item in given_input["packets"])
    mapping = PrivateMapping.from_dict(given_input["mapping"])
    assert audit_mapping(objects, mapping, RandomizationKey(key)).to_dict() == expected


def _run_vector(given_input: dict[str, Any], expected: dict[str, Any]) -> None:
    op = given_input["op"]
    if op == "case_digest":
        built = build_case(given_input["case"])
        assert evaluation_case_digest(built) == expected["digest"]
        if "payload_canonical" in expected:
            assert encode_openmed(evaluation_case_payload(built)) == expected["payload_canonical"]
    elif op == "keyed_order":
        tag = keyed_hmac(
            bytes.fromhex(given_input["key_hex"]), given_input["domain"], given_input["value"]
        )
        assert tag.hex() == expected["hmac_hex"]
    elif op == "render":
        _check_render(given_input, expected)
    elif op == "audit":
        _check_audit(given_input, expected)
    elif op == "balance":
        report = balance_report(PrivateMapping.from_dict(given_input["mapping"]))
        assert report.to_dict() == expected
        assert balance_report(given_input["mapping"]).to_json() == encode_openmed(expected)
    else:
        pytest.fail("vector case shape not understood")


@pytest.mark.parametrize("case", cases(VECTORS))
def test_vectors(case: dict[str, Any]) -> None:
    given_input = decode_input(case["input"])
    expected = case["expected"]
    if isinstance(expected, dict) and set(expected) == {"error_code"}:
        if given_input["op"] != "render":
            pytest.fail("vector case shape not understood")
        with pytest.raises(SealevalError) as caught:
            render_from(given_input)
        assert str(caught.value) == expected["error_code"]
        assert type(caught.value) in (AdjudicationError, CaseError)
        assert caught.value.code in type(caught.value).codes
        return
    _run_vector(given_input, expected)


def test_vector_file_is_fully_understood() -> None:
    ops = {case["input"]["op"] for case in load(VECTORS)["cases"]}
    assert ops == {"case_digest", "keyed_order", "render", "audit", "balance"}
    counts = {
        case["name"]: case["expected"].get("case_count")
        for case in load("openmed/index.json")["cases"]
    }
    assert len(load(VECTORS)["cases"]) == counts[VECTORS.rsplit("/", 1)[-1]]


def test_input_order_does_not_change_the_rendering() -> None:
    by_name = {case["name"]: case for case in load(VECTORS)["cases"]}
    given_input = decode_input(by_name["render_input_order_irrelevant"]["input"])
    shuffled = dict(given_input, cases=tuple(reversed(given_input["cases"])))
    assert render_from(shuffled).mapping.to_json() == render_from(given_input).mapping.to_json()


# ---------------------------------------------------------------------------
# Contracts: every expected document validates against its schema


def _schema(kind: str) -> Draft202012Validator:
    path = PROJECT_ROOT / "contracts" / f"openmed.eval.blinded_adjudication.{kind}.v1.schema.json"
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


def test_vector_documents_match_the_schemas() -> None:
    validators = {kind: _schema(kind) for kind in ("packet", "mapping", "balance", "audit")}
    counts = dict.fromkeys(validators, 0)
    for case in load(VECTORS)["cases"]:
        op, expected = case["input"]["op"], case["expected"]
        if "error_code" in expected:
            continue
        if op == "render":
            for packet in expected["packets"]:
                validators["packet"].validate(packet)
                counts["packet"] += 1
            validators["mapping"].validate(expected["mapping"])
            validators["balance"].validate(expected["balance"])
            validators["audit"].validate(expected["audit"])
            counts["mapping"] += 1
            counts["balance"] += 1
            counts["audit"] += 1
        elif op == "audit":
            validators["audit"].validate(expected)
            validators["mapping"].validate(case["input"]["mapping"])
            for packet in case["input"]["packets"]:
                validators["packet"].validate(packet)
            counts["audit"] += 1
        elif op == "balance":
            validators["balance"].validate(expected)
            validators["mapping"].validate(case["input"]["mapping"])
            counts["balance"] += 1
    assert min(counts.values()) >= 4


def test_schemas_reject_identities_in_packets() -> None:
    by_name = {case["name"]: case for case in load(VECTORS)["cases"]}
    packet = copy.deepcopy(by_name["render_single_case"]["expected"]["packets"][0])
    packet["candidates"][0]["candidate_identity"] = "gamma"
    assert not _schema("packet").is_valid(packet)
    recused = copy.deepcopy(by_name["render_single_case"]["expected"]["packets"][0])
    recused["conflict_of_interest"]["status"] = "recused"
    assert not _schema("packet").is_valid(recused)


# ---------------------------------------------------------------------------
# A small fixture world


def _evidence(ref: str = "ev-1", content: str = "Evidence text") -> SourceEvidence:
    return SourceEvidence(evidence_ref=ref, content=content)


def _case(ref: str, identities: tuple[str, ...] = ("alpha", "beta", "gamma")) -> ComparisonCase:
    return ComparisonCase(
        case_ref=ref,
        source_evidence=(_evidence(),),
        candidate_outputs={
            identity: f"output {index} of {ref}" for index, identity in enumerate(identities)
        },
    )


CASES = tuple(_case(f"case-{index}") for index in range(5))
RUBRIC = (
    RubricCriterion(
        criterion_ref="grounding", question="Grounded?", minimum_score=1, maximum_score=5
    ),
)
CLEARED = ConflictOfInterestMetadata(reviewer_ref="reviewer-7", declaration_digest=DECLARATION)
RECUSED = ConflictOfInterestMetadata(
    reviewer_ref="reviewer-7", declaration_digest=DECLARATION, status="recused"
)
MANIFESTS = {
    name: "sha256:" + format(index, "x") * 64
    for index, name in enumerate(("alpha", "beta", "gamma"), 1)
}


def _render(**changes: Any) -> BlindedPacketSet:
    arguments: dict[str, Any] = {
        "packet_set_ref": "set-1",
        "cases": CASES,
        "rubric": RUBRIC,
        "conflict_of_interest": CLEARED,
        "holdout_commitment_digest": HOLDOUT,
        "submission_manifest_digests": MANIFESTS,
        "randomization_key": KEY,
    }
    arguments.update(changes)
    return render_blinded_packets(**arguments)


RENDERED = _render()
PACKET = RENDERED.packets[0]
PACKET_DOC = PACKET.to_dict()
MAPPING = RENDERED.mapping
MAPPING_DOC = MAPPING.to_dict()


def _packet(**changes: Any) -> BlindedPacket:
    return dataclasses.replace(PACKET, **changes)


def _packet_doc(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(PACKET_DOC)
    document.update(changes)
    return document


def _assignment(**changes: Any) -> MappingAssignment:
    return dataclasses.replace(MAPPING.entries[0].assignments[0], **changes)


def _entry(**changes: Any) -> MappingEntry:
    return dataclasses.replace(MAPPING.entries[0], **changes)


def _mapping(**changes: Any) -> PrivateMapping:
    return dataclasses.replace(MAPPING, **changes)


def _mapping_doc(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(MAPPING_DOC)
    document.update(changes)
    return document


def _unbalanced_render(monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setattr(adjudication_render, "rotated_order", lambda base, position: tuple(base))
    return _render()


_TWO = tuple(MAPPING.entries[0].assignments[:2])


class _Hostile(Mapping[str, Any]):
    """A mapping whose every access raises with the canary in the message."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(CANARY)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(CANARY)

    def __len__(self) -> int:
        return 2


_CANDIDATES = tuple(PACKET.candidates)

# (action, expected message); actions take the monkeypatch fixture.
REFUSALS = refusal_table(
    # render, in the specified check order
    *rows_for(
        "packet_set_ref: invalid_reference",
        render_packet_set_ref_first=lambda m: _render(
            packet_set_ref="bad ref", holdout_commitment_digest="x"
        ),
        render_packet_set_ref_none=lambda m: _render(packet_set_ref=None),
    ),
    (
        "render-holdout-before-key",
        lambda m: _render(holdout_commitment_digest="sha256:" + "0" * 63, randomization_key=b""),
        "holdout_commitment_digest: invalid_digest",
    ),
    *rows_for(
        "randomization_key: invalid_key",
        render_key_short_before_conflict=lambda m: _render(
            randomization_key=KEY[:31], conflict_of_interest=RECUSED
        ),
        render_key_str=lambda m: _render(randomization_key=KEY.hex()),
        render_key_bytearray=lambda m: _render(randomization_key=bytearray(KEY)),
        render_key_none=lambda m: _render(randomization_key=None),
    ),
    (
        "render-conflict-document",
        lambda m: _render(conflict_of_interest=CLEARED.to_dict()),
        "conflict_of_interest: invalid_metadata",
    ),
    (
        "render-recused-before-cases",
        lambda m: _render(conflict_of_interest=RECUSED, cases=()),
        "conflict_of_interest: reviewer_recused",
    ),
    *rows_for(
        "cases: invalid_sequence",
        render_cases_empty=lambda m: _render(cases=()),
        render_cases_too_many=lambda m: _render(cases=[CASES[0]] * 100_001),
        render_cases_iterator=lambda m: _render(cases=iter(CASES)),
        render_cases_foreign_item=lambda m: _render(cases=(*CASES, "case")),
    ),
    (
        "render-cases-duplicate-before-rubric",
        lambda m: _render(cases=(CASES[0], CASES[0]), rubric=()),
        "cases: duplicate_reference",
    ),
    *rows_for(
        "rubric: invalid_sequence",
        render_rubric_empty=lambda m: _render(rubric=()),
        render_rubric_nine=lambda m: _render(
            rubric=tuple(dataclasses.replace(RUBRIC[0], criterion_ref=f"c{i}") for i in range(9))
        ),
        render_rubric_document=lambda m: _render(rubric=(RUBRIC[0].to_dict(),)),
    ),
    (
        "render-rubric-duplicate",
        lambda m: _render(rubric=RUBRIC * 2),
        "rubric: duplicate_reference",
    ),
    *rows_for(
        "cases: inconsistent_candidates",
        render_inconsistent_before_manifests=lambda m: _render(
            cases=(*CASES, _case("case-x", ("alpha", "beta", "delta"))),
            submission_manifest_digests={},
        ),
        render_inconsistent_fewer=lambda m: _render(
            cases=(*CASES, _case("case-x", ("alpha", "beta")))
        ),
    ),
    *rows_for(
        "submission_manifest_digests: invalid_keys",
        render_manifests_missing=lambda m: _render(
            submission_manifest_digests={"alpha": MANIFESTS["alpha"]}
        ),
        render_manifests_extra=lambda m: _render(
            submission_manifest_digests={**MANIFESTS, "delta": MANIFESTS["alpha"]}
        ),
        render_manifests_not_mapping=lambda m: _render(
            submission_manifest_digests=list(MANIFESTS.items())
        ),
    ),
    (
        "render-manifest-digest",
        lambda m: _render(submission_manifest_digests={**MANIFESTS, "beta": "sha256:x"}),
        "submission_manifest_digest: invalid_digest",
    ),
    ("render-unbalanced-guard", _unbalanced_render, "mapping: unbalanced"),
    # key
    *rows_for(
        "randomization_key: invalid_key",
        key_31_bytes=lambda m: RandomizationKey(KEY[:31]),
        key_memoryview=lambda m: RandomizationKey(memoryview(KEY)),
    ),
    # keyed orderings
    ("keyed-domain", lambda m: keyed_hmac(KEY, "other-v1", "a"), "domain: invalid_domain"),
    ("keyed-value", lambda m: keyed_hmac(KEY, "case-order-v1", "a b"), "value: invalid_reference"),
    (
        "keyed-key",
        lambda m: keyed_hmac(b"short", "case-order-v1", "a"),
        "randomization_key: invalid_key",
    ),
    (
        "base-order-duplicate",
        lambda m: candidate_base_order(KEY, ["a", "a"]),
        "candidate_identity: duplicate_reference",
    ),
    (
        "base-order-grammar",
        lambda m: candidate_base_order(KEY, ["a", ""]),
        "candidate_identity: invalid_reference",
    ),
    (
        "case-order-duplicate",
        lambda m: keyed_case_order(KEY, [CASES[0], CASES[0]]),
        "cases: duplicate_reference",
    ),
    ("case-order-foreign", lambda m: keyed_case_order(KEY, ["case-0"]), "cases: invalid_sequence"),
    *rows_for(
        "slot: invalid_alias",
        alias_slot_26=lambda m: alias_for_slot(26),
        alias_slot_bool=lambda m: alias_for_slot(True),
    ),
    (
        "recusal-none",
        lambda m: require_cleared_reviewer(None),
        "conflict_of_interest: invalid_metadata",
    ),
    (
        "recusal-recused",
        lambda m: require_cleared_reviewer(RECUSED),
        "conflict_of_interest: reviewer_recused",
    ),
    # packets
    (
        "packet-schema",
        lambda m: _packet(schema_version=MAPPING_SCHEMA),
        "schema_version: unsupported_version",
    ),
    ("packet-set-ref", lambda m: _packet(packet_set_ref=""), "packet_set_ref: invalid_reference"),
    (
        "packet-holdout",
        lambda m: _packet(holdout_commitment_digest=None),
        "holdout_commitment_digest: invalid_digest",
    ),
    (
        "packet-commitment",
        lambda m: _packet(mapping_commitment="sha256:"),
        "mapping_commitment: invalid_digest",
    ),
    ("packet-case-ref", lambda m: _packet(case_ref="a/b"), "case_ref: invalid_reference"),
    (
        "packet-recused",
        lambda m: _packet(conflict_of_interest=RECUSED),
        "conflict_of_interest: reviewer_recused",
    ),
    (
        "packet-conflict-type",
        lambda m: _packet(conflict_of_interest={}),
        "conflict_of_interest: invalid_metadata",
    ),
    ("packet-rubric", lambda m: _packet(rubric=()), "rubric: invalid_sequence"),
    (
        "packet-evidence-duplicate",
        lambda m: _packet(source_evidence=(_evidence(), _evidence())),
        "source_evidence: duplicate_reference",
    ),
    (
        "packet-evidence-empty",
        lambda m: _packet(source_evidence=[]),
        "source_evidence: invalid_sequence",
    ),
    ("packet-candidates-none", lambda m: _packet(candidates=None), "candidates: invalid_sequence"),
    *rows_for(
        "candidates: invalid_count",
        packet_one_candidate=lambda m: _packet(candidates=_CANDIDATES[:1]),
        packet_27_candidates=lambda m: _packet(
            candidates=(
                *(BlindedCandidate(alias=alias_for_slot(i), content="x") for i in range(26)),
                BlindedCandidate(alias="candidate-a", content="x"),
            )
        ),
    ),
    *rows_for(
        "alias: invalid_alias",
        packet_aliases_out_of_order=lambda m: _packet(candidates=_CANDIDATES[::-1]),
        candidate_alias_grammar=lambda m: BlindedCandidate(alias="candidate-A", content="x"),
        candidate_alias_identity=lambda m: BlindedCandidate(alias="gamma", content="x"),
    ),
    (
        "candidate-content-blank",
        lambda m: BlindedCandidate(alias="candidate-a", content="  "),
        "content: invalid_text",
    ),
    *rows_for(
        "packet: invalid_document",
        packet_doc_not_mapping=lambda m: BlindedPacket.from_dict([]),
        packet_doc_extra_key=lambda m: BlindedPacket.from_dict(
            _packet_doc(candidate_identity="gamma")
        ),
        packet_doc_missing_key=lambda m: BlindedPacket.from_dict(
            {k: v for k, v in PACKET_DOC.items() if k != "rubric"}
        ),
    ),
    *rows_for(
        "candidates: invalid_document",
        packet_doc_candidates_str=lambda m: BlindedPacket.from_dict(_packet_doc(candidates="x")),
        packet_doc_candidate_identity=lambda m: BlindedPacket.from_dict(
            _packet_doc(
                candidates=[{"alias": "candidate-a", "content": "x", "candidate_identity": "gamma"}]
                * 2
            )
        ),
    ),
    (
        "packet-doc-rubric-mapping",
        lambda m: BlindedPacket.from_dict(_packet_doc(rubric={})),
        "rubric: invalid_document",
    ),
    *rows_for(
        "packet: invalid_document",
        packet_json_duplicate_key=lambda m: BlindedPacket.from_json('{"a":1,"a":2}'),
        packet_json_not_utf8=lambda m: BlindedPacket.from_json(b"\xff"),
    ),
    # mapping
    ("assignment-alias", lambda m: _assignment(alias="candidate-1"), "alias: invalid_alias"),
    (
        "assignment-identity",
        lambda m: _assignment(candidate_identity=""),
        "candidate_identity: invalid_reference",
    ),
    (
        "assignment-output-digest",
        lambda m: _assignment(output_digest="sha256:" + "G" * 64),
        "output_digest: invalid_digest",
    ),
    (
        "assignment-manifest-digest",
        lambda m: _assignment(submission_manifest_digest=1),
        "submission_manifest_digest: invalid_digest",
    ),
    ("entry-case-ref", lambda m: _entry(case_ref=" "), "case_ref: invalid_reference"),
    ("entry-assignments-str", lambda m: _entry(assignments="ab"), "assignments: invalid_sequence"),
    ("entry-one-assignment", lambda m: _entry(assignments=_TWO[:1]), "assignments: invalid_count"),
    (
        "entry-aliases-out-of-order",
        lambda m: _entry(assignments=_TWO[::-1]),
        "alias: invalid_alias",
    ),
    (
        "entry-identity-twice",
        lambda m: _entry(assignments=(_TWO[0], dataclasses.replace(_TWO[0], alias="candidate-b"))),
        "assignments: duplicate_reference",
    ),
    (
        "mapping-schema",
        lambda m: _mapping(schema_version=PACKET_SCHEMA),
        "schema_version: unsupported_version",
    ),
    (
        "mapping-set-ref",
        lambda m: _mapping(packet_set_ref="é"),
        "packet_set_ref: invalid_reference",
    ),
    (
        "mapping-holdout",
        lambda m: _mapping(holdout_commitment_digest=HOLDOUT.upper()),
        "holdout_commitment_digest: invalid_digest",
    ),
    (
        "mapping-commitment",
        lambda m: _mapping(mapping_commitment="hmac:" + "0" * 64),
        "mapping_commitment: invalid_digest",
    ),
    ("mapping-no-entries", lambda m: _mapping(entries=()), "entries: invalid_sequence"),
    (
        "mapping-duplicate-case",
        lambda m: _mapping(entries=(MAPPING.entries[0],) * 2),
        "entries: duplicate_reference",
    ),
    *rows_for(
        "mapping: invalid_document",
        mapping_doc_none=lambda m: PrivateMapping.from_dict(None),
        mapping_doc_extra=lambda m: PrivateMapping.from_dict(_mapping_doc(extra=1)),
    ),
    *rows_for(
        "entries: invalid_document",
        mapping_doc_entries_mapping=lambda m: PrivateMapping.from_dict(_mapping_doc(entries={})),
        mapping_doc_entry_keys=lambda m: PrivateMapping.from_dict(
            _mapping_doc(entries=[{"case_ref": "c"}])
        ),
    ),
    (
        "mapping-doc-assignment-type",
        lambda m: PrivateMapping.from_dict(
            _mapping_doc(entries=[{"case_ref": "c", "assignments": [1, 2]}])
        ),
        "assignments: invalid_document",
    ),
    (
        "packet-doc-hostile-mapping",
        lambda m: BlindedPacket.from_dict(_Hostile()),
        "packet: invalid_document",
    ),
    (
        "render-manifests-hostile-mapping",
        lambda m: _render(submission_manifest_digests=_Hostile()),
        "submission_manifest_digests: invalid_keys",
    ),
    ("mapping-json", lambda m: PrivateMapping.from_json("[1,"), "mapping: invalid_document"),
    (
        "commitment-document",
        lambda m: compute_mapping_commitment(MAPPING_DOC, KEY),
        "mapping: invalid_mapping",
    ),
    # balance and audit
    *rows_for(
        "mapping: invalid_mapping",
        balance_not_mapping=lambda m: balance_report([MAPPING]),
        balance_malformed_document=lambda m: balance_report(_mapping_doc(entries=[])),
    ),
    *rows_for(
        "randomization_key: invalid_key",
        audit_short_key=lambda m: audit_mapping(RENDERED.packets, MAPPING, KEY[:-1]),
        audit_key_before_mapping=lambda m: audit_mapping(RENDERED.packets, None, "key"),
    ),
    *rows_for(
        "mapping: invalid_mapping",
        audit_mapping_none=lambda m: audit_mapping(RENDERED.packets, None, KEY),
        audit_mapping_bad_document=lambda m: audit_mapping(
            RENDERED.packets, _mapping_doc(schema_version="x"), KEY
        ),
        audit_mapping_before_packets=lambda m: audit_mapping([], "mapping", KEY),
    ),
)


@pytest.mark.parametrize(("action", "message"), REFUSALS)
def test_refusals(
    action: Callable[[pytest.MonkeyPatch], object], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_refused_as(lambda: action(monkeypatch), message, AdjudicationError)


def test_every_code_is_exercised() -> None:
    assert codes_of(REFUSALS) == set(AdjudicationError.codes)


def test_error_class_is_wired_to_its_module() -> None:
    assert AdjudicationError.module == "sealeval.session.adjudication"
    assert AdjudicationError.field_in_message is True


def test_case_errors_surface_unchanged_from_packet_documents() -> None:
    bad_rubric = _packet_doc(rubric=[{**RUBRIC[0].to_dict(), "maximum_score": 9}])
    with pytest.raises(CaseError, match=r"^score_range: invalid_range$"):
        BlindedPacket.from_dict(bad_rubric)


# ---------------------------------------------------------------------------
# Audit results (reported, not raised)


def _audit(packets: Any, mapping: Any = MAPPING, key: Any = KEY) -> tuple[int, tuple[str, ...]]:
    result = audit_mapping(packets, mapping, key)
    assert result.valid == (result.reason_codes == ("valid",))
    assert result.schema_version == AUDIT_SCHEMA
    return result.packet_count, result.reason_codes


def _with_candidate(packet: BlindedPacket, slot: int, content: str) -> BlindedPacket:
    candidates = list(packet.candidates)
    candidates[slot] = BlindedCandidate(alias=candidates[slot].alias, content=content)
    return dataclasses.replace(packet, candidates=tuple(candidates))


def _tampered_packet(**changes: Any) -> tuple[BlindedPacket, ...]:
    return (dataclasses.replace(RENDERED.packets[0], **changes), *RENDERED.packets[1:])


@pytest.mark.parametrize(
    ("packets", "mapping", "key", "expected"),
    [
        pytest.param(RENDERED.packets, MAPPING, KEY, (5, ("valid",)), id="valid-objects"),
        pytest.param(
            [p.to_dict() for p in RENDERED.packets],
            MAPPING_DOC,
            KEY,
            (5, ("valid",)),
            id="valid-documents",
        ),
        pytest.param(
            RENDERED.packets, MAPPING, RandomizationKey(KEY), (5, ("valid",)), id="valid-key-object"
        ),
        pytest.param((), MAPPING, KEY, (0, ("invalid_packet_set",)), id="empty"),
        pytest.param(
            iter(RENDERED.packets), MAPPING, KEY, (0, ("invalid_packet_set",)), id="iterator"
        ),
        pytest.param(
            RENDERED.packets[0],
            MAPPING,
            KEY,
            (0, ("invalid_packet_set",)),
            id="single-packet-not-sequence",
        ),
        pytest.param(
            (*RENDERED.packets, "packet"),
            MAPPING,
            KEY,
            (0, ("invalid_packet_set",)),
            id="foreign-item",
        ),
        pytest.param(
            (*RENDERED.packets[:-1], {**PACKET_DOC, "x": 1}),
            MAPPING,
            KEY,
            (0, ("invalid_packet_set",)),
            id="malformed-document",
        ),
        pytest.param(
            RENDERED.packets, MAPPING, OTHER_KEY, (5, ("commitment_mismatch",)), id="other-key"
        ),
        pytest.param(
            RENDERED.packets[:-1], MAPPING, KEY, (4, ("mapping_mismatch",)), id="missing-packet"
        ),
        pytest.param(
            RENDERED.packets + RENDERED.packets[:1],
            MAPPING,
            KEY,
            (6, ("mapping_mismatch",)),
            id="extra-packet",
        ),
        pytest.param(
            RENDERED.packets[::-1], MAPPING, KEY, (5, ("mapping_mismatch",)), id="reordered"
        ),
        pytest.param(
            _tampered_packet(packet_set_ref="set-2"),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="packet-set-ref",
        ),
        pytest.param(
            _tampered_packet(holdout_commitment_digest="sha256:" + "0" * 64),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="holdout",
        ),
        pytest.param(
            _tampered_packet(mapping_commitment="sha256:" + "0" * 64),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="packet-commitment",
        ),
        pytest.param(
            _tampered_packet(case_ref="case-other"),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="case-ref",
        ),
        pytest.param(
            _tampered_packet(candidates=tuple(RENDERED.packets[0].candidates[:2])),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="candidate-count",
        ),
        pytest.param(
            (_with_candidate(RENDERED.packets[0], 2, "edited"), *RENDERED.packets[1:]),
            MAPPING,
            KEY,
            (5, ("mapping_mismatch",)),
            id="last-slot-text",
        ),
        pytest.param(
            RENDERED.packets,
            _mapping(packet_set_ref="set-2"),
            KEY,
            (5, ("commitment_mismatch", "mapping_mismatch")),
            id="mapping-set-ref",
        ),
        pytest.param(
            RENDERED.packets,
            _mapping(mapping_commitment="sha256:" + "1" * 64),
            KEY,
            (5, ("commitment_mismatch", "mapping_mismatch")),
            id="mapping-commitment",
        ),
    ],
)
def test_audit_reports(
    packets: Any, mapping: Any, key: Any, expected: tuple[int, tuple[str, ...]]
) -> None:
    assert _audit(packets, mapping, key) == expected


def test_audit_compares_the_commitment_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, object]] = []
    real = hmac.compare_digest

    def spy(first: Any, second: Any) -> bool:
        calls.append((first, second))
        return real(first, second)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert _audit(RENDERED.packets) == (5, ("valid",))
    assert calls == [(MAPPING.mapping_commitment, MAPPING.mapping_commitment)]


def test_identical_outputs_cannot_be_attributed() -> None:
    same = ComparisonCase(
        case_ref="dup",
        source_evidence=(_evidence(),),
        candidate_outputs={"alpha": "same", "beta": "same", "gamma": "other"},
    )
    rendered = _render(cases=(same,))
    digests = {
        a.candidate_identity: a.output_digest for a in rendered.mapping.entries[0].assignments
    }
    assert digests["alpha"] == digests["beta"]
    assert _audit(rendered.packets, rendered.mapping) == (1, ("valid",))


# ---------------------------------------------------------------------------
# Balance edges


def _assign(slot: int, identity: str) -> MappingAssignment:
    return MappingAssignment(
        alias=alias_for_slot(slot),
        candidate_identity=identity,
        output_digest=digest_bytes(identity.encode()),
        submission_manifest_digest=MANIFESTS["alpha"],
    )


def _balance_of(rows: list[tuple[str, ...]]) -> dict[str, Any]:
    entries = tuple(
        MappingEntry(assignments=tuple(_assign(s, i) for s, i in enumerate(row)), case_ref=f"c{n}")
        for n, row in enumerate(rows)
    )
    mapping = PrivateMapping(
        entries=entries,
        holdout_commitment_digest=HOLDOUT,
        mapping_commitment=HOLDOUT,
        packet_set_ref="s",
    )
    return balance_report(mapping).to_dict()


@pytest.mark.parametrize(
    ("rows", "balanced", "imbalance"),
    [
        pytest.param([("x", "y")], True, 1, id="single-entry"),
        pytest.param([("x", "y"), ("y", "x")], True, 0, id="perfect"),
        pytest.param([("x", "y"), ("x", "y")], False, 2, id="fixed-order"),
        pytest.param([("x", "y", "z"), ("x", "y")], False, 1, id="count-differs"),
        pytest.param([("x", "y"), ("x", "z"), ("y", "x")], False, 0, id="identity-set-differs"),
        pytest.param(
            [("x", "y", "z"), ("y", "z", "x"), ("z", "x", "y")], True, 0, id="full-rotation"
        ),
    ],
)
def test_balance_edges(rows: list[tuple[str, ...]], balanced: bool, imbalance: int) -> None:
    report = _balance_of(rows)
    assert report["balanced"] is balanced
    assert report["maximum_slot_imbalance"] == imbalance
    assert report["packet_count"] == len(rows)
    assert report["candidate_count"] == len(rows[0])
    assert report["schema_version"] == BALANCE_SCHEMA


# ---------------------------------------------------------------------------
# The key


def test_key_never_shows_its_bytes() -> None:
    secret = hmac.new(KEY, b"a key that never shows", "sha256").digest()
    key = RandomizationKey(secret)
    for text in (repr(key), str(key), f"{key}", f"{key!r}"):
        assert secret.hex() not in text
        assert secret.hex()[:6] not in text
        assert repr(secret) not in text
    assert not hasattr(key, "__dict__")
    with pytest.raises(TypeError):
        pickle.dumps(key)
    with pytest.raises(AttributeError):
        key._material = b"x" * 32  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del key._material  # type: ignore[misc]
    assert key != RandomizationKey(secret)
    assert copy.copy(key) is key
    assert copy.deepcopy({"k": key})["k"] is key


def test_key_object_and_bytes_render_the_same() -> None:
    assert _render(randomization_key=RandomizationKey(KEY)).mapping == MAPPING
    longer = _render(randomization_key=KEY + b"\x00" * 100)
    assert longer.mapping.mapping_commitment != MAPPING.mapping_commitment


def test_mapping_commitment_is_the_specified_hmac() -> None:
    payload = encode_openmed(MAPPING.payload()).encode("ascii")
    tag = hmac.new(KEY, MAPPING_SCHEMA.encode("ascii") + b"\x00" + payload, "sha256").hexdigest()
    assert MAPPING.mapping_commitment == "sha256:" + tag
    assert MAPPING.to_dict() == {
        **MAPPING.payload(),
        "mapping_commitment": MAPPING.mapping_commitment,
    }


def test_keyed_orderings_follow_the_specified_hmac() -> None:
    identities = ["alpha", "beta", "gamma", "delta"]
    expected = sorted(identities, key=lambda i: (keyed_hmac(KEY, "candidate-order-v1", i), i))
    assert candidate_base_order(KEY, identities) == tuple(expected)
    tag = hmac.new(KEY, b"case-order-v1\x00case-1", "sha256").digest()
    assert keyed_hmac(KEY, "case-order-v1", "case-1") == tag
    ordered = keyed_case_order(KEY, CASES)
    assert [c.case_ref for c in ordered] == [e.case_ref for e in MAPPING.entries]
    assert rotated_order(("a", "b", "c"), 4) == ("b", "c", "a")
    assert rotated_order((), 3) == ()
    assert [alias_for_slot(s) for s in (0, 1, 25)] == ["candidate-a", "candidate-b", "candidate-z"]


# ---------------------------------------------------------------------------
# Purity, immutability, never-echo


def test_rendering_performs_no_file_io(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("file I/O during rendering")

    monkeypatch.setattr(builtins, "open", refuse)
    rendered = _render()
    assert audit_mapping(rendered.packets, rendered.mapping, KEY).valid


def test_rendered_values_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        RENDERED.packets[0].case_ref = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        RENDERED.mapping.entries = ()  # type: ignore[misc]
    assert isinstance(RENDERED.packets[0].candidates, tuple)
    assert isinstance(RENDERED.mapping.entries, tuple)
    document = RENDERED.mapping.to_dict()
    document["entries"].clear()
    assert RENDERED.mapping.entries


def test_canary_never_reaches_errors_reprs_logs_or_packets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    identities = (CANARY + "-id-a", CANARY + "-id-b")
    canary_cases = tuple(
        ComparisonCase(
            case_ref=f"{CANARY}-case-{n}",
            source_evidence=(SourceEvidence(evidence_ref=CANARY, content="evidence " + CANARY),),
            candidate_outputs={
                identity: f"output {n} {index}" for index, identity in enumerate(identities)
            },
        )
        for n in range(3)
    )
    manifests = {
        identity: "sha256:" + format(index + 10, "x") * 64
        for index, identity in enumerate(identities)
    }
    arguments: dict[str, Any] = {
        "packet_set_ref": CANARY,
        "cases": canary_cases,
        "rubric": (
            RubricCriterion(
                criterion_ref=CANARY, question=CANARY, minimum_score=0, maximum_score=1
            ),
        ),
        "conflict_of_interest": ConflictOfInterestMetadata(
            reviewer_ref=CANARY, declaration_digest=DECLARATION
        ),
        "holdout_commitment_digest": HOLDOUT,
        "submission_manifest_digests": manifests,
        "randomization_key": KEY,
    }
    rendered = render_blinded_packets(**arguments)
    for packet in rendered.packets:
        text = packet.to_json()
        for identity in identities:
            assert json.dumps(identity) not in text
        for digest in manifests.values():
            assert digest not in text
    values = (
        rendered,
        *rendered.packets,
        *rendered.packets[0].candidates,
        *rendered.packets[0].source_evidence,
        *rendered.packets[0].rubric,
        rendered.packets[0].conflict_of_interest,
        rendered.mapping,
        *rendered.mapping.entries,
        *rendered.mapping.entries[0].assignments,
        rendered.balance,
    )
    for value in values:
        assert CANARY not in repr(value)
    assert CANARY not in rendered.balance.to_json()
    assert CANARY not in audit_mapping(rendered.packets, rendered.mapping, KEY).to_json()

    refusals: list[Callable[[], object]] = [
        lambda: render_blinded_packets(**{**arguments, "packet_set_ref": CANARY + " "}),
        lambda: render_blinded_packets(**{**arguments, "holdout_commitment_digest": CANARY}),
        lambda: render_blinded_packets(**{**arguments, "randomization_key": CANARY.encode()[:31]}),
        lambda: render_blinded_packets(**{**arguments, "randomization_key": CANARY}),
        lambda: render_blinded_packets(**{**arguments, "conflict_of_interest": CANARY}),
        lambda: render_blinded_packets(**{**arguments, "cases": (CANARY,)}),
        lambda: render_blinded_packets(**{**arguments, "cases": canary_cases * 2}),
        lambda: render_blinded_packets(**{**arguments, "rubric": (CANARY,)}),
        lambda: render_blinded_packets(
            **{**arguments, "submission_manifest_digests": {CANARY: CANARY}}
        ),
        lambda: render_blinded_packets(
            **{**arguments, "submission_manifest_digests": dict.fromkeys(identities, CANARY)}
        ),
        lambda: keyed_hmac(KEY, CANARY, CANARY),
        lambda: keyed_hmac(KEY, "case-order-v1", CANARY + " "),
        lambda: candidate_base_order(KEY, [CANARY, CANARY]),
        lambda: BlindedCandidate(alias=CANARY, content=CANARY),
        lambda: BlindedPacket.from_dict({CANARY: CANARY}),
        lambda: BlindedPacket.from_dict(
            {**rendered.packets[0].to_dict(), "case_ref": CANARY + "/"}
        ),
        lambda: BlindedPacket.from_json(f'{{"{CANARY}":1,"{CANARY}":2}}'),
        lambda: PrivateMapping.from_dict({**rendered.mapping.to_dict(), CANARY: CANARY}),
        lambda: PrivateMapping.from_json(f'["{CANARY}"'),
        lambda: MappingAssignment(
            alias="candidate-a",
            candidate_identity=CANARY + "!",
            output_digest=HOLDOUT,
            submission_manifest_digest=HOLDOUT,
        ),
        lambda: audit_mapping(rendered.packets, {CANARY: CANARY}, KEY),
        lambda: audit_mapping(rendered.packets, rendered.mapping, CANARY),
        lambda: balance_report(CANARY),  # type: ignore[arg-type]
    ]
    for action in refusals:
        with pytest.raises(SealevalError) as caught:
            action()
        error = caught.value
        for text in (str(error), repr(error), *map(str, error.args)):
            assert CANARY not in text
        assert error.__cause__ is None
    tampered = [{**rendered.packets[0].to_dict(), CANARY: CANARY}]
    assert CANARY not in audit_mapping(tampered, rendered.mapping, KEY).to_json()
    assert CANARY not in caplog.text


# ---------------------------------------------------------------------------
# Properties


@st.composite
def _worlds(draw: st.DrawFn) -> tuple[tuple[ComparisonCase, ...], dict[str, str]]:
    count = draw(st.integers(min_value=2, max_value=7))
    identities = [f"ident-{index}" for index in range(count)]
    case_count = draw(st.integers(min_value=1, max_value=40))
    texts = st.text(alphabet="abcdefghij XYZ.", min_size=1, max_size=12).filter(str.strip)
    built = tuple(
        ComparisonCase(
            case_ref=f"case-{n}",
            source_evidence=(SourceEvidence(evidence_ref="ev", content=draw(texts)),),
            candidate_outputs={identity: draw(texts) for identity in identities},
        )
        for n in range(case_count)
    )
    manifests = {identity: digest_bytes(identity.encode()) for identity in identities}
    return built, manifests


_keys = st.binary(min_size=32, max_size=64)


@settings(max_examples=60, deadline=None)
@given(world=_worlds(), key=_keys)
def test_rotation_is_balanced_and_audit_passes(
    world: tuple[tuple[ComparisonCase, ...], dict[str, str]], key: bytes
) -> None:
    built, manifests = world
    rendered = _render(cases=built, submission_manifest_digests=manifests, randomization_key=key)
    n = len(manifests)
    per_slot = {identity: [0] * n for identity in manifests}
    for entry in rendered.mapping.entries:
        assert [a.alias for a in entry.assignments] == [alias_for_slot(s) for s in range(n)]
        assert {a.candidate_identity for a in entry.assignments} == set(manifests)
        for slot, assignment in enumerate(entry.assignments):
            per_slot[assignment.candidate_identity][slot] += 1
    worst = max(max(counts) - min(counts) for counts in per_slot.values())
    assert worst <= 1
    assert rendered.balance.balanced
    assert rendered.balance.maximum_slot_imbalance == worst
    assert rendered.balance.packet_count == len(built)
    assert audit_mapping(rendered.packets, rendered.mapping, key).valid


@settings(max_examples=40, deadline=None)
@given(world=_worlds(), key=_keys, other=_keys, seed=st.randoms(use_true_random=False))
def test_determinism_and_key_dependence(
    world: tuple[tuple[ComparisonCase, ...], dict[str, str]], key: bytes, other: bytes, seed: Any
) -> None:
    built, manifests = world
    first = _render(cases=built, submission_manifest_digests=manifests, randomization_key=key)
    shuffled = list(built)
    seed.shuffle(shuffled)
    second = _render(
        cases=tuple(shuffled), submission_manifest_digests=manifests, randomization_key=key
    )
    assert first.mapping.to_json() == second.mapping.to_json()
    assert [p.to_json() for p in first.packets] == [p.to_json() for p in second.packets]
    if other != key:
        third = _render(cases=built, submission_manifest_digests=manifests, randomization_key=other)
        assert third.mapping.mapping_commitment != first.mapping.mapping_commitment
        assert (
            audit_mapping(first.packets, first.mapping, other).reason_codes[0]
            == "commitment_mismatch"
        )


@settings(max_examples=40, deadline=None)
@given(world=_worlds(), key=_keys, data=st.data())
def test_round_trip_coverage_and_tamper_detection(
    world: tuple[tuple[ComparisonCase, ...], dict[str, str]], key: bytes, data: st.DataObject
) -> None:
    built, manifests = world
    rendered = _render(cases=built, submission_manifest_digests=manifests, randomization_key=key)
    by_ref = {case.case_ref: case for case in built}
    for packet, entry in zip(rendered.packets, rendered.mapping.entries, strict=True):
        assert BlindedPacket.from_json(packet.to_json()) == packet
        case = by_ref[packet.case_ref]
        assert packet.source_evidence == case.source_evidence
        for candidate, assignment in zip(packet.candidates, entry.assignments, strict=True):
            assert candidate.content == case.candidate_outputs[assignment.candidate_identity]
            assert assignment.submission_manifest_digest == manifests[assignment.candidate_identity]
        text = packet.to_json()
        assert all(f'"{identity}"' not in text for identity in manifests)
    assert PrivateMapping.from_json(rendered.mapping.to_json()) == rendered.mapping
    index = data.draw(st.integers(min_value=0, max_value=len(rendered.packets) - 1))
    slot = data.draw(st.integers(min_value=0, max_value=len(manifests) - 1))
    packets = list(rendered.packets)
    original = packets[index].candidates[slot].content
    packets[index] = _with_candidate(packets[index], slot, original + " (edited)")
    assert audit_mapping(packets, rendered.mapping, key).reason_codes == ("mapping_mismatch",)


@pytest.mark.slow
def test_largest_case_set_renders() -> None:
    evidence = (_evidence(),)
    many = [
        ComparisonCase(
            case_ref=f"c{n}",
            source_evidence=evidence,
            candidate_outputs={"alpha": f"a{n}", "beta": f"b{n}"},
        )
        for n in range(100_000)
    ]
    rendered = _render(
        cases=many, submission_manifest_digests={k: MANIFESTS[k] for k in ("alpha", "beta")}
    )
    assert len(rendered.packets) == 100_000
    assert rendered.balance.balanced
    assert rendered.balance.maximum_slot_imbalance == 0
