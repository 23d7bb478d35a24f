"""Offline verification of captured evidence packs: trust inputs, recipient checks, replay."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import sealeval.captured.pack_reader as reader_module
import sealeval.captured.verify as verify_module
from sealeval.canonical import digest_bytes, digest_invarlock, encode_invarlock
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.pack_reader import (
    UNCAPPED_PACK_LIMITS,
    checksum_ledger,
    read_evidence_pack,
)
from sealeval.captured.policy import ComparisonPolicyError
from sealeval.captured.receipt import issue_receipt
from sealeval.captured.request import comparison_id
from sealeval.captured.signing import (
    SigningKey,
    SigningKeyError,
    load_signing_key,
    signature_envelope,
)
from sealeval.captured.trust import (
    MAX_PROFILE_BYTES,
    TrustInputError,
    TrustInputs,
    check_verification_inputs,
    explicit_trust_inputs,
    is_identity,
    is_safe_relative_path,
    parse_trust_profile,
    read_trust_profile,
)
from sealeval.captured.verify import (
    REPLAY_COMPLETED,
    REPLAY_FAILED,
    REPLAY_NOT_STARTED,
    ScoringAssurance,
    VerificationError,
    VerificationOutcome,
    required_draws,
    scoring_assurance,
    verify_evidence_pack,
)
from support.captured_verify import (
    MAIN,
    VERIFY_MESSAGES,
    V,
    pack_dir_workspace,
    pack_workspace,
    private_cases,
    private_load,
    recipient_for,
)
from support.vectors import PROJECT_ROOT, pack_case, pack_folder

CANARY = "CANARYv9qk"
KEYS = V / "keys"
SIGNER = KEYS / "evidence-signer" / "private.pem"
OTHER = KEYS / "other-signer" / "private.pem"
VERIFIER = KEYS / "verifier" / "private.pem"
TRUST_SCHEMA = Draft202012Validator(
    json.loads(
        (PROJECT_ROOT / "contracts" / "invarlock.trust-inputs-v2.schema.json").read_text("utf-8")
    )
)
ROLE_PATHS = {
    "request": "request.json",
    "policy": "inputs/policy.json",
    "baseline": "records/baseline.json",
    "subject": "records/subject.json",
    "report": "reports/evaluation.report.json",
}

#: Every distinct reference message of verify.json -> (our error class, code, field).
#: The reference quotes values in some messages; ours are closed codes only.


def message_of(expected: dict[str, Any]) -> str | None:
    stdout = expected.get("stdout_json") or {}
    errors = stdout.get("errors") or []
    if errors:
        assert len(errors) == 1
        message: str = errors[0]
        if message not in VERIFY_MESSAGES:
            pytest.fail(f"unknown reference message: {message[:120]}")
        return message
    return None


def option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def trust_inputs_of(command: list[str], cwd: Path) -> TrustInputs:
    profile = option(command, "--trust-profile")
    if profile is not None:
        return read_trust_profile(cwd / profile)
    return explicit_trust_inputs(
        policy=cwd / str(option(command, "--policy")),
        expected_baseline_run=option(command, "--expected-baseline-run"),
        expected_subject_run=option(command, "--expected-subject-run"),
        expected_request_digest=option(command, "--expected-request-digest"),
        expected_signer=option(command, "--expected-signer"),
        verifier_signing_key=cwd / str(option(command, "--verifier-signing-key")),
        verifier_identity=option(command, "--verifier-identity"),
    )


# ---------------------------------------------------------------------------
# verify.json at the library level: every case


def _verifier(streamed: bool, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``verify_evidence_pack``, or the same reading every run file as a streamed outline."""
    if not streamed:
        return verify_module.verify_evidence_pack
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(verify_module, "compare_runs", None)  # the held path must not run

    def verify(*args: Any, **kwargs: Any) -> Any:
        return verify_module.verify_evidence_pack(*args, limits=UNCAPPED_PACK_LIMITS, **kwargs)

    return verify


@pytest.mark.parametrize("streamed", [False, True], ids=["held", "streamed"])
@pytest.mark.parametrize("case", private_cases("invarlock/verify.json"))
def test_verify_vectors(
    case: dict[str, Any], streamed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every vector, with the runs held and with every run file streamed (outline + replay).

    Streamed: every run file is read as an outline and the replay runs
    :func:`compare_run_files` on the examined files (uncapped limits, the
    streaming threshold lowered to 0); the outcome and receipt bytes must
    not change.
    """
    inputs, expected = case["input"], case["expected"]
    verify_evidence_pack = _verifier(streamed, monkeypatch)
    cwd, pack = pack_dir_workspace(inputs["pack_dir"], tmp_path)
    command = inputs["command"]
    if "--trust-profile" in command and "--policy" in command:
        # Mixing is refused by the command line (test_cli_evaluate_verify.py); the library
        # only ever sees one mode.
        assert message_of(expected) == "--trust-profile cannot be mixed with --policy"
        assert expected["exit_code"] == 2
        return
    receipt = str(option(command, "--receipt"))
    destination = cwd / receipt
    budget_text = option(command, "--max-bootstrap-draws")
    budget = DEFAULT_MAX_BOOTSTRAP_DRAWS if budget_text is None else int(budget_text)
    trust = trust_inputs_of(command, cwd)
    if set(expected) == {"first", "second"}:
        recipient = check_verification_inputs(
            trust, evidence=pack, receipt=destination, max_bootstrap_draws=budget
        )
        outcome = verify_evidence_pack(pack, recipient, workers=1)
        assert outcome.status == expected["first"]["exit_code"]
        assert expected["second"]["stdout_json"]["reason"] == "receipt_publication_failed"
        return
    message = message_of(expected)
    if expected["exit_code"] == 2:
        assert message is not None
        cls, code, field = VERIFY_MESSAGES[message]

        def run() -> None:
            recipient = check_verification_inputs(
                trust, evidence=pack, receipt=destination, max_bootstrap_draws=budget
            )
            verify_evidence_pack(pack, recipient, workers=1)

        with pytest.raises((TrustInputError, VerificationError)) as caught:
            run()
        assert isinstance(caught.value, cls)
        assert (caught.value.code, caught.value.field) == (code, field)
        assert expected["receipt_file"] is None
        return
    recipient = check_verification_inputs(
        trust, evidence=pack, receipt=destination, max_bootstrap_draws=budget
    )
    outcome = verify_evidence_pack(pack, recipient, workers=1)
    assert outcome.status == expected["exit_code"]
    statement = expected["receipt"]["statement"]
    assert outcome.replay_status == statement["replay_status"]
    assert outcome.verdict() == statement["verdict"]
    assert outcome.pack_manifest_digest == statement["pack_manifest_digest"]
    if message is None:
        assert outcome.error is None
        assert outcome.integrity_ok
        assert [s.to_dict() for s in outcome.metric_summaries] == expected["stdout_json"][
            "metric_summaries"
        ]
    else:
        cls, code, field = VERIFY_MESSAGES[message]
        assert isinstance(outcome.error, cls)
        assert (outcome.error.code, outcome.error.field) == (code, field)
        assert outcome.metric_summaries == ()
        assert outcome.error.status == expected["exit_code"]  # type: ignore[attr-defined]
    # The signed receipt, byte for byte (Ed25519 is deterministic).
    assert issue_receipt(outcome, recipient) == (V / expected["receipt_file"]).read_bytes()
    assert expected["receipt_is_canonical"]


def test_every_vector_trust_profile_matches_the_contract() -> None:
    profiles = sorted((V / "packs").glob("*/trust*/trust-inputs.json"))
    assert len(profiles) >= 20
    for path in profiles:
        document = json.loads(path.read_bytes())
        TRUST_SCHEMA.validate(document)
        parse_trust_profile(document)
        assert read_trust_profile(path).trust_profile_digest == digest_invarlock(document)


def test_verify_cases_cover_every_tamper_variant() -> None:
    """Each tampered copy beside a pack the cases tamper with is verified by exactly one case."""
    verified = [
        case["input"]["pack_dir"]
        for case in private_load("invarlock/verify.json")["cases"]
        if "/tampered/" in case["input"]["pack_dir"]
    ]
    assert verified  # the file tests tampering
    assert len(verified) == len(set(verified))
    roots = {pack_dir.split("/tampered/")[0] for pack_dir in verified}
    variants = {
        f"{root}/tampered/{path.name}"
        for root in roots
        for path in (V / root / "tampered").iterdir()
    }
    assert set(verified) == variants


# ---------------------------------------------------------------------------
# Forged packs (valid signatures over lying content) for the paths the vectors lack


def forge(
    pack: Path,
    edit: Callable[[dict[str, Any]], None],
    *,
    key: SigningKey | None = None,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, str]:
    """Edit payload documents, then rebind everything and re-sign; return the new digests."""
    docs = {role: json.loads((pack / path).read_bytes()) for role, path in ROLE_PATHS.items()}
    edit(docs)
    hexes = {role: digest_invarlock(docs[role]) for role in ("policy", "baseline", "subject")}
    comparison = docs["request"]["comparison"]
    for side in ("baseline", "subject"):
        comparison[side]["run_digest"] = hexes[side]
        comparison[side].pop("expected_run_digest", None)
    comparison["policy_digest"] = hexes["policy"]
    docs["report"]["bindings"] = {role: hexes[role] for role in ("baseline", "subject", "policy")}
    if report is not None:
        report(docs["report"])
    for role, path in ROLE_PATHS.items():
        target = pack / path
        target.chmod(0o644)
        target.write_bytes(encode_invarlock(docs[role]))
    digests = {role: digest_bytes((pack / path).read_bytes()) for role, path in ROLE_PATHS.items()}
    ledger = checksum_ledger(digests)
    (pack / "checksums.sha256").chmod(0o644)
    (pack / "checksums.sha256").write_bytes(ledger)
    signer = key or load_signing_key(SIGNER)
    manifest = json.loads((pack / "manifest.json").read_bytes())
    manifest["files"] = {
        role: {"path": path, "digest": digests[role]} for role, path in ROLE_PATHS.items()
    }
    manifest["checksums_sha256_digest"] = hashlib.sha256(ledger).hexdigest()
    manifest["request_digest"] = digests["request"]
    manifest["comparison_id"] = comparison_id(
        request_digest=digests["request"],
        baseline_run_digest=digests["baseline"],
        subject_run_digest=digests["subject"],
        policy_digest=digests["policy"],
    )
    manifest["signing_key_fingerprint"] = signer.fingerprint
    manifest_bytes = encode_invarlock(manifest)
    for name, data in (
        ("manifest.json", manifest_bytes),
        ("manifest.signature.json", signature_envelope(manifest_bytes, signer)),
    ):
        (pack / name).chmod(0o644)
        (pack / name).write_bytes(data)
    return digests


def profile_for(trust: Path, digests: dict[str, str], **verifier: str) -> Path:
    """Rewrite a trust directory's profile with new anchors (and optionally verifier members)."""
    document = json.loads((trust / "trust-inputs.json").read_bytes())
    document["anchors"] = {
        "baseline_run_digest": digests["baseline"],
        "subject_run_digest": digests["subject"],
        "request_digest": digests["request"],
        "evidence_signer_fingerprint": load_signing_key(SIGNER).fingerprint,
    }
    document["verifier"].update(verifier)
    (trust / "trust-inputs.json").write_text(json.dumps(document), "utf-8")
    return trust / "trust-inputs.json"


@pytest.fixture
def main(tmp_path: Path) -> Path:
    return pack_workspace(MAIN, tmp_path)


def test_forged_but_consistent_pack_verifies(main: Path, tmp_path: Path) -> None:
    digests = forge(main / "evidence", lambda docs: None)
    profile_for(main / "trust", digests)
    outcome = verify_evidence_pack(
        main / "evidence", recipient_for(main / "evidence", main / "trust", tmp_path)
    )
    assert (outcome.status, outcome.replay_status) == (0, REPLAY_COMPLETED)


def test_replay_error_is_an_integrity_failure(main: Path, tmp_path: Path) -> None:
    def drop_a_record(docs: dict[str, Any]) -> None:
        docs["subject"]["records"].pop()

    digests = forge(main / "evidence", drop_a_record)
    profile_for(main / "trust", digests)
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    outcome = verify_evidence_pack(main / "evidence", recipient)
    assert (outcome.status, outcome.replay_status) == (6, REPLAY_FAILED)
    assert isinstance(outcome.error, VerificationError)
    assert (outcome.error.code, outcome.error.field) == ("replay_failed", "comparison")
    assert (outcome.decision, outcome.assurance, outcome.policy_verdict) == (None, None, None)
    statement = json.loads(issue_receipt(outcome, recipient))["statement"]
    assert statement["replay_status"] == "failed"
    assert statement["verdict"]["verification_status"] == 6


def _pin_unicode(version: str) -> Callable[[dict[str, Any]], None]:
    def edit(docs: dict[str, Any]) -> None:
        docs["policy"]["metrics"][0]["configuration"]["unicode_version"] = version

    return edit


def test_unsupported_unicode_version_is_incomplete(tmp_path: Path) -> None:
    work = pack_workspace("ragas-native-signed", tmp_path)
    digests = forge(work / "evidence", _pin_unicode("13.0.0"))
    profile_for(work / "trust", digests)
    shutil.copyfile(work / "evidence" / "inputs" / "policy.json", work / "trust" / "policy.json")
    recipient = recipient_for(work / "evidence", work / "trust", tmp_path)
    with pytest.raises(VerificationError) as caught:
        verify_evidence_pack(work / "evidence", recipient)
    assert caught.value.code == "unsupported_scoring_environment"
    assert caught.value.field == "metrics[0].configuration.unicode_version"
    assert caught.value.status == 2


def test_anchor_failures_come_before_the_scoring_environment(tmp_path: Path) -> None:
    work = pack_workspace("ragas-native-signed", tmp_path)
    digests = forge(work / "evidence", _pin_unicode("13.0.0"))
    digests["baseline"] = "sha256:" + "0" * 64
    profile_for(work / "trust", digests)
    shutil.copyfile(work / "evidence" / "inputs" / "policy.json", work / "trust" / "policy.json")
    outcome = verify_evidence_pack(
        work / "evidence", recipient_for(work / "evidence", work / "trust", tmp_path)
    )
    assert outcome.status == 6
    assert outcome.error is not None
    assert outcome.error.code == "anchor_mismatch"


def test_subject_anchor_mismatch_is_named(main: Path, tmp_path: Path) -> None:
    document = json.loads((main / "trust" / "trust-inputs.json").read_bytes())
    document["anchors"]["subject_run_digest"] = "sha256:" + "1" * 64
    (main / "trust" / "trust-inputs.json").write_text(json.dumps(document), "utf-8")
    outcome = verify_evidence_pack(
        main / "evidence", recipient_for(main / "evidence", main / "trust", tmp_path)
    )
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.field) == (
        "anchor_mismatch",
        "anchors.subject_run_digest",
    )


def test_budget_equality_is_allowed_and_one_less_is_refused(tmp_path: Path) -> None:
    work = pack_workspace("text-200-multi-signed", tmp_path)
    pack = read_evidence_pack(work / "evidence")
    required = required_draws(pack, pack.policy)
    preflight = pack_case("text-200-multi-signed")["expected"]["evaluate_preflight"]
    assert required == preflight["stdout_json"]["required_bootstrap_draws"]  # the reference's
    exact = recipient_for(work / "evidence", work / "trust", tmp_path, budget=required)
    assert verify_evidence_pack(work / "evidence", exact).status == 7
    unlimited = recipient_for(work / "evidence", work / "trust", tmp_path, budget=None)
    assert verify_evidence_pack(work / "evidence", unlimited, workers=1).status == 7
    short = recipient_for(work / "evidence", work / "trust", tmp_path, budget=required - 1)
    with pytest.raises(VerificationError) as caught:
        verify_evidence_pack(work / "evidence", short)
    assert caught.value.code == "local_work_budget_exceeded"


def test_binary_only_policy_needs_no_budget(main: Path, tmp_path: Path) -> None:
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path, budget=0)
    assert verify_evidence_pack(main / "evidence", recipient).status == 0


def test_pack_changed_during_replay(
    main: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    real = verify_module.compare_runs

    def compare_and_tamper(**kwargs: Any) -> Any:
        report = real(**kwargs)
        (main / "evidence" / "notes.txt").write_text("late", "utf-8")
        return report

    monkeypatch.setattr(verify_module, "compare_runs", compare_and_tamper)
    outcome = verify_evidence_pack(main / "evidence", recipient)
    assert (outcome.status, outcome.replay_status) == (6, REPLAY_COMPLETED)
    assert outcome.error is not None
    assert outcome.error.code == "file_changed"


def test_streamed_replay_refuses_a_run_file_replaced_after_examination(
    main: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay reopens the examined run files; a replaced one (same bytes) is refused."""
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    real = verify_module._check_environment
    baseline = main / "evidence" / "records" / "baseline.json"

    def check_and_replace(policy: Any) -> None:
        real(policy)
        data = baseline.read_bytes()
        baseline.unlink()
        baseline.write_bytes(data)

    monkeypatch.setattr(verify_module, "_check_environment", check_and_replace)
    outcome = verify_evidence_pack(main / "evidence", recipient, limits=UNCAPPED_PACK_LIMITS)
    assert (outcome.status, outcome.replay_status) == (6, REPLAY_FAILED)
    assert outcome.error is not None
    assert (outcome.error.code, outcome.error.field) == ("file_changed", "pack")
    assert outcome.pack_manifest_digest == digest_bytes(
        (main / "evidence" / "manifest.json").read_bytes()
    )
    monkeypatch.setattr(verify_module, "_check_environment", real)
    again = verify_evidence_pack(main / "evidence", recipient, limits=UNCAPPED_PACK_LIMITS)
    assert (again.status, again.replay_status) == (0, REPLAY_COMPLETED)


def test_unidentified_pack_is_a_contract_failure_without_receipt(
    main: Path, tmp_path: Path
) -> None:
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    (main / "evidence" / "manifest.json").write_text('{"format": "something-else"}', "utf-8")
    outcome = verify_evidence_pack(main / "evidence", recipient)
    assert (outcome.status, outcome.identified, outcome.replay_status) == (
        4,
        False,
        REPLAY_NOT_STARTED,
    )
    assert not outcome.integrity_ok
    assert outcome.pack_manifest_digest is None
    symlink = tmp_path / "link"
    symlink.symlink_to(main / "evidence", target_is_directory=True)
    linked = verify_evidence_pack(symlink, recipient)
    assert linked.status == 4
    assert linked.error is not None
    assert linked.error.code == "not_directory"


def test_verify_refuses_wrong_argument_types(main: Path, tmp_path: Path) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_evidence_pack(main / "evidence", object())  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.status) == ("invalid_type", 2)
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    for arguments, field in (
        ({"limits": "uncapped"}, "limits"),
        ({"decision_order": "sideways"}, "decision_order"),
    ):
        with pytest.raises(VerificationError) as caught:
            verify_evidence_pack(main / "evidence", recipient, **arguments)  # type: ignore[arg-type]
        assert (caught.value.code, caught.value.field) == ("invalid_type", field)


def test_scoring_assurance_follows_report_order(tmp_path: Path) -> None:
    work = pack_workspace("text-200-multi-signed", tmp_path)
    pack = read_evidence_pack(work / "evidence")
    derived = scoring_assurance(pack.policy)
    names = [(item.slice, item.name) for item in derived]
    assert names == [(entry["slice"], entry["name"]) for entry in pack.report["metrics"]]
    assert {item.scoring_assurance for item in derived} == {"recorded", "recomputed"}
    assert ScoringAssurance("n", "overall", "exact_match", "recomputed").to_dict() == {
        "name": "n",
        "slice": "overall",
        "kind": "exact_match",
        "scoring_assurance": "recomputed",
    }


def test_outcome_repr_shows_no_values(main: Path, tmp_path: Path) -> None:
    recipient = recipient_for(main / "evidence", main / "trust", tmp_path)
    outcome = verify_evidence_pack(main / "evidence", recipient)
    assert repr(outcome) == ("VerificationOutcome(status=0, replay_status='completed', error=None)")
    assert "sha256:" in repr(recipient)
    assert repr(VerificationOutcome(4, REPLAY_NOT_STARTED, None)) == (
        "VerificationOutcome(status=4, replay_status='not_started', error=None)"
    )


# ---------------------------------------------------------------------------
# Trust inputs: the profile's closed schema, paths, input checks in order

GOOD_PROFILE: dict[str, Any] = json.loads(
    (pack_folder(MAIN) / "trust" / "trust-inputs.json").read_bytes()
)


def _mutated(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(GOOD_PROFILE))
    node = document
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return document


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "code", "field"),
    [
        (("format",), "invarlock/trust-inputs-v1", "invalid_constant", "trust_profile.format"),
        (("kind",), "native", "invalid_constant", "trust_profile.kind"),
        (("note",), "x", "unknown_field", "trust_profile"),
        (("verifier",), _DELETE, "missing_field", "trust_profile"),
        (("policy",), "policy.json", "invalid_type", "trust_profile.policy"),
        (("policy", "sha256"), "x", "unknown_field", "trust_profile.policy"),
        (("anchors", "request_digest"), _DELETE, "missing_field", "trust_profile.anchors"),
        (("policy", "path"), "/etc/policy.json", "invalid_path", "trust_profile.policy.path"),
        (("policy", "path"), "../policy.json", "invalid_path", "trust_profile.policy.path"),
        (
            ("anchors", "baseline_run_digest"),
            "sha256:" + "A" * 64,
            "invalid_digest",
            "trust_profile.anchors.baseline_run_digest",
        ),
        (
            ("anchors", "evidence_signer_fingerprint"),
            None,
            "invalid_digest",
            "trust_profile.anchors.evidence_signer_fingerprint",
        ),
        (
            ("verifier", "identity"),
            "-leading-dash",
            "invalid_identity",
            "trust_profile.verifier.identity",
        ),
        (
            ("verifier", "signing_key_path"),
            "keys//verifier.pem",
            "invalid_path",
            "trust_profile.verifier.signing_key_path",
        ),
    ],
)
def test_trust_profile_schema(path: tuple[str, ...], value: Any, code: str, field: str) -> None:
    document = _mutated(path, value)
    with pytest.raises(TrustInputError) as caught:
        parse_trust_profile(document)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert not TRUST_SCHEMA.is_valid(document)


def test_trust_profile_must_be_an_object() -> None:
    with pytest.raises(TrustInputError) as caught:
        parse_trust_profile([])
    assert caught.value.code == "not_object"
    assert TRUST_SCHEMA.is_valid(GOOD_PROFILE)


@pytest.mark.parametrize(
    ("value", "safe"),
    [
        ("policy.json", True),
        ("a/b-c_d.e/f.pem", True),
        ("x" * 512, True),
        ("x" * 513, False),
        ("", False),
        ("/abs", False),
        ("dir/", False),
        ("a//b", False),
        ("./a", False),
        ("a/../b", False),
        ("a/.", False),
        ("sp ace", False),
        ("ü", False),
        (7, False),
    ],
)
def test_safe_relative_paths(value: object, safe: bool) -> None:
    assert is_safe_relative_path(value) is safe
    if isinstance(value, str):
        document = _mutated(("policy", "path"), value)
        assert TRUST_SCHEMA.is_valid(document) is safe


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("recipient-qa", True),
        ("org:team/qa.v1_2", True),
        ("a" * 256, True),
        ("a" * 257, False),
        ("", False),
        (".hidden", False),
        ("has space", False),
        ("ünicode", False),
        (None, False),
    ],
)
def test_identity_pattern(value: object, valid: bool) -> None:
    assert is_identity(value) is valid
    if isinstance(value, str):
        assert TRUST_SCHEMA.is_valid(_mutated(("verifier", "identity"), value)) is valid


def _write_profile(directory: Path, document: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trust-inputs.json"
    path.write_text(json.dumps(document, indent=2), "utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"\xef\xbb\xbf{}", "not_utf8"),
        (b'{"a": 1, "a": 2}', "duplicate_key"),
        (b"{", "invalid_json"),
        (b"[]", "not_object"),
        (b" " * (MAX_PROFILE_BYTES + 1), "too_large"),
    ],
)
def test_trust_profile_file_refusals(tmp_path: Path, content: bytes, code: str) -> None:
    path = tmp_path / "profile.json"
    path.write_bytes(content)
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile(path)
    assert (caught.value.code, caught.value.field) == (code, "trust_profile")


def test_trust_profile_file_must_be_regular(tmp_path: Path) -> None:
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile(tmp_path / "missing.json")
    assert caught.value.code == "not_found"
    real = _write_profile(tmp_path / "real", GOOD_PROFILE)
    (tmp_path / "link.json").symlink_to(real)
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile(tmp_path / "link.json")
    assert caught.value.code == "not_regular_file"
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile(tmp_path)
    assert caught.value.code == "not_regular_file"
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile("/")
    assert caught.value.code == "not_regular_file"
    with pytest.raises(TrustInputError) as caught:
        read_trust_profile(tmp_path / "no-such-directory" / "profile.json")
    assert caught.value.code == "not_found"


def test_trust_profile_digest_ignores_formatting(main: Path) -> None:
    pretty = read_trust_profile(main / "trust" / "trust-inputs.json")
    compact = main / "trust" / "compact.json"
    compact.write_bytes(encode_invarlock(GOOD_PROFILE))
    assert read_trust_profile(compact).trust_profile_digest == pretty.trust_profile_digest
    assert repr(pretty) == "TrustInputs(mode='trust_profile')"


def test_profile_paths_are_opened_without_following_symlinks(main: Path, tmp_path: Path) -> None:
    trust = main / "trust"
    (trust / "keys").mkdir()
    shutil.move(trust / "verifier.pem", trust / "keys" / "verifier.pem")
    (trust / "linked").symlink_to(trust / "keys", target_is_directory=True)
    profile = _write_profile(
        trust / "nested", _mutated(("verifier", "signing_key_path"), "../keys/verifier.pem")
    )
    with pytest.raises(TrustInputError):
        read_trust_profile(profile)
    for key_path, code in (
        ("keys/verifier.pem", None),
        ("linked/verifier.pem", "not_regular_file"),
        ("keys/missing.pem", "not_found"),
        ("missing/verifier.pem", "not_found"),
        ("keys/verifier.pem/x", "not_regular_file"),
        ("keys", "not_regular_file"),
    ):
        path = _write_profile(trust, _mutated(("verifier", "signing_key_path"), key_path))
        trust_inputs = read_trust_profile(path)
        if code is None:
            check_verification_inputs(
                trust_inputs,
                evidence=main / "evidence",
                receipt=tmp_path / "r.json",
                max_bootstrap_draws=0,
            )
            continue
        with pytest.raises(TrustInputError) as caught:
            check_verification_inputs(
                trust_inputs,
                evidence=main / "evidence",
                receipt=tmp_path / "r.json",
                max_bootstrap_draws=0,
            )
        assert (caught.value.code, caught.value.field) == (code, "verifier_signing_key")
    (trust / "policy-link.json").symlink_to(trust / "policy.json")
    path = _write_profile(trust, _mutated(("policy", "path"), "policy-link.json"))
    with pytest.raises(TrustInputError) as caught:
        check_verification_inputs(
            read_trust_profile(path),
            evidence=main / "evidence",
            receipt=tmp_path / "r.json",
            max_bootstrap_draws=0,
        )
    assert (caught.value.code, caught.value.field) == ("not_regular_file", "policy")


def _explicit(main: Path, **overrides: Any) -> TrustInputs:
    profile = GOOD_PROFILE["anchors"]
    values: dict[str, Any] = {
        "policy": main / "trust" / "policy.json",
        "expected_baseline_run": profile["baseline_run_digest"],
        "expected_subject_run": profile["subject_run_digest"],
        "expected_request_digest": profile["request_digest"],
        "expected_signer": profile["evidence_signer_fingerprint"],
        "verifier_signing_key": main / "trust" / "verifier.pem",
        "verifier_identity": "recipient-qa",
    }
    values.update(overrides)
    return explicit_trust_inputs(**values)


@pytest.mark.parametrize(
    ("overrides", "receipt", "budget", "code", "field"),
    [
        (
            {"expected_baseline_run": None},
            "r.json",
            0,
            "missing_input",
            "anchors.baseline_run_digest",
        ),
        (
            {"expected_subject_run": "SHA256:" + "a" * 64},
            "r.json",
            0,
            "invalid_digest",
            "anchors.subject_run_digest",
        ),
        (
            {"expected_signer": CANARY, "verifier_identity": CANARY + " x"},
            None,
            -1,
            "invalid_digest",
            "anchors.evidence_signer_fingerprint",
        ),
        ({"verifier_identity": None}, "r.json", 0, "missing_input", "verifier_identity"),
        ({"verifier_identity": CANARY + " x"}, None, -1, "invalid_identity", "verifier_identity"),
        ({}, None, -1, "missing_input", "receipt"),
        ({"policy": None}, "r.json", 0, "missing_input", "policy"),
        ({"verifier_signing_key": None}, "r.json", 0, "missing_input", "verifier_signing_key"),
        ({}, "r.json", -1, "invalid_budget", "max_bootstrap_draws"),
        ({}, "r.json", True, "invalid_budget", "max_bootstrap_draws"),
        ({}, "evidence/r.json", 0, "inside_pack", "receipt"),
        ({}, "evidence/../evidence/r.json", 0, "inside_pack", "receipt"),
        ({}, "evidence", 0, "inside_pack", "receipt"),
        ({}, "out/", 0, "invalid_destination", "receipt"),
        ({}, "..", 0, "invalid_destination", "receipt"),
        ({"policy": "evidence/inputs/policy.json"}, "r.json", 0, "inside_pack", "policy"),
        (
            {"verifier_signing_key": "evidence/manifest.json"},
            "r.json",
            0,
            "inside_pack",
            "verifier_signing_key",
        ),
        ({"policy": "missing.json"}, "r.json", 0, "not_found", "policy"),
        ({"policy": "trust"}, "r.json", 0, "not_regular_file", "policy"),
        ({"policy": "trust/trust-inputs.json"}, "r.json", 0, "unknown_field", "policy"),
    ],
)
def test_input_checks_in_order(
    main: Path,
    monkeypatch: pytest.MonkeyPatch,
    overrides: dict[str, Any],
    receipt: str | None,
    budget: object,
    code: str,
    field: str,
) -> None:
    monkeypatch.chdir(main)
    trust = _explicit(main, **overrides)
    with pytest.raises((TrustInputError, ComparisonPolicyError)) as caught:
        check_verification_inputs(
            trust, evidence="evidence", receipt=receipt, max_bootstrap_draws=budget
        )
    assert (caught.value.code, caught.value.field) == (code, field)
    assert CANARY not in str(caught.value) + repr(caught.value)


def test_receipt_through_a_symlink_into_the_pack_is_refused(main: Path) -> None:
    (main / "alias").symlink_to(main / "evidence", target_is_directory=True)
    with pytest.raises(TrustInputError) as caught:
        check_verification_inputs(
            _explicit(main),
            evidence=main / "evidence",
            receipt=main / "alias" / "r.json",
            max_bootstrap_draws=0,
        )
    assert (caught.value.code, caught.value.field) == ("inside_pack", "receipt")


def test_profile_inside_the_pack_is_refused(main: Path, tmp_path: Path) -> None:
    evidence = main / "evidence"
    inner = evidence / "inputs"
    for name in ("trust-inputs.json", "policy.json", "verifier.pem"):
        shutil.copyfile(main / "trust" / name, inner / name)
    with pytest.raises(TrustInputError) as caught:
        check_verification_inputs(
            read_trust_profile(inner / "trust-inputs.json"),
            evidence=evidence,
            receipt=tmp_path / "r.json",
            max_bootstrap_draws=0,
        )
    assert (caught.value.code, caught.value.field) == ("inside_pack", "trust_profile")


def test_invalid_policy_and_key_files(main: Path, tmp_path: Path) -> None:
    bad_policy = tmp_path / "policy.json"
    bad_policy.write_text('{"format": "invarlock/comparison-policy-v1", "metrics": []}', "utf-8")
    with pytest.raises(ComparisonPolicyError) as caught:
        check_verification_inputs(
            _explicit(main, policy=bad_policy),
            evidence=main / "evidence",
            receipt=tmp_path / "r.json",
            max_bootstrap_draws=0,
        )
    assert caught.value.field is not None
    assert caught.value.field.startswith("policy")
    public = tmp_path / "public.pem"
    shutil.copyfile(KEYS / "verifier" / "public.pem", public)
    with pytest.raises(SigningKeyError) as key_error:
        check_verification_inputs(
            _explicit(main, verifier_signing_key=public),
            evidence=main / "evidence",
            receipt=tmp_path / "r.json",
            max_bootstrap_draws=0,
        )
    assert (key_error.value.code, key_error.value.field) == ("invalid_pem", "verifier_signing_key")
    big = tmp_path / "big.pem"
    big.write_bytes(b"x" * 70_000)
    with pytest.raises(TrustInputError) as too_large:
        check_verification_inputs(
            _explicit(main, verifier_signing_key=big),
            evidence=main / "evidence",
            receipt=tmp_path / "r.json",
            max_bootstrap_draws=0,
        )
    assert (too_large.value.code, too_large.value.field) == ("too_large", "verifier_signing_key")


def test_explicit_inputs_load(main: Path, tmp_path: Path) -> None:
    recipient = check_verification_inputs(
        _explicit(main),
        evidence=main / "evidence",
        receipt=None,
        max_bootstrap_draws=None,
        require_receipt=False,
    )
    assert recipient.receipt is None
    assert recipient.max_bootstrap_draws is None
    assert recipient.trust_profile_digest is None
    assert (
        recipient.verifier_fingerprint
        == json.loads((KEYS / "keys.json").read_bytes())["verifier"]["fingerprint"]
    )
    assert repr(_explicit(main)) == "TrustInputs(mode='explicit')"
    with pytest.raises(TrustInputError) as caught:
        check_verification_inputs(
            object(),  # type: ignore[arg-type]
            evidence=main / "evidence",
            receipt=None,
            max_bootstrap_draws=None,
        )
    assert caught.value.code == "invalid_type"


def test_canary_never_reaches_trust_errors(tmp_path: Path) -> None:
    directory = tmp_path / CANARY
    directory.mkdir()
    texts: list[str] = []
    for document in (
        _mutated(("verifier", "identity"), CANARY + " !"),
        _mutated(("policy", "path"), f"/{CANARY}"),
        _mutated((CANARY,), CANARY),
        _mutated(("anchors", "request_digest"), CANARY),
    ):
        path = _write_profile(directory, document)
        with pytest.raises(TrustInputError) as caught:
            read_trust_profile(path)
        texts += [str(caught.value), repr(caught.value)]
    with pytest.raises(TrustInputError) as missing:
        read_trust_profile(directory / f"{CANARY}.json")
    texts += [str(missing.value), repr(missing.value)]
    assert all(CANARY not in text for text in texts)
    assert os.fspath(tmp_path) not in " ".join(texts)
