"""Tamper rules for the evidence packs of ``invarlock/verify.json`` (no reference import).

The shared vectors hold 13 tampered copies of the main pack's published evidence
(``packs/<main>/tampered/<name>/``), made by the reference's generator editing the pack.
Each tamper kind has ONE rule here, a small function that edits a copy of a published pack
(``RULES``: variant name -> rule). ``invarlock_verify.py`` first **replays** every rule on
the shared untampered pack and stops unless the result is the shared variant byte for byte
(``replay_rules``), then applies the rules to the regenerated pack
(``packs/alt-<seed>-<main>/tampered/``, ``write_variants``) and asks ``invarlock verify``
for the new expected outcome. ``RECEIPT_RULES`` does the same for the forged receipt of
``receipts.json`` (an edit of the pack's main receipt).

A re-signature is an Ed25519 signature over the manifest's bytes with the fixed test key
the variant names (``keys/evidence-signer`` or ``keys/other-signer``); a fingerprint is
the SHA-256 of the raw public key (both checked by the replay). The repository stores the
``symlinked-payload`` variant's link as a plain file holding its target (git keeps no
link here); ``restore_links`` turns it back into a link before the reference reads it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from renaming import canonical_text

#: The members of a published pack the rules edit.
MANIFEST = "manifest.json"
SIGNATURE = "manifest.signature.json"
LEDGER = "checksums.sha256"
#: variant -> the member the repository stores as a plain file holding a link's target.
LINKS = {"symlinked-payload": "request.json"}
#: The decision and reason a lying report claims instead of ``pass``.
LIE = ("regression", "lower interval bound exceeds allowed regression")


@dataclass(frozen=True)
class Keys:
    """The fixed test keys a rule may sign with (``keys/*/private.pem`` of the vector tree)."""

    signer: Path
    other: Path

    @classmethod
    def of(cls, vectors: Path) -> Keys:
        """Return the keys of the invarlock vector folder ``vectors``."""
        return cls(
            signer=vectors / "keys" / "evidence-signer" / "private.pem",
            other=vectors / "keys" / "other-signer" / "private.pem",
        )


def read(pack: Path, member: str) -> Any:
    """Return the JSON document ``member`` of ``pack``."""
    return json.loads((pack / member).read_bytes())


def write(pack: Path, member: str, document: Any) -> bytes:
    """Write ``document`` as canonical text to ``member`` of ``pack``; return the bytes."""
    data = canonical_text(document).encode("utf-8")
    (pack / member).write_bytes(data)
    return data


def indented(document: Any) -> bytes:
    """Return the non-canonical form the generator used (one-space indent, no newline)."""
    return json.dumps(document, indent=1, ensure_ascii=False).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Return the hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sign(pack: Path, key_path: Path) -> None:
    """Re-sign ``pack``'s manifest bytes with ``key_path``; keep the envelope's other fields."""
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise SystemExit(f"{key_path.name}: not an Ed25519 key")
    public = key.public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    envelope = read(pack, SIGNATURE)
    envelope["public_key"]["value"] = pem.decode("ascii")
    envelope["signature"]["value"] = base64.b64encode(
        key.sign((pack / MANIFEST).read_bytes())
    ).decode("ascii")
    envelope["signing_key_fingerprint"] = "sha256:" + sha256_hex(raw)
    write(pack, SIGNATURE, envelope)


def fingerprint(key_path: Path) -> str:
    """Return the fingerprint of the Ed25519 private key file ``key_path``."""
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise SystemExit(f"{key_path.name}: not an Ed25519 key")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "sha256:" + sha256_hex(raw)


def member_of(pack: Path, role: str) -> str:
    """Return the path the manifest gives the payload of ``role``."""
    path: str = read(pack, MANIFEST)["files"][role]["path"]
    return path


# ---------------------------------------------------------------------------
# One rule per tamper kind: each edits the pack copy ``pack`` in place.


def edited_subject_record(pack: Path, _keys: Keys) -> None:
    """One subject output changed (the first record's text output gains a prefix)."""
    member = member_of(pack, "subject")
    run = read(pack, member)
    output = run["records"][0]["output"]
    if not isinstance(output, str):
        raise SystemExit("edited-subject-record: the first subject output is not text")
    run["records"][0]["output"] = f"tampered {output}"
    write(pack, member, run)


def extra_file(pack: Path, _keys: Keys) -> None:
    """Add an unknown file at the pack root."""
    (pack / "notes.txt").write_bytes(b"hello\n")


def extra_directory(pack: Path, _keys: Keys) -> None:
    """Add an unknown directory beside the runs (with a file in it, so git keeps it)."""
    folder = pack / Path(member_of(pack, "subject")).parent / "more"
    folder.mkdir()
    (folder / "keep.txt").write_bytes(b"kept so that version control retains the directory\n")


def corrupted_signature(pack: Path, _keys: Keys) -> None:
    """Flip the lowest bit of the signature's first byte."""
    envelope = read(pack, SIGNATURE)
    raw = bytearray(base64.b64decode(envelope["signature"]["value"], validate=True))
    raw[0] ^= 0x01
    envelope["signature"]["value"] = base64.b64encode(bytes(raw)).decode("ascii")
    write(pack, SIGNATURE, envelope)


def resigned_lying_report(pack: Path, keys: Keys) -> None:
    """Rewrite the stored report's pass as a regression and rebind and re-sign the pack.

    The ledger line and the manifest's digests follow the new report, and the same signer
    key signs the manifest again: only a replay detects it.
    """
    member = member_of(pack, "report")
    report = read(pack, member)
    if report["decision"] != "pass":
        raise SystemExit("resigned-lying-report: the pack's decision is not pass")
    report["decision"] = LIE[0]
    for metric in report["metrics"]:
        if metric["decision"] == "pass":
            metric["decision"] = LIE[0]
            metric["reasons"] = [LIE[1]]
    digest = sha256_hex(write(pack, member, report))
    ledger = []
    for line in (pack / LEDGER).read_text("utf-8").splitlines():
        old, name = line.split("  ", 1)
        ledger.append(f"{digest if name == member else old}  {name}\n")
    ledger_bytes = "".join(ledger).encode("utf-8")
    (pack / LEDGER).write_bytes(ledger_bytes)
    manifest = read(pack, MANIFEST)
    manifest["files"]["report"]["digest"] = f"sha256:{digest}"
    manifest["checksums_sha256_digest"] = sha256_hex(ledger_bytes)
    write(pack, MANIFEST, manifest)
    sign(pack, keys.signer)


def resigned_by_other_key(pack: Path, keys: Keys) -> None:
    """Re-sign the pack (no content change) with a key that is not the expected signer."""
    manifest = read(pack, MANIFEST)
    manifest["signing_key_fingerprint"] = fingerprint(keys.other)
    write(pack, MANIFEST, manifest)
    sign(pack, keys.other)


def missing_subject_file(pack: Path, _keys: Keys) -> None:
    """Delete the subject run."""
    (pack / member_of(pack, "subject")).unlink()


def missing_signature_file(pack: Path, _keys: Keys) -> None:
    """Delete the signature while the manifest says signed."""
    (pack / SIGNATURE).unlink()


def noncanonical_manifest(pack: Path, _keys: Keys) -> None:
    """Re-serialize the manifest with indentation."""
    (pack / MANIFEST).write_bytes(indented(read(pack, MANIFEST)))


def noncanonical_policy_payload(pack: Path, _keys: Keys) -> None:
    """Re-serialize the policy with indentation and update the manifest's digest of it.

    The signature is now stale; the ledger is untouched.
    """
    member = member_of(pack, "policy")
    data = indented(read(pack, member))
    (pack / member).write_bytes(data)
    manifest = read(pack, MANIFEST)
    manifest["files"]["policy"]["digest"] = "sha256:" + sha256_hex(data)
    write(pack, MANIFEST, manifest)


def ledger_whitespace(pack: Path, _keys: Keys) -> None:
    """Add a trailing space to the request's ledger line."""
    request = member_of(pack, "request")
    lines = (pack / LEDGER).read_text("utf-8").splitlines()
    edited = [f"{line} " if line.split("  ", 1)[1] == request else line for line in lines]
    if edited == lines:
        raise SystemExit("ledger-whitespace: no ledger line names the request")
    (pack / LEDGER).write_bytes("".join(f"{line}\n" for line in edited).encode("utf-8"))


def unknown_manifest_field(pack: Path, _keys: Keys) -> None:
    """Add an unknown top-level field to the manifest (not re-signed)."""
    manifest = read(pack, MANIFEST)
    manifest["note"] = "x"
    write(pack, MANIFEST, manifest)


def symlinked_payload(pack: Path, _keys: Keys) -> None:
    """Replace the request by a symlink to it, moved beside the runs."""
    member = member_of(pack, "request")
    target = (Path(member_of(pack, "subject")).parent / "request-real.json").as_posix()
    (pack / member).rename(pack / target)
    (pack / member).symlink_to(target)


#: variant name -> its rule (the shared variants' folder names).
RULES: dict[str, Callable[[Path, Keys], None]] = {
    "edited-subject-record": edited_subject_record,
    "extra-file": extra_file,
    "extra-directory": extra_directory,
    "corrupted-signature": corrupted_signature,
    "resigned-lying-report": resigned_lying_report,
    "resigned-by-other-key": resigned_by_other_key,
    "missing-subject-file": missing_subject_file,
    "missing-signature-file": missing_signature_file,
    "noncanonical-manifest": noncanonical_manifest,
    "noncanonical-policy-payload": noncanonical_policy_payload,
    "ledger-whitespace": ledger_whitespace,
    "unknown-manifest-field": unknown_manifest_field,
    "symlinked-payload": symlinked_payload,
}


def forged_statement(receipt: dict[str, Any]) -> dict[str, Any]:
    """Return a passing receipt whose statement claims status 7 (the signature left stale)."""
    if receipt["statement"]["verdict"]["verification_status"] != 0:
        raise SystemExit("forged-statement: the receipt does not state a pass")
    forged = json.loads(json.dumps(receipt))
    forged["statement"]["verdict"]["verification_status"] = 7
    return forged


#: forged receipt file -> (the receipt file it edits, the rule), both under ``verify/``.
RECEIPT_RULES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "forged-statement.receipt.json": ("trust-profile.receipt.json", forged_statement),
}


# ---------------------------------------------------------------------------
# Applying the rules, replaying them on the shared packs, storing links as git does


def normalize_modes(folder: Path) -> None:
    """Give ``folder`` the shared tree's modes (0644 files, 0755 folders; links untouched)."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def store_links(folder: Path) -> None:
    """Replace each symlink under ``folder`` by a plain file holding its target."""
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            target = str(path.readlink())
            path.unlink()
            path.write_text(target, "utf-8")
            path.chmod(0o644)


def restore_links(folder: Path) -> None:
    """Turn each stored link of a ``symlinked-payload`` variant under ``folder`` into a link."""
    for variant, member in LINKS.items():
        for candidate in sorted(folder.rglob(variant)):
            link = candidate / member
            if link.is_file() and not link.is_symlink():
                target = link.read_text("utf-8").strip()
                link.unlink()
                link.symlink_to(target)


def apply(name: str, evidence: Path, target: Path, keys: Keys) -> None:
    """Write variant ``name`` of the published pack ``evidence`` to ``target`` (links stored)."""
    shutil.copytree(evidence, target, symlinks=True)
    normalize_modes(target)
    RULES[name](target, keys)
    store_links(target)
    normalize_modes(target)


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Return every entry of ``folder``: file bytes, or None for a directory."""
    return {
        path.relative_to(folder).as_posix(): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


def replay_rules(shared_root: Path, keys: Keys) -> None:
    """Stop unless every rule turns the shared pack into its shared variant byte for byte."""
    variants = sorted(path.name for path in (shared_root / "tampered").iterdir())
    if variants != sorted(RULES):
        raise SystemExit(f"tamper variants without a rule: {sorted(set(variants) - set(RULES))}")
    scratch = Path(tempfile.mkdtemp(prefix="vectors-tamper-"))
    try:
        for name in variants:
            apply(name, shared_root / "evidence", scratch / name, keys)
            made, shared = snapshot(scratch / name), snapshot(shared_root / "tampered" / name)
            if made != shared:
                missed = sorted(key for key in {*made, *shared} if made.get(key) != shared.get(key))
                raise SystemExit(f"tamper rule {name} does not reproduce the variant: {missed}")
    finally:
        shutil.rmtree(scratch)


def replay_receipt_rules(shared_root: Path) -> None:
    """Stop unless every receipt rule turns the shared receipt into the shared forgery."""
    for forged, (original, rule) in RECEIPT_RULES.items():
        folder = shared_root / "verify"
        if not (folder / forged).is_file():
            continue
        made_bytes = canonical_text(rule(json.loads((folder / original).read_bytes())))
        if made_bytes.encode("utf-8") != (folder / forged).read_bytes():
            raise SystemExit(f"receipt rule {forged} does not reproduce the shared receipt")


def write_variants(new_root: Path, keys: Keys) -> None:
    """Write every variant of the regenerated pack ``new_root/evidence`` under ``tampered/``."""
    (new_root / "tampered").mkdir(mode=0o755)
    for name in sorted(RULES):
        apply(name, new_root / "evidence", new_root / "tampered" / name, keys)


def write_forged_receipts(shared_root: Path, new_root: Path) -> list[str]:
    """Write the forged receipts ``shared_root/verify/`` holds under ``new_root/verify/``.

    Each is made by its rule from the regenerated receipt it edits; return the names written.
    """
    written = []
    for forged, (original, rule) in RECEIPT_RULES.items():
        source = new_root / "verify" / original
        if (shared_root / "verify" / forged).is_file() and source.is_file():
            (new_root / "verify" / forged).write_text(
                canonical_text(rule(json.loads(source.read_bytes()))), "utf-8"
            )
            (new_root / "verify" / forged).chmod(0o644)
            written.append(forged)
    return written
