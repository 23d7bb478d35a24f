"""sealeval.attest: in-toto statements in DSSE envelopes, checked by independent libraries.

Every attestation is built from real documents (the reference's sealed
manifests, candidate bundles and verification receipts), signed with a real
Ed25519 key, then verified by ``securesystemslib``'s DSSE implementation and
parsed by the ``in-toto-attestation`` bindings as well as by sealeval.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from in_toto_attestation.v1 import statement as intoto_statement
from in_toto_attestation.v1 import statement_pb2
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from sealeval.attest import (
    PAYLOAD_TYPE,
    PREDICATE_TYPES,
    RELEASE_DECISION_PREDICATE,
    SEALED_MANIFEST_PREDICATE,
    STATEMENT_TYPE,
    VERIFICATION_RECEIPT_PREDICATE,
    AttestationError,
    Statement,
    Subject,
    check_statement,
    pae,
    parse_statement,
    release_decision_statement,
    sealed_manifest_statement,
    sign_statement,
    verification_receipt_statement,
    verify_attestation,
)
from sealeval.attest._dsse import MAX_SIGNATURES, parse_envelope, sign_envelope
from sealeval.canonical import digest_openmed, encode_invarlock, encode_openmed
from sealeval.captured.signing import SigningKey, VerifyKey
from sealeval.gates.candidate import CandidateBundle, sign_packet
from sealeval.manifest import COMPONENTS, SealedWorkflowManifest
from support.vectors import PROJECT_ROOT, load, vectors_dir

CANARY = "CANARY-attest-9f2e-jane-doe"
KEY = SigningKey.generate()
OTHER = SigningKey.generate()
CONTRACTS = PROJECT_ROOT / "contracts"


# ---------------------------------------------------------------------------
# Real documents


def _manifests() -> list[dict[str, Any]]:
    found = [
        case["expected"]["parsed"]
        for case in load("openmed/manifest_seal.json")["cases"]
        if "parsed" in case["expected"]
    ]
    assert len(found) > 10
    return found


def _bundles() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (case["name"], case["expected"]["bundle"])
        for case in load("openmed/candidate_runner.json")["cases"]
        if "bundle" in case.get("expected", {})
    ]
    assert len(found) > 10
    return found


def _attestable_bundles() -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, bundle)
        for name, bundle in _bundles()
        if any(bundle["manifest"]["artifacts"].get(role) for role in ("wheel", "sdist"))
    ]


def _receipts() -> list[Path]:
    every = sorted((vectors_dir() / "invarlock" / "packs").glob("*/verify/*.receipt.json"))
    # A forged statement is the reference's own negative example (tested below).
    found = [path for path in every if path.name != "forged-statement.receipt.json"]
    assert len(found) > 10
    return found


def test_the_forged_vector_receipt_is_refused() -> None:
    every = (vectors_dir() / "invarlock" / "packs").glob("*/verify/forged-statement.receipt.json")
    forged = sorted(every)
    assert forged
    for path in forged:
        with pytest.raises(AttestationError) as caught:
            verification_receipt_statement(json.loads(path.read_bytes()))
        assert caught.value.code == "invalid_predicate"


def _receipt(path: Path | None = None) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((path or _receipts()[0]).read_bytes())
    return document


def _statements() -> list[Any]:
    params = [
        pytest.param(sealed_manifest_statement(doc), id=f"manifest-{i}")
        for i, doc in enumerate(_manifests())
    ]
    params += [
        pytest.param(release_decision_statement(bundle), id=f"release-{name}")
        for name, bundle in _attestable_bundles()
    ]
    params += [
        pytest.param(verification_receipt_statement(_receipt(path)), id=f"receipt-{index}")
        for index, path in enumerate(_receipts())
    ]
    return params


# ---------------------------------------------------------------------------
# Independent tooling


def _sslib_key(key: VerifyKey) -> SSlibKey:
    """Build the securesystemslib key from the PEM, with our documented keyid rule."""
    public = load_pem_public_key(key.pem.encode("ascii"))
    raw = key.raw
    keyid = "sha256:" + hashlib.sha256(raw).hexdigest()
    return SSlibKey.from_crypto(public, keyid=keyid)


def _sslib_verify(envelope: bytes, key: VerifyKey) -> bytes:
    parsed = Envelope.from_dict(json.loads(envelope))
    accepted = parsed.verify([_sslib_key(key)], 1)
    assert list(accepted) == [key.fingerprint]
    return parsed.payload


def _intoto_parse(payload: bytes) -> statement_pb2.Statement:
    message = json_format.Parse(payload.decode("utf-8"), statement_pb2.Statement())
    intoto_statement.Statement.copy_from_pb(message).validate()
    return message


@pytest.mark.parametrize("statement", _statements())
def test_envelopes_verify_with_securesystemslib_and_parse_with_in_toto(
    statement: Statement,
) -> None:
    envelope = sign_statement(statement, KEY)
    payload = _sslib_verify(envelope, KEY.public_key)
    assert payload == statement.payload
    parsed = _intoto_parse(payload)
    assert parsed.type == STATEMENT_TYPE
    assert parsed.predicate_type == statement.predicate_type
    assert [(item.name, "sha256:" + item.digest["sha256"]) for item in parsed.subject] == [
        (item.name, item.digest) for item in statement.subjects
    ]
    assert json_format.MessageToDict(parsed.predicate) == json.loads(
        encode_openmed(dict(statement.predicate))
    )
    verified = verify_attestation(envelope, KEY.public_key)
    assert verified.statement.to_dict() == statement.to_dict()
    assert verified.keyid == KEY.fingerprint
    assert verified.payload_digest == "sha256:" + hashlib.sha256(payload).hexdigest()


def test_pae_matches_the_dsse_specification_and_securesystemslib() -> None:
    # The example of the DSSE protocol document.
    expected = b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    assert pae("http://example.com/HelloWorld", b"hello world") == expected
    envelope = Envelope(payload=b"\x00\xffpayload", payload_type=PAYLOAD_TYPE, signatures={})
    assert envelope.pae() == pae(PAYLOAD_TYPE, b"\x00\xffpayload")


def test_envelope_bytes_are_deterministic_and_canonical() -> None:
    key = SigningKey.from_seed(bytes(range(32)))
    statement = sealed_manifest_statement(_manifests()[0])
    first = sign_statement(statement, key)
    assert first == sign_statement(statement, key)
    document = json.loads(first)
    assert encode_invarlock(document) == first
    assert set(document) == {"payload", "payloadType", "signatures"}
    assert document["payloadType"] == PAYLOAD_TYPE
    assert document["signatures"] == [
        {"keyid": key.fingerprint, "sig": document["signatures"][0]["sig"]}
    ]
    assert base64.b64decode(document["payload"]) == statement.payload


# ---------------------------------------------------------------------------
# Subjects and predicates


def test_manifest_subjects_are_the_components_with_their_digests() -> None:
    for document in _manifests():
        statement = sealed_manifest_statement(document)
        assert [item.name for item in statement.subjects] == list(COMPONENTS)
        assert {item.name: item.digest for item in statement.subjects} == dict(
            document["component_digests"]
        )
        assert dict(statement.predicate) == SealedWorkflowManifest.from_dict(document).to_dict()
        assert statement.predicate_type == SEALED_MANIFEST_PREDICATE


def test_release_subjects_are_the_recorded_wheel_and_sdist() -> None:
    for _, bundle in _attestable_bundles():
        statement = release_decision_statement(bundle)
        artifacts = bundle["manifest"]["artifacts"]
        expected = [(role, artifacts[role]) for role in ("wheel", "sdist") if artifacts[role]]
        assert [(item.name, item.digest) for item in statement.subjects] == expected
        assert dict(statement.predicate) == bundle
        assert statement.predicate_type == RELEASE_DECISION_PREDICATE
    named = release_decision_statement(_attestable_bundles()[0][1], names={"wheel": "a.whl"})
    assert named.subjects[0].name == "a.whl"


def test_receipt_subject_is_the_pack_manifest() -> None:
    for path in _receipts():
        receipt = _receipt(path)
        statement = verification_receipt_statement(receipt)
        assert [(item.name, item.digest) for item in statement.subjects] == [
            ("manifest.json", receipt["statement"]["pack_manifest_digest"])
        ]
        assert dict(statement.predicate) == receipt
        assert statement.predicate_type == VERIFICATION_RECEIPT_PREDICATE


def _registry() -> Registry:
    resources = [
        Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))
        for path in sorted(CONTRACTS.glob("*.schema.json"))
    ]
    return Registry().with_resources((item.id(), item) for item in resources)  # type: ignore[misc]


@pytest.mark.parametrize("statement", _statements())
def test_statements_match_their_contract(statement: Statement) -> None:
    name = {
        SEALED_MANIFEST_PREDICATE: "sealed-manifest",
        RELEASE_DECISION_PREDICATE: "release-decision",
        VERIFICATION_RECEIPT_PREDICATE: "verification-receipt",
    }[statement.predicate_type]
    schema = json.loads(
        (CONTRACTS / f"sealeval.attestation.{name}.v1.schema.json").read_text(encoding="utf-8")
    )
    validator = Draft202012Validator(schema, registry=_registry())
    validator.validate(json.loads(statement.payload))
    changed = json.loads(statement.payload)
    changed["predicateType"] = "https://example.invalid/other"
    assert not validator.is_valid(changed)


def test_predicate_types_are_stable_uris() -> None:
    assert dict(PREDICATE_TYPES) == {
        "manifest": "https://sealeval.dev/attestations/sealed-manifest/v1",
        "release": "https://sealeval.dev/attestations/release-decision/v1",
        "receipt": "https://sealeval.dev/attestations/verification-receipt/v1",
    }


# ---------------------------------------------------------------------------
# Tampering: refused by securesystemslib and by sealeval


def _envelope() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        sign_statement(sealed_manifest_statement(_manifests()[0]), KEY)
    )
    return document


def _flip_payload(document: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(document["payload"]))
    raw[len(raw) // 2] ^= 0x01
    document["payload"] = base64.b64encode(bytes(raw)).decode("ascii")


def _flip_signature(document: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(document["signatures"][0]["sig"]))
    raw[0] ^= 0x01
    document["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode("ascii")


def _other_keyid(document: dict[str, Any]) -> None:
    document["signatures"][0]["keyid"] = OTHER.fingerprint


def _other_payload_type(document: dict[str, Any]) -> None:
    document["payloadType"] = "application/vnd.in-toto+jsonx"


TAMPERING = [
    pytest.param(_flip_payload, "invalid_signature", id="payload-byte"),
    pytest.param(_flip_signature, "invalid_signature", id="signature"),
    pytest.param(_other_keyid, "unknown_keyid", id="keyid"),
    pytest.param(_other_payload_type, "invalid_payload_type", id="payload-type"),
]


@pytest.mark.parametrize(("tamper", "code"), TAMPERING)
def test_tampered_envelopes_are_refused_by_both(tamper: Any, code: str) -> None:
    document = _envelope()
    _sslib_verify(json.dumps(document).encode(), KEY.public_key)
    tamper(document)
    data = encode_invarlock(document)
    with pytest.raises(VerificationError, match="threshold"):
        Envelope.from_dict(json.loads(data)).verify([_sslib_key(KEY.public_key)], 1)
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, KEY.public_key)
    assert caught.value.code == code


def test_a_different_trusted_key_is_refused_by_both() -> None:
    data = encode_invarlock(_envelope())
    with pytest.raises(VerificationError):
        Envelope.from_dict(json.loads(data)).verify([_sslib_key(OTHER.public_key)], 1)
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, OTHER.public_key)
    assert caught.value.code == "unknown_keyid"


# ---------------------------------------------------------------------------
# Every other refusal of verify_attestation


def _signed_payload(payload: bytes) -> bytes:
    return sign_envelope(payload, PAYLOAD_TYPE, KEY)


def _statement_document() -> dict[str, Any]:
    return sealed_manifest_statement(_manifests()[0]).to_dict()


def _with(change: Any) -> bytes:
    document = _statement_document()
    change(document)
    return _signed_payload(encode_openmed(document).encode("ascii"))


def _envelope_with(change: Any) -> bytes:
    document = _envelope()
    change(document)
    return encode_invarlock(document)


def _set_subject_digest(document: dict[str, Any]) -> None:
    document["subject"][1]["digest"]["sha256"] = "0" * 64


def _tampered_receipt() -> bytes:
    receipt = _receipt()
    statement = Statement(
        predicate_type=VERIFICATION_RECEIPT_PREDICATE,
        subjects=(Subject("manifest.json", receipt["statement"]["pack_manifest_digest"]),),
        predicate=receipt,
    )
    document = statement.to_dict()
    document["predicate"]["statement"]["replay_status"] = "failed"
    document["predicate"]["statement"]["verdict"]["verification_status"] = 6
    document["predicate"]["statement"]["verdict"].update(
        ok=False, integrity_ok=False, decision=None, policy_verdict=None
    )
    document["predicate"]["statement"]["scoring_assurance"] = None
    return _signed_payload(encode_openmed(document).encode("ascii"))


def _inconsistent_bundle() -> bytes:
    bundle = copy.deepcopy(_attestable_bundles()[0][1])
    statement = release_decision_statement(bundle).to_dict()
    statement["predicate"]["manifest"]["reason_codes"] = ["dirty_tree"]
    return _signed_payload(encode_openmed(statement).encode("ascii"))


def _non_canonical() -> bytes:
    document = _statement_document()
    return _signed_payload(json.dumps(document, indent=1).encode("ascii"))


REFUSALS = [
    pytest.param(lambda: b"{", "invalid_json", id="not-json"),
    pytest.param(lambda: b'{"a":1,"a":2}', "invalid_json", id="duplicate-key"),
    pytest.param(
        lambda: _envelope_with(lambda d: d.update(extra=1)), "invalid_envelope", id="extra-member"
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d.pop("signatures")),
        "invalid_envelope",
        id="missing-signatures",
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d.update(signatures=[])),
        "invalid_envelope",
        id="no-signature",
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d["signatures"][0].pop("keyid")),
        "invalid_envelope",
        id="signature-without-keyid",
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d.update(payload=d["payload"].rstrip("=") + "-_")),
        "invalid_base64",
        id="url-safe-base64",
    ),
    pytest.param(
        lambda: _envelope_with(
            lambda d: d.update(signatures=d["signatures"] * (MAX_SIGNATURES + 1))
        ),
        "too_many_signatures",
        id="too-many-signatures",
    ),
    pytest.param(lambda: _signed_payload(b"[]"), "invalid_statement", id="statement-not-object"),
    pytest.param(
        lambda: _with(lambda d: d.update(_type="https://in-toto.io/Statement/v0.1")),
        "invalid_statement",
        id="statement-type",
    ),
    pytest.param(_non_canonical, "non_canonical_payload", id="non-canonical"),
    pytest.param(
        lambda: _with(lambda d: d.update(predicateType="https://example.invalid/p")),
        "unknown_predicate_type",
        id="unknown-predicate-type",
    ),
    pytest.param(lambda: _with(lambda d: d.update(subject=[])), "no_subject", id="no-subject"),
    pytest.param(
        lambda: _with(lambda d: d["subject"][0]["digest"].update(sha512="00")),
        "invalid_subject",
        id="second-digest",
    ),
    pytest.param(
        lambda: _with(lambda d: d["subject"][0].update(name="")),
        "invalid_subject",
        id="empty-name",
    ),
    pytest.param(
        lambda: _with(_set_subject_digest), "subject_mismatch", id="subject-digest-changed"
    ),
    pytest.param(
        lambda: _with(lambda d: d["subject"].reverse()), "subject_mismatch", id="subjects-reordered"
    ),
    pytest.param(
        lambda: _with(lambda d: d["predicate"].update(extra=1)),
        "invalid_predicate",
        id="manifest-extra-field",
    ),
    pytest.param(
        lambda: _with(lambda d: d["predicate"].update(manifest_digest="sha256:" + "1" * 64)),
        "inconsistent_predicate",
        id="manifest-seal-broken",
    ),
    pytest.param(_inconsistent_bundle, "inconsistent_predicate", id="bundle-manifest-changed"),
    pytest.param(_tampered_receipt, "predicate_signature_invalid", id="receipt-statement-changed"),
]


@pytest.mark.parametrize(("make", "code"), REFUSALS)
def test_verify_refusals(make: Any, code: str) -> None:
    with pytest.raises(AttestationError) as caught:
        verify_attestation(make(), KEY.public_key)
    assert caught.value.code == code


def test_expected_predicate_type() -> None:
    data = encode_invarlock(_envelope())
    assert verify_attestation(data, KEY.public_key, predicate_type=SEALED_MANIFEST_PREDICATE)
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, KEY.public_key, predicate_type=RELEASE_DECISION_PREDICATE)
    assert caught.value.code == "predicate_type_mismatch"
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, KEY.public_key, predicate_type="https://example.invalid/x")
    assert caught.value.code == "unknown_predicate_type"


def test_oversized_envelope_is_refused_before_parsing() -> None:
    with pytest.raises(AttestationError) as caught:
        verify_attestation(b" " * (16 * 1024 * 1024 + 1), KEY.public_key)
    assert caught.value.code == "too_large"


# ---------------------------------------------------------------------------
# Builder refusals: nothing sealeval would refuse is ever signed


def _inconsistent_manifest() -> dict[str, Any]:
    manifest = copy.deepcopy(_manifests()[0])
    manifest["component_digests"]["model"] = "sha256:" + "2" * 64
    return manifest


def _missing_artifacts_bundle() -> dict[str, Any]:
    missing = [bundle for name, bundle in _bundles() if name == "all_artifacts_missing"]
    assert missing
    return missing[0]


def _forged_receipt() -> dict[str, Any]:
    receipt = _receipt()
    receipt["signature"]["value"] = base64.b64encode(bytes(64)).decode("ascii")
    return receipt


BUILDER_REFUSALS = [
    pytest.param(
        lambda: sealed_manifest_statement(_inconsistent_manifest()),
        "inconsistent_predicate",
        None,
        id="manifest-digest-inconsistent",
    ),
    pytest.param(
        lambda: sealed_manifest_statement({"schema_version": CANARY}),
        "invalid_predicate",
        None,
        id="manifest-invalid",
    ),
    pytest.param(
        lambda: release_decision_statement(_missing_artifacts_bundle()),
        "no_subject",
        None,
        id="release-no-artifact",
    ),
    pytest.param(
        lambda: release_decision_statement({"packet": CANARY}),
        "invalid_predicate",
        None,
        id="release-invalid",
    ),
    *(
        pytest.param(
            lambda names=names: release_decision_statement(
                _attestable_bundles()[0][1],
                names=names,  # type: ignore[arg-type]
            ),
            "invalid_type",
            "names",
            id=f"release-names-{name}",
        )
        for name, names in (
            ("unknown-kind", {"policy": "x"}),
            ("canary-kind", {CANARY: "x", "wheel": "a.whl"}),
            ("a-list", ["wheel"]),
            ("a-string", CANARY),
        )
    ),
    pytest.param(
        lambda: verification_receipt_statement(_forged_receipt()),
        "predicate_signature_invalid",
        None,
        id="receipt-signature-forged",
    ),
    pytest.param(
        lambda: verification_receipt_statement({"statement": CANARY}),
        "invalid_predicate",
        None,
        id="receipt-invalid",
    ),
]


@pytest.mark.parametrize(("action", "code", "field"), BUILDER_REFUSALS)
def test_builders_refuse_invalid_documents(
    action: Callable[[], object], code: str, field: str | None
) -> None:
    with pytest.raises(AttestationError) as caught:
        action()
    assert caught.value.code == code
    if field is not None:
        assert caught.value.field == field
    assert CANARY not in str(caught.value) + repr(caught.value)


def test_sign_statement_checks_the_statement_first() -> None:
    good = sealed_manifest_statement(_manifests()[0])
    forged = Statement(
        predicate_type=good.predicate_type,
        subjects=tuple(reversed(good.subjects)),
        predicate=good.predicate,
    )
    with pytest.raises(AttestationError) as caught:
        sign_statement(forged, KEY)
    assert caught.value.code == "subject_mismatch"
    with pytest.raises(AttestationError) as caught:
        sign_statement(good, KEY.public_key)  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"
    with pytest.raises(AttestationError) as caught:
        check_statement(Statement("https://example.invalid/p", good.subjects, {}))
    assert caught.value.code == "unknown_predicate_type"


def test_statement_and_subject_construction_refusals() -> None:
    with pytest.raises(AttestationError) as caught:
        Subject(CANARY + "\n", "sha256:" + "0" * 64)
    assert caught.value.code == "invalid_subject"
    with pytest.raises(AttestationError) as caught:
        Subject("model", CANARY)
    assert caught.value.code == "invalid_subject"
    with pytest.raises(AttestationError) as caught:
        Statement(SEALED_MANIFEST_PREDICATE, (), {})
    assert caught.value.code == "no_subject"
    subject = Subject("a", "sha256:" + "0" * 64)
    with pytest.raises(AttestationError) as caught:
        Statement(SEALED_MANIFEST_PREDICATE, (subject,), {"x": float("nan")})
    assert caught.value.code == "invalid_statement"
    with pytest.raises(AttestationError) as caught:
        parse_statement(b'{"_type":1}')
    assert caught.value.code == "invalid_statement"


def test_statement_predicate_is_a_private_read_only_copy() -> None:
    document = copy.deepcopy(_manifests()[0])
    statement = sealed_manifest_statement(document)
    payload = statement.payload
    document["manifest_digest"] = CANARY
    with pytest.raises(TypeError):
        statement.predicate["manifest_digest"] = CANARY  # type: ignore[index]
    assert statement.payload == payload
    assert digest_openmed(json.loads(payload)["predicate"]["component_digests"])


def test_refusals_never_echo_values() -> None:
    document = _statement_document()
    document["subject"][0]["name"] = CANARY
    for data in (
        _signed_payload(encode_openmed(document).encode("ascii")),
        CANARY.encode(),
        json.dumps({"payload": CANARY, "payloadType": CANARY, "signatures": []}).encode(),
    ):
        with pytest.raises(AttestationError) as caught:
            verify_attestation(data, KEY.public_key)
        assert CANARY not in str(caught.value)
        assert CANARY not in repr(caught.value)
    assert CANARY not in repr(sealed_manifest_statement(_manifests()[0]))


# ---------------------------------------------------------------------------
# Remaining rules, one case each


def _resealed_bundle(change: Any) -> dict[str, Any]:
    """A vector bundle with its candidate manifest changed, re-digested and re-signed."""
    bundle = copy.deepcopy(_attestable_bundles()[0][1])
    change(bundle["manifest"])
    bundle["manifest_digest"] = digest_openmed(bundle["manifest"])
    unsigned = {
        key: value
        for key, value in bundle["packet"].items()
        if key not in ("packet_digest", "signature")
    }
    unsigned["manifest_digest"] = bundle["manifest_digest"]
    bundle["packet"] = sign_packet(unsigned, b"k" * 32)
    return bundle


def _release_payload(change: Any) -> bytes:
    document = release_decision_statement(_attestable_bundles()[0][1]).to_dict()
    change(document)
    return _signed_payload(encode_openmed(document).encode("ascii"))


def _receipt_payload(change: Any) -> bytes:
    document = verification_receipt_statement(_receipt()).to_dict()
    change(document)
    return _signed_payload(encode_openmed(document).encode("ascii"))


def _foreign_receipt_key(document: dict[str, Any]) -> None:
    document["predicate"]["signature"]["public_key"]["value"] = OTHER.public_key.pem


MORE_REFUSALS = [
    pytest.param(
        lambda: _envelope_with(lambda d: d["signatures"][0].update(sig="QR==")),
        "invalid_base64",
        id="padding-bits",
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d.update(payloadType=1)),
        "invalid_envelope",
        id="payload-type-not-text",
    ),
    pytest.param(
        lambda: _envelope_with(lambda d: d["signatures"][0].update(keyid="a b")),
        "invalid_envelope",
        id="keyid-grammar",
    ),
    pytest.param(lambda: _signed_payload(b"\xff"), "invalid_statement", id="payload-not-utf8"),
    pytest.param(
        lambda: _with(lambda d: d.update(subject={})), "invalid_statement", id="subject-not-list"
    ),
    pytest.param(
        lambda: _with(lambda d: d.update(predicate=[])),
        "invalid_statement",
        id="predicate-not-object",
    ),
    pytest.param(
        lambda: _with(lambda d: d.update(subject=d["subject"] * 9)),
        "invalid_statement",
        id="too-many-subjects",
    ),
    pytest.param(
        lambda: _with(lambda d: d["subject"].__setitem__(0, "model")),
        "invalid_subject",
        id="subject-not-object",
    ),
    pytest.param(
        lambda: _with(lambda d: d["subject"][0]["digest"].update(sha256="AB" * 32)),
        "invalid_subject",
        id="digest-upper-hex",
    ),
    pytest.param(
        lambda: _release_payload(lambda d: d["subject"].reverse()),
        "subject_mismatch",
        id="release-subjects-reordered",
    ),
    pytest.param(
        lambda: _receipt_payload(lambda d: d["subject"][0]["digest"].update(sha256="3" * 64)),
        "subject_mismatch",
        id="receipt-subject-changed",
    ),
    pytest.param(
        lambda: _receipt_payload(_foreign_receipt_key),
        "predicate_signature_invalid",
        id="receipt-signed-by-another-key",
    ),
]


@pytest.mark.parametrize(("make", "code"), MORE_REFUSALS)
def test_more_verify_refusals(make: Any, code: str) -> None:
    with pytest.raises(AttestationError) as caught:
        verify_attestation(make(), KEY.public_key)
    assert caught.value.code == code


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: m.update(artifacts=[]), id="artifacts-not-object"),
        pytest.param(lambda m: m["artifacts"].update(wheel="wheel"), id="artifact-not-digest"),
    ],
)
def test_release_artifacts_must_be_digests(change: Any) -> None:
    bundle = _resealed_bundle(change)
    with pytest.raises(AttestationError) as caught:
        release_decision_statement(bundle)
    assert caught.value.code == "invalid_predicate"


def test_wrong_python_types_are_refused() -> None:
    statement = sealed_manifest_statement(_manifests()[0])
    cases = [
        lambda: verify_attestation("text", KEY.public_key),  # type: ignore[arg-type]
        lambda: verify_attestation(b"{}", KEY),  # type: ignore[arg-type]
        lambda: sign_envelope("text", PAYLOAD_TYPE, KEY),  # type: ignore[arg-type]
        lambda: check_statement(statement.to_dict()),  # type: ignore[arg-type]
        lambda: Statement(SEALED_MANIFEST_PREDICATE, list(statement.subjects), {}),  # type: ignore[arg-type]
        lambda: release_decision_statement(CandidateBundle.from_dict(_attestable_bundles()[0][1])),  # type: ignore[arg-type]
    ]
    for case in cases:
        with pytest.raises(AttestationError) as caught:
            case()
        assert caught.value.code == "invalid_type"
    with pytest.raises(AttestationError) as caught:
        Statement("", statement.subjects, {})
    assert caught.value.code == "invalid_statement"


def test_parsed_envelope_repr_shows_sizes_only() -> None:
    parsed = parse_envelope(encode_invarlock(_envelope()))
    assert CANARY not in repr(parsed)
    assert repr(parsed).startswith("ParsedEnvelope(payload=")
    assert parsed.payload_type == PAYLOAD_TYPE


def test_verified_attestation_repr_shows_type_and_key_only() -> None:
    document = _statement_document()
    document["subject"][0]["name"] = CANARY
    verified = verify_attestation(encode_invarlock(_envelope()), KEY.public_key)
    assert repr(verified) == (
        f"VerifiedAttestation(predicate_type={SEALED_MANIFEST_PREDICATE!r}, "
        f"keyid={KEY.fingerprint!r})"
    )


# ---------------------------------------------------------------------------
# Hostile input: any bytes are refused with a closed code, never another exception

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512))
def test_arbitrary_bytes_are_refused_with_a_closed_code(data: bytes) -> None:
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, KEY.public_key)
    assert caught.value.code in AttestationError.codes


@settings(max_examples=200, deadline=None)
@given(payload=_JSON, payload_type=st.sampled_from([PAYLOAD_TYPE, "text/plain"]))
def test_signed_arbitrary_payloads_are_refused_with_a_closed_code(
    payload: Any, payload_type: str
) -> None:
    data = sign_envelope(json.dumps(payload).encode(), payload_type, KEY)
    with pytest.raises(AttestationError) as caught:
        verify_attestation(data, KEY.public_key)
    assert caught.value.code in AttestationError.codes


@settings(max_examples=100, deadline=None)
@given(envelope=_JSON)
def test_arbitrary_envelope_documents_are_refused_with_a_closed_code(envelope: Any) -> None:
    with pytest.raises(AttestationError) as caught:
        verify_attestation(json.dumps(envelope).encode(), KEY.public_key)
    assert caught.value.code in AttestationError.codes
