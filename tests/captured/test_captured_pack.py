"""Evidence pack v2: byte-exact construction, publication, strict reading, keys and signatures."""

from __future__ import annotations

import base64
import ctypes
import dataclasses
import errno
import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from jsonschema import Draft202012Validator

import sealeval.captured.pack as pack_module
import sealeval.captured.pack_reader as reader_module
import sealeval.captured.pack_reader.scan as scan_module
import sealeval.captured.signing as signing_module
import sealeval.captured.staging as staging_module
from sealeval._fs import FileSystemError
from sealeval._fs import _write as fs_module
from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack import (
    STAGING_PREFIX,
    EvidencePackBuildError,
    PublishedPack,
    StagedPack,
    build_evidence_pack,
    prepare_pack,
    publish_pack,
)
from sealeval.captured.pack_reader import (
    REFERENCE_PACK_LIMITS,
    UNCAPPED_PACK_LIMITS,
    EvidencePack,
    EvidencePackError,
    check_report_document,
    checksum_ledger,
    parse_manifest,
    read_evidence_pack,
)
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.request import (
    CapturedRequest,
    NormalizedRequest,
    comparison_id,
    load_captured_request,
)
from sealeval.captured.run import read_run
from sealeval.captured.signing import (
    GeneratedKey,
    SignatureEnvelope,
    SigningKey,
    SigningKeyError,
    VerifyKey,
    generate_key_directory,
    generate_signing_key,
    key_fingerprint,
    load_signing_key,
    load_verify_key,
    parse_signature_envelope,
    signature_envelope,
    verify_signature_envelope,
)
from support.captured_request import oracle_loader
from support.refusals import rows_for
from support.vectors import (
    PROJECT_ROOT,
    cases,
    pack_case,
    pack_folder,
    tree_files,
    vectors_dir,
    writable_copy,
)

V = vectors_dir() / "invarlock"
CANARY = "CANARYq7zx"
CONTRACTS = PROJECT_ROOT / "contracts"
MANIFEST_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evidence-pack-v2.manifest.schema.json").read_text("utf-8"))
)
SIGNATURE_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evidence-pack-v2.signature.schema.json").read_text("utf-8"))
)
_REQUEST_SCHEMA = json.loads(
    (CONTRACTS / "invarlock.evaluation-request-v2.schema.json").read_text("utf-8")
)
NORMALIZED_SCHEMA = Draft202012Validator(
    {**_REQUEST_SCHEMA, "oneOf": [{"$ref": "#/$defs/normalized"}]}
)
SIGNER = V / "keys" / "evidence-signer" / "private.pem"
MAIN = "text-20-exact-signed"


def _load(case: dict[str, Any], tmp_path: Path) -> tuple[CapturedRequest, bool]:
    inputs, expected = case["input"], case["expected"]
    root = tmp_path / "request"
    writable_copy(V / inputs["request_dir"], root)
    command = inputs["command"]
    output = command[command.index("--output") + 1] if "--output" in command else None
    request = load_captured_request(
        root / "request.yaml",
        output=output,
        cwd=root,
        run_loader=oracle_loader(V / expected["evidence_dir"]),
    )
    return request, "--unsigned" in command


def _build(name: str, tmp_path: Path) -> PublishedPack:
    case = pack_case(name)
    request, unsigned = _load(case, tmp_path)
    report = (V / case["expected"]["evidence_dir"] / "reports/evaluation.report.json").read_bytes()
    key = None if unsigned else load_signing_key(SIGNER)
    return build_evidence_pack(
        request, comparison_report=report, signing_key=key, unsigned=unsigned
    )


# ---------------------------------------------------------------------------
# packs.json: construction byte for byte, modes, evaluate output, reading


@pytest.mark.parametrize("case", cases("invarlock/packs.json"))
def test_pack_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    inputs, expected = case["input"], case["expected"]
    if set(inputs) != {"request_dir", "command", "signing_key", "note"} or not {
        "evidence_dir",
        "evaluate",
        "inventory_as_published",
        "manifest",
        "pack_manifest_digest",
        "checksums_text",
        "decision",
        "anchors",
        "normalized_request",
    } <= set(expected):
        pytest.fail("vector case shape not understood")
    evidence = V / expected["evidence_dir"]
    request, unsigned = _load(case, tmp_path)
    report = (evidence / "reports" / "evaluation.report.json").read_bytes()
    if unsigned:
        assert inputs["signing_key"] is None
        published = build_evidence_pack(request, comparison_report=report, unsigned=True)
    else:
        key = load_signing_key(V / inputs["signing_key"])
        published = build_evidence_pack(request, comparison_report=report, signing_key=key)
    # Every file byte for byte, nothing more.
    assert tree_files(published.path) == tree_files(evidence)
    # Modes and inventory as the reference published them.
    inventory = expected["inventory_as_published"]
    assert oct(stat.S_IMODE(published.path.stat().st_mode)) == inventory["root_mode"]
    for directory, mode in inventory["directories"].items():
        assert oct(stat.S_IMODE((published.path / directory).stat().st_mode)) == mode
    for name, facts in inventory["files"].items():
        info = (published.path / name).lstat()
        assert oct(stat.S_IMODE(info.st_mode)) == facts["mode"]
        assert info.st_size == facts["bytes"]
        assert hashlib.sha256((published.path / name).read_bytes()).hexdigest() == facts["sha256"]
    # What evaluate reports.
    stdout = expected["evaluate"]["stdout_json"]
    assert expected["evaluate"]["exit_code"] == 0
    assert (
        published.pack_manifest_digest
        == stdout["pack_manifest_digest"]
        == expected["pack_manifest_digest"]
    )
    assert published.comparison_id == stdout["comparison_id"]
    assert published.request_digest == stdout["request_digest"]
    assert published.baseline_run_digest == stdout["baseline_run_digest"]
    assert published.subject_run_digest == stdout["subject_run_digest"]
    assert published.policy_digest == stdout["policy_digest"]
    assert published.authentication == stdout["authentication"]
    assert published.decision == stdout["decision"] == expected["decision"]
    relative = published.path.relative_to(request.root).as_posix()
    assert f"{Path(inputs['request_dir']).parent.as_posix()}/{relative}" == stdout["evidence"]
    assert (published.path / "checksums.sha256").read_text("ascii") == expected["checksums_text"]
    # Contracts.
    MANIFEST_SCHEMA.validate(expected["manifest"])
    NORMALIZED_SCHEMA.validate(expected["normalized_request"])
    if not unsigned:
        SIGNATURE_SCHEMA.validate(json.loads((evidence / "manifest.signature.json").read_bytes()))
    # Reading: the vector's pack and ours give the same typed content.
    for directory in (evidence, published.path):
        pack = read_evidence_pack(directory)
        assert pack.manifest.to_dict() == expected["manifest"]
        assert pack.manifest_digest == expected["pack_manifest_digest"]
        assert pack.request.to_dict() == expected["normalized_request"]
        assert pack.decision == expected["decision"]
        anchors = expected["anchors"]
        assert pack.baseline.digest == anchors["baseline_run_digest"] == pack.digest("baseline")
        assert pack.subject.digest == anchors["subject_run_digest"]
        assert pack.request_digest == anchors["request_digest"] == pack.request.digest
        assert pack.policy.digest == anchors["policy_digest"]
        assert pack.comparison_id == pack.request.comparison_id == stdout["comparison_id"]
        if unsigned:
            assert (pack.signed, pack.signer, pack.signature) == (False, None, None)
            assert pack.signing_key_fingerprint is None
        else:
            assert pack.signer is not None
            assert pack.signer.fingerprint == anchors["evidence_signer_fingerprint"]
            assert pack.signing_key_fingerprint == anchors["evidence_signer_fingerprint"]
        pack.check_unchanged()


# ---------------------------------------------------------------------------
# verify.json: reader-level refusals with their closed codes; recipient checks are not ours

READER_MESSAGES = {
    "captured subject binding is invalid": ("digest_mismatch", "subject"),
    "captured evidence inventory has an unknown entry": ("unknown_entry", "pack"),
    "captured manifest signature is invalid": ("signature_invalid", "signature"),
    "captured evidence file inventory is incomplete": ("missing_entry", "pack"),
    "captured manifest must be canonical JSON": ("not_canonical", "manifest.json"),
    "captured checksum ledger binding is invalid": ("ledger_mismatch", "checksums.sha256"),
    "captured contract is invalid: Additional properties are not allowed ('note' was unexpected)": (
        "unknown_field",
        "manifest",
    ),
    "captured inventory contains an unsafe entry": ("unsafe_entry", "pack"),
}
#: Refusals of verification after the pack was read (recipient checks, replay, inputs).
RECIPIENT_MESSAGES = frozenset(
    {
        "captured verification requires signed evidence",
        "captured evidence signer does not match expected anchor",
        "captured baseline differs from expected anchor",
        "captured request differs from expected anchor",
        "captured policy differs from expected anchor",
        "captured replay disagrees with stored comparison",
        "local_work_budget_exceeded",
        "invalid verification inputs: destination must be outside the evidence pack",
        "--trust-profile cannot be mixed with --policy",
    }
)


def _materialize(case: dict[str, Any], tmp_path: Path) -> Path:
    """Copy the pack; restore the symlink the repository stores as a plain file."""
    target = writable_copy(V / case["input"]["pack_dir"], tmp_path / "pack")
    note = case["input"].get("note", "")
    if "symlink" in note and not (target / "request.json").is_symlink():
        link = (target / "request.json").read_text("utf-8").strip()
        (target / "request.json").unlink()
        (target / "request.json").symlink_to(link)
    return target


@pytest.mark.parametrize("case", cases("invarlock/verify.json"))
def test_verify_vectors_reader_level(case: dict[str, Any], tmp_path: Path) -> None:
    expected = case["expected"]
    if "pack_dir" not in case["input"]:
        pytest.fail("vector case shape not understood")
    if set(expected) == {"first", "second"}:
        read_evidence_pack(V / case["input"]["pack_dir"])
        return
    if "exit_code" not in expected:
        pytest.fail("vector case shape not understood")
    errors = (expected.get("stdout_json") or {}).get("errors") or []
    reason = (expected.get("stdout_json") or {}).get("reason")
    messages = [*errors, *([reason] if reason else [])]
    reader = [message for message in messages if message in READER_MESSAGES]
    unknown = [m for m in messages if m not in READER_MESSAGES and m not in RECIPIENT_MESSAGES]
    if unknown:
        pytest.fail(f"unknown reference message: {unknown[0][:120]}")
    pack_dir = _materialize(case, tmp_path)
    if not reader:
        pack = read_evidence_pack(pack_dir)
        if "receipt" in expected:
            statement = expected["receipt"]["statement"]
            assert pack.manifest_digest == statement["pack_manifest_digest"]
        return
    code, field = READER_MESSAGES[reader[0]]
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack_dir)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert caught.value.status == expected["exit_code"]
    statement = expected["receipt"]["statement"]
    assert statement["verdict"]["verification_status"] == caught.value.status
    assert caught.value.identified
    assert caught.value.manifest_digest == statement["pack_manifest_digest"]


# ---------------------------------------------------------------------------
# Reader refusals, one per rule


@pytest.fixture(scope="module")
def signed_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(MAIN, tmp_path_factory.mktemp("signed")).path


def _reseal(
    pack: Path,
    *,
    key: SigningKey | None = None,
    manifest: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Recompute digests, ledger, manifest and signature after payload edits (a forged pack)."""
    paths = {
        "request": "request.json",
        "policy": "inputs/policy.json",
        "baseline": "records/baseline.json",
        "subject": "records/subject.json",
        "report": "reports/evaluation.report.json",
    }
    document = json.loads((pack / "manifest.json").read_bytes())
    hexes = {role: digest_bytes((pack / path).read_bytes()) for role, path in paths.items()}
    ledger = checksum_ledger(hexes)
    (pack / "checksums.sha256").write_bytes(ledger)
    for role, digest in hexes.items():
        document["files"][role]["digest"] = digest
    document["checksums_sha256_digest"] = hashlib.sha256(ledger).hexdigest()
    document["request_digest"] = hexes["request"]

    document["comparison_id"] = comparison_id(
        request_digest=hexes["request"],
        baseline_run_digest=hexes["baseline"],
        subject_run_digest=hexes["subject"],
        policy_digest=hexes["policy"],
    )
    signer = key or load_signing_key(SIGNER)
    document["signing_key_fingerprint"] = signer.fingerprint
    if manifest is not None:
        manifest(document)
    data = encode_invarlock(document)
    (pack / "manifest.json").write_bytes(data)
    (pack / "manifest.signature.json").write_bytes(signature_envelope(data, signer))


def _canonical(value: Any) -> bytes:
    return encode_invarlock(value)


def _edit_json(relative: str, edit: Callable[[Any], Any]) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        value = json.loads((pack / relative).read_bytes())
        (pack / relative).write_bytes(_canonical(edit(value)))
        _reseal(pack)

    return mutate


def _raw(relative: str, data: bytes, *, reseal: bool = True) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        (pack / relative).write_bytes(data)
        if reseal:
            _reseal(pack)

    return mutate


def _manifest_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        document = json.loads((pack / "manifest.json").read_bytes())
        edit(document)
        (pack / "manifest.json").write_bytes(_canonical(document))

    return mutate


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        node = document
        parts = key.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value

    return edit


def _signature_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        document = json.loads((pack / "manifest.signature.json").read_bytes())
        edit(document)
        (pack / "manifest.signature.json").write_bytes(_canonical(document))

    return mutate


def _symlink(relative: str) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        (pack / relative).unlink()
        (pack / relative).symlink_to(pack / "inputs" / "policy.json")

    return mutate


def _fifo(pack: Path) -> None:
    (pack / "request.json").unlink()
    os.mkfifo(pack / "request.json")


def _sparse(sizes: dict[str, int]) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        for relative, size in sizes.items():
            os.truncate(pack / relative, size)

    return mutate


def _many_records(pack: Path) -> None:
    run = json.loads((pack / "records" / "subject.json").read_bytes())
    run["records"] = [{}] * 50_001  # the count is checked before anything else
    (pack / "records" / "subject.json").write_bytes(_canonical(run))
    _reseal(pack)


def _resign_other(pack: Path) -> None:
    other = load_signing_key(V / "keys" / "other-signer" / "private.pem")
    data = (pack / "manifest.json").read_bytes()
    (pack / "manifest.signature.json").write_bytes(signature_envelope(data, other))


def _other_public_key(pack: Path) -> None:
    other = load_signing_key(V / "keys" / "other-signer" / "private.pem")
    _signature_edit(_set("public_key.value", other.public_key.pem))(pack)


def _swap_run_digests(value: dict[str, Any]) -> dict[str, Any]:
    sides = value["comparison"]
    sides["baseline"]["run_digest"], sides["subject"]["run_digest"] = (
        sides["subject"]["run_digest"],
        sides["baseline"]["run_digest"],
    )
    return value


def _report_bindings(value: dict[str, Any]) -> dict[str, Any]:
    value["bindings"]["policy"] = "sha256:" + "0" * 64
    return value


def _unsign(pack: Path) -> None:
    (pack / "manifest.signature.json").unlink()

    def edit(document: dict[str, Any]) -> None:
        document["authentication"] = "unsigned_local"
        document["signing_key_fingerprint"] = None
        del document["signature"]

    _manifest_edit(edit)(pack)


def _extra_signature(pack: Path) -> None:
    _unsign(pack)
    (pack / "manifest.signature.json").write_bytes(b"{}\n")


def _indent(relative: str) -> Callable[[Path], None]:
    def mutate(pack: Path) -> None:
        value = json.loads((pack / relative).read_bytes())
        (pack / relative).write_bytes(json.dumps(value, indent=1).encode() + b"\n")
        _reseal(pack)

    return mutate


UNIDENTIFIED = None
R = [
    # identification (no manifest digest: no receipt)
    ("manifest-missing", lambda p: (p / "manifest.json").unlink(), "manifest_missing", 4, False),
    ("manifest-symlink", _symlink("manifest.json"), "unsafe_entry", 4, False),
    *rows_for(
        ("too_large", 4, False),
        manifest_over_256k=_raw("manifest.json", b" " * 262_145, reseal=False),
        manifest_over_64k=lambda p: (p / "manifest.json").write_bytes(
            b'{"format":"invarlock/evidence-pack-v2","kind":"captured","x":"'
            + b"y" * 70_000
            + b'"}\n'
        ),
    ),
    (
        "manifest-duplicate-key",
        _raw("manifest.json", b'{"kind":"captured","kind":"captured"}', reseal=False),
        "duplicate_key",
        4,
        False,
    ),
    *rows_for(
        ("non_finite_number", 4, False),
        manifest_nan=_raw("manifest.json", b'{"format":NaN}', reseal=False),
        manifest_overflow=_raw("manifest.json", b'{"format":1e400}', reseal=False),
    ),
    (
        "manifest-invalid-json",
        _raw("manifest.json", b'{"format":', reseal=False),
        "invalid_json",
        4,
        False,
    ),
    ("manifest-bom", _raw("manifest.json", b"\xef\xbb\xbf{}", reseal=False), "not_utf8", 4, False),
    ("manifest-not-object", _raw("manifest.json", b"[]", reseal=False), "not_object", 4, False),
    (
        "manifest-wrong-format",
        _manifest_edit(_set("format", "invarlock/evidence-pack-v1")),
        "unsupported_format",
        4,
        False,
    ),
    # manifest contract
    (
        "manifest-not-canonical",
        lambda p: (p / "manifest.json").write_bytes(
            json.dumps(json.loads((p / "manifest.json").read_bytes()), indent=2).encode()
        ),
        "not_canonical",
        4,
        True,
    ),
    *rows_for(
        ("unknown_field", 4, True),
        manifest_unknown_member=_manifest_edit(_set("note", 1)),
        manifest_unknown_role=_manifest_edit(_set("files.extra", {})),
    ),
    (
        "manifest-missing-member",
        _manifest_edit(lambda d: d.pop("comparison_id")),
        "missing_field",
        4,
        True,
    ),
    (
        "manifest-bad-authentication",
        _manifest_edit(_set("authentication", "maybe")),
        "invalid_field",
        4,
        True,
    ),
    *rows_for(
        ("path_traversal", 4, True),
        manifest_path_traversal=_manifest_edit(_set("files.request.path", "../request.json")),
        manifest_absolute_path=_manifest_edit(_set("files.policy.path", "/etc/passwd")),
    ),
    (
        "manifest-other-path",
        _manifest_edit(_set("files.policy.path", "policy.json")),
        "invalid_field",
        4,
        True,
    ),
    (
        "manifest-ledger-traversal",
        _manifest_edit(_set("checksums", "../checksums.sha256")),
        "path_traversal",
        4,
        True,
    ),
    (
        "manifest-unsigned-with-fingerprint",
        _manifest_edit(lambda d: (d.update(authentication="unsigned_local"), d.pop("signature"))),
        "invalid_field",
        4,
        True,
    ),
    # inventory
    *rows_for(
        ("unknown_entry", 4, True),
        extra_root_file=_raw("notes.txt", b"x", reseal=False),
        extra_directory=lambda p: (p / "records" / "more").mkdir(),
        unexpected_signature_file=_extra_signature,
    ),
    *rows_for(
        ("unsafe_entry", 4, True),
        payload_symlink=_symlink("request.json"),
        payload_fifo=_fifo,
        directory_symlink=lambda p: (
            shutil.rmtree(p / "reports"),
            (p / "reports").symlink_to(p / "inputs"),
        ),
        directory_is_file=lambda p: (
            shutil.rmtree(p / "reports"),
            (p / "reports").write_bytes(b"x"),
        ),
    ),
    *rows_for(
        ("missing_entry", 4, True),
        missing_payload=lambda p: (p / "records" / "subject.json").unlink(),
        missing_ledger=lambda p: (p / "checksums.sha256").unlink(),
        missing_directory=lambda p: shutil.rmtree(p / "reports"),
    ),
    *rows_for(
        ("too_large", 4, True),
        request_over_1mib=_sparse({"request.json": 1_048_577}),
        run_over_128mib=_sparse({"records/baseline.json": 134_217_729}),
        ledger_over_64k=_sparse({"checksums.sha256": 65_537}),
        total_over_384mib=_sparse(
            {
                "inputs/policy.json": 134_217_728,
                "records/baseline.json": 134_217_728,
                "records/subject.json": 134_217_728,
            }
        ),
    ),
    # signature
    (
        "signature-not-canonical",
        lambda p: (p / "manifest.signature.json").write_bytes(
            json.dumps(json.loads((p / "manifest.signature.json").read_bytes()), indent=1).encode()
        ),
        "not_canonical",
        4,
        True,
    ),
    (
        "signature-duplicate-key",
        _raw("manifest.signature.json", b'{"format":1,"format":1}', reseal=False),
        "duplicate_key",
        4,
        True,
    ),
    ("signature-unknown-member", _signature_edit(_set("note", 1)), "unknown_field", 4, True),
    (
        "signature-missing-member",
        _signature_edit(lambda d: d.pop("algorithm")),
        "missing_field",
        4,
        True,
    ),
    *rows_for(
        ("invalid_field", 4, True),
        signature_wrong_algorithm=_signature_edit(_set("algorithm", "rsa")),
        signature_wrong_encoding=_signature_edit(_set("signature.encoding", "hex")),
        signature_value_not_string=_signature_edit(_set("public_key.value", 1)),
    ),
    *rows_for(
        ("signature_invalid", 6, True),
        signature_bad_base64=_signature_edit(_set("signature.value", "!" * 86 + "==")),
        signature_base64_whitespace=_signature_edit(
            lambda d: d["signature"].update(
                value=d["signature"]["value"][:40] + "\n" + d["signature"]["value"][41:]
            )
        ),
        signature_pem_garbage=_signature_edit(_set("public_key.value", "not a key")),
        signature_wrong_key=_other_public_key,
    ),
    *rows_for(
        ("signer_mismatch", 6, True),
        signature_other_signer=_resign_other,
        signature_fingerprint_differs=_signature_edit(
            _set("signing_key_fingerprint", "sha256:" + "0" * 64)
        ),
    ),
    # payloads
    (
        "payload-digest",
        _raw("records/subject.json", b"{}\n", reseal=False),
        "digest_mismatch",
        6,
        True,
    ),
    (
        "payload-duplicate-key",
        _raw("inputs/policy.json", b'{"a":1,"a":2}\n'),
        "duplicate_key",
        4,
        True,
    ),
    (
        "payload-nan",
        _raw("reports/evaluation.report.json", b'{"a":NaN}\n'),
        "non_finite_number",
        4,
        True,
    ),
    ("payload-not-object", _raw("reports/evaluation.report.json", b"[]\n"), "not_object", 4, True),
    ("payload-not-utf8", _raw("request.json", b'{"a":"\xff"}\n'), "not_utf8", 4, True),
    ("payload-not-canonical", _indent("inputs/policy.json"), "not_canonical", 4, True),
    ("run-over-50000-records", _many_records, "too_many_records", 4, True),
    *rows_for(
        ("invalid_payload", 4, True),
        run_invalid=_edit_json("records/baseline.json", lambda v: {**v, "format": "x"}),
        policy_invalid=_edit_json("inputs/policy.json", lambda v: {**v, "format": "x"}),
        report_invalid=_edit_json(
            "reports/evaluation.report.json", lambda v: {**v, "decision": "maybe"}
        ),
    ),
    *rows_for(
        ("ledger_mismatch", 6, True),
        ledger_line=_raw("checksums.sha256", b"0" * 64 + b"  request.json\n", reseal=False),
        ledger_rebuilt_differs=lambda p: (
            _raw("checksums.sha256", b"x\n", reseal=False)(p),
            _reseal_ledger_digest(p),
        ),
    ),
    (
        "request-digest",
        lambda p: _reseal(p, manifest=_set("request_digest", "sha256:" + "1" * 64)),
        "request_digest_mismatch",
        6,
        True,
    ),
    (
        "comparison-id",
        lambda p: _reseal(p, manifest=_set("comparison_id", "sha256:" + "1" * 64)),
        "comparison_id_mismatch",
        6,
        True,
    ),
    (
        "request-invalid",
        _edit_json("request.json", lambda v: {**v, "extra": 1}),
        "invalid_payload",
        4,
        True,
    ),
    (
        "request-binding",
        _edit_json("request.json", _swap_run_digests),
        "request_binding_mismatch",
        6,
        True,
    ),
    (
        "report-binding",
        _edit_json("reports/evaluation.report.json", _report_bindings),
        "report_binding_mismatch",
        6,
        True,
    ),
]


def _reseal_ledger_digest(pack: Path) -> None:
    """Keep a wrong ledger but make its manifest digest (and signature) agree with it."""
    ledger = (pack / "checksums.sha256").read_bytes()
    document = json.loads((pack / "manifest.json").read_bytes())
    document["checksums_sha256_digest"] = hashlib.sha256(ledger).hexdigest()
    data = encode_invarlock(document)
    (pack / "manifest.json").write_bytes(data)
    (pack / "manifest.signature.json").write_bytes(
        signature_envelope(data, load_signing_key(SIGNER))
    )


@pytest.mark.parametrize(
    ("mutate", "code", "status", "identified"),
    [pytest.param(*row[1:], id=row[0]) for row in R],
)
def test_reader_refusals(
    mutate: Callable[[Path], Any],
    code: str,
    status: int,
    identified: bool,
    signed_pack: Path,
    tmp_path: Path,
) -> None:
    pack = writable_copy(signed_pack, tmp_path / "pack")
    mutate(pack)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack)
    assert caught.value.code == code
    assert caught.value.status == status
    assert caught.value.identified is identified
    assert "\n" not in str(caught.value)


#: Rows whose cap the uncapped limits lift (run size, total size, record count), with the
#: rule that then refuses the forged content. Every other row refuses alike.
_LIFTED = {
    "run-over-128mib": ("digest_mismatch", 6, True),  # the truncated run no longer hashes
    "total-over-384mib": ("digest_mismatch", 6, True),
    "run-over-50000-records": ("invalid_payload", 4, True),  # 50,001 empty records
}


def test_the_lifted_rows_are_the_caps_the_uncapped_limits_lift() -> None:
    assert UNCAPPED_PACK_LIMITS.max_records is None
    assert UNCAPPED_PACK_LIMITS.max_total_bytes is None
    lifted = {role for role, cap in UNCAPPED_PACK_LIMITS.role_bytes.items() if cap is None}
    assert lifted == {"baseline", "subject"}
    ids = {row[0] for row in R}
    assert set(_LIFTED) <= ids
    capped = {row[0] for row in R if row[2] in ("too_large", "too_many_records")}
    assert set(_LIFTED) < capped  # some caps stay (manifest, request, ledger sizes)


@pytest.mark.parametrize(
    ("mutate", "code", "status", "identified"),
    [pytest.param(*row[1:], id=row[0]) for row in R],
)
def test_uncapped_streamed_reader_refuses_alike(
    mutate: Callable[[Path], Any],
    code: str,
    status: int,
    identified: bool,
    signed_pack: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Every refusal of the whole-file reader is the same when run files are streamed.

    Uncapped, a lifted cap is no refusal: the forged content is then refused
    by the next rule (``_LIFTED``), never accepted.
    """
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    pack = writable_copy(signed_pack, tmp_path / "pack")
    mutate(pack)
    expected = _LIFTED.get(request.node.callspec.id, (code, status, identified))
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack, limits=UNCAPPED_PACK_LIMITS)
    assert (caught.value.code, caught.value.status, caught.value.identified) == expected


def test_uncapped_streamed_read_equals_the_whole_file_read(
    signed_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = read_evidence_pack(signed_pack)
    assert whole.limits is REFERENCE_PACK_LIMITS
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    calls: list[str] = []
    original = scan_module.read_canonical_run

    def counted(source: Any, **kwargs: Any) -> Any:
        calls.append("streamed")
        return original(source, **kwargs)

    monkeypatch.setattr(scan_module, "read_canonical_run", counted)
    streamed = read_evidence_pack(signed_pack, limits=UNCAPPED_PACK_LIMITS)
    assert calls == ["streamed", "streamed"]
    assert streamed.limits is UNCAPPED_PACK_LIMITS
    assert streamed.baseline.digest == whole.baseline.digest
    assert streamed.subject.digest == whole.subject.digest
    assert streamed.baseline.to_canonical() == whole.baseline.to_canonical()
    streamed.check_unchanged()
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(signed_pack, limits="uncapped")  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.field) == ("invalid_field", "limits")


def test_streamed_run_falls_back_or_detects_a_change(
    signed_pack: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    whole = read_evidence_pack(signed_pack)

    def refuse(source: Any, **kwargs: Any) -> Any:
        raise CapturedRunError("not_canonical", "run")

    monkeypatch.setattr(scan_module, "read_canonical_run", refuse)
    fallback = read_evidence_pack(signed_pack, limits=UNCAPPED_PACK_LIMITS)
    assert fallback.baseline.digest == whole.baseline.digest

    def other(source: Any, **kwargs: Any) -> Any:
        return whole.subject  # parsed bytes that hash differently: the file changed

    monkeypatch.setattr(scan_module, "read_canonical_run", other)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(signed_pack, limits=UNCAPPED_PACK_LIMITS)
    assert (caught.value.code, caught.value.status) == ("file_changed", 6)


def test_reader_refuses_what_is_not_a_real_directory(signed_pack: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(signed_pack)
    for path in (link, tmp_path / "missing", signed_pack / "manifest.json"):
        with pytest.raises(EvidencePackError) as caught:
            read_evidence_pack(path)
        assert (caught.value.code, caught.value.status, caught.value.identified) == (
            "not_directory",
            4,
            False,
        )


def test_reader_accepts_reordered_runs_only_when_canonical(signed_pack: Path) -> None:
    pack = read_evidence_pack(signed_pack)
    assert isinstance(pack, EvidencePack)
    assert pack.baseline.run_id not in repr(pack)
    assert pack.report["format"] == "invarlock/multi-metric-comparison-v1"


def test_report_validator_is_applied(signed_pack: Path) -> None:
    seen: list[str] = []

    def validator(report: Any) -> None:
        seen.append(report["decision"])

    read_evidence_pack(signed_pack, validate_report=validator)
    assert seen == ["pass"]

    def refuse(report: Any) -> None:
        raise EvidencePackError("invalid_payload", "report.metrics")

    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(signed_pack, validate_report=refuse)
    assert (caught.value.code, caught.value.field) == ("invalid_payload", "report.metrics")


def test_file_changed_while_reading(
    signed_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = writable_copy(signed_pack, tmp_path / "pack")
    original = scan_module.Scanner.read

    def read(self: Any, name: str, snapshot: Any) -> bytes:
        if name == "records/subject.json":
            data = (pack / name).read_bytes()
            (pack / name).write_bytes(data.replace(b'"', b'"', 1))  # same bytes, new identity
            os.utime(pack / name, ns=(1, 1))
        return original(self, name, snapshot)

    monkeypatch.setattr(scan_module.Scanner, "read", read)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack)
    assert (caught.value.code, caught.value.status) == ("file_changed", 6)
    assert caught.value.identified


def test_check_unchanged_detects_later_changes(signed_pack: Path, tmp_path: Path) -> None:
    pack_dir = writable_copy(signed_pack, tmp_path / "pack")
    pack = read_evidence_pack(pack_dir)
    pack.check_unchanged()
    (pack_dir / "reports" / "extra.json").write_bytes(b"{}")
    with pytest.raises(EvidencePackError) as caught:
        pack.check_unchanged()
    assert (caught.value.code, caught.value.status) == ("file_changed", 6)
    assert caught.value.manifest_digest == pack.manifest_digest
    (pack_dir / "reports" / "extra.json").unlink()
    os.utime(pack_dir / "request.json", ns=(5, 5))
    with pytest.raises(EvidencePackError):
        pack.check_unchanged()


def test_unsigned_pack_reads(tmp_path: Path) -> None:
    published = _build("text-20-exact-unsigned", tmp_path)
    pack = read_evidence_pack(published.path)
    assert pack.authentication == "unsigned_local"
    assert not (published.path / "manifest.signature.json").exists()


def test_manifest_and_report_helpers() -> None:
    manifest = json.loads((pack_folder(MAIN) / "evidence" / "manifest.json").read_bytes())
    parsed = parse_manifest(manifest)
    assert parse_manifest(parsed) is parsed
    assert parsed.signed
    assert "sha256" in repr(parsed)
    with pytest.raises(EvidencePackError) as caught:
        parse_manifest([])
    assert caught.value.code == "not_object"
    with pytest.raises(EvidencePackError) as caught:
        parse_manifest({**manifest, "files": []})
    assert (caught.value.code, caught.value.field) == ("invalid_field", "manifest.files")
    with pytest.raises(EvidencePackError) as caught:
        parse_manifest({**manifest, "comparison_id": float("nan")})
    assert caught.value.code == "invalid_field"
    with pytest.raises(EvidencePackError) as caught:
        checksum_ledger({"request": "x"})
    assert caught.value.code == "invalid_field"
    report = json.loads(
        (pack_folder(MAIN) / "evidence" / "reports/evaluation.report.json").read_bytes()
    )
    check_report_document(report)
    for broken, field in (
        ({**report, "format": "x"}, "report.format"),
        ({**report, "bindings": {}}, "report.bindings"),
        ({**report, "metrics": [1]}, "report.metrics"),
        ({**report, "limitations": [1]}, "report.limitations"),
        ({**report, "extra": 1}, "report"),
    ):
        with pytest.raises(EvidencePackError) as caught:
            check_report_document(broken)
        assert caught.value.field == field


# ---------------------------------------------------------------------------
# Construction refusals


@pytest.fixture(scope="module")
def loaded_main(tmp_path_factory: pytest.TempPathFactory) -> tuple[CapturedRequest, bytes]:
    case = pack_case(MAIN)
    request, _ = _load(case, tmp_path_factory.mktemp("main"))
    report = (V / case["expected"]["evidence_dir"] / "reports/evaluation.report.json").read_bytes()
    return request, report


def _prepare(loaded: tuple[CapturedRequest, bytes], **overrides: Any) -> StagedPack:
    request, report = loaded
    arguments: dict[str, Any] = {
        "request": request.normalized,
        "baseline": request.baseline,
        "subject": request.subject,
        "policy": request.policy,
        "comparison_report": report,
        "signing_key": load_signing_key(SIGNER),
    }
    arguments.update(overrides)
    return prepare_pack(**arguments)


def _report_with(report: bytes, **changes: Any) -> bytes:
    return encode_invarlock({**json.loads(report), **changes})


BUILD_REFUSALS = [
    *rows_for(
        "signing_mode",
        both_modes=lambda r: {"unsigned": True},
        no_mode=lambda r: {"signing_key": None},
    ),
    *rows_for(
        "invalid_type",
        key_not_a_key=lambda r: {"signing_key": "key.pem"},
        report_not_bytes=lambda r: {"comparison_report": "{}"},
    ),
    (
        "runs-swapped",
        lambda r: {"baseline": r[0].subject, "subject": r[0].baseline},
        "request_mismatch",
    ),
    *rows_for(
        "invalid_report",
        report_not_json=lambda r: {"comparison_report": b"{"},
        report_not_object=lambda r: {"comparison_report": b"[]\n"},
    ),
    (
        "report-not-canonical",
        lambda r: {"comparison_report": json.dumps(json.loads(r[1]), indent=1).encode()},
        "report_not_canonical",
    ),
    (
        "report-envelope",
        lambda r: {"comparison_report": _report_with(r[1], decision="maybe")},
        "invalid_report",
    ),
    (
        "report-bindings",
        lambda r: {
            "comparison_report": _report_with(
                r[1], bindings={**json.loads(r[1])["bindings"], "subject": "sha256:" + "0" * 64}
            )
        },
        "report_binding_mismatch",
    ),
    ("report-too-large", lambda r: {"comparison_report": b" " * 134_217_729}, "too_large"),
]


@pytest.mark.parametrize(
    ("overrides", "code"), [pytest.param(*row[1:], id=row[0]) for row in BUILD_REFUSALS]
)
def test_build_refusals(
    overrides: Callable[[Any], dict[str, Any]],
    code: str,
    loaded_main: tuple[CapturedRequest, bytes],
) -> None:
    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, **overrides(loaded_main))
    assert caught.value.code == code


def test_build_refuses_runs_over_the_record_cap(
    loaded_main: tuple[CapturedRequest, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reference's cap is 50,000; a cap one below the run's size exercises the same rule.
    size = len(loaded_main[0].baseline.records)
    limits = dataclasses.replace(REFERENCE_PACK_LIMITS, max_records=size - 1)
    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, limits=limits)
    assert (caught.value.code, caught.value.field) == ("too_many_records", "baseline")
    assert _prepare(loaded_main, limits=UNCAPPED_PACK_LIMITS).decision
    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, limits="uncapped")
    assert (caught.value.code, caught.value.field) == ("invalid_type", "limits")


def test_build_refuses_a_report_validator_refusal(
    loaded_main: tuple[CapturedRequest, bytes],
) -> None:
    def refuse(report: Any) -> None:
        raise EvidencePackError("invalid_payload", "report.metrics")

    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, validate_report=refuse)
    assert caught.value.code == "invalid_report"


def test_staged_pack_holds_no_second_copy(loaded_main: tuple[CapturedRequest, bytes]) -> None:
    staged = _prepare(loaded_main)
    assert staged.report_bytes is loaded_main[1]
    assert staged.baseline is loaded_main[0].baseline
    assert "pack_manifest_digest" in repr(staged)
    assert staged.comparison_id == loaded_main[0].comparison_id
    assert staged.digest("request") == loaded_main[0].request_digest


# ---------------------------------------------------------------------------
# Publication


def _published_tree(path: Path) -> list[tuple[str, str]]:
    return sorted(
        (item.relative_to(path).as_posix(), oct(stat.S_IMODE(item.lstat().st_mode)))
        for item in [path, *path.rglob("*")]
    )


def test_publication_modes(loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path) -> None:
    published = publish_pack(_prepare(loaded_main), tmp_path / "new" / "deeper" / "pack")
    modes = dict(_published_tree(published.path))
    assert modes.pop(".") == "0o700"
    for directory in ("inputs", "records", "reports"):
        assert modes.pop(directory) == "0o700"
    assert set(modes.values()) == {"0o444"}
    assert len(modes) == 8
    assert oct(stat.S_IMODE((tmp_path / "new").stat().st_mode)) == "0o700"
    assert [p.name for p in (tmp_path / "new" / "deeper").iterdir()] == ["pack"]


@pytest.mark.parametrize("existing", ["directory", "empty-directory", "file", "dangling-symlink"])
def test_existing_destination_is_refused(
    existing: str, loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path
) -> None:
    destination = tmp_path / "pack"
    if existing == "directory":
        destination.mkdir()
        (destination / "keep").write_text("mine")
    elif existing == "empty-directory":
        destination.mkdir()
    elif existing == "file":
        destination.write_text("mine")
    else:
        destination.symlink_to(tmp_path / "nowhere")
    before = _published_tree(tmp_path)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), destination)
    assert caught.value.code == "output_exists"
    assert _published_tree(tmp_path) == before


@pytest.mark.parametrize("noreplace", ["renameat2", "claimed-directory"])
def test_destination_created_concurrently_is_never_clobbered(
    noreplace: str,
    loaded_main: tuple[CapturedRequest, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if noreplace == "claimed-directory":
        monkeypatch.setattr(fs_module, "_NOREPLACE", None)
    destination = tmp_path / "pack"
    original = pack_module._stage

    def stage(parent_fd: int, staging: str, staged: StagedPack) -> None:
        original(parent_fd, staging, staged)
        destination.mkdir()
        (destination / "theirs").write_text("concurrent writer")

    monkeypatch.setattr(pack_module, "_stage", stage)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), destination)
    assert caught.value.code == "output_exists"
    assert [p.name for p in destination.iterdir()] == ["theirs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]


def test_claimed_directory_fallback_publishes(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fs_module, "_NOREPLACE", None)
    published = publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert read_evidence_pack(published.path).manifest_digest == published.pack_manifest_digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pack"]


def test_unsupported_noreplace_falls_back(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    def unsupported(*args: Any) -> int:
        ctypes.set_errno(errno.EINVAL)
        return -1

    monkeypatch.setattr(fs_module, "_NOREPLACE", (unsupported, 1))
    published = publish_pack(_prepare(loaded_main), tmp_path / "pack")
    read_evidence_pack(published.path)


@pytest.mark.parametrize("failing_call", [1, 3, 8])
def test_no_partial_pack_after_a_failure_mid_staging(
    failing_call: int,
    loaded_main: tuple[CapturedRequest, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = pack_module._write_file
    calls = {"n": 0}

    def write(dir_fd: int, name: str, chunks: Any) -> tuple[str, int]:
        calls["n"] += 1
        if calls["n"] == failing_call:
            raise OSError(28, "No space left on device")
        return original(dir_fd, name, chunks)

    monkeypatch.setattr(pack_module, "_write_file", write)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert caught.value.code == "output_unwritable"
    assert list(tmp_path.iterdir()) == []


def test_corrupted_staging_is_refused_and_removed(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = pack_module._write_file

    def write(dir_fd: int, name: str, chunks: Any) -> tuple[str, int]:
        digest, size = original(dir_fd, name, chunks)
        return ("sha256:" + "0" * 64, size) if name == "subject.json" else (digest, size)

    monkeypatch.setattr(pack_module, "_write_file", write)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert (caught.value.code, caught.value.field) == ("self_check_failed", "subject")
    assert list(tmp_path.iterdir()) == []


def test_unsafe_destinations(loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path) -> None:
    staged = _prepare(loaded_main)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file").write_text("x")
    for destination, kwargs in (
        (tmp_path / "link" / "pack", {}),
        (tmp_path / "file" / "pack", {}),
        (tmp_path / "a" / ".." / "pack", {}),
        (Path("pack"), {"anchor": tmp_path / "missing"}),
        (tmp_path / "elsewhere", {"anchor": tmp_path / "real"}),
    ):
        with pytest.raises(EvidencePackBuildError) as caught:
            publish_pack(staged, destination, **kwargs)
        assert caught.value.code in ("unsafe_destination", "output_unwritable")
    assert list((tmp_path / "real").iterdir()) == []
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(staged, tmp_path / "link" / "pack")
    assert caught.value.code == "unsafe_destination"
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack("not staged", tmp_path / "x")  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"
    with pytest.raises(EvidencePackBuildError) as caught:
        build_evidence_pack("request", comparison_report=b"")  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"


def test_relative_destination_with_anchor(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path
) -> None:
    published = publish_pack(_prepare(loaded_main), "out/pack", anchor=tmp_path)
    assert published.path == tmp_path / "out" / "pack"
    read_evidence_pack(published.path)
    again = build_evidence_pack(
        loaded_main[0],
        comparison_report=loaded_main[1],
        unsigned=True,
        destination=tmp_path / "second",
    )
    assert again.authentication == "unsigned_local"


def test_evaluate_refuses_an_existing_request_destination(tmp_path: Path) -> None:
    published = _build(MAIN, tmp_path)
    case = pack_case(MAIN)
    request, _ = _load(case, tmp_path / "again")
    (request.destination).mkdir()
    report = published.path / "reports" / "evaluation.report.json"
    with pytest.raises(EvidencePackBuildError) as caught:
        build_evidence_pack(request, comparison_report=report.read_bytes(), unsigned=True)
    assert caught.value.code == "output_exists"


# ---------------------------------------------------------------------------
# Keys, fingerprints, signature envelope

KEYS = json.loads((V / "keys" / "keys.json").read_bytes())


@pytest.mark.parametrize("name", sorted(KEYS))
def test_fixed_test_keys(name: str) -> None:
    facts = KEYS[name]
    key = SigningKey.from_seed(bytes.fromhex(facts["raw_private_seed_hex"]))
    assert key.private_pem() == (V / facts["private_pem"]).read_bytes()
    assert key.public_key.pem.encode() == (V / facts["public_pem"]).read_bytes()
    assert key.public_key.raw.hex() == facts["raw_public_hex"]
    assert key.fingerprint == facts["fingerprint"] == key_fingerprint(key.public_key.raw)
    assert load_signing_key(V / facts["private_pem"]).fingerprint == facts["fingerprint"]
    assert load_verify_key(V / facts["public_pem"]).fingerprint == facts["fingerprint"]
    assert facts["raw_public_hex"] not in repr(key) + repr(key.public_key)


def test_signature_envelope_round_trip() -> None:
    key = load_signing_key(SIGNER)
    manifest = (pack_folder(MAIN) / "evidence" / "manifest.json").read_bytes()
    envelope_bytes = signature_envelope(manifest, key)
    assert (
        envelope_bytes == (pack_folder(MAIN) / "evidence" / "manifest.signature.json").read_bytes()
    )
    envelope = parse_signature_envelope(json.loads(envelope_bytes))
    assert isinstance(envelope, SignatureEnvelope)
    assert repr(envelope) == "SignatureEnvelope(...)"
    assert encode_invarlock(envelope.to_dict()) == envelope_bytes
    signer = verify_signature_envelope(envelope, manifest, manifest_fingerprint=key.fingerprint)
    assert signer.fingerprint == key.fingerprint
    with pytest.raises(SigningKeyError) as caught:
        verify_signature_envelope(envelope, manifest + b" ", manifest_fingerprint=key.fingerprint)
    assert caught.value.code == "invalid_signature"
    with pytest.raises(SigningKeyError) as caught:
        verify_signature_envelope(envelope, manifest, manifest_fingerprint=None)
    assert caught.value.code == "fingerprint_mismatch"
    # Non-zero padding bits: a different text for the same bytes is refused.
    value = envelope.signature_base64
    tweaked = value[:85] + chr(ord(value[85]) + 1) + "=="
    assert base64.b64decode(tweaked) == base64.b64decode(value)
    bad = SignatureEnvelope(envelope.signing_key_fingerprint, envelope.public_key_pem, tweaked)
    with pytest.raises(SigningKeyError) as caught:
        verify_signature_envelope(bad, manifest, manifest_fingerprint=key.fingerprint)
    assert caught.value.code == "invalid_base64"
    with pytest.raises(SigningKeyError) as caught:
        signature_envelope(manifest, "key")  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"
    for broken in ([], {"format": 1}, {**json.loads(envelope_bytes), "public_key": "x"}):
        with pytest.raises(SigningKeyError):
            parse_signature_envelope(broken)
    with pytest.raises(SigningKeyError) as caught:
        parse_signature_envelope({**json.loads(envelope_bytes), "public_key": {"encoding": "pem"}})
    assert caught.value.code == "missing_field"


def _rsa_pem() -> bytes:
    return generate_private_key(public_exponent=65537, key_size=1024).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
    )


def _key_file(tmp_path: Path, kind: str) -> Path:
    """Write one refused key file of ``kind`` and return the path to hand to the loader."""
    if kind == "missing":
        return tmp_path / "missing.pem"
    if kind == "dotdot":
        (tmp_path / "junk.pem").write_bytes(b"junk")
        return tmp_path / ".." / tmp_path.name / "junk.pem"
    path = tmp_path / f"{kind}.pem"
    if kind == "symlink":
        path.symlink_to(SIGNER)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(
            {
                "encrypted": lambda: SigningKey.generate()._key.private_bytes(
                    Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"pw")
                ),
                "rsa": _rsa_pem,
                "rsa-public": lambda: (
                    generate_private_key(public_exponent=65537, key_size=1024)
                    .public_key()
                    .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
                ),
                "junk": lambda: b"junk",
                "oversized": lambda: b"x" * 65_537,
            }[kind]()
        )
    return path


#: One row per key-file rule: (id naming the rule, loader, file kind, closed code).
KEY_FILE_REFUSALS = [
    ("signing-key-encrypted-pem", load_signing_key, "encrypted", "encrypted_key"),
    ("signing-key-rsa-not-ed25519", load_signing_key, "rsa", "not_ed25519"),
    ("signing-key-not-pem", load_signing_key, "junk", "invalid_pem"),
    ("signing-key-over-64k", load_signing_key, "oversized", "too_large"),
    ("signing-key-symlink-not-regular", load_signing_key, "symlink", "not_regular_file"),
    ("signing-key-directory-not-regular", load_signing_key, "directory", "not_regular_file"),
    ("signing-key-missing", load_signing_key, "missing", "not_found"),
    ("signing-key-dotdot-unsafe-path", load_signing_key, "dotdot", "unsafe_path"),
    ("verify-key-rsa-not-ed25519", load_verify_key, "rsa-public", "not_ed25519"),
    ("verify-key-not-pem", load_verify_key, "junk", "invalid_pem"),
]


@pytest.mark.parametrize(
    ("loader", "kind", "code"), [pytest.param(*row[1:], id=row[0]) for row in KEY_FILE_REFUSALS]
)
def test_key_file_refusals(
    loader: Callable[[Path], Any], kind: str, code: str, tmp_path: Path
) -> None:
    path = _key_file(tmp_path, kind)
    with pytest.raises(SigningKeyError) as caught:
        loader(path)
    assert caught.value.code == code
    assert str(tmp_path) not in str(caught.value)


def test_key_value_refusals() -> None:
    with pytest.raises(SigningKeyError) as caught:
        SigningKey.from_seed(b"short")
    assert caught.value.code == "not_ed25519"
    with pytest.raises(SigningKeyError) as caught:
        SigningKey.from_pem("text")  # type: ignore[arg-type]
    assert caught.value.code in SigningKeyError.codes
    with pytest.raises(SigningKeyError) as caught:
        key_fingerprint(b"short")
    assert caught.value.code in SigningKeyError.codes


def test_generate_signing_key_permissions(tmp_path: Path) -> None:
    generated = generate_signing_key(tmp_path / "private.pem", tmp_path / "public.pem")
    assert isinstance(generated, GeneratedKey)
    assert stat.S_IMODE((tmp_path / "private.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "public.pem").stat().st_mode) == 0o600
    key = load_signing_key(tmp_path / "private.pem")
    assert key.fingerprint == generated.fingerprint
    assert load_verify_key(tmp_path / "public.pem").fingerprint == generated.fingerprint
    private_text = (tmp_path / "private.pem").read_text("ascii").splitlines()
    assert private_text[0] == "-----BEGIN PRIVATE KEY-----"
    assert len(private_text[1]) == 64
    public_text = (tmp_path / "public.pem").read_text("ascii").splitlines()
    assert public_text[0] == "-----BEGIN PUBLIC KEY-----"
    assert len(public_text[1]) == 60
    with pytest.raises(SigningKeyError) as caught:
        generate_signing_key(tmp_path / "private.pem", tmp_path / "other.pem")
    assert caught.value.code == "output_exists"
    assert not (tmp_path / "other.pem").exists()
    with pytest.raises(SigningKeyError) as caught:
        generate_signing_key(tmp_path / "missing" / "a.pem", tmp_path / "b.pem")
    assert caught.value.code == "output_parent_missing"


def test_generate_signing_key_removes_the_first_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    original = signing_module.create_exclusive
    calls = {"n": 0}

    def write(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> int:
        calls["n"] += 1
        if calls["n"] == 2:
            raise FileSystemError("output_unwritable", "output")
        return original(dir_fd, name, data, mode=mode)

    monkeypatch.setattr(signing_module, "create_exclusive", write)
    with pytest.raises(SigningKeyError):
        generate_signing_key(tmp_path / "private.pem", tmp_path / "public.pem")
    assert list(tmp_path.iterdir()) == []
    calls["n"] = 0
    with pytest.raises(SigningKeyError):
        generate_key_directory(tmp_path / "keys")
    assert list(tmp_path.iterdir()) == []


def test_generate_key_directory(tmp_path: Path) -> None:
    generated = generate_key_directory(tmp_path / "keys")
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    (tmp_path / "outside").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "outside")
    for write in (
        lambda: generate_key_directory(tmp_path / "linked" / "keys"),
        lambda: generate_signing_key(tmp_path / "linked" / "a.pem", tmp_path / "b.pem"),
        lambda: generate_signing_key(tmp_path / "a.pem", tmp_path / "linked" / "b.pem"),
    ):
        with pytest.raises(SigningKeyError) as unsafe:
            write()
        assert unsafe.value.code == "unsafe_destination"
    assert list((tmp_path / "outside").iterdir()) == []
    assert not (tmp_path / "a.pem").exists()
    for name in ("private.pem", "public.pem"):
        assert stat.S_IMODE((tmp_path / "keys" / name).stat().st_mode) == 0o600
    assert load_signing_key(generated.private_key).fingerprint == generated.fingerprint
    with pytest.raises(SigningKeyError) as caught:
        generate_key_directory(tmp_path / "keys")
    assert caught.value.code == "output_exists"
    with pytest.raises(SigningKeyError) as caught:
        generate_key_directory(tmp_path / "missing" / "keys")
    assert caught.value.code == "output_parent_missing"


def test_signing_keys_are_not_comparable_values() -> None:
    key = load_signing_key(SIGNER)
    assert key != load_signing_key(SIGNER)
    assert VerifyKey(key.public_key.raw) == key.public_key


# ---------------------------------------------------------------------------
# Never echo


def test_canary_never_reaches_pack_errors_reprs_or_logs(
    signed_pack: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    messages: list[str] = []
    pack = writable_copy(signed_pack, tmp_path / f"{CANARY}-pack")
    (pack / f"{CANARY}.txt").write_text(CANARY)
    with pytest.raises(EvidencePackError) as unknown:
        read_evidence_pack(pack)
    messages += [str(unknown.value), repr(unknown.value)]
    (pack / f"{CANARY}.txt").unlink()
    loaded = read_evidence_pack(pack)
    messages += [repr(loaded), repr(loaded.manifest), repr(loaded.snapshot)]
    _edit_json("request.json", lambda v: {**v, CANARY: CANARY})(pack)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack)
    messages += [str(caught.value), repr(caught.value)]
    (tmp_path / f"{CANARY}-link").symlink_to(tmp_path)
    read = read_evidence_pack(signed_pack)
    staged = prepare_pack(
        request=read.request,
        baseline=read.baseline,
        subject=read.subject,
        policy=read.policy,
        comparison_report=(signed_pack / "reports" / "evaluation.report.json").read_bytes(),
        unsigned=True,
    )
    with pytest.raises(EvidencePackBuildError) as build_error:
        publish_pack(staged, tmp_path / f"{CANARY}-link" / "pack", anchor=tmp_path)
    messages += [str(build_error.value), repr(build_error.value)]
    with pytest.raises(SigningKeyError) as key_error:
        load_signing_key(tmp_path / f"{CANARY}.pem")
    messages += [str(key_error.value), repr(key_error.value)]
    messages += [record.getMessage() for record in caplog.records]
    assert all(CANARY not in message for message in messages)
    assert len(messages) >= 8


def test_staged_names_are_private(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    original = staging_module.rename_noreplace

    def rename(dir_fd: int, old: str, new: str) -> None:
        seen.append(old)
        mode = os.stat(old, dir_fd=dir_fd, follow_symlinks=False).st_mode
        assert stat.S_IMODE(mode) == 0o700
        original(dir_fd, old, new)

    monkeypatch.setattr(staging_module, "rename_noreplace", rename)
    publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert len(seen) == 1
    assert seen[0].startswith(STAGING_PREFIX)
    assert len(seen[0]) == len(STAGING_PREFIX) + 32


def test_policy_type_in_pack(signed_pack: Path) -> None:
    assert isinstance(read_evidence_pack(signed_pack).policy, ComparisonPolicy)
    assert (
        read_run(signed_pack / "records" / "baseline.json").digest
        == read_evidence_pack(signed_pack).baseline.digest
    )


# ---------------------------------------------------------------------------
# Smaller rules, one by one

_MANIFEST = json.loads((pack_folder(MAIN) / "evidence" / "manifest.json").read_bytes())
_UNSIGNED_MANIFEST = json.loads(
    (pack_folder("text-20-exact-unsigned") / "evidence" / "manifest.json").read_bytes()
)


def _manifest_with(path: str, value: Any, base: dict[str, Any] = _MANIFEST) -> dict[str, Any]:
    document = json.loads(json.dumps(base))
    node = document
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part]
    if value is _DROP:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return document


_DROP = object()
MANIFEST_RULES = [
    ("files.request", "x", "invalid_field", "manifest.files.request"),
    ("files.request.extra", 1, "unknown_field", "manifest.files.request"),
    ("files.request.path", 1, "invalid_field", "manifest.files.request.path"),
    ("files.request.digest", "sha256:AB", "invalid_field", "manifest.files.request.digest"),
    ("files.report", _DROP, "missing_field", "manifest.files"),
    ("kind", "native", "unsupported_format", "manifest.kind"),
    ("request_digest", "x", "invalid_field", "manifest.request_digest"),
    ("signing_key_fingerprint", "x", "invalid_field", "manifest.signing_key_fingerprint"),
    ("signing_key_fingerprint", None, "invalid_field", "manifest.signing_key_fingerprint"),
    ("signature", _DROP, "missing_field", "manifest.signature"),
    ("signature", "other.json", "invalid_field", "manifest.signature"),
    ("checksums_sha256_digest", "A" * 64, "invalid_field", "manifest.checksums_sha256_digest"),
]


@pytest.mark.parametrize(("path", "value", "code", "field"), MANIFEST_RULES)
def test_manifest_rules(path: str, value: Any, code: str, field: str) -> None:
    document = _manifest_with(path, value)
    with pytest.raises(EvidencePackError) as caught:
        parse_manifest(document)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert not MANIFEST_SCHEMA.is_valid(document)


def test_unsigned_manifest_rules() -> None:
    parse_manifest(_UNSIGNED_MANIFEST)
    for path, value, code in (
        ("signature", "manifest.signature.json", "unknown_field"),
        ("signing_key_fingerprint", "sha256:" + "0" * 64, "invalid_field"),
    ):
        document = _manifest_with(path, value, _UNSIGNED_MANIFEST)
        with pytest.raises(EvidencePackError) as caught:
            parse_manifest(document)
        assert caught.value.code == code
        assert not MANIFEST_SCHEMA.is_valid(document)


def test_report_must_be_an_object() -> None:
    with pytest.raises(EvidencePackError) as caught:
        check_report_document([])
    assert caught.value.code == "not_object"


def test_snapshot_totals(signed_pack: Path) -> None:
    pack = read_evidence_pack(signed_pack)
    assert pack.snapshot.total_bytes == sum(len(data) for data in tree_files(signed_pack).values())


EXTRA_READER_RULES = [
    ("run-not-canonical", _indent("records/baseline.json"), "not_canonical", 4),
    (
        "run-invalid-and-not-canonical",
        lambda p: (
            (p / "records/baseline.json").write_bytes(b'{"format": "x"}\n'),
            _reseal(p),
        ),
        "not_canonical",
        4,
    ),
    (
        "request-metric-not-in-policy",
        _edit_json(
            "request.json",
            lambda v: {
                **v,
                "comparison": {**v["comparison"], "metric": "normalized_nll_per_utf8_byte"},
            },
        ),
        "request_binding_mismatch",
        6,
    ),
]


@pytest.mark.parametrize(
    ("mutate", "code", "status"), [pytest.param(*row[1:], id=row[0]) for row in EXTRA_READER_RULES]
)
def test_more_reader_refusals(
    mutate: Callable[[Path], Any], code: str, status: int, signed_pack: Path, tmp_path: Path
) -> None:
    pack = writable_copy(signed_pack, tmp_path / "pack")
    mutate(pack)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack)
    assert (caught.value.code, caught.value.status) == (code, status)


@pytest.mark.parametrize("how", ["removed", "symlink"])
def test_file_replaced_while_reading(
    how: str, signed_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack = writable_copy(signed_pack, tmp_path / "pack")
    original = scan_module.Scanner.read

    def read(self: Any, name: str, snapshot: Any) -> bytes:
        if name == "inputs/policy.json":
            (pack / name).unlink()
            if how == "symlink":
                (pack / name).symlink_to(pack / "request.json")
        return original(self, name, snapshot)

    monkeypatch.setattr(scan_module.Scanner, "read", read)
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(pack)
    assert (caught.value.code, caught.value.status) == ("file_changed", 6)


def test_build_re_normalizes_the_request(loaded_main: tuple[CapturedRequest, bytes]) -> None:
    request = loaded_main[0].normalized.to_dict()
    request["comparison"]["metric"] = "normalized_nll_per_utf8_byte"
    from_other_world = NormalizedRequest(request)
    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, request=from_other_world)
    assert caught.value.code == "request_mismatch"


def test_build_refuses_a_pack_over_384_mib(
    loaded_main: tuple[CapturedRequest, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = dataclasses.replace(REFERENCE_PACK_LIMITS, max_total_bytes=1000)
    with pytest.raises(EvidencePackBuildError) as caught:
        _prepare(loaded_main, limits=limits)
    assert (caught.value.code, caught.value.field) == ("too_large", "pack")
    assert _prepare(loaded_main, limits=UNCAPPED_PACK_LIMITS).decision


@pytest.mark.parametrize("sabotage", ["size", "manifest", "extra-file", "mode", "dir-mode", "link"])
def test_staged_self_check(
    sabotage: str,
    loaded_main: tuple[CapturedRequest, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = pack_module._write_file

    def write(dir_fd: int, name: str, chunks: Any) -> tuple[str, int]:
        digest, size = original(dir_fd, name, chunks)
        if name != "manifest.json":
            return digest, size
        if sabotage == "size":
            return digest, size + 1
        if sabotage == "manifest":
            return "sha256:" + "0" * 64, size
        if sabotage == "extra-file":
            os.close(os.open("extra", os.O_CREAT | os.O_WRONLY, 0o444, dir_fd=dir_fd))
        elif sabotage == "mode":
            os.chmod("request.json", 0o644, dir_fd=dir_fd)
        elif sabotage == "dir-mode":
            os.chmod("inputs", 0o755, dir_fd=dir_fd)
        else:
            os.symlink("request.json", "link", dir_fd=dir_fd)
        return digest, size

    monkeypatch.setattr(pack_module, "_write_file", write)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert caught.value.code == "self_check_failed"
    assert list(tmp_path.iterdir()) == []


def test_nested_file_mode_is_self_checked(
    loaded_main: tuple[CapturedRequest, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = pack_module._write_file

    def write(dir_fd: int, name: str, chunks: Any) -> tuple[str, int]:
        result = original(dir_fd, name, chunks)
        if name == "policy.json":
            os.chmod(name, 0o600, dir_fd=dir_fd)
        return result

    monkeypatch.setattr(pack_module, "_write_file", write)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert caught.value.code == "self_check_failed"


@pytest.mark.parametrize(
    ("error", "code"), [(errno.EEXIST, "output_exists"), (errno.EACCES, "output_unwritable")]
)
def test_noreplace_rename_errors(
    error: int,
    code: str,
    loaded_main: tuple[CapturedRequest, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(*args: Any) -> int:
        ctypes.set_errno(error)
        return -1

    monkeypatch.setattr(fs_module, "_NOREPLACE", (failing, 1))
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert caught.value.code == code
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("concurrent", "code"), [("fills-claim", "output_exists"), ("denied", "output_unwritable")]
)
def test_claimed_directory_rename_errors(
    concurrent: str,
    code: str,
    loaded_main: tuple[CapturedRequest, bytes],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fs_module, "_NOREPLACE", None)
    real_rename = os.rename

    def rename(old: Any, new: Any, **kwargs: Any) -> None:
        if concurrent == "denied":
            raise OSError(errno.EACCES, "denied")
        (tmp_path / "pack" / "theirs").write_text("concurrent writer")
        real_rename(old, new, **kwargs)

    monkeypatch.setattr(pack_module.os, "rename", rename)
    with pytest.raises(EvidencePackBuildError) as caught:
        publish_pack(_prepare(loaded_main), tmp_path / "pack")
    assert caught.value.code == code
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert remaining == (["pack"] if concurrent == "fills-claim" else [])


def test_published_pack_repr(tmp_path: Path) -> None:
    published = _build(MAIN, tmp_path)
    assert repr(published).startswith("PublishedPack(pack_manifest_digest='sha256:")


def _main_envelope(**changes: Any) -> dict[str, Any]:
    envelope = json.loads((pack_folder(MAIN) / "evidence" / "manifest.signature.json").read_bytes())
    return {**envelope, **changes}


def _file_in(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("x")
    return tmp_path / "file"


KEY_AND_ENVELOPE_REFUSALS = [
    ("pem-not-text", lambda t: VerifyKey.from_pem(3), "invalid_pem"),
    ("key-not-bytes", lambda t: SigningKey("not a key"), "not_ed25519"),
    (
        "envelope-format",
        lambda t: parse_signature_envelope(_main_envelope(format="x")),
        "invalid_constant",
    ),
    (
        "envelope-algorithm",
        lambda t: parse_signature_envelope(_main_envelope(algorithm="rsa")),
        "invalid_constant",
    ),
    (
        "envelope-signature-unknown-field",
        lambda t: parse_signature_envelope(
            _main_envelope(signature={"encoding": "base64", "value": 1, "x": 2})
        ),
        "unknown_field",
    ),
    *rows_for(
        "unsafe_destination",
        generate_below_a_file=lambda t: generate_signing_key(_file_in(t) / "a.pem", t / "b.pem"),
        generate_to_a_parent=lambda t: generate_signing_key(t / "..", t / "b.pem"),
        directory_through_a_file=lambda t: generate_key_directory(_file_in(t) / ".."),
    ),
]


@pytest.mark.parametrize(
    ("action", "code"),
    [pytest.param(*row[1:], id=row[0]) for row in KEY_AND_ENVELOPE_REFUSALS],
)
def test_key_and_envelope_details(
    action: Callable[[Path], object], code: str, tmp_path: Path
) -> None:
    with pytest.raises(SigningKeyError) as caught:
        action(tmp_path)
    assert caught.value.code == code
    assert str(tmp_path) not in str(caught.value)


def test_width_first_report_envelope_is_opt_in(
    signed_pack: Path, loaded_main: tuple[CapturedRequest, bytes]
) -> None:
    """A ``decision_rule`` member only with decision_order="width_first", and then required."""
    report = json.loads(
        (pack_folder(MAIN) / "evidence" / "reports/evaluation.report.json").read_bytes()
    )
    width_first = {**report, "decision_rule": reader_module.WIDTH_FIRST_RULE}
    check_report_document(width_first, decision_order="width_first")
    for document, order, field in (
        (width_first, "reference", "report"),
        (report, "width_first", "report"),
        ({**report, "decision_rule": "other"}, "width_first", "report.decision_rule"),
        (report, "sideways", "decision_order"),
    ):
        with pytest.raises(EvidencePackError) as caught:
            check_report_document(document, decision_order=order)
        assert caught.value.field == field
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(signed_pack, decision_order="sideways")
    assert (caught.value.code, caught.value.field) == ("invalid_field", "decision_order")
    with pytest.raises(EvidencePackError) as caught:
        read_evidence_pack(signed_pack, decision_order="width_first")
    assert (caught.value.code, caught.value.field) == ("invalid_payload", "report")
    with pytest.raises(EvidencePackBuildError) as built:
        _prepare(loaded_main, decision_order="sideways")
    assert (built.value.code, built.value.field) == ("invalid_type", "decision_order")
    with pytest.raises(EvidencePackBuildError) as built:
        _prepare(loaded_main, decision_order="width_first")
    assert built.value.code == "invalid_report"
