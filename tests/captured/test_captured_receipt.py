"""Signed verification receipts v3: issuing, publication, schema, re-verification."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.captured.receipt import (
    MAX_RECEIPT_BYTES,
    ReceiptCheck,
    ReceiptError,
    check_receipt,
    issue_receipt,
    parse_receipt,
    publish_receipt,
    receipt_statement,
    sign_receipt,
    verify_receipt,
)
from sealeval.captured.signing import load_signing_key
from sealeval.captured.verify import REPLAY_NOT_STARTED, VerificationOutcome, verify_evidence_pack
from support.captured_verify import (
    MAIN,
    pack_dir_workspace,
    pack_workspace,
    private_cases,
    recipient_for,
)
from support.vectors import PROJECT_ROOT, pack_folder, vectors_dir

V = vectors_dir() / "invarlock"
CANARY = "CANARYr3ct"
VERIFIER = V / "keys" / "verifier" / "private.pem"
SCHEMA = Draft202012Validator(
    json.loads(
        (
            PROJECT_ROOT / "contracts" / "invarlock.evidence-verification-receipt-v3.schema.json"
        ).read_text("utf-8")
    )
)
#: The first receipts.json case names the main pack and its receipt (a regenerated vector
#: tree publishes them elsewhere than packs/<MAIN>/).
_MAIN_CASE = json.loads((V / "receipts.json").read_bytes())["cases"][0]["input"]
MAIN_RECEIPT = V / _MAIN_CASE["receipt"]
MAIN_EVIDENCE = V / _MAIN_CASE["pack_dir"]
#: The rejection receipt's case (about the tampered copy of the shared main pack).
_REJECTION_CASE = next(
    case["input"]
    for case in json.loads((V / "receipts.json").read_bytes())["cases"]
    if case["input"]["pack_dir"] == "see note"
)
REJECTION_RECEIPT = V / _REJECTION_CASE["receipt"]
REJECTION_EVIDENCE = V / Path(_REJECTION_CASE["receipt"]).parents[1] / "evidence"

#: Every distinct reference message of receipts.json -> (our code, field).
RECEIPT_MESSAGES = {
    "captured receipt verifier key is unauthorized": (
        "verifier_key_unauthorized",
        "signature.public_key",
    ),
    "captured receipt verifier does not match caller expectations": (
        "verifier_mismatch",
        None,
    ),
    "captured receipt anchors do not match caller expectations": (
        "anchor_mismatch",
        "statement.anchors.request_digest",
    ),
}
#: Reference messages that quote the receipt's values, mapped by their shape.
RECEIPT_MESSAGE_SHAPES = {
    # The forged statement: the reference quotes the verdict object it refused.
    re.compile(
        r"captured contract is invalid: \{'decision': .*, 'verification_status': \d+\} "
        r"is not valid under any of the given schemas"
    ): ("schema_violation", "statement.verdict"),
}


def receipt_code(message: str) -> tuple[str, str | None]:
    """Return our (code, field) for a reference message of receipts.json."""
    if message in RECEIPT_MESSAGES:
        return RECEIPT_MESSAGES[message]
    for shape, mapped in RECEIPT_MESSAGE_SHAPES.items():
        if shape.fullmatch(message):
            return mapped
    pytest.fail(f"unknown reference message: {message[:120]}")


def _expectations(inputs: dict[str, Any]) -> dict[str, Any]:
    return {
        "policy": V / inputs["policy_path"],
        "expected_baseline_run_digest": inputs["expected_run_digests"]["baseline"],
        "expected_subject_run_digest": inputs["expected_run_digests"]["subject"],
        "expected_request_digest": inputs["expected_request_digest"],
        "expected_signer_fingerprint": inputs["expected_pack_signer_fingerprint"],
        "expected_verifier_identity": inputs["expected_verifier_identity"],
        "expected_verifier_fingerprint": inputs["expected_verifier_fingerprint"],
        "expected_trust_profile_digest": inputs["expected_trust_profile_digest"],
    }


@pytest.mark.parametrize("case", private_cases("invarlock/receipts.json"))
def test_receipt_vectors(case: dict[str, Any]) -> None:
    inputs, expected = case["input"], case["expected"]
    if inputs["pack_dir"] == "see note":
        # The rejection receipt is about the tampered pack, whose manifest is untouched:
        # it verifies against either directory.
        root = V / Path(inputs["receipt"]).parents[1]  # the pack folder of the receipt
        packs = [root / "tampered" / "edited-subject-record", root / "evidence"]
    else:
        packs = [V / inputs["pack_dir"]]
    for pack in packs:
        result = verify_receipt(V / inputs["receipt"], evidence=pack, **_expectations(inputs))
        assert result.ok is expected["ok"]
        assert result.signed is expected["signed"]
        assert result.verifier_fingerprint == expected["verifier_fingerprint"]
        if expected["ok"]:
            assert result.errors == () == tuple(expected["errors"])
            assert result.statement is not None
            continue
        assert len(expected["errors"]) == 1
        code, field = receipt_code(expected["errors"][0])
        assert result.error is not None
        assert result.error.code == code
        if field is not None:
            assert result.error.field == field
        assert result.errors == (str(result.error),)


def test_every_vector_receipt_matches_the_contract() -> None:
    receipts = sorted((V / "packs").glob("*/verify/*.receipt.json"))
    assert len(receipts) >= 35
    for path in receipts:
        data = path.read_bytes()
        document = json.loads(data)
        if path.name == "forged-statement.receipt.json":
            assert not SCHEMA.is_valid(document)
            with pytest.raises(ReceiptError):
                parse_receipt(document)
            continue
        SCHEMA.validate(document)
        parse_receipt(document)
        assert encode_invarlock(document) == data


# ---------------------------------------------------------------------------
# The schema's invariants, checked identically by the contract and by parse_receipt


def _valid(path: Path = MAIN_RECEIPT) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_bytes())
    return document


def _set(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    result = copy.deepcopy(document)
    node = result
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return result


_DELETE = object()
_MUTATIONS: list[tuple[str, str, Any, str]] = [
    ("positive", "extra", 1, "receipt"),
    ("positive", "statement.extra", 1, "statement"),
    (
        "positive",
        "statement.format",
        "invarlock/evidence-verification-receipt-v2",
        "statement.format",
    ),
    ("positive", "statement.kind", "native", "statement.kind"),
    ("positive", "statement.pack_format", "x", "statement.pack_format"),
    ("positive", "statement.verification_scope", "x", "statement.verification_scope"),
    ("positive", "statement.pack_manifest_digest", "sha256:AB", "statement.pack_manifest_digest"),
    ("positive", "statement.anchors.policy_digest", None, "statement.anchors.policy_digest"),
    ("positive", "statement.anchors.extra", "x", "statement.anchors"),
    ("positive", "statement.subject.kind", "run", "statement.subject.kind"),
    ("positive", "statement.subject.run_digest", 1, "statement.subject.run_digest"),
    ("positive", "statement.verifier.identity", " x", "statement.verifier.identity"),
    (
        "positive",
        "statement.verifier.signing_key_fingerprint",
        None,
        "statement.verifier.signing_key_fingerprint",
    ),
    (
        "positive",
        "statement.verifier.trust_profile_digest",
        "x",
        "statement.verifier.trust_profile_digest",
    ),
    ("positive", "statement.replay_status", "started", "statement.replay_status"),
    ("positive", "statement.replay_status", "not_started", "statement.verdict"),
    ("positive", "statement.scoring_assurance", [], "statement.scoring_assurance"),
    ("positive", "statement.scoring_assurance", None, "statement.verdict"),
    ("positive", "statement.scoring_assurance", "x", "statement.scoring_assurance"),
    (
        "positive",
        "statement.scoring_assurance.0.scoring_assurance",
        "claimed",
        "statement.scoring_assurance",
    ),
    ("positive", "statement.scoring_assurance.0.name", "", "statement.scoring_assurance"),
    ("positive", "statement.scoring_assurance.0.slice", "a\nb", "statement.scoring_assurance"),
    ("positive", "statement.verdict.ok", 1, "statement.verdict"),
    ("positive", "statement.verdict.ok", False, "statement.verdict"),
    ("positive", "statement.verdict.integrity_ok", None, "statement.verdict"),
    ("positive", "statement.verdict.verification_status", 0.0, "statement.verdict"),
    ("positive", "statement.verdict.verification_status", True, "statement.verdict"),
    ("positive", "statement.verdict.verification_status", 7, "statement.verdict"),
    ("positive", "statement.verdict.decision", "regression", "statement.verdict"),
    ("positive", "statement.verdict.policy_verdict", "fail", "statement.verdict"),
    ("positive", "statement.verdict.extra", 1, "statement.verdict"),
    ("rejection", "statement.verdict.verification_status", 0, "statement.verdict"),
    ("rejection", "statement.verdict.verification_status", 2, "statement.verdict"),
    ("rejection", "statement.verdict.ok", True, "statement.verdict"),
    ("rejection", "statement.verdict.decision", "pass", "statement.verdict"),
    ("rejection", "statement.verdict.policy_verdict", "fail", "statement.verdict"),
    ("rejection4", "statement.replay_status", "completed", "statement.verdict"),
    ("rejection4", "statement.replay_status", "failed", "statement.verdict"),
    ("rejection", "signature.format", "x", "signature.format"),
    ("rejection", "signature.algorithm", "rsa", "signature.algorithm"),
    ("rejection", "signature.public_key.encoding", "der", "signature.public_key.encoding"),
    ("rejection", "signature.public_key.value", 1, "signature.public_key.value"),
    ("rejection", "signature.public_key.extra", 1, "signature.public_key"),
    ("rejection", "signature.value", "x==", "signature.value"),
    ("rejection", "signature", _DELETE, "receipt"),
]


def _fix_index(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    if ".0." not in path:
        return _set(document, path, value)
    head, tail = path.split(".0.")
    result = copy.deepcopy(document)
    node = result
    for key in head.split("."):
        node = node[key]
    node[0][tail] = value
    return result


@pytest.mark.parametrize(("base", "path", "value", "field"), _MUTATIONS)
def test_schema_invariants(base: str, path: str, value: Any, field: str) -> None:
    document = _valid(MAIN_RECEIPT if base == "positive" else REJECTION_RECEIPT)
    if base == "rejection4":
        document = _set(document, "statement.verdict.verification_status", 4)
    mutated = _fix_index(document, path, value)
    with pytest.raises(ReceiptError) as caught:
        parse_receipt(mutated)
    assert (caught.value.code, caught.value.field) == ("schema_violation", field)
    if type(value) is not float:  # JSON Schema cannot tell 0.0 from 0; the reader can
        assert not SCHEMA.is_valid(mutated)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("statement.verdict.verification_status", 4),
        ("statement.verification_status_replay", None),
    ],
)
def test_valid_rejection_variants(path: str, value: Any) -> None:
    document = _valid(REJECTION_RECEIPT)
    if path == "statement.verification_status_replay":
        document = _set(document, "statement.replay_status", "failed")
    else:
        document = _set(document, path, value)
    parse_receipt(document)
    SCHEMA.validate(document)


# ---------------------------------------------------------------------------
# Issuing and publishing


def test_issue_is_deterministic_and_refuses_unidentified_outcomes(tmp_path: Path) -> None:
    work, _ = pack_dir_workspace(_MAIN_CASE["pack_dir"], tmp_path)
    recipient = recipient_for(work / "evidence", work / "trust", tmp_path)
    outcome = verify_evidence_pack(work / "evidence", recipient)
    first = issue_receipt(outcome, recipient)
    assert first == issue_receipt(outcome, recipient) == MAIN_RECEIPT.read_bytes()
    with pytest.raises(ReceiptError) as caught:
        receipt_statement(VerificationOutcome(4, REPLAY_NOT_STARTED, None), recipient)
    assert (caught.value.code, caught.value.field) == ("not_identified", "pack_manifest_digest")
    with pytest.raises(ReceiptError) as wrong:
        receipt_statement(object(), recipient)  # type: ignore[arg-type]
    assert wrong.value.code == "invalid_type"
    with pytest.raises(ReceiptError) as key:
        sign_receipt(receipt_statement(outcome, recipient), object())  # type: ignore[arg-type]
    assert key.value.code == "invalid_type"
    statement = receipt_statement(outcome, recipient)
    with pytest.raises(ReceiptError) as inconsistent:
        sign_receipt({**statement, "replay_status": "failed"}, recipient.verifier_key)
    assert inconsistent.value.code == "schema_violation"
    with pytest.raises(ReceiptError) as unencodable:
        sign_receipt({**statement, "kind": float("nan")}, recipient.verifier_key)
    assert unencodable.value.code == "schema_violation"


def test_publish_is_no_clobber_with_private_modes(tmp_path: Path) -> None:
    destination = tmp_path / "a" / "b" / "receipt.json"
    publish_receipt(destination, b"{}\n")
    assert destination.read_bytes() == b"{}\n"
    assert stat.S_IMODE(destination.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    with pytest.raises(ReceiptError) as caught:
        publish_receipt(destination, b"[]\n")
    assert (caught.value.code, caught.value.field) == ("publication_failed", "receipt")
    assert destination.read_bytes() == b"{}\n"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ReceiptError):
        publish_receipt(tmp_path / "dangling", b"{}\n")
    assert not (tmp_path / "nowhere").exists()
    (tmp_path / "file").write_text("x", "utf-8")
    with pytest.raises(ReceiptError):
        publish_receipt(tmp_path / "file" / "receipt.json", b"{}\n")


# ---------------------------------------------------------------------------
# Re-verification: every refusal, in order

MAIN_EXPECTATIONS = _expectations(_MAIN_CASE)


def _check(receipt: Path | bytes, evidence: Path | None = None, **overrides: Any) -> ReceiptCheck:
    values = {**MAIN_EXPECTATIONS, **overrides}
    return verify_receipt(receipt, evidence=evidence or MAIN_EVIDENCE, **values)


def _code(result: ReceiptCheck) -> tuple[str | None, str | None]:
    assert not result.ok
    assert result.error is not None
    assert result.verifier_fingerprint is None
    return result.error.code, result.error.field


def test_receipt_file_refusals(tmp_path: Path) -> None:
    assert _code(_check(tmp_path / "missing.json")) == ("not_found", "receipt")
    assert _code(_check(tmp_path)) == ("not_regular_file", "receipt")
    (tmp_path / "link.json").symlink_to(MAIN_RECEIPT)
    assert _code(_check(tmp_path / "link.json")) == ("not_regular_file", "receipt")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_RECEIPT_BYTES + 1))
    assert _code(_check(big)) == ("too_large", "receipt")
    assert _code(_check(b" " * (MAX_RECEIPT_BYTES + 1))) == ("too_large", "receipt")
    assert _code(_check(b"\xef\xbb\xbf{}")) == ("not_utf8", "receipt")
    assert _code(_check(b'{"a":1,"a":1}')) == ("duplicate_key", "receipt")
    assert _code(_check(b"{")) == ("invalid_json", "receipt")
    assert _code(_check(b"[]")) == ("not_object", "receipt")
    assert _check(MAIN_RECEIPT.read_bytes()).ok


def test_policy_and_expectation_refusals(tmp_path: Path) -> None:
    bad = tmp_path / "policy.json"
    bad.write_text('{"format": "x"}', "utf-8")
    assert _code(_check(MAIN_RECEIPT, policy=bad)) == ("invalid_policy", "policy")
    assert _code(_check(MAIN_RECEIPT, policy=tmp_path / "none.json")) == ("not_found", "policy")
    assert _code(_check(MAIN_RECEIPT, expected_request_digest=CANARY)) == (
        "invalid_expectation",
        "request_digest",
    )
    assert _code(_check(MAIN_RECEIPT, expected_verifier_identity=CANARY + " ")) == (
        "invalid_expectation",
        "verifier_identity",
    )
    assert _code(_check(MAIN_RECEIPT, expected_trust_profile_digest=CANARY)) == (
        "invalid_expectation",
        "trust_profile_digest",
    )
    policy = read_evidence_pack(MAIN_EVIDENCE).policy
    assert _check(MAIN_RECEIPT, policy=policy).ok


def test_subject_and_assurance_and_manifest_refusals(tmp_path: Path) -> None:
    other_subject = "sha256:" + "2" * 64
    assert _code(_check(MAIN_RECEIPT, expected_subject_run_digest=other_subject)) == (
        "subject_mismatch",
        "statement.subject.run_digest",
    )
    multi = pack_folder("text-200-multi-signed")
    assert _code(_check(MAIN_RECEIPT, policy=multi / "trust" / "policy.json")) == (
        "assurance_mismatch",
        "statement.scoring_assurance",
    )
    assert _code(_check(MAIN_RECEIPT, evidence=multi / "evidence")) == (
        "manifest_mismatch",
        "statement.pack_manifest_digest",
    )
    (tmp_path / "empty").mkdir()
    for pack in (tmp_path / "none", MAIN_RECEIPT, tmp_path / "empty"):
        assert _code(_check(MAIN_RECEIPT, evidence=pack)) == ("pack_unidentified", "pack")
    for content in (b"{", b"[]", b'{"format": "invarlock/evidence-pack-v1"}'):
        pack = tmp_path / f"pack{len(content)}"
        pack.mkdir()
        (pack / "manifest.json").write_bytes(content)
        assert _code(_check(MAIN_RECEIPT, evidence=pack)) == ("pack_unidentified", "pack")
    directory = tmp_path / "manifest-is-a-directory"
    (directory / "manifest.json").mkdir(parents=True)
    assert _code(_check(MAIN_RECEIPT, evidence=directory)) == ("pack_unidentified", "pack")
    fifo = tmp_path / "fifo-pack"
    fifo.mkdir()
    os.mkfifo(fifo / "manifest.json")
    assert _code(_check(MAIN_RECEIPT, evidence=fifo)) == ("pack_unidentified", "pack")


def test_anchor_verifier_and_signature_refusals() -> None:
    assert _code(_check(MAIN_RECEIPT, expected_baseline_run_digest="sha256:" + "3" * 64)) == (
        "anchor_mismatch",
        "statement.anchors.baseline_run_digest",
    )
    assert _code(_check(MAIN_RECEIPT, expected_signer_fingerprint="sha256:" + "4" * 64)) == (
        "anchor_mismatch",
        "statement.anchors.signer_fingerprint",
    )
    assert _code(_check(MAIN_RECEIPT, expected_trust_profile_digest=None)) == (
        "verifier_mismatch",
        "statement.verifier.trust_profile_digest",
    )
    document = _valid(REJECTION_RECEIPT)
    rejection = {"evidence": REJECTION_EVIDENCE, **_expectations(_REJECTION_CASE)}
    flipped = _set(document, "statement.verdict.verification_status", 4)
    assert _code(_check(encode_invarlock(flipped), **rejection)) == (
        "signature_invalid",
        "signature.value",
    )
    zeroed = _set(document, "signature.value", "A" * 86 + "==")
    assert _code(_check(encode_invarlock(zeroed), **rejection)) == (
        "signature_invalid",
        "signature.value",
    )
    rsa_free = _set(document, "signature.public_key.value", "not a key")
    assert _code(_check(encode_invarlock(rsa_free), **rejection)) == (
        "verifier_key_unauthorized",
        "signature.public_key",
    )
    declared = _set(document, "statement.verifier.signing_key_fingerprint", "sha256:" + "5" * 64)
    assert _code(_check(encode_invarlock(declared), **rejection)) == (
        "verifier_key_unauthorized",
        "signature.public_key",
    )


def _forged_positive(pack: Path, statement_edit: dict[str, Any] | None = None) -> bytes:
    """A verifier-signed positive receipt over an arbitrary manifest (the verifier lied)."""
    statement = copy.deepcopy(_valid(MAIN_RECEIPT)["statement"])
    statement["pack_manifest_digest"] = digest_bytes((pack / "manifest.json").read_bytes())
    statement.update(statement_edit or {})
    return sign_receipt(statement, load_signing_key(VERIFIER))


def test_positive_receipt_requires_a_consistent_pack(tmp_path: Path) -> None:
    unsigned = pack_folder("text-20-exact-unsigned") / "evidence"
    assert _code(_check(_forged_positive(unsigned), evidence=unsigned)) == ("pack_mismatch", "pack")
    work, _ = pack_dir_workspace(_MAIN_CASE["pack_dir"], tmp_path)
    evidence = work / "evidence"
    manifest = json.loads((evidence / "manifest.json").read_bytes())
    for edit in (
        lambda m: m.update(comparison_id="sha256:" + "6" * 64),
        lambda m: m["files"]["baseline"].update(digest="sha256:" + "7" * 64),
        lambda m: m.update(note="x"),
    ):
        changed = copy.deepcopy(manifest)
        edit(changed)
        (evidence / "manifest.json").write_bytes(encode_invarlock(changed))
        assert _code(_check(_forged_positive(evidence), evidence=evidence)) == (
            "pack_mismatch",
            "pack",
        )
    (evidence / "manifest.json").write_text(json.dumps(manifest, indent=1), "utf-8")
    assert _code(_check(_forged_positive(evidence), evidence=evidence)) == (
        "pack_mismatch",
        "pack",
    )
    (evidence / "manifest.json").write_bytes(encode_invarlock(manifest))
    assert _check(_forged_positive(evidence), evidence=evidence).ok


def test_issued_rejection_receipts_verify(tmp_path: Path) -> None:
    work = pack_workspace(MAIN, tmp_path)
    pack = work / "tampered" / "corrupted-signature"
    recipient = recipient_for(pack, work / "trust", tmp_path)
    outcome = verify_evidence_pack(pack, recipient)
    data = issue_receipt(outcome, recipient)
    statement = check_receipt(
        data,
        evidence=pack,
        policy=recipient.policy,
        expected_baseline_run_digest=recipient.anchors.baseline_run_digest,
        expected_subject_run_digest=recipient.anchors.subject_run_digest,
        expected_request_digest=recipient.anchors.request_digest,
        expected_signer_fingerprint=recipient.anchors.signer_fingerprint,
        expected_verifier_identity=recipient.verifier_identity,
        expected_verifier_fingerprint=recipient.verifier_fingerprint,
        expected_trust_profile_digest=recipient.trust_profile_digest,
    )
    assert statement["verdict"]["verification_status"] == 6
    assert repr(ReceiptCheck(ok=True, verifier_fingerprint=None, error=None)) == (
        "ReceiptCheck(ok=True, error=None, pack_rechecked=False)"
    )


def test_receipt_errors_never_echo_values(tmp_path: Path) -> None:
    texts: list[str] = []
    for overrides in (
        {"expected_verifier_identity": CANARY},
        {"expected_request_digest": CANARY},
    ):
        result = _check(MAIN_RECEIPT, **overrides)
        texts += [*result.errors, repr(result)]
    canary_dir = tmp_path / CANARY
    result = _check(canary_dir / "receipt.json", evidence=canary_dir)
    texts += [*result.errors, repr(result)]
    forged = _set(_valid(MAIN_RECEIPT), "statement.verifier.identity", CANARY + " !")
    result = _check(encode_invarlock(forged))
    texts += [*result.errors, repr(result)]
    assert texts
    assert all(CANARY not in text for text in texts)


# ---------------------------------------------------------------------------
# The pack re-check (#13: a valid receipt said nothing about edited payloads)


def _edited_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "evidence"
    shutil.copytree(MAIN_EVIDENCE, copy)
    subject = copy / "records" / "subject.json"
    subject.chmod(0o644)
    data = bytearray(subject.read_bytes())
    index = data.index(b'"')
    data[index + 1] = ord("Z") if data[index + 1] != ord("Z") else ord("Y")
    subject.write_bytes(bytes(data))
    return copy


def test_receipt_check_says_payloads_were_not_rechecked(tmp_path: Path) -> None:
    edited = _edited_copy(tmp_path)
    result = _check(MAIN_RECEIPT, evidence=edited)
    assert result.ok
    assert result.pack_rechecked is False
    assert "pack_rechecked=False" in repr(result)


def test_receipt_recheck_refuses_edited_payloads(tmp_path: Path) -> None:
    edited = _edited_copy(tmp_path)
    assert _code(_check(MAIN_RECEIPT, evidence=edited, recheck_pack=True)) == (
        "pack_mismatch",
        "pack",
    )
    with pytest.raises(ReceiptError) as caught:
        check_receipt(MAIN_RECEIPT, evidence=edited, recheck_pack=True, **MAIN_EXPECTATIONS)
    assert caught.value.code == "pack_mismatch"


def test_receipt_recheck_accepts_the_untouched_pack() -> None:
    result = _check(MAIN_RECEIPT, recheck_pack=True)
    assert result.ok
    assert result.pack_rechecked is True
