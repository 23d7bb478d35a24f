"""sealeval.session.holdout: golden vectors, every refusal, never-echo, properties, schemas."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.errors import SealevalError
from sealeval.session import holdout
from sealeval.session.holdout import (
    COMMITMENT_SCHEMA,
    LEAF_DOMAIN,
    MANIFEST_KINDS,
    NODE_DOMAIN,
    PROOF_SCHEMA,
    REASON_CODES,
    VERIFICATION_SCHEMA,
    HoldoutCommitment,
    HoldoutError,
    HoldoutVerification,
    InclusionProof,
    build_inclusion_proof,
    commit_holdout,
    leaf_digest,
    leaf_preimage,
    merkle_levels,
    merkle_root,
    node_digest,
    node_preimage,
    tree_depth,
    verify_holdout_commitment,
    verify_inclusion_proof,
)
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/holdout.json"


def dg(n: int) -> str:
    """A distinct, well-formed item digest for each integer."""
    return "sha256:" + hashlib.sha256(b"item-%d" % n).hexdigest()


def manifests(sizes: tuple[int, int, int, int] = (5, 1, 3, 8)) -> dict[str, list[str]]:
    start = 0
    result = {}
    for kind, size in zip(MANIFEST_KINDS, sizes, strict=True):
        result[kind] = [dg(start + i) for i in range(size)]
        start += 1000
    return result


MANIFESTS = manifests()
COMMITMENT = commit_holdout("pub-epoch-2", MANIFESTS)
COMMITMENT_DOC = COMMITMENT.to_dict()
PROOF = build_inclusion_proof(COMMITMENT, "case", 4, MANIFESTS["case"])
PROOF_DOC = PROOF.to_dict()


# ---------------------------------------------------------------------------
# Golden vectors


def _items_for_proof(case_input: dict[str, Any]) -> Any:
    if "item_digests_override" in case_input:
        return case_input["item_digests_override"]
    return case_input["manifests"][case_input["manifest_kind"]]


def _run(case_input: dict[str, Any]) -> Any:
    op = case_input.get("op")
    if op == "leaf":
        args = (case_input["manifest_kind"], case_input["item_index"], case_input["item_digest"])
        return {"digest": leaf_digest(*args), "preimage_hex": leaf_preimage(*args).hex()}
    if op == "node":
        args = (case_input["left"], case_input["right"])
        return {"digest": node_digest(*args), "preimage_hex": node_preimage(*args).hex()}
    if op == "commit":
        commitment = commit_holdout(case_input["holdout_version"], case_input["manifests"])
        levels = {
            kind: [list(level) for level in merkle_levels(kind, case_input["manifests"][kind])]
            for kind in MANIFEST_KINDS
        }
        return {"canonical": commitment.to_json(), "parsed": commitment.to_dict(), "levels": levels}
    if op == "proof":
        commitment = commit_holdout(case_input["holdout_version"], case_input["manifests"])
        proof = build_inclusion_proof(
            commitment,
            case_input["manifest_kind"],
            case_input["item_index"],
            _items_for_proof(case_input),
        )
        return {
            "proof": {"canonical": proof.to_json(), "parsed": proof.to_dict()},
            "verification": verify_inclusion_proof(commitment, proof).to_dict(),
        }
    if op == "verify_commitment":
        return verify_holdout_commitment(case_input["commitment"]).to_dict()
    if op == "verify_proof":
        return verify_inclusion_proof(case_input["commitment"], case_input["proof"]).to_dict()
    pytest.fail("vector case shape not understood")


@pytest.mark.parametrize("case", cases(VECTORS))
def test_vector(case: dict[str, Any]) -> None:
    case_input = decode_input(case["input"])
    expected = case["expected"]
    if set(expected) == {"error_code"}:
        with pytest.raises(HoldoutError) as caught:
            _run(case_input)
        assert str(caught.value) == expected["error_code"]
        assert caught.value.code in HoldoutError.codes
        return
    got = _run(case_input)
    op = case_input["op"]
    if op in {"leaf", "node"}:
        assert got == expected
        assert (
            got["digest"]
            == "sha256:" + hashlib.sha256(bytes.fromhex(got["preimage_hex"])).hexdigest()
        )
    elif op == "commit":
        assert got["canonical"] == expected["canonical"]
        assert got["parsed"] == expected["parsed"]
        assert got["levels"] == expected["levels"]
        assert json.loads(expected["canonical"]) == expected["parsed"]
        parsed = HoldoutCommitment.from_json(expected["canonical"])
        assert parsed.to_json() == expected["canonical"]
        assert verify_holdout_commitment(expected["parsed"]).to_dict()["valid"] is True
    elif op == "proof":
        assert got["proof"]["canonical"] == expected["proof"]["canonical"]
        assert got["proof"]["parsed"] == expected["proof"]["parsed"]
        assert got["verification"] == expected["verification"]
        parsed_proof = InclusionProof.from_json(expected["proof"]["canonical"])
        assert parsed_proof.to_json() == expected["proof"]["canonical"]
        commitment = commit_holdout(case_input["holdout_version"], case_input["manifests"])
        documents = verify_inclusion_proof(commitment.to_dict(), expected["proof"]["parsed"])
        assert documents.to_dict() == expected["verification"]
    elif op in {"verify_commitment", "verify_proof"}:
        assert got == expected
        assert encode_openmed(got) == encode_openmed(expected)
        if op == "verify_commitment":
            _cross_check_constructor(case_input["commitment"], valid=expected["valid"])
    else:
        pytest.fail("vector case shape not understood")


def _cross_check_constructor(document: Any, *, valid: bool) -> None:
    """The strict parser accepts exactly the documents the verifier calls valid."""
    if valid:
        assert HoldoutCommitment.from_dict(document).to_dict() == document
    else:
        with pytest.raises(HoldoutError):
            HoldoutCommitment.from_dict(document)


def test_vectors_cover_every_op_and_reason() -> None:
    document = load(VECTORS)
    assert len(document["cases"]) == 84
    ops = {case["input"]["op"] for case in document["cases"]}
    assert ops == {"leaf", "node", "commit", "proof", "verify_commitment", "verify_proof"}
    reasons = {
        code for case in document["cases"] for code in case["expected"].get("reason_codes", ())
    }
    assert reasons == set(REASON_CODES)


# ---------------------------------------------------------------------------
# JSON Schemas


def _validator(name: str) -> Draft202012Validator:
    path = PROJECT_ROOT / "contracts" / f"{name}.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_vector_documents_match_the_schemas() -> None:
    commitment = _validator(COMMITMENT_SCHEMA)
    proof = _validator(PROOF_SCHEMA)
    verification = _validator(VERIFICATION_SCHEMA)
    counts = {"commitment": 0, "proof": 0, "verification": 0}
    for case in load(VECTORS)["cases"]:
        expected = case["expected"]
        op = case["input"]["op"]
        if op == "commit" and "parsed" in expected:
            commitment.validate(expected["parsed"])
            counts["commitment"] += 1
        elif op == "proof" and "proof" in expected:
            proof.validate(expected["proof"]["parsed"])
            verification.validate(expected["verification"])
            counts["proof"] += 1
            counts["verification"] += 1
        elif op in {"verify_commitment", "verify_proof"}:
            verification.validate(expected)
            counts["verification"] += 1
    assert counts == {"commitment": 7, "proof": 22, "verification": 51}


def test_schemas_refuse_what_the_code_refuses() -> None:
    commitment = _validator(COMMITMENT_SCHEMA)
    proof = _validator(PROOF_SCHEMA)
    verification = _validator(VERIFICATION_SCHEMA)
    assert not commitment.is_valid({**COMMITMENT_DOC, "extra": 1})
    assert not commitment.is_valid(
        {**COMMITMENT_DOC, "manifest_item_counts": {**COMMITMENT.manifest_item_counts, "case": 0}}
    )
    assert not commitment.is_valid({**COMMITMENT_DOC, "holdout_version": ".x"})
    assert not proof.is_valid({**PROOF_DOC, "manifest_kind": "cases"})
    assert not proof.is_valid({**PROOF_DOC, "item_index": -1})
    assert not proof.is_valid({**PROOF_DOC, "item_index": True})
    for reason in REASON_CODES:
        document = HoldoutVerification.of(reason).to_dict()
        verification.validate(document)
        assert not verification.is_valid({**document, "valid": not document["valid"]})
    assert not verification.is_valid(
        {"reason_codes": ["valid", "valid"], "schema_version": VERIFICATION_SCHEMA, "valid": True}
    )


# ---------------------------------------------------------------------------
# Hash constructions and trees


def test_leaf_and_node_preimages_are_exact() -> None:
    item = dg(1)
    assert leaf_preimage("label", 12, item) == (
        LEAF_DOMAIN.encode() + b"\x00label\x0012\x00" + item.encode()
    )
    assert node_preimage(item, dg(2)) == NODE_DOMAIN.encode() + b"\x00" + item.encode() + (
        b"\x00" + dg(2).encode()
    )
    assert leaf_digest("label", 12, item) == (
        "sha256:" + hashlib.sha256(leaf_preimage("label", 12, item)).hexdigest()
    )


@pytest.mark.parametrize(
    ("count", "depth"),
    [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (16, 4), (17, 5), (100_000, 17)],
)
def test_tree_depth(count: int, depth: int) -> None:
    assert tree_depth(count) == depth
    assert len(merkle_levels("case", [dg(0)] * min(count, 64))) == tree_depth(min(count, 64)) + 1


def test_single_item_root_is_its_leaf() -> None:
    assert merkle_root("template", [dg(7)]) == leaf_digest("template", 0, dg(7))
    assert merkle_levels("template", (dg(7),)) == ((leaf_digest("template", 0, dg(7)),),)


def test_odd_last_element_pairs_with_itself() -> None:
    items = [dg(0), dg(1), dg(2)]
    leaves = [leaf_digest("case", i, item) for i, item in enumerate(items)]
    expected = node_digest(node_digest(leaves[0], leaves[1]), node_digest(leaves[2], leaves[2]))
    assert merkle_root("case", items) == expected


def _reference_root(kind: str, items: list[str]) -> str:
    """An independent recursive formulation of the same tree (test oracle only)."""

    def build(level: list[str]) -> str:
        if len(level) == 1:
            return level[0]
        padded = [*level, level[-1]] if len(level) % 2 else level
        return build([node_digest(padded[i], padded[i + 1]) for i in range(0, len(padded), 2)])

    return build([leaf_digest(kind, i, item) for i, item in enumerate(items)])


def test_tree_building_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real_node = holdout._node

    def counting(left: str, right: str) -> str:
        nonlocal calls
        calls += 1
        return real_node(left, right)

    monkeypatch.setattr(holdout, "_node", counting)
    size = 100_000
    items = [dg(i) for i in range(size)]
    root = merkle_root("case", items)
    expected_nodes = 0
    level = size
    while level > 1:
        level = math.ceil(level / 2)
        expected_nodes += level
    assert calls == expected_nodes
    calls = 0
    commitment = commit_holdout(
        "big", {kind: items if kind == "case" else [dg(0)] for kind in MANIFEST_KINDS}
    )
    assert commitment.manifest_roots["case"] == root
    assert commitment.manifest_item_counts["case"] == size
    assert calls == expected_nodes
    calls = 0
    proof = build_inclusion_proof(commitment, "case", size - 1, items)
    assert calls == expected_nodes
    assert len(proof.sibling_digests) == 17
    calls = 0
    assert verify_inclusion_proof(commitment.to_dict(), proof.to_dict()).valid
    assert calls == 17


# ---------------------------------------------------------------------------
# Objects: immutability, round trips


def test_commitment_is_immutable_and_documents_are_fresh() -> None:
    source = {kind: list(items) for kind, items in MANIFESTS.items()}
    commitment = commit_holdout("v1", source)
    source["case"].append(dg(999))
    assert commitment.manifest_item_counts["case"] == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        commitment.holdout_version = "v2"  # type: ignore[misc]
    with pytest.raises(TypeError):
        commitment.manifest_roots["case"] = dg(1)  # type: ignore[index]
    with pytest.raises(TypeError):
        commitment.manifest_item_counts["case"] = 1  # type: ignore[index]
    document = commitment.to_dict()
    document["manifest_roots"]["case"] = dg(1)
    document["manifest_item_counts"]["case"] = 1
    assert commitment.to_dict() != document
    assert list(commitment.manifest_roots) == list(MANIFEST_KINDS)
    assert commitment.to_json() == encode_openmed(commitment.to_dict())


def test_constructor_copies_caller_mappings() -> None:
    roots = dict(COMMITMENT.manifest_roots)
    counts = dict(COMMITMENT.manifest_item_counts)
    commitment = HoldoutCommitment(
        holdout_version="pub-epoch-2",
        manifest_roots=roots,
        manifest_item_counts=counts,
        commitment_digest=COMMITMENT.commitment_digest,
    )
    roots["case"] = dg(1)
    counts["case"] = 9
    assert commitment == COMMITMENT


def test_proof_is_immutable_and_stores_a_tuple() -> None:
    proof = InclusionProof(
        commitment_digest=PROOF.commitment_digest,
        manifest_kind="case",
        item_index=4,
        item_digest=PROOF.item_digest,
        sibling_digests=list(PROOF.sibling_digests),
    )
    assert type(proof.sibling_digests) is tuple
    assert proof == PROOF
    with pytest.raises(dataclasses.FrozenInstanceError):
        proof.item_index = 0  # type: ignore[misc]
    document = proof.to_dict()
    document["sibling_digests"].append(dg(1))
    assert proof.to_dict() == PROOF_DOC


def test_verification_result_accessors() -> None:
    result = HoldoutVerification.of("item_not_included")
    assert result.reason == "item_not_included"
    assert result.valid is False
    assert result.to_json() == (
        '{"reason_codes":["item_not_included"],'
        '"schema_version":"openmed.eval.holdout_commitment.verification.v1","valid":false}'
    )
    assert HoldoutVerification.of("valid").valid is True


def test_verification_rechecks_a_commitment_object_altered_behind_its_back() -> None:
    altered = commit_holdout("pub-epoch-2", MANIFESTS)
    object.__setattr__(altered, "holdout_version", "pub-epoch-3")
    assert verify_holdout_commitment(altered).reason == "invalid_commitment"
    assert verify_inclusion_proof(altered, PROOF).reason == "invalid_commitment"
    proof = build_inclusion_proof(COMMITMENT, "label", 0, MANIFESTS["label"])
    object.__setattr__(proof, "item_index", True)
    assert verify_inclusion_proof(COMMITMENT, proof).reason == "invalid_proof"


# ---------------------------------------------------------------------------
# Refusals (table-driven; every code of HoldoutError is exercised)


def _with(document: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    return {**document, **changes}


def _without(document: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in document.items() if name != key}


def _replace_kind(mapping: Mapping[str, Any], kind: str, value: Any) -> dict[str, Any]:
    return {**mapping, kind: value}


def _gen() -> Iterator[str]:
    yield dg(0)


COMMIT_REFUSALS = [
    pytest.param(1, MANIFESTS, "holdout_version: invalid", id="version-not-string"),
    pytest.param("", MANIFESTS, "holdout_version: invalid", id="version-empty"),
    pytest.param("-v1", MANIFESTS, "holdout_version: invalid", id="version-leading-dash"),
    pytest.param("v" * 129, MANIFESTS, "holdout_version: invalid", id="version-too-long"),
    pytest.param("v1\n", MANIFESTS, "holdout_version: invalid", id="version-trailing-newline"),
    pytest.param("v\u0663", MANIFESTS, "holdout_version: invalid", id="version-non-ascii-digit"),
    pytest.param("v1", None, "manifests: invalid_keys", id="manifests-none"),
    pytest.param("v1", list(MANIFESTS.items()), "manifests: invalid_keys", id="manifests-pairs"),
    pytest.param(
        "v1", _without(MANIFESTS, "label"), "manifests: invalid_keys", id="manifests-missing"
    ),
    pytest.param(
        "v1", {**MANIFESTS, "cases": [dg(0)]}, "manifests: invalid_keys", id="manifests-extra"
    ),
    pytest.param(
        "v1", {**MANIFESTS, 1: [dg(0)]}, "manifests: invalid_keys", id="manifests-non-string-key"
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "label", dg(0)),
        "manifests.label: invalid_sequence",
        id="manifest-string",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "label", dg(0).encode()),
        "manifests.label: invalid_sequence",
        id="manifest-bytes",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "template", _gen()),
        "manifests.template: invalid_sequence",
        id="manifest-generator",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "template", {dg(0)}),
        "manifests.template: invalid_sequence",
        id="manifest-set",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "template", {dg(0): 1}),
        "manifests.template: invalid_sequence",
        id="manifest-mapping",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "randomization", ()),
        "manifests.randomization: empty",
        id="manifest-empty",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "case", [dg(0), dg(1).upper()]),
        "manifests.case: invalid_item_digest",
        id="item-uppercase",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "case", [dg(0) + "\n"]),
        "manifests.case: invalid_item_digest",
        id="item-trailing-newline",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "case", [dg(0).encode()]),
        "manifests.case: invalid_item_digest",
        id="item-bytes",
    ),
    pytest.param(
        "v1",
        _replace_kind(MANIFESTS, "case", [None]),
        "manifests.case: invalid_item_digest",
        id="item-none",
    ),
    pytest.param(
        "v1",
        {**_replace_kind(MANIFESTS, "label", []), "case": ["x"]},
        "manifests.case: invalid_item_digest",
        id="kind-order-decides",
    ),
]


@pytest.mark.parametrize(("version", "given", "message"), COMMIT_REFUSALS)
def test_commit_refusals(version: Any, given: Any, message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        commit_holdout(version, given)
    assert str(caught.value) == message


def _fields(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "holdout_version": COMMITMENT.holdout_version,
        "manifest_roots": dict(COMMITMENT.manifest_roots),
        "manifest_item_counts": dict(COMMITMENT.manifest_item_counts),
        "commitment_digest": COMMITMENT.commitment_digest,
        "schema_version": COMMITMENT_SCHEMA,
    }
    return {**base, **changes}


ROOTS = dict(COMMITMENT.manifest_roots)
COUNTS = dict(COMMITMENT.manifest_item_counts)
CONSTRUCTOR_REFUSALS = [
    pytest.param(_fields(schema_version="x"), "schema_version: unsupported_version", id="schema"),
    pytest.param(
        _fields(schema_version=None, holdout_version=""),
        "schema_version: unsupported_version",
        id="schema-checked-first",
    ),
    pytest.param(_fields(holdout_version=".v"), "holdout_version: invalid", id="version"),
    pytest.param(_fields(manifest_roots="roots"), "manifest_roots: invalid_keys", id="roots-type"),
    pytest.param(
        _fields(manifest_roots=_without(ROOTS, "case")),
        "manifest_roots: invalid_keys",
        id="roots-missing",
    ),
    pytest.param(
        _fields(manifest_roots={**ROOTS, "x": dg(0)}),
        "manifest_roots: invalid_keys",
        id="roots-extra",
    ),
    pytest.param(
        _fields(manifest_roots={**ROOTS, "label": "sha256:"}),
        "manifest_roots: invalid_digest",
        id="root-digest",
    ),
    pytest.param(
        _fields(manifest_item_counts=[5, 1, 3, 8]),
        "manifest_item_counts: invalid_keys",
        id="counts-type",
    ),
    pytest.param(
        _fields(manifest_item_counts=_without(COUNTS, "template")),
        "manifest_item_counts: invalid_keys",
        id="counts-missing",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": 0}),
        "manifest_item_counts: invalid_count",
        id="count-zero",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": -5}),
        "manifest_item_counts: invalid_count",
        id="count-negative",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "label": True}),
        "manifest_item_counts: invalid_count",
        id="count-bool",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": 5.0}),
        "manifest_item_counts: invalid_count",
        id="count-float",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": "5"}),
        "manifest_item_counts: invalid_count",
        id="count-string",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": 10**5000}),
        "manifest_item_counts: invalid_count",
        id="count-not-serializable",
    ),
    pytest.param(
        _fields(commitment_digest=COMMITMENT.commitment_digest.upper()),
        "commitment_digest: invalid_digest",
        id="digest-grammar",
    ),
    pytest.param(
        _fields(commitment_digest=dg(0)),
        "commitment_digest: payload_mismatch",
        id="digest-mismatch",
    ),
    pytest.param(
        _fields(manifest_item_counts={**COUNTS, "case": 6}),
        "commitment_digest: payload_mismatch",
        id="count-tampered",
    ),
]


@pytest.mark.parametrize(("fields", "message"), CONSTRUCTOR_REFUSALS)
def test_constructor_refusals(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        HoldoutCommitment(**fields)
    assert str(caught.value) == message
    assert verify_holdout_commitment(fields).reason == "invalid_commitment"


FROM_DICT_REFUSALS = [
    pytest.param([COMMITMENT_DOC], "commitment: invalid_document", id="not-mapping"),
    pytest.param(_with(COMMITMENT_DOC, extra=1), "commitment: unknown_field", id="unknown"),
    *[
        pytest.param(_without(COMMITMENT_DOC, key), f"{key}: missing_field", id=f"missing-{key}")
        for key in sorted(COMMITMENT_DOC)
    ],
]


@pytest.mark.parametrize(("document", "message"), FROM_DICT_REFUSALS)
def test_commitment_from_dict_refusals(document: Any, message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        HoldoutCommitment.from_dict(document)
    assert str(caught.value) == message
    assert verify_holdout_commitment(document).reason == "invalid_commitment"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{", id="truncated"),
        pytest.param(b'{"a":1,"a":2}', id="duplicate-key"),
        pytest.param(b"[NaN]", id="nan"),
        pytest.param(b"\xff", id="not-utf8"),
    ],
)
def test_from_json_refusals(data: bytes) -> None:
    with pytest.raises(HoldoutError) as caught:
        HoldoutCommitment.from_json(data)
    assert str(caught.value) == "commitment: invalid_document"
    with pytest.raises(HoldoutError) as caught:
        InclusionProof.from_json(data)
    assert str(caught.value) == "proof: invalid_document"


def test_from_json_accepts_canonical_and_pretty_text() -> None:
    assert HoldoutCommitment.from_json(COMMITMENT.to_json().encode()) == COMMITMENT
    assert HoldoutCommitment.from_json(json.dumps(COMMITMENT_DOC, indent=2)) == COMMITMENT
    assert InclusionProof.from_json(PROOF.to_json()) == PROOF


CASE_ITEMS = MANIFESTS["case"]
PROOF_REFUSALS = [
    pytest.param(COMMITMENT_DOC, "case", 0, CASE_ITEMS, "commitment: invalid", id="commitment-doc"),
    pytest.param(None, "case", 0, CASE_ITEMS, "commitment: invalid", id="commitment-none"),
    pytest.param(COMMITMENT, "cases", 0, CASE_ITEMS, "manifest_kind: invalid", id="kind-unknown"),
    pytest.param(COMMITMENT, ["case"], 0, CASE_ITEMS, "manifest_kind: invalid", id="kind-list"),
    pytest.param(COMMITMENT, None, 0, CASE_ITEMS, "manifest_kind: invalid", id="kind-none"),
    pytest.param(
        COMMITMENT, "case", 0, CASE_ITEMS[0], "item_digests: invalid_sequence", id="items-string"
    ),
    pytest.param(COMMITMENT, "case", 0, None, "item_digests: invalid_sequence", id="items-none"),
    pytest.param(
        COMMITMENT, "case", 0, iter(CASE_ITEMS), "item_digests: invalid_sequence", id="items-iter"
    ),
    pytest.param(COMMITMENT, "case", 0, [], "item_digests: invalid", id="items-empty"),
    pytest.param(
        COMMITMENT, "case", 0, [*CASE_ITEMS[:4], "x"], "item_digests: invalid", id="items-bad"
    ),
    pytest.param(COMMITMENT, "case", True, CASE_ITEMS, "item_index: invalid", id="index-bool"),
    pytest.param(COMMITMENT, "case", 0.0, CASE_ITEMS, "item_index: invalid", id="index-float"),
    pytest.param(COMMITMENT, "case", "0", CASE_ITEMS, "item_index: invalid", id="index-string"),
    pytest.param(COMMITMENT, "case", -1, CASE_ITEMS, "item_index: invalid", id="index-negative"),
    pytest.param(COMMITMENT, "case", 5, CASE_ITEMS, "item_index: invalid", id="index-too-big"),
    pytest.param(
        COMMITMENT,
        "case",
        0,
        CASE_ITEMS[:4],
        "item_digests: commitment_mismatch",
        id="count-differs",
    ),
    pytest.param(
        COMMITMENT,
        "case",
        0,
        list(reversed(CASE_ITEMS)),
        "item_digests: commitment_mismatch",
        id="order-differs",
    ),
    pytest.param(
        COMMITMENT,
        "label",
        0,
        MANIFESTS["case"][:1],
        "item_digests: commitment_mismatch",
        id="other-kind-items",
    ),
]


@pytest.mark.parametrize(("commitment", "kind", "index", "items", "message"), PROOF_REFUSALS)
def test_build_proof_refusals(
    commitment: Any, kind: Any, index: Any, items: Any, message: str
) -> None:
    with pytest.raises(HoldoutError) as caught:
        build_inclusion_proof(commitment, kind, index, items)
    assert str(caught.value) == message


PROOF_FIELD_REFUSALS = [
    pytest.param({"schema_version": "x"}, "schema_version: unsupported_version", id="schema"),
    pytest.param({"commitment_digest": "x"}, "commitment_digest: invalid_digest", id="commitment"),
    pytest.param({"manifest_kind": "Case"}, "manifest_kind: invalid", id="kind"),
    pytest.param({"manifest_kind": {"k": 1}}, "manifest_kind: invalid", id="kind-unhashable"),
    pytest.param({"item_index": -1}, "item_index: invalid", id="index-negative"),
    pytest.param({"item_index": False}, "item_index: invalid", id="index-bool"),
    pytest.param({"item_index": 4.0}, "item_index: invalid", id="index-float"),
    pytest.param({"item_digest": None}, "item_digest: invalid_digest", id="item"),
    pytest.param(
        {"sibling_digests": dg(0)}, "sibling_digests: invalid_sequence", id="siblings-str"
    ),
    pytest.param(
        {"sibling_digests": {dg(0)}}, "sibling_digests: invalid_sequence", id="siblings-set"
    ),
    pytest.param(
        {"sibling_digests": [dg(0), 1]}, "sibling_digests: invalid_digest", id="siblings-item"
    ),
]


@pytest.mark.parametrize(("changes", "message"), PROOF_FIELD_REFUSALS)
def test_proof_constructor_refusals(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        InclusionProof.from_dict(_with(PROOF_DOC, **changes))
    assert str(caught.value) == message
    assert verify_inclusion_proof(COMMITMENT, _with(PROOF_DOC, **changes)).reason == "invalid_proof"


PROOF_FROM_DICT_REFUSALS = [
    pytest.param((PROOF_DOC,), "proof: invalid_document", id="not-mapping"),
    pytest.param(_with(PROOF_DOC, extra=1), "proof: unknown_field", id="unknown"),
    *[
        pytest.param(_without(PROOF_DOC, key), f"{key}: missing_field", id=f"missing-{key}")
        for key in sorted(PROOF_DOC)
    ],
]


@pytest.mark.parametrize(("document", "message"), PROOF_FROM_DICT_REFUSALS)
def test_proof_from_dict_refusals(document: Any, message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        InclusionProof.from_dict(document)
    assert str(caught.value) == message
    assert verify_inclusion_proof(COMMITMENT, document).reason == "invalid_proof"


HELPER_REFUSALS = [
    pytest.param(lambda: leaf_digest("x", 0, dg(0)), "manifest_kind: invalid", id="leaf-kind"),
    pytest.param(lambda: leaf_preimage("case", -1, dg(0)), "item_index: invalid", id="leaf-index"),
    pytest.param(lambda: leaf_digest("case", True, dg(0)), "item_index: invalid", id="leaf-bool"),
    pytest.param(
        lambda: leaf_digest("case", 0, dg(0)[:-1]), "item_digest: invalid_digest", id="leaf-item"
    ),
    pytest.param(lambda: node_digest("x", dg(0)), "left: invalid_digest", id="node-left"),
    pytest.param(lambda: node_preimage(dg(0), None), "right: invalid_digest", id="node-right"),
    pytest.param(lambda: merkle_root("x", [dg(0)]), "manifest_kind: invalid", id="root-kind"),
    pytest.param(lambda: merkle_levels("x", [dg(0)]), "manifest_kind: invalid", id="levels-kind"),
    pytest.param(
        lambda: merkle_root("case", dg(0)), "item_digests: invalid_sequence", id="root-items"
    ),
    pytest.param(lambda: merkle_levels("case", []), "item_digests: invalid", id="levels-empty"),
    pytest.param(lambda: tree_depth(0), "item_count: invalid_count", id="depth-zero"),
    pytest.param(lambda: tree_depth(True), "item_count: invalid_count", id="depth-bool"),
    pytest.param(
        lambda: HoldoutVerification(valid=True, reason_codes=("valid",), schema_version="x"),
        "schema_version: unsupported_version",
        id="result-schema",
    ),
    pytest.param(
        lambda: HoldoutVerification(valid=True, reason_codes=("valid", "valid")),
        "reason_codes: invalid",
        id="result-two-codes",
    ),
    pytest.param(
        lambda: HoldoutVerification(valid=False, reason_codes=("broken",)),
        "reason_codes: invalid",
        id="result-unknown-code",
    ),
    pytest.param(
        lambda: HoldoutVerification(valid=False, reason_codes=["invalid_proof"]),  # type: ignore[arg-type]
        "reason_codes: invalid",
        id="result-list",
    ),
    pytest.param(
        lambda: HoldoutVerification(valid=False, reason_codes=("valid",)),
        "valid: invalid",
        id="result-valid-disagrees",
    ),
    pytest.param(
        lambda: HoldoutVerification(valid=1, reason_codes=("valid",)),  # type: ignore[arg-type]
        "valid: invalid",
        id="result-valid-not-bool",
    ),
]


@pytest.mark.parametrize(("action", "message"), HELPER_REFUSALS)
def test_helper_refusals(action: Callable[[], object], message: str) -> None:
    with pytest.raises(HoldoutError) as caught:
        action()
    assert str(caught.value) == message


def test_every_code_is_exercised_by_a_refusal_table() -> None:
    messages = [
        param.values[-1]
        for table in (
            COMMIT_REFUSALS,
            CONSTRUCTOR_REFUSALS,
            FROM_DICT_REFUSALS,
            PROOF_REFUSALS,
            PROOF_FIELD_REFUSALS,
            PROOF_FROM_DICT_REFUSALS,
            HELPER_REFUSALS,
        )
        for param in table
    ]
    codes = {message.rsplit(": ", 1)[1] for message in messages}
    assert codes == set(HoldoutError.codes)


def test_error_class_contract() -> None:
    assert issubclass(HoldoutError, SealevalError)
    assert issubclass(HoldoutError, ValueError)
    assert HoldoutError.module == "sealeval.session.holdout"
    assert HoldoutError.field_in_message is True
    error = HoldoutError("invalid", "manifest_kind")
    assert (error.code, error.field, str(error)) == (
        "invalid",
        "manifest_kind",
        "manifest_kind: invalid",
    )
    assert repr(error) == "HoldoutError(code='invalid', field='manifest_kind')"


# ---------------------------------------------------------------------------
# Verification beyond the vectors (never raises; closed reasons)


class _Hostile(Mapping[str, Any]):
    """A mapping whose every access fails."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError(CANARY)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError(CANARY)

    def __len__(self) -> int:
        return 5


def _siblings(*replacements: tuple[int, str]) -> list[str]:
    siblings = list(PROOF.sibling_digests)
    for index, value in replacements:
        siblings[index] = value
    return siblings


VERIFY_PROOF_TABLE = [
    pytest.param(COMMITMENT, PROOF, "valid", id="objects"),
    pytest.param(COMMITMENT_DOC, PROOF_DOC, "valid", id="documents"),
    pytest.param(_Hostile(), PROOF_DOC, "invalid_commitment", id="hostile-commitment"),
    pytest.param(None, PROOF_DOC, "invalid_commitment", id="commitment-none"),
    pytest.param(
        _with(COMMITMENT_DOC, holdout_version="x y"),
        None,
        "invalid_commitment",
        id="commitment-checked-before-proof",
    ),
    pytest.param(COMMITMENT, _Hostile(), "invalid_proof", id="hostile-proof"),
    pytest.param(COMMITMENT, None, "invalid_proof", id="proof-none"),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, manifest_kind=["case"]),
        "invalid_proof",
        id="kind-unhashable-beyond",
    ),
    pytest.param(COMMITMENT, _with(PROOF_DOC, item_index=-1), "invalid_proof", id="index-negative"),
    pytest.param(COMMITMENT, _with(PROOF_DOC, item_index=4.0), "invalid_proof", id="index-float"),
    pytest.param(
        COMMITMENT, _with(PROOF_DOC, item_digest=CANARY), "invalid_proof", id="item-not-digest"
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, sibling_digests=_siblings((0, "sha256:0"))),
        "invalid_proof",
        id="sibling-not-digest",
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, sibling_digests=_siblings()[:-1]),
        "invalid_proof",
        id="too-few-siblings",
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, commitment_digest=dg(0), item_index=99),
        "commitment_mismatch",
        id="mismatch-before-bounds",
    ),
    pytest.param(
        COMMITMENT, _with(PROOF_DOC, item_index=5), "invalid_proof", id="index-equals-count"
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, sibling_digests=_siblings((2, dg(0)))),
        "item_not_included",
        id="top-sibling-tampered",
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, sibling_digests=_siblings((1, dg(0)))),
        "invalid_proof",
        id="upper-self-pair-sibling-tampered",
    ),
    pytest.param(
        COMMITMENT,
        _with(PROOF_DOC, sibling_digests=_siblings((0, dg(0)))),
        "invalid_proof",
        id="self-pair-sibling-tampered",
    ),
]


@pytest.mark.parametrize(("commitment", "proof", "reason"), VERIFY_PROOF_TABLE)
def test_verify_proof_reasons(commitment: Any, proof: Any, reason: str) -> None:
    result = verify_inclusion_proof(commitment, proof)
    assert result.reason_codes == (reason,)
    assert result.valid is (reason == "valid")


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(_Hostile(), id="hostile"),
        pytest.param("commitment", id="string"),
        pytest.param(_with(COMMITMENT_DOC, schema_version=PROOF_SCHEMA), id="other-schema"),
        pytest.param(
            _with(COMMITMENT_DOC, manifest_roots={**ROOTS, "case": ROOTS["label"]}),
            id="roots-swapped",
        ),
    ],
)
def test_verify_commitment_refuses(document: Any) -> None:
    assert verify_holdout_commitment(document).reason == "invalid_commitment"


def test_verify_commitment_accepts_object_and_document() -> None:
    assert verify_holdout_commitment(COMMITMENT).reason == "valid"
    assert verify_holdout_commitment(COMMITMENT_DOC).reason == "valid"
    assert verify_holdout_commitment(json.loads(COMMITMENT.to_json())).reason == "valid"


def test_appending_the_odd_last_item_again_is_detected() -> None:
    # Self-pairing is safe because leaves bind the index and the commitment binds the count.
    items = MANIFESTS["template"]
    assert len(items) % 2 == 1
    assert merkle_root("template", [*items, items[-1]]) != merkle_root("template", items)
    forged = _with(build_inclusion_proof(COMMITMENT, "template", 2, items).to_dict(), item_index=3)
    assert verify_inclusion_proof(COMMITMENT, forged).reason == "invalid_proof"


# ---------------------------------------------------------------------------
# Never echo


def _texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        texts += _texts(cause)
    return texts


CANARY_DIGEST_LIKE = "sha256:" + CANARY
CANARY_REFUSALS: list[tuple[str, Callable[[], object]]] = [
    ("version", lambda: commit_holdout(CANARY + " v1", MANIFESTS)),
    ("manifest-key", lambda: commit_holdout("v1", {**MANIFESTS, CANARY: [dg(0)]})),
    ("manifest-string", lambda: commit_holdout("v1", {**MANIFESTS, "case": CANARY})),
    ("manifest-item", lambda: commit_holdout("v1", {**MANIFESTS, "case": [CANARY_DIGEST_LIKE]})),
    ("from-dict-key", lambda: HoldoutCommitment.from_dict({**COMMITMENT_DOC, CANARY: CANARY})),
    (
        "from-dict-version",
        lambda: HoldoutCommitment.from_dict(_with(COMMITMENT_DOC, holdout_version=CANARY)),
    ),
    (
        "from-dict-schema",
        lambda: HoldoutCommitment.from_dict(_with(COMMITMENT_DOC, schema_version=CANARY)),
    ),
    (
        "from-dict-root",
        lambda: HoldoutCommitment.from_dict(
            _with(COMMITMENT_DOC, manifest_roots={**ROOTS, "case": CANARY})
        ),
    ),
    (
        "from-dict-root-key",
        lambda: HoldoutCommitment.from_dict(
            _with(COMMITMENT_DOC, manifest_roots={**ROOTS, CANARY: dg(0)})
        ),
    ),
    (
        "from-dict-count",
        lambda: HoldoutCommitment.from_dict(
            _with(COMMITMENT_DOC, manifest_item_counts={**COUNTS, "case": CANARY})
        ),
    ),
    (
        "from-dict-digest",
        lambda: HoldoutCommitment.from_dict(_with(COMMITMENT_DOC, commitment_digest=CANARY)),
    ),
    ("from-json", lambda: HoldoutCommitment.from_json(f'{{"{CANARY}":1,"{CANARY}":2}}')),
    ("proof-kind", lambda: build_inclusion_proof(COMMITMENT, CANARY, 0, CASE_ITEMS)),
    ("proof-items", lambda: build_inclusion_proof(COMMITMENT, "case", 0, [CANARY])),
    ("proof-items-string", lambda: build_inclusion_proof(COMMITMENT, "case", 0, CANARY)),
    ("proof-index", lambda: build_inclusion_proof(COMMITMENT, "case", CANARY, CASE_ITEMS)),
    ("proof-commitment", lambda: build_inclusion_proof(CANARY, "case", 0, CASE_ITEMS)),  # type: ignore[arg-type]
    ("proof-doc-key", lambda: InclusionProof.from_dict({**PROOF_DOC, CANARY: 1})),
    ("proof-doc-kind", lambda: InclusionProof.from_dict(_with(PROOF_DOC, manifest_kind=CANARY))),
    ("proof-doc-item", lambda: InclusionProof.from_dict(_with(PROOF_DOC, item_digest=CANARY))),
    (
        "proof-doc-sibling",
        lambda: InclusionProof.from_dict(_with(PROOF_DOC, sibling_digests=[CANARY])),
    ),
    ("proof-json", lambda: InclusionProof.from_json(f'["{CANARY}"')),
    ("leaf", lambda: leaf_digest("case", 0, CANARY)),
    ("node", lambda: node_digest(CANARY, dg(0))),
]


def test_refusals_never_echo(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for name, action in CANARY_REFUSALS:
        with pytest.raises(HoldoutError) as caught:
            action()
        for text in _texts(caught.value):
            assert CANARY not in text, name
        assert caught.value.__cause__ is None, name
    assert CANARY not in caplog.text


def test_verification_results_never_echo(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    hostile_commitments: list[Any] = [
        {CANARY: CANARY},
        _with(COMMITMENT_DOC, holdout_version=CANARY),
        _with(COMMITMENT_DOC, manifest_roots={CANARY: CANARY}),
        _Hostile(),
    ]
    hostile_proofs: list[Any] = [
        {CANARY: CANARY},
        _with(PROOF_DOC, manifest_kind=CANARY),
        _with(PROOF_DOC, item_digest=CANARY),
        _with(PROOF_DOC, sibling_digests=[CANARY]),
        _Hostile(),
    ]
    results = [verify_holdout_commitment(document) for document in hostile_commitments]
    results += [verify_inclusion_proof(COMMITMENT, proof) for proof in hostile_proofs]
    results += [verify_inclusion_proof(document, PROOF_DOC) for document in hostile_commitments]
    for result in results:
        assert not result.valid
        assert CANARY not in result.to_json()
        assert CANARY not in repr(result)
    assert CANARY not in caplog.text


# ---------------------------------------------------------------------------
# Properties

digest_lists = st.lists(st.integers(min_value=0, max_value=50).map(dg), min_size=1, max_size=40)
versions = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
kinds = st.sampled_from(MANIFEST_KINDS)


@settings(max_examples=60, deadline=None)
@given(version=versions, lists=st.tuples(digest_lists, digest_lists, digest_lists, digest_lists))
def test_commitment_round_trips(version: str, lists: tuple[list[str], ...]) -> None:
    given_manifests = dict(zip(MANIFEST_KINDS, lists, strict=True))
    commitment = commit_holdout(version, given_manifests)
    assert HoldoutCommitment.from_dict(commitment.to_dict()) == commitment
    assert HoldoutCommitment.from_json(commitment.to_json()) == commitment
    assert (
        commitment.to_json()
        == commit_holdout(version, dict(reversed(given_manifests.items()))).to_json()
    )
    body = {key: value for key, value in commitment.to_dict().items() if key != "commitment_digest"}
    assert commitment.commitment_digest == digest_openmed(body)
    for kind, items in given_manifests.items():
        assert commitment.manifest_item_counts[kind] == len(items)
        assert commitment.manifest_roots[kind] == _reference_root(kind, items)


@settings(max_examples=40, deadline=None)
@given(items=digest_lists, kind=kinds, data=st.data())
def test_every_index_proves_and_only_there(
    items: list[str], kind: str, data: st.DataObject
) -> None:
    # The other manifests hold an item the strategy never draws (items come from
    # dg(0..50)), so a proof moved to another kind cannot be genuinely valid there.
    given_manifests = {name: [dg(1000)] for name in MANIFEST_KINDS}
    given_manifests[kind] = items
    commitment = commit_holdout("v1", given_manifests)
    for index in range(len(items)):
        proof = build_inclusion_proof(commitment, kind, index, items)
        assert len(proof.sibling_digests) == tree_depth(len(items))
        assert verify_inclusion_proof(commitment.to_dict(), proof.to_dict()).reason == "valid"
        assert InclusionProof.from_dict(proof.to_dict()) == proof
    index = data.draw(st.integers(min_value=0, max_value=len(items) - 1))
    proof_doc = build_inclusion_proof(commitment, kind, index, items).to_dict()
    other = data.draw(st.integers(min_value=51, max_value=60).map(dg))
    assert not verify_inclusion_proof(commitment, _with(proof_doc, item_digest=other)).valid
    if proof_doc["sibling_digests"]:
        position = data.draw(
            st.integers(min_value=0, max_value=len(proof_doc["sibling_digests"]) - 1)
        )
        siblings = list(proof_doc["sibling_digests"])
        siblings[position] = other
        tampered = verify_inclusion_proof(commitment, _with(proof_doc, sibling_digests=siblings))
        assert tampered.reason in {"item_not_included", "invalid_proof"}
    other_kind = data.draw(kinds.filter(lambda name: name != kind))
    moved = verify_inclusion_proof(commitment, _with(proof_doc, manifest_kind=other_kind))
    assert not moved.valid


@settings(max_examples=40, deadline=None)
@given(items=digest_lists, data=st.data())
def test_changing_any_item_changes_the_root(items: list[str], data: st.DataObject) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(items) - 1))
    replacement = data.draw(st.integers(min_value=51, max_value=60).map(dg))
    changed = [*items]
    changed[index] = replacement
    assert merkle_root("case", changed) != merkle_root("case", items)
    assert merkle_root("label", items) != merkle_root("case", items)
    assert merkle_root("case", [*items, items[-1]]) != merkle_root("case", items)


def test_field_coverage_every_field_changes_the_digest() -> None:
    base = COMMITMENT
    variants: list[dict[str, Any]] = [{"holdout_version": "pub-epoch-3"}]
    for kind in MANIFEST_KINDS:
        variants.append({"manifest_roots": {**ROOTS, kind: dg(77)}})
        variants.append({"manifest_item_counts": {**COUNTS, kind: COUNTS[kind] + 1}})
    seen = {base.commitment_digest}
    for changes in variants:
        body = {key: value for key, value in base.to_dict().items() if key != "commitment_digest"}
        body.update(changes)
        digest = digest_openmed(body)
        assert digest not in seen
        seen.add(digest)
        rebuilt = HoldoutCommitment(**{**_fields(**changes), "commitment_digest": digest})
        assert rebuilt.commitment_digest == digest
        with pytest.raises(HoldoutError) as caught:
            HoldoutCommitment(**_fields(**changes))
        assert caught.value.code == "payload_mismatch"
