"""Pack workspaces shared by the verify, receipt and CLI tests.

Moved out of ``test_captured_verify.py`` so that no test module imports another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.pack_reader import EvidencePackError
from sealeval.captured.trust import (
    RecipientInputs,
    TrustInputError,
    check_verification_inputs,
    read_trust_profile,
)
from sealeval.captured.verify import (
    VerificationError,
)
from support.vectors import pack_folder, refuse_empty, vectors_dir, writable_copy

V = vectors_dir() / "invarlock"


MAIN = "text-20-exact-signed"


VERIFY_MESSAGES: dict[str, tuple[type[Exception], str, str]] = {
    "captured verification requires signed evidence": (
        VerificationError,
        "unsigned_evidence",
        "manifest.authentication",
    ),
    "captured evidence signer does not match expected anchor": (
        VerificationError,
        "signer_mismatch",
        "anchors.signer_fingerprint",
    ),
    "captured baseline differs from expected anchor": (
        VerificationError,
        "anchor_mismatch",
        "anchors.baseline_run_digest",
    ),
    "captured request differs from expected anchor": (
        VerificationError,
        "anchor_mismatch",
        "anchors.request_digest",
    ),
    "captured policy differs from expected anchor": (
        VerificationError,
        "anchor_mismatch",
        "anchors.policy_digest",
    ),
    "captured replay disagrees with stored comparison": (
        VerificationError,
        "replay_mismatch",
        "report",
    ),
    "local_work_budget_exceeded": (
        VerificationError,
        "local_work_budget_exceeded",
        "max_bootstrap_draws",
    ),
    "invalid verification inputs: destination must be outside the evidence pack": (
        TrustInputError,
        "inside_pack",
        "receipt",
    ),
    "--trust-profile cannot be mixed with --policy": (
        TrustInputError,
        "mixed_trust_inputs",
        "policy",
    ),
    "receipt_publication_failed": (Exception, "publication_failed", "receipt"),
    "captured subject binding is invalid": (EvidencePackError, "digest_mismatch", "subject"),
    "captured evidence inventory has an unknown entry": (
        EvidencePackError,
        "unknown_entry",
        "pack",
    ),
    "captured manifest signature is invalid": (
        EvidencePackError,
        "signature_invalid",
        "signature",
    ),
    "captured evidence file inventory is incomplete": (EvidencePackError, "missing_entry", "pack"),
    "captured manifest must be canonical JSON": (
        EvidencePackError,
        "not_canonical",
        "manifest.json",
    ),
    "captured checksum ledger binding is invalid": (
        EvidencePackError,
        "ledger_mismatch",
        "checksums.sha256",
    ),
    "captured contract is invalid: Additional properties are not allowed ('note' was unexpected)": (
        EvidencePackError,
        "unknown_field",
        "manifest",
    ),
    "captured inventory contains an unsafe entry": (EvidencePackError, "unsafe_entry", "pack"),
}


def private_load(relative: str) -> dict[str, Any]:
    """Read a vector file afresh: other tests must not be able to change what ours see."""
    document: dict[str, Any] = json.loads((vectors_dir() / relative).read_bytes())
    refuse_empty(relative, document)
    return document


def private_cases(relative: str) -> list[Any]:
    """One ``pytest.param`` per case (id ``<stem>-<name>``), on a private copy of the file."""
    stem = Path(relative).stem
    return [
        pytest.param(case, id=f"{stem}-{case['name']}") for case in private_load(relative)["cases"]
    ]


def restore_symlinks(directory: Path) -> None:
    """The repository stores the symlinked-payload variant's link as a plain file."""
    for candidate in directory.rglob("symlinked-payload"):
        link = candidate / "request.json"
        if link.is_file() and not link.is_symlink():
            target = link.read_text("utf-8").strip()
            link.unlink()
            link.symlink_to(target)


def pack_workspace(name: str, tmp_path: Path) -> Path:
    """Copy the pack of ``invarlock/packs.json`` case ``name`` into a writable tree.

    The whole pack folder is copied (evidence, request, trust dirs, tamper variants).
    """
    return _folder_workspace(pack_folder(name), tmp_path)


def pack_dir_workspace(pack_dir: str, tmp_path: Path) -> tuple[Path, Path]:
    """Copy the pack folder holding a vector case's ``pack_dir`` (``packs/<folder>/...``).

    Returns the writable copy of the folder and ``pack_dir``'s place inside it.
    """
    parts = Path(pack_dir).parts
    assert parts[:1] == ("packs",), "pack_dir outside packs/"
    assert len(parts) >= 2, "pack_dir names no pack folder"
    workspace = _folder_workspace(V.joinpath(*parts[:2]), tmp_path)
    return workspace, workspace.joinpath(*parts[2:])


def _folder_workspace(folder: Path, tmp_path: Path) -> Path:
    target = writable_copy(folder, tmp_path / folder.name)
    restore_symlinks(target)
    return target


def recipient_for(
    pack: Path, trust: Path, tmp_path: Path, *, budget: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS
) -> RecipientInputs:
    return check_verification_inputs(
        read_trust_profile(trust / "trust-inputs.json"),
        evidence=pack,
        receipt=tmp_path / "out" / "receipt.json",
        max_bootstrap_draws=budget,
    )
