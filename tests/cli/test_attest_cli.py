"""``sealeval attest``: emit, verify, refuse; and the policy example of docs/attestations.md."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.attest import PREDICATE_TYPES, verify_attestation
from sealeval.canonical import digest_bytes, digest_openmed, encode_invarlock, encode_openmed
from sealeval.captured.signing import generate_key_directory, load_verify_key
from sealeval.cli.attest import attest
from sealeval.gates.candidate import AgentCandidatePacket, Ed25519SigningKey, sign_packet
from sealeval.gates.runner import MAX_KEY_BYTES
from support.vectors import PROJECT_ROOT, load, vectors_dir

CANARY = "CANARY-attest-cli-41b7-jane-doe"


def _case(name: str) -> dict[str, Any]:
    for case in load("openmed/candidate_runner.json")["cases"]:
        if case["name"] == name:
            return case  # type: ignore[no-any-return]
    raise LookupError(name)


HMAC_KEY = bytes.fromhex(_case("recipe")["input"]["signing_key_hex"])


def _bundles(decision: str) -> list[dict[str, Any]]:
    found = [
        case["expected"]["bundle"]
        for case in load("openmed/candidate_runner.json")["cases"]
        if "bundle" in case.get("expected", {})
        and case["expected"]["bundle"]["packet"]["decision"] == decision
        and case["expected"]["bundle"]["manifest"]["artifacts"]["wheel"]
    ]
    assert found
    return found


def _rebound(bundle: dict[str, Any], wheel: bytes, sdist: bytes) -> dict[str, Any]:
    """Bind a vector bundle to real artifact files: new digests, re-sealed and re-signed."""
    result = copy.deepcopy(bundle)
    result["manifest"]["artifacts"]["wheel"] = digest_bytes(wheel)
    result["manifest"]["artifacts"]["sdist"] = digest_bytes(sdist)
    result["manifest_digest"] = digest_openmed(result["manifest"])
    unsigned = {
        key: value
        for key, value in result["packet"].items()
        if key not in ("packet_digest", "signature")
    }
    unsigned["manifest_digest"] = result["manifest_digest"]
    result["packet"] = sign_packet(unsigned, HMAC_KEY)
    return result


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    generate_key_directory(tmp_path / "keys")
    generate_key_directory(tmp_path / "other")
    (tmp_path / "hmac.key").write_bytes(HMAC_KEY)
    (tmp_path / "dist").mkdir()
    wheel = b"PK\x03\x04 a real enough wheel " + CANARY.encode()
    sdist = b"\x1f\x8b an sdist"
    (tmp_path / "dist" / "agent-1.0-py3-none-any.whl").write_bytes(wheel)
    (tmp_path / "dist" / "agent-1.0.tar.gz").write_bytes(sdist)
    ready = _rebound(_bundles("READY")[0], wheel, sdist)
    (tmp_path / "bundle.json").write_text(encode_openmed(ready), encoding="utf-8")
    not_ready = _rebound(_bundles("NOT_READY")[0], wheel, sdist)
    (tmp_path / "not-ready.json").write_text(encode_openmed(not_ready), encoding="utf-8")
    manifest = next(
        case["expected"]["parsed"]
        for case in load("openmed/manifest_seal.json")["cases"]
        if "parsed" in case["expected"]
    )
    (tmp_path / "manifest.json").write_text(encode_openmed(manifest), encoding="utf-8")
    receipt = sorted((vectors_dir() / "invarlock" / "packs").glob("*/verify/trust-*.json"))[0]
    (tmp_path / "receipt.json").write_bytes(receipt.read_bytes())
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(attest, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


SIGN = ("--signing-key", "keys/private.pem")
HMAC = ("--hmac-key-file", "hmac.key")
RELEASE = ("release", "bundle.json", *HMAC)


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        pytest.param(("manifest", "manifest.json"), "manifest", id="manifest"),
        pytest.param(("receipt", "receipt.json"), "receipt", id="receipt"),
        pytest.param(RELEASE, "release", id="release"),
    ],
)
def test_emit_then_verify(ws: Path, args: tuple[str, ...], kind: str) -> None:
    code, out, err = invoke(*args, *SIGN, "-o", "out.json")
    assert (code, err) == (0, "")
    key = load_verify_key(ws / "keys" / "public.pem")
    assert out.splitlines()[:2] == [
        f"predicate: {PREDICATE_TYPES[kind]}",
        f"keyid: {key.fingerprint}",
    ]
    verified = verify_attestation((ws / "out.json").read_bytes(), key)
    code, out, _ = invoke("verify", "out.json", "--public-key", "keys/public.pem", "--type", kind)
    assert code == 0
    assert out.splitlines() == [
        f"verified: {PREDICATE_TYPES[kind]}",
        f"keyid: {key.fingerprint}",
        *(f"subject: {subject.digest}" for subject in verified.statement.subjects),
    ]
    code, out, _ = invoke("verify", "out.json", "--public-key", "keys/public.pem", "--json")
    assert code == 0
    assert out == encode_openmed(verified.statement.to_dict()) + "\n"
    # Refused with another trusted key, or another required type.
    code, out, err = invoke("verify", "out.json", "--public-key", "other/public.pem")
    assert (code, out, err) == (1, "", "sealeval: error: signatures.keyid: unknown_keyid\n")
    other = next(name for name in PREDICATE_TYPES if name != kind)
    code, _, err = invoke("verify", "out.json", "--public-key", "keys/public.pem", "--type", other)
    assert (code, err) == (1, "sealeval: error: predicateType: predicate_type_mismatch\n")
    # The output is never overwritten.
    code, _, err = invoke(*args, *SIGN, "-o", "out.json")
    assert (code, err) == (2, "sealeval: error: --output: output_exists\n")


def test_release_subjects_are_named_by_the_artifact_files(ws: Path) -> None:
    wheel, sdist = "dist/agent-1.0-py3-none-any.whl", "dist/agent-1.0.tar.gz"
    code, _, _ = invoke(*RELEASE, "--wheel", wheel, "--sdist", sdist, *SIGN, "-o", "r.json")
    assert code == 0
    verified = verify_attestation(
        (ws / "r.json").read_bytes(), load_verify_key(ws / "keys" / "public.pem")
    )
    assert [(item.name, item.digest) for item in verified.statement.subjects] == [
        (Path(wheel).name, digest_bytes((ws / wheel).read_bytes())),
        (Path(sdist).name, digest_bytes((ws / sdist).read_bytes())),
    ]


def test_release_refusals(ws: Path) -> None:
    (ws / "wrong.key").write_bytes(b"w" * 40)
    (ws / "dist" / "other.whl").write_bytes(b"not the recorded wheel")
    cases = [
        ((*RELEASE, "--wheel", "dist/other.whl"), 2, "wheel: subject_mismatch"),
        ((*RELEASE, "--wheel", "dist/absent.whl"), 2, "wheel: input_unavailable"),
        (("release", "bundle.json", "--hmac-key-file", "wrong.key"), 2, None),
        (("release", "bundle.json", "--packet-public-key", "keys/public.pem"), 2, None),
        (("release", "absent.json", "--hmac-key-file", "hmac.key"), 2, "bundle: input_unavailable"),
        (
            ("release", "receipt.json", "--hmac-key-file", "hmac.key"),
            2,
            "bundle: invalid_predicate",
        ),
    ]
    for args, status, message in cases:
        code, out, err = invoke(*args, *SIGN, "-o", "r.json")
        assert (code, out) == (status, ""), args
        expected = message or "packet: predicate_signature_invalid"
        assert err == f"sealeval: error: {expected}\n", args
        assert not (ws / "r.json").exists()
    code, _, err = invoke("release", "bundle.json", *SIGN, "-o", "r.json")
    assert code == 2
    assert "exactly one of --hmac-key-file or --packet-public-key" in err


def test_input_refusals(ws: Path) -> None:
    (ws / "bad.json").write_text('{"a": 1, "a": 2}', encoding="utf-8")
    (ws / "list.json").write_text("[]", encoding="utf-8")
    (ws / "canary.json").write_text(json.dumps({"schema_version": CANARY}), encoding="utf-8")
    cases = [
        (("manifest", "canary.json"), "component_digests: missing_field"),
        (("manifest", "absent.json"), "manifest: input_unavailable"),
        (("receipt", "bad.json"), "receipt: invalid_json"),
        (("receipt", "list.json"), "receipt: invalid_predicate"),
        (("receipt", "canary.json"), "predicate: invalid_predicate"),
    ]
    for args, message in cases:
        code, out, err = invoke(*args, *SIGN, "-o", "x.json")
        assert (code, out, err) == (2, "", f"sealeval: error: {message}\n"), args
        assert CANARY not in err
    code, _, err = invoke(
        "manifest", "manifest.json", "--signing-key", "keys/public.pem", "-o", "x"
    )
    assert (code, err) == (2, "sealeval: error: --signing-key: invalid_pem\n")


def _tamper_payload(document: dict[str, Any]) -> None:
    raw = bytearray(base64.b64decode(document["payload"]))
    raw[-2] ^= 0x01
    document["payload"] = base64.b64encode(bytes(raw)).decode("ascii")


def test_verify_refusals_exit_1_and_input_errors_exit_2(ws: Path) -> None:
    assert invoke("manifest", "manifest.json", *SIGN, "-o", "m.json")[0] == 0
    document = json.loads((ws / "m.json").read_bytes())
    _tamper_payload(document)
    (ws / "tampered.json").write_bytes(encode_invarlock(document))
    code, out, err = invoke("verify", "tampered.json", "--public-key", "keys/public.pem")
    assert (code, out, err) == (1, "", "sealeval: error: signatures.sig: invalid_signature\n")
    (ws / "canary.json").write_text(CANARY, encoding="utf-8")
    code, _, err = invoke("verify", "canary.json", "--public-key", "keys/public.pem")
    assert (code, err) == (1, "sealeval: error: envelope: invalid_json\n")
    code, _, err = invoke("verify", "absent.json", "--public-key", "keys/public.pem")
    assert (code, err) == (2, "sealeval: error: envelope: input_unavailable\n")
    code, _, err = invoke("verify", "m.json", "--public-key", "canary.json")
    assert (code, err) == (2, "sealeval: error: --public-key: invalid_pem\n")


# ---------------------------------------------------------------------------
# docs/attestations.md: the policy example runs as documented


def _policy() -> Any:
    text = (PROJECT_ROOT / "docs" / "attestations.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- policy-example -->\n```python\n(.*?)```\n", text, re.DOTALL)
    assert match is not None
    namespace: dict[str, Any] = {}
    exec(compile(match.group(1), "attestations.md", "exec"), namespace)
    return namespace["admit"]


def test_the_documented_policy_admits_only_a_passing_decision(ws: Path) -> None:
    admit = _policy()
    wheel = ws / "dist" / "agent-1.0-py3-none-any.whl"
    public = ws / "keys" / "public.pem"
    assert invoke(*RELEASE, *SIGN, "-o", "ready.json")[0] == 0
    assert (
        invoke("release", "not-ready.json", "--hmac-key-file", "hmac.key", *SIGN, "-o", "no.json")[
            0
        ]
        == 0
    )
    assert invoke("manifest", "manifest.json", *SIGN, "-o", "manifest.intoto.json")[0] == 0
    assert admit(wheel, ws / "ready.json", public) is True
    assert admit(wheel, ws / "no.json", public) is False
    assert admit(ws / "dist" / "agent-1.0.tar.gz", ws / "ready.json", public) is True
    (ws / "model.bin").write_bytes(b"another artifact")
    assert admit(ws / "model.bin", ws / "ready.json", public) is False
    assert admit(wheel, ws / "ready.json", ws / "other" / "public.pem") is False
    assert admit(wheel, ws / "manifest.intoto.json", public) is False
    document = json.loads((ws / "ready.json").read_bytes())
    _tamper_payload(document)
    (ws / "tampered.json").write_bytes(encode_invarlock(document))
    assert admit(wheel, ws / "tampered.json", public) is False


def test_release_with_an_ed25519_signed_packet(ws: Path) -> None:
    private = (ws / "other" / "private.pem").read_bytes()
    bundle = json.loads((ws / "bundle.json").read_bytes())
    packet = AgentCandidatePacket.from_dict(bundle["packet"])
    bundle["packet_ed25519"] = Ed25519SigningKey.from_pem(private).sign_packet(packet)
    (ws / "signed-bundle.json").write_text(encode_openmed(bundle), encoding="utf-8")
    release = ("release", "signed-bundle.json", *SIGN, "-o")
    code, _, err = invoke(*release, "a.json", "--packet-public-key", "other/public.pem")
    assert (code, err) == (0, "")
    verified = verify_attestation(
        (ws / "a.json").read_bytes(), load_verify_key(ws / "keys" / "public.pem")
    )
    assert verified.statement.predicate["packet_ed25519"] == bundle["packet_ed25519"]
    code, _, err = invoke(*release, "b.json", "--packet-public-key", "keys/public.pem")
    assert (code, err) == (2, "sealeval: error: packet: predicate_signature_invalid\n")


@pytest.mark.parametrize(
    ("name", "content", "code"),
    [
        ("absent.pem", None, "public_key_unavailable"),
        ("big.pem", b"k" * (MAX_KEY_BYTES + 1), "public_key_unavailable"),
        ("bad.pem", b"not a key", "public_key_invalid"),
    ],
    ids=["missing", "over-64-KiB", "not-pem"],
)
def test_release_packet_public_key_refusals(
    ws: Path, name: str, content: bytes | None, code: str
) -> None:
    """The packet's public key is read by the one key reader (sealeval._keys), runner codes."""
    if content is not None:
        (ws / name).write_bytes(content)
    status, out, err = invoke(
        "release", "bundle.json", "--packet-public-key", name, *SIGN, "-o", "r.json"
    )
    assert (status, out, err) == (2, "", f"sealeval: error: {code}\n")
    assert not (ws / "r.json").exists()
