"""Regenerate ``invarlock/receipts.json`` on the regenerated packs (invarlock venv).

Runs after ``invarlock_verify.py``. A receipt case checks a signed verification receipt
against a pack, a policy and the caller's anchors with the reference's public
``invarlock.engine.verify_signed_verification_receipt``. For every case on a regenerated
pack's published evidence whose receipt ``verify.json`` re-issued under
``packs/alt-<seed>-<name>/verify/``, it replays the case on the shared files (the outcome
must be the case's own), then maps every digest of the case's input to the digest at the
same place of the regenerated pack and receipt (the runs, request, signer, trust profile;
a deliberately wrong anchor or fingerprint gets a fresh digest, so it stays wrong) and
asks the reference again; a case whose outcome would change is copied unchanged.
The forged and rejection receipts (edits of the shared pack's receipts) are copied.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from invarlock.engine import verify_signed_verification_receipt
from invarlock_verify import moved_packs
from renaming import DIGEST, DigestRenamer


def check(folder: Path, given: dict[str, Any]) -> dict[str, Any]:
    """Run one receipt case with the files under ``folder``; return its expected output.

    The paths are made absolute: the reference refuses a path with a parent traversal.
    """
    folder = folder.resolve()
    result = verify_signed_verification_receipt(
        folder / given["receipt"],
        folder / given["pack_dir"],
        policy_path=folder / given["policy_path"],
        expected_run_digests=given["expected_run_digests"],
        expected_request_digest=given["expected_request_digest"],
        expected_pack_signer_fingerprint=given["expected_pack_signer_fingerprint"],
        expected_verifier_identity=given["expected_verifier_identity"],
        expected_verifier_fingerprint=given["expected_verifier_fingerprint"],
        expected_trust_profile_digest=given["expected_trust_profile_digest"],
    )
    return {
        "ok": result.ok,
        "signed": result.signed,
        "verifier_fingerprint": result.verifier_fingerprint,
        "errors": list(result.errors),
    }


def align(old: Any, new: Any, aligned: dict[str, str]) -> None:
    """Record, for every digest of ``old``, the digest at the same place of ``new``."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key, item in old.items():
            if key in new:
                align(item, new[key], aligned)
    elif isinstance(old, list) and isinstance(new, list):
        for one, other in zip(old, new, strict=False):
            align(one, other, aligned)
    elif isinstance(old, str) and isinstance(new, str) and DIGEST.fullmatch(old):
        aligned.setdefault(old, new)


def remap(value: Any, pairs: dict[str, str], renamer: DigestRenamer, roots: tuple[str, str]) -> Any:
    """Return a case input with digests mapped (``pairs``, else renamed) and paths moved."""
    if isinstance(value, dict):
        return {key: remap(item, pairs, renamer, roots) for key, item in value.items()}
    if isinstance(value, str) and DIGEST.fullmatch(value):
        return pairs.get(value) or renamer.digest(value)
    if isinstance(value, str) and value.startswith(f"{roots[0]}/"):
        return value.replace(roots[0], roots[1], 1)
    return value


def regenerate_receipts(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``invarlock/receipts.json``; return (regenerated, copied) case counts."""
    folder = source / "invarlock"
    moved = moved_packs(source, output)
    renamer = DigestRenamer(seed)
    document = json.loads((folder / "receipts.json").read_text("utf-8"))
    new_cases, regenerated, copied = [], 0, 0
    for case in document["cases"]:
        given, expected = case["input"], case["expected"]
        root = "/".join(given["receipt"].split("/")[:2])
        new_root, aligned = moved.get(root, (root, {}))
        new_receipt = given["receipt"].replace(root, new_root, 1)
        if (
            root not in moved
            or given["pack_dir"] != f"{root}/evidence"
            or not (output / "invarlock" / new_receipt).is_file()
        ):
            new_cases.append(case)
            copied += 1
            continue
        if check(folder, given) != expected:
            raise SystemExit(f"invarlock/receipts.json {case['name']}: not reproduced")
        pairs = dict(aligned)
        old_document = json.loads((folder / given["receipt"]).read_text("utf-8"))
        new_document = json.loads((output / "invarlock" / new_receipt).read_text("utf-8"))
        align(old_document, new_document, pairs)

        new_input = remap(given, pairs, renamer, (root, new_root))
        renewed = check(output / "invarlock", new_input)
        same = (renewed["ok"], renewed["signed"], renewed["errors"]) == (
            expected["ok"],
            expected["signed"],
            expected["errors"],
        )
        if not same:
            new_cases.append(case)
            copied += 1
            continue
        new_cases.append({"name": case["name"], "input": new_input, "expected": renewed})
        regenerated += 1
    generator = dict(document.get("generator") or {})
    generator.update({"tool": "scripts/vectors/invarlock_receipts.py", "seed": seed})
    regenerated_document = {**document, "generator": generator, "cases": new_cases}
    (output / "invarlock" / "receipts.json").write_text(
        json.dumps(regenerated_document, indent=1) + "\n", "utf-8"
    )
    return regenerated, copied
