"""Signed extended statistics beside a pack (sealeval.captured.extended_seal, sealeval extended).

Uses the reference's signed pack vectors and the vectors' evidence-signer key;
asserts facts derived from each pack (its manifest digest, its signer, a
recomputation from its runs), never literals copied from a vector. Every
refusal code has its own case, and the refusal table covers the closed set.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from referencing import Registry, Resource

import sealeval.captured.extended_seal as extended_seal
from sealeval.canonical import decode, encode_invarlock
from sealeval.captured.extended import EXTENSION_FORMAT, parse_policy_extension
from sealeval.captured.extended_seal import (
    SEAL_FORMAT,
    ExtendedSealError,
    seal_extended,
    verify_extended_seal,
)
from sealeval.captured.pack_reader import EvidencePack, read_evidence_pack
from sealeval.captured.report import extended_for_pack, render_markdown
from sealeval.captured.signing import SigningKey, load_signing_key
from sealeval.cli import cli
from support.contracts import schema
from support.vectors import pack_folder, vectors_dir

SIGNER = vectors_dir() / "invarlock" / "keys" / "evidence-signer" / "private.pem"
MAIN = "text-20-exact-signed"
OTHER = "text-200-multi-signed"
CANARY = "CANARY-7f3a-do-not-echo"


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return load_signing_key(SIGNER)


@pytest.fixture(scope="module")
def pack() -> EvidencePack:
    return read_evidence_pack(pack_folder(MAIN) / "evidence")


def _extension(pack: EvidencePack, **members: Any) -> Any:
    return parse_policy_extension(
        {"format": EXTENSION_FORMAT, "policy_digest": pack.policy.digest, **members}
    )


@pytest.fixture(scope="module")
def sealed(pack: EvidencePack, key: SigningKey) -> bytes:
    assert pack.signer is not None
    assert pack.signer.fingerprint == key.fingerprint
    return seal_extended(pack, _extension(pack, multiplicity="holm", flip_ids=5), key)


def _resign(document: dict[str, Any], key: SigningKey) -> bytes:
    """Sign a (possibly edited) statement as the seal format says: a forger holding ``key``."""
    message = SEAL_FORMAT.encode("ascii") + b"\n" + encode_invarlock(document["statement"])
    document["signing_key_fingerprint"] = key.fingerprint
    document["public_key"]["value"] = key.public_key.pem
    document["signature"]["value"] = base64.b64encode(key.sign(message)).decode("ascii")
    return encode_invarlock(document)


# ---------------------------------------------------------------------------
# The seal covers the numbers; the pack stays the reference's


def test_seal_round_trip_is_deterministic_and_bound_to_the_pack(
    pack: EvidencePack, key: SigningKey, sealed: bytes
) -> None:
    extension = _extension(pack, multiplicity="holm", flip_ids=5)
    assert seal_extended(pack, extension, key) == sealed  # Ed25519 is deterministic
    result = verify_extended_seal(pack, sealed)
    assert result.signer == key.fingerprint
    assert result.pack_manifest_digest == pack.manifest_digest
    assert result.recomputed
    assert result.extension == extension
    assert result.extended_document() == extended_for_pack(pack, extension)
    document = decode(sealed)
    assert document["format"] == SEAL_FORMAT
    registry = Registry().with_resources(
        (contract["$id"], Resource.from_contents(contract))
        for contract in (
            schema("sealeval.comparison-policy-extension-v1"),
            schema("sealeval.extended-comparison-v1"),
        )
    )
    validator = jsonschema.Draft202012Validator(
        schema("sealeval.extended-seal-v1"), registry=registry
    )
    validator.validate(document)
    document["statement"]["extended"]["entries"][0]["flips"] = {"unknown": 1}
    assert not validator.is_valid(document)  # the referenced contracts are enforced
    document = decode(sealed)
    assert document["statement"]["pack_manifest_digest"] == pack.manifest_digest
    # the extension is written in full (every member explicit), so its digest is reproducible
    assert document["statement"]["extension"] == extension.to_dict()
    # a sealed document renders like a recomputed one
    assert render_markdown(pack, extended=result.extended_document()) == render_markdown(
        pack, extended=extended_for_pack(pack, extension)
    )


def test_every_number_in_the_seal_is_covered_by_the_signature(
    pack: EvidencePack, sealed: bytes
) -> None:
    """Field coverage: change each scalar of the statement in turn; the seal is refused."""
    document = decode(sealed)
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for name, child in value.items():
                walk(child, (*path, name))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))
        else:
            paths.append(path)

    walk(document["statement"], ())
    assert len(paths) > 20
    for path in paths:
        edited = decode(sealed)
        parent = edited["statement"]
        for step in path[:-1]:
            parent = parent[step]
        old = parent[path[-1]]
        parent[path[-1]] = "x" if old is None else (not old if isinstance(old, bool) else f"{old}x")
        with pytest.raises(ExtendedSealError) as refused:
            verify_extended_seal(pack, encode_invarlock(edited))
        assert refused.value.code == "invalid_signature", path


def test_the_pack_signer_vouching_for_wrong_numbers_is_caught_by_recomputation(
    pack: EvidencePack, key: SigningKey, sealed: bytes
) -> None:
    document = decode(sealed)
    rows = document["statement"]["extended"]["entries"]
    tested = next(row for row in rows if row["p_value"] is not None)
    tested["p_value"] = min(1.0, tested["p_value"] / 2 + 0.25)
    forged = _resign(document, key)
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal(pack, forged)
    assert (refused.value.code, refused.value.field) == ("extended_mismatch", "statement.extended")
    # recompute=False trusts the signer (documented); the signature still holds
    trusted = verify_extended_seal(pack, forged, recompute=False)
    assert not trusted.recomputed


# ---------------------------------------------------------------------------
# Refusals, one per rule


def _edit(change: Callable[[dict[str, Any]], None], *, resign: bool) -> Callable[..., bytes]:
    def make(sealed: bytes, key: SigningKey, other: SigningKey) -> bytes:
        document = decode(sealed)
        change(document)
        return _resign(document, key) if resign else encode_invarlock(document)

    return make


def _raw(data: Callable[[bytes], bytes]) -> Callable[..., bytes]:
    return lambda sealed, key, other: data(sealed)


def _other_key(sealed: bytes, key: SigningKey, other: SigningKey) -> bytes:
    return _resign(decode(sealed), other)


def _declared_other(sealed: bytes, key: SigningKey, other: SigningKey) -> bytes:
    document = decode(sealed)
    data = _resign(document, key)
    document = decode(data)
    document["signing_key_fingerprint"] = other.fingerprint
    return encode_invarlock(document)


def _bad_base64(document: dict[str, Any]) -> None:
    document["signature"]["value"] = "not base64!"


def _flip_decision(document: dict[str, Any]) -> None:
    extended = document["statement"]["extended"]
    extended["decision"] = "regression" if extended["decision"] != "regression" else "pass"


def _pretty(sealed: bytes) -> bytes:
    return json.dumps(json.loads(sealed), indent=2).encode("utf-8")


REFUSALS = [
    pytest.param(_raw(lambda s: b"{" + s), "invalid_document", "seal", id="not-json"),
    pytest.param(_raw(lambda s: b"[]\n"), "invalid_document", "seal", id="not-an-object"),
    pytest.param(_raw(_pretty), "not_canonical", "seal", id="not-canonical"),
    pytest.param(
        _edit(lambda d: d.update(extra=1), resign=False), "unknown_member", "seal", id="unknown"
    ),
    pytest.param(
        _edit(lambda d: d.pop("signature"), resign=False),
        "missing_member",
        "signature",
        id="missing",
    ),
    pytest.param(
        _edit(lambda d: d["statement"].pop("extension"), resign=False),
        "missing_member",
        "statement.extension",
        id="missing-statement-member",
    ),
    pytest.param(
        _edit(lambda d: d.update(format="sealeval/extended-seal-v0"), resign=False),
        "invalid_value",
        "format",
        id="format",
    ),
    pytest.param(
        _edit(lambda d: d["public_key"].update(encoding="der"), resign=False),
        "invalid_value",
        "public_key",
        id="key-encoding",
    ),
    pytest.param(
        _edit(_bad_base64, resign=False), "invalid_signature", "signature", id="bad-base64"
    ),
    pytest.param(
        _edit(_flip_decision, resign=False),
        "invalid_signature",
        "signature",
        id="tampered-numbers",
    ),
    pytest.param(_other_key, "signer_mismatch", "signing_key_fingerprint", id="other-signer"),
    pytest.param(
        _declared_other, "signer_mismatch", "signing_key_fingerprint", id="declared-other"
    ),
    pytest.param(
        _edit(
            lambda d: d["statement"].update(pack_manifest_digest="sha256:" + "0" * 64),
            resign=True,
        ),
        "pack_mismatch",
        "statement.pack_manifest_digest",
        id="other-pack",
    ),
    pytest.param(
        _edit(lambda d: d["statement"]["extension"].pop("flip_ids"), resign=True),
        "extension_mismatch",
        "statement.extension",
        id="extension-not-explicit",
    ),
    pytest.param(
        _edit(lambda d: d["statement"]["extension"].update(alpha=2.0), resign=True),
        "extension_mismatch",
        "statement.extension",
        id="extension-invalid",
    ),
    pytest.param(
        _edit(
            lambda d: d["statement"]["extension"].update(policy_digest="sha256:" + "1" * 64),
            resign=True,
        ),
        "extension_mismatch",
        "statement.extension.policy_digest",
        id="extension-other-policy",
    ),
    pytest.param(
        _edit(
            lambda d: d["statement"]["extended"].update(comparison_digest="sha256:" + "2" * 64),
            resign=True,
        ),
        "extended_mismatch",
        "statement.extended",
        id="extended-other-comparison",
    ),
]


@pytest.mark.parametrize(("make", "code", "field"), REFUSALS)
def test_seal_refusals(
    make: Callable[..., bytes],
    code: str,
    field: str,
    pack: EvidencePack,
    key: SigningKey,
    sealed: bytes,
) -> None:
    other = SigningKey.from_seed(bytes(range(32)))
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal(pack, make(sealed, key, other))
    assert (refused.value.code, refused.value.field) == (code, field)


def test_size_and_pack_refusals(
    pack: EvidencePack, key: SigningKey, sealed: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    unsigned = read_evidence_pack(pack_folder("text-20-exact-unsigned") / "evidence")
    for call in (
        lambda: verify_extended_seal(unsigned, sealed),
        lambda: seal_extended(unsigned, _extension(unsigned), key),
    ):
        with pytest.raises(ExtendedSealError) as refused:
            call()
        assert (refused.value.code, refused.value.field) == ("unsigned_pack", "pack")
    other = read_evidence_pack(pack_folder(OTHER) / "evidence")
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal(other, sealed)
    assert refused.value.code == "pack_mismatch"
    with pytest.raises(ExtendedSealError) as refused:
        seal_extended(pack, _extension(pack), SigningKey.from_seed(bytes(32)))
    assert (refused.value.code, refused.value.field) == ("signer_mismatch", "signing_key")
    for arguments, field in (
        (("pack", _extension(pack), key), "pack"),
        ((pack, {"format": EXTENSION_FORMAT}, key), "extension"),
        ((pack, _extension(pack), "key"), "signing_key"),
    ):
        with pytest.raises(ExtendedSealError) as refused:
            seal_extended(*arguments)  # type: ignore[arg-type]
        assert (refused.value.code, refused.value.field) == ("invalid_value", field)
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal("pack", sealed)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.field) == ("invalid_value", "pack")
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal(pack, "text")  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.field) == ("invalid_document", "seal")
    monkeypatch.setattr(extended_seal, "MAX_SEAL_BYTES", len(sealed) - 1)
    with pytest.raises(ExtendedSealError) as refused:
        verify_extended_seal(pack, sealed)
    assert (refused.value.code, refused.value.field) == ("too_large", "seal")


def test_refusal_cases_cover_every_code() -> None:
    covered = {param.values[1] for param in REFUSALS} | {
        "unsigned_pack",
        "too_large",
        "extended_mismatch",
        "signer_mismatch",
        "invalid_value",
        "pack_mismatch",
    }
    assert covered == ExtendedSealError.codes


# ---------------------------------------------------------------------------
# CLI


def test_cli_seals_and_checks_without_touching_the_pack(tmp_path: Path, pack: EvidencePack) -> None:
    evidence = pack_folder(MAIN) / "evidence"
    before = {path: path.read_bytes() for path in sorted(evidence.rglob("*")) if path.is_file()}
    extension = tmp_path / "extension.json"
    extension.write_text(
        json.dumps({"format": EXTENSION_FORMAT, "policy_digest": pack.policy.digest}),
        encoding="utf-8",
    )
    seal = tmp_path / "extended.seal.json"
    runner = CliRunner()
    arguments = ["extended", str(evidence), "--extension", str(extension)]
    made = runner.invoke(cli, [*arguments, "--signing-key", str(SIGNER), "--output", str(seal)])
    assert made.exit_code == 0, made.output
    assert "--check" in made.output
    assert {path: path.read_bytes() for path in before} == before
    checked = runner.invoke(cli, ["extended", str(evidence), "--check", str(seal), "--json"])
    assert checked.exit_code == 0, checked.output
    expected = extended_for_pack(pack, _extension(pack))
    assert decode(checked.output) == expected
    human = runner.invoke(cli, ["extended", str(evidence), "--check", str(seal)])
    assert human.exit_code == 0
    assert f"extended decision {expected['decision']}" in human.output
    assert pack.manifest_digest in human.output
    # an existing destination is never replaced
    again = runner.invoke(cli, [*arguments, "--signing-key", str(SIGNER), "--output", str(seal)])
    assert again.exit_code == 2
    assert "output_exists" in again.output
    # a tampered seal is refused with its code, naming no value
    document = decode(seal.read_bytes())
    document["statement"]["extended"]["decision"] = CANARY
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(encode_invarlock(document))
    refused = runner.invoke(cli, ["extended", str(evidence), "--check", str(tampered)])
    assert refused.exit_code == 2
    assert "signature: invalid_signature" in refused.output
    assert CANARY not in refused.output


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        pytest.param(["--check", "s.json", "--output", "o.json"], "--check", id="check-and-output"),
        pytest.param(["--output", "o.json"], "--extension", id="no-extension"),
        pytest.param(["--extension", "e.json", "--output", "o.json"], "--signing-key", id="no-key"),
        pytest.param(["--extension", "e.json", "--signing-key", "k"], "--output", id="no-output"),
        pytest.param(
            ["--extension", "e.json", "--signing-key", "k.pem", "--output", "o", "--json"],
            "--json",
            id="json-when-sealing",
        ),
    ],
)
def test_cli_usage_refusals(extra: list[str], option: str, tmp_path: Path) -> None:
    result = CliRunner(env={"SEALEVAL_SIGNING_KEY": None}).invoke(
        cli, ["extended", str(pack_folder(MAIN) / "evidence"), *extra]
    )
    assert result.exit_code == 2
    assert f"{option}:" in result.output


def test_cli_refuses_a_seal_inside_the_pack(tmp_path: Path) -> None:
    evidence = pack_folder(MAIN) / "evidence"
    result = CliRunner().invoke(
        cli,
        [
            "extended",
            str(evidence),
            "--extension",
            str(tmp_path / "e.json"),
            "--signing-key",
            str(SIGNER),
            "--output",
            str(evidence / "extended.json"),
        ],
    )
    assert result.exit_code == 2
    assert "--output: invalid_value" in result.output
    assert not (evidence / "extended.json").exists()
