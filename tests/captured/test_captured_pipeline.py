"""The library pipelines: ``evaluate_request`` / ``preflight_request`` and ``verify_with_receipt``.

They are what ``sealeval evaluate`` and ``sealeval verify`` (and ``bench/``,
``scripts/interop``) run: the vector packs are rebuilt byte for byte through
the library alone, the preflight writes nothing, refusals carry closed codes,
and verification publishes the receipt the reference would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.evaluate import (
    PREFLIGHT_FORMAT,
    RESULT_FORMAT,
    evaluate_request,
    failure_document,
    preflight_request,
)
from sealeval.captured.trust import read_trust_profile
from sealeval.captured.verification import REASONS, verify_with_receipt
from sealeval.errors import SealevalError
from support.vectors import cases, pack_folder, tree_files, vectors_dir, writable_copy

V = vectors_dir() / "invarlock"
SIGNER = V / "keys" / "evidence-signer" / "private.pem"
CANARY = "PIPELINE-CANARY-4411"


@pytest.fixture
def inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("case", cases("invarlock/packs.json"))
def test_the_library_rebuilds_every_vector_pack(case: dict[str, Any], inside: Path) -> None:
    expected = case["expected"]
    pack = V / Path(case["input"]["request_dir"]).parent  # the case names its request
    workspace = writable_copy(pack, inside / case["name"])
    request = workspace / "request" / "request.yaml"
    os.chdir(request.parent)  # overrides are relative to the caller's directory, as on the CLI
    command = case["input"]["command"]
    unsigned = "--unsigned" in command
    key = None if unsigned else SIGNER
    overrides = {
        name: command[command.index(option) + 1]
        for option, name in (("--output", "output"), ("--request-root", "request_root"))
        if option in command
    }
    checked = preflight_request(request, signing_key=key, unsigned=unsigned, overrides=overrides)
    reference = expected["evaluate_preflight"]["stdout_json"]
    document = dict(checked.document)
    assert document["format_version"] == PREFLIGHT_FORMAT
    assert reference["output"].endswith("/" + document.pop("output"))
    assert document == {key: value for key, value in reference.items() if key != "output"}
    assert checked.report is None
    assert checked.published is None
    assert not list(request.parent.glob("*evidence*"))  # a preflight writes nothing
    evaluation = evaluate_request(request, signing_key=key, unsigned=unsigned, overrides=overrides)
    result = dict(evaluation.document)
    assert result["format_version"] == RESULT_FORMAT
    evidence = result.pop("evidence")
    assert expected["evaluate"]["stdout_json"]["evidence"].endswith("/" + evidence)
    assert result == {
        key: value
        for key, value in expected["evaluate"]["stdout_json"].items()
        if key != "evidence"
    }
    assert evaluation.report is not None
    assert evaluation.report.decision == result["decision"]
    assert evaluation.published is not None
    published = request.parent / evidence
    assert evaluation.published.path.resolve() == published.resolve()
    assert tree_files(published) == tree_files(V / expected["evidence_dir"])
    # no staging folder or lock file is left beside the pack
    assert not [p for p in published.parent.iterdir() if p.name.startswith(".captured-evidence")]


def test_refusals_are_closed_codes_and_publish_nothing(inside: Path) -> None:
    workspace = writable_copy(pack_folder("text-20-exact-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    with pytest.raises(SealevalError) as neither:
        evaluate_request(request)  # neither a key nor unsigned
    with pytest.raises(SealevalError) as both:
        evaluate_request(request, signing_key=SIGNER, unsigned=True)
    (request.parent / CANARY).mkdir()
    os.chdir(request.parent)  # overrides are relative to the caller's directory
    with pytest.raises(SealevalError) as exists:
        evaluate_request(request, unsigned=True, overrides={"output": CANARY})
    assert exists.value.code == "output_exists"
    for caught in (neither, both, exists):
        assert CANARY not in str(caught.value)
    assert (neither.value.code, both.value.code) == (
        "signing_key_required",
        "signing_mode_conflict",
    )
    assert tree_files(request.parent / CANARY) == {}
    failure = failure_document(
        preflight=True, requested_authentication="signed", error=str(exists.value)
    )
    assert failure["ok"] is False
    assert failure["errors"] == [str(exists.value)]
    assert failure["format_version"] == PREFLIGHT_FORMAT
    assert failure_document(preflight=False, requested_authentication="signed", error="x")[
        "format_version"
    ] == (RESULT_FORMAT)


def test_verify_with_receipt_publishes_the_reference_receipt(inside: Path) -> None:
    cases = json.loads((V / "verify.json").read_bytes())["cases"]
    case = next(
        c
        for c in cases
        if c["name"].startswith("text-20-exact-signed--")
        and c["input"]["pack_dir"].endswith("/evidence")
        and "--trust-profile" in c["input"]["command"]
        and c["expected"].get("receipt_file")
        and "--policy" not in c["input"]["command"]
    )
    # The pack the case names (a regenerated tree publishes it elsewhere).
    workspace = writable_copy(V / Path(case["input"]["pack_dir"]).parent, inside / "pack")
    command = case["input"]["command"]
    os.chdir(workspace)
    trust = read_trust_profile(command[command.index("--trust-profile") + 1])
    receipt = workspace / command[command.index("--receipt") + 1]
    done = verify_with_receipt(command[1], trust, receipt=receipt)
    assert done.status == case["expected"]["exit_code"]
    assert done.receipt == receipt
    assert receipt.read_bytes() == (V / case["expected"]["receipt_file"]).read_bytes()
    again = verify_with_receipt(command[1], trust, receipt=receipt)
    assert again.status == 2
    assert again.reason == "receipt_publication_failed"
    assert again.reason in REASONS
    assert again.outcome is None
    assert again.error is not None
    assert again.error.code == "publication_failed"
    inside_pack = verify_with_receipt(command[1], trust, receipt=Path(command[1]) / "r.json")
    assert (inside_pack.status, inside_pack.reason) == (2, "invalid_verification_inputs")


def test_staged_and_read_packs_share_the_manifest_facts(inside: Path) -> None:
    """One mixin answers the manifest's facts for a staged pack and for a read pack."""
    from sealeval.captured.pack import StagedPack  # noqa: PLC0415
    from sealeval.captured.pack_reader import (  # noqa: PLC0415
        EvidencePack,
        ManifestFacts,
        read_evidence_pack,
    )

    facts = ("authentication", "signed", "signing_key_fingerprint", "comparison_id", "digest")
    for cls in (StagedPack, EvidencePack):
        assert issubclass(cls, ManifestFacts)
        assert not set(facts) & set(vars(cls)), "a fact is defined twice"
    workspace = writable_copy(pack_folder("text-20-exact-signed"), inside / "pack")
    os.chdir(workspace / "request")
    evaluation = evaluate_request("request.yaml", signing_key=SIGNER)
    published = evaluation.published
    assert published is not None
    pack = read_evidence_pack(published.path)
    manifest = pack.manifest
    assert pack.pack_manifest_digest == pack.manifest_digest == published.pack_manifest_digest
    assert pack.authentication == manifest.authentication == published.authentication
    assert pack.signed is True
    assert pack.signing_key_fingerprint == published.signing_key_fingerprint
    assert pack.comparison_id == published.comparison_id
    assert pack.request_digest == published.request_digest
    for role in ("baseline", "subject", "policy"):
        assert pack.digest(role) == manifest.files[role].digest
    assert pack.digest("baseline") == published.baseline_run_digest
