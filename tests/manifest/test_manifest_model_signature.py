"""OpenSSF Model Signing signatures checked before sealing (real signatures, real keys).

Every signature here is made in a temporary directory by the ``model-signing``
package itself with a freshly generated local ECDSA key, then checked offline
by :func:`sealeval.manifest.model_signature.check_model_signature` and by
``sealeval manifest seal/verify --model-signature --model-public-key``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from model_signing import hashing, signing

from sealeval.cli.manifest import manifest
from sealeval.errors import ComponentDigestError
from sealeval.manifest.components import digest_tree
from sealeval.manifest.model_signature import (
    ModelSignatureError,
    check_model_signature,
    signed_files,
)
from sealeval.manifest.sealed import COMPONENTS
from support.refusals import assert_refused

CANARY = "CANARY-model-7c1d-jane-doe"


def _write_key(directory: Path, key: Any, name: str) -> tuple[Path, Path]:
    private = directory / f"{name}.key"
    public = directory / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def _model(directory: Path) -> Path:
    model = directory / "model"
    (model / "shards").mkdir(parents=True)
    (model / "config.json").write_text('{"layers": 2}\n', encoding="utf-8")
    (model / "shards" / "weights-1.bin").write_bytes(bytes(range(256)) * 64)
    (model / "shards" / "weights-2.bin").write_bytes(os.urandom(4096))
    return model


def _sign(model: Path, private: Path, signature: Path, *, shards: bool = False) -> None:
    config = signing.Config().use_elliptic_key_signer(private_key=private)
    if shards:
        config = config.set_hashing_config(hashing.Config().use_shard_serialization())
    config.sign(model, signature)


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Path]:
    model = _model(tmp_path)
    private, public = _write_key(tmp_path, ec.generate_private_key(ec.SECP256R1()), "p256")
    signature = tmp_path / "model.sig"
    _sign(model, private, signature)
    return {"model": model, "private": private, "public": public, "signature": signature}


def _refused(paths: dict[str, Path], code: str, field: str, **override: Path) -> None:
    arguments = {**paths, **override}
    error = assert_refused(
        lambda: check_model_signature(
            arguments["model"], arguments["signature"], arguments["public"]
        ),
        code,
        field,
    )
    assert isinstance(error, ModelSignatureError)


# ---------------------------------------------------------------------------
# Accepted


def test_a_valid_signature_is_accepted_and_the_walk_is_the_sealed_digest(
    signed: dict[str, Path],
) -> None:
    result = check_model_signature(signed["model"], signed["signature"], signed["public"])
    assert result.model_digest == digest_tree(signed["model"])
    assert result.file_count == 3
    claimed = signed_files(signed["signature"].read_bytes())
    assert set(claimed) == {"config.json", "shards/weights-1.bin", "shards/weights-2.bin"}
    data = (signed["model"] / "config.json").read_bytes()
    assert claimed["config.json"] == "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("curve", [ec.SECP384R1(), ec.SECP521R1()], ids=["p384", "p521"])
def test_other_supported_curves(tmp_path: Path, curve: ec.EllipticCurve) -> None:
    model = _model(tmp_path)
    private, public = _write_key(tmp_path, ec.generate_private_key(curve), "key")
    _sign(model, private, tmp_path / "model.sig")
    result = check_model_signature(model, tmp_path / "model.sig", public)
    assert result.model_digest == digest_tree(model)


# ---------------------------------------------------------------------------
# Coverage: exactly the files being sealed


def test_an_extra_file_is_refused(signed: dict[str, Path]) -> None:
    (signed["model"] / "shards" / "extra.bin").write_bytes(b"x")
    _refused(signed, "extra_file", "model")


def test_a_missing_file_is_refused(signed: dict[str, Path]) -> None:
    (signed["model"] / "shards" / "weights-2.bin").unlink()
    _refused(signed, "missing_file", "model")


def test_a_changed_file_is_refused(signed: dict[str, Path]) -> None:
    (signed["model"] / "config.json").write_text('{"layers": 3}\n', encoding="utf-8")
    _refused(signed, "changed_file", "model")


def test_files_the_package_ignores_are_still_sealed_so_they_must_be_signed(
    signed: dict[str, Path],
) -> None:
    (signed["model"] / ".gitattributes").write_text("*.bin binary\n", encoding="utf-8")
    _refused(signed, "extra_file", "model")


def test_a_symlink_is_not_covered(signed: dict[str, Path]) -> None:
    (signed["model"] / "alias.json").symlink_to("config.json")
    _refused(signed, "extra_file", "model")


def test_a_signature_inside_the_model_directory_is_an_extra_file(
    signed: dict[str, Path],
) -> None:
    inside = signed["model"] / "model.sig"
    inside.write_bytes(signed["signature"].read_bytes())
    _refused(signed, "extra_file", "model", signature=inside)


# ---------------------------------------------------------------------------
# Authenticity


def test_another_key_is_refused(signed: dict[str, Path], tmp_path: Path) -> None:
    _, other = _write_key(tmp_path, ec.generate_private_key(ec.SECP256R1()), "other")
    _refused(signed, "invalid_signature", "model_signature", public=other)


def test_a_forged_file_list_is_refused(signed: dict[str, Path], tmp_path: Path) -> None:
    # Change a file, then rewrite the signed file list to match it: the coverage
    # check agrees with the forged list, the signature does not.
    changed = b'{"layers": 99}\n'
    (signed["model"] / "config.json").write_bytes(changed)
    bundle = json.loads(signed["signature"].read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    for resource in statement["predicate"]["resources"]:
        if resource["name"] == "config.json":
            resource["digest"] = hashlib.sha256(changed).hexdigest()
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    forged = tmp_path / "forged.sig"
    forged.write_text(json.dumps(bundle), encoding="utf-8")
    _refused(signed, "invalid_signature", "model_signature", signature=forged)


# ---------------------------------------------------------------------------
# Inputs


def test_an_ed25519_key_is_unsupported(signed: dict[str, Path], tmp_path: Path) -> None:
    _, public = _write_key(tmp_path, Ed25519PrivateKey.generate(), "ed")
    _refused(signed, "unsupported_public_key", "model_public_key", public=public)


def test_key_and_signature_file_refusals(signed: dict[str, Path], tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text(CANARY, encoding="utf-8")
    _refused(signed, "invalid_public_key", "model_public_key", public=garbage)
    _refused(signed, "invalid_signature_document", "model_signature", signature=garbage)
    _refused(signed, "unavailable", "model_public_key", public=tmp_path / "absent.pub")
    _refused(signed, "unavailable", "model_signature", signature=tmp_path / "absent.sig")
    _refused(signed, "unavailable", "model_signature", signature=tmp_path)
    link = tmp_path / "link.sig"
    link.symlink_to(signed["signature"])
    _refused(signed, "unavailable", "model_signature", signature=link)
    not_dsse = tmp_path / "not-dsse.sig"
    not_dsse.write_text(json.dumps({"dsseEnvelope": {"payloadType": "text/plain"}}), "utf-8")
    _refused(signed, "invalid_signature_document", "model_signature", signature=not_dsse)


def test_shard_serialization_is_unsupported(tmp_path: Path) -> None:
    model = _model(tmp_path)
    private, public = _write_key(tmp_path, ec.generate_private_key(ec.SECP256R1()), "key")
    _sign(model, private, tmp_path / "model.sig", shards=True)
    paths = {"model": model, "signature": tmp_path / "model.sig", "public": public}
    _refused(paths, "unsupported_serialization", "model_signature")


def test_the_model_must_be_a_directory(signed: dict[str, Path]) -> None:
    _refused(signed, "not_directory", "model", model=signed["model"] / "config.json")


def test_walk_refusals_name_the_model(signed: dict[str, Path], tmp_path: Path) -> None:
    (signed["model"] / "escape").symlink_to(tmp_path / "model.sig")
    with pytest.raises(ComponentDigestError) as caught:
        check_model_signature(signed["model"], signed["signature"], signed["public"])
    assert (caught.value.code, caught.value.field) == ("symlink_escapes_tree", "model")


def test_without_the_extra_the_check_names_it(
    signed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "model_signing", None)
    monkeypatch.setitem(sys.modules, "model_signing.verifying", None)
    _refused(signed, "model_signing_extra_missing", "model_signature")


def test_refusals_never_echo_file_names(signed: dict[str, Path]) -> None:
    (signed["model"] / CANARY).write_bytes(b"x")
    with pytest.raises(ModelSignatureError) as caught:
        check_model_signature(signed["model"], signed["signature"], signed["public"])
    assert caught.value.code == "extra_file"
    assert CANARY not in str(caught.value)
    assert CANARY not in repr(caught.value)


# ---------------------------------------------------------------------------
# sealeval manifest seal / verify


OTHERS = [f"{name}=sha256:{index:064x}" for index, name in enumerate(COMPONENTS) if name != "model"]


def _digests() -> list[str]:
    return [item for value in OTHERS for item in ("--digest", value)]


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(manifest, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _options(paths: dict[str, Path]) -> list[str]:
    return [
        "--model",
        str(paths["model"]),
        "--model-signature",
        str(paths["signature"]),
        "--model-public-key",
        str(paths["public"]),
    ]


def test_seal_and_verify_with_a_valid_signature(signed: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "manifest.json"
    code, out, err = _cli("seal", *_digests(), *_options(signed), "-o", str(output))
    assert (code, err) == (0, "")
    document = json.loads(output.read_bytes())
    assert document["component_digests"]["model"] == digest_tree(signed["model"])
    assert out.strip() == document["manifest_digest"]
    code, out, _ = _cli("verify", str(output), *_digests(), *_options(signed), "--json")
    assert code == 0
    assert json.loads(out)["eligible_for_sealed_results"] is True


def test_seal_refuses_a_mismatching_model_and_writes_nothing(
    signed: dict[str, Path], tmp_path: Path
) -> None:
    (signed["model"] / CANARY).write_bytes(b"x")
    output = tmp_path / "manifest.json"
    code, out, err = _cli("seal", *_digests(), *_options(signed), "-o", str(output))
    assert (code, out, err) == (2, "", "sealeval: error: model: extra_file\n")
    assert not output.exists()


def test_verify_refuses_a_changed_model(signed: dict[str, Path], tmp_path: Path) -> None:
    output = tmp_path / "manifest.json"
    assert _cli("seal", *_digests(), *_options(signed), "-o", str(output))[0] == 0
    (signed["model"] / "config.json").write_text("{}", encoding="utf-8")
    code, _, err = _cli("verify", str(output), *_digests(), *_options(signed))
    assert (code, err) == (2, "sealeval: error: model: changed_file\n")


@pytest.mark.parametrize(
    ("drop", "extra", "message"),
    [
        pytest.param(
            "--model-public-key", [], "model-signature: model_signature_incomplete", id="no-key"
        ),
        pytest.param(
            "--model-signature", [], "model-signature: model_signature_incomplete", id="no-sig"
        ),
        pytest.param(
            None, ["--kind", "model=file"], "model: model_signature_needs_directory", id="kind"
        ),
    ],
)
def test_seal_usage_refusals(
    signed: dict[str, Path], tmp_path: Path, drop: str | None, extra: list[str], message: str
) -> None:
    options = _options(signed)
    if drop is not None:
        index = options.index(drop)
        del options[index : index + 2]
    code, _, err = _cli("seal", *_digests(), *options, *extra, "-o", str(tmp_path / "m.json"))
    assert (code, err) == (2, f"sealeval: error: {message}\n")


def test_a_model_given_as_a_digest_cannot_be_signature_checked(
    signed: dict[str, Path], tmp_path: Path
) -> None:
    options = _options(signed)[2:]
    digest = ["--digest", "model=sha256:" + "f" * 64]
    code, _, err = _cli("seal", *_digests(), *digest, *options, "-o", str(tmp_path / "m.json"))
    assert (code, err) == (2, "sealeval: error: model: model_signature_needs_directory\n")


def test_seal_without_the_extra_names_it(
    signed: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "model_signing", None)
    monkeypatch.setitem(sys.modules, "model_signing.verifying", None)
    code, _, err = _cli("seal", *_digests(), *_options(signed), "-o", str(tmp_path / "m.json"))
    assert (code, err) == (2, "sealeval: error: model_signature: model_signing_extra_missing\n")


# ---------------------------------------------------------------------------
# The signature document's structure, one rule per case


def _statement_edit(signature: Path, edit: Any) -> bytes:
    bundle = json.loads(signature.read_bytes())
    statement = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    edit(statement)
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    return json.dumps(bundle).encode()


def _resource(index: int, **changes: Any) -> Any:
    return lambda s: s["predicate"]["resources"][index].update(changes)


def _duplicate(statement: dict[str, Any]) -> None:
    resources = statement["predicate"]["resources"]
    resources.append(dict(resources[0]))


DOCUMENT_RULES = [
    pytest.param(lambda s: s.update(predicateType="x"), "invalid_signature_document", id="type"),
    pytest.param(lambda s: s.pop("predicate"), "invalid_signature_document", id="no-predicate"),
    pytest.param(
        lambda s: s["predicate"].update(resources={}), "invalid_signature_document", id="resources"
    ),
    pytest.param(_duplicate, "invalid_signature_document", id="duplicate-name"),
    pytest.param(_resource(0, digest="AB" * 32), "invalid_signature_document", id="upper-hex"),
    pytest.param(_resource(0, name=7), "invalid_signature_document", id="name-type"),
    pytest.param(_resource(0, algorithm="blake3"), "unsupported_serialization", id="blake3"),
    pytest.param(
        lambda s: s["predicate"]["serialization"].update(hash_type="blake2"),
        "unsupported_serialization",
        id="hash-type",
    ),
]


@pytest.fixture(scope="module")
def one_signature(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("one-signature")
    private, _ = _write_key(directory, ec.generate_private_key(ec.SECP256R1()), "key")
    _sign(_model(directory), private, directory / "model.sig")
    return directory / "model.sig"


@pytest.mark.parametrize(("edit", "code"), DOCUMENT_RULES)
def test_signature_document_rules(one_signature: Path, edit: Any, code: str) -> None:
    assert signed_files(_statement_edit(one_signature, lambda _: None))
    edited = _statement_edit(one_signature, edit)
    error = assert_refused(lambda: signed_files(edited), code, "model_signature")
    assert isinstance(error, ModelSignatureError)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[]", id="not-object"),
        pytest.param(
            b'{"dsseEnvelope": {"payloadType": "application/vnd.in-toto+json"}}', id="nop"
        ),
        pytest.param(
            b'{"dsseEnvelope": {"payloadType": "application/vnd.in-toto+json", "payload": "!"}}',
            id="base64",
        ),
        pytest.param(b'{"a": 1, "a": 1}', id="duplicate-key"),
    ],
)
def test_signature_bytes_rules(data: bytes) -> None:
    with pytest.raises(ModelSignatureError) as caught:
        signed_files(data)
    assert caught.value.code == "invalid_signature_document"


def test_an_oversized_key_file_is_refused(signed: dict[str, Path], tmp_path: Path) -> None:
    large = tmp_path / "large.pub"
    large.write_bytes(b"-" * 70_000)
    _refused(signed, "too_large", "model_public_key", public=large)


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=256)
    | st.builds(
        lambda t: json.dumps(t).encode(),
        st.dictionaries(st.text(max_size=12), st.text(max_size=12) | st.integers(), max_size=3),
    )
)
def test_arbitrary_signature_bytes_are_refused_with_a_closed_code(data: bytes) -> None:
    with pytest.raises(ModelSignatureError) as caught:
        signed_files(data)
    assert caught.value.code in ModelSignatureError.codes
