"""``sealeval gates``: agent-release exit codes and modes, verify-packet, evaluate.

Every command runs through the ``gates`` click group, in-process with
CliRunner and as a real subprocess (``GATES``), on a real temporary git
repository built from the vector recipe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sealeval.canonical import encode_openmed
from sealeval.cli.gates import KEY_NEWLINE_WARNING, gates, release_script
from sealeval.gates.candidate import parse_evidence_document
from sealeval.gates.evaluation import evaluate_agent_release_gates
from sealeval.gates.registry import GATE_METRICS
from sealeval.gates.runner import MAX_KEY_BYTES
from support.gates_candidate import (
    HEAD,
    KEY,
    READY,
    SCRIPT,
    _case,
    build_recipe,
    fresh,
    runner_env,
    subprocess_env,
)
from support.refusals import CANARY

#: The group as a real process: the installed `sealeval` console script.
GATES = [str(Path(sys.executable).with_name("sealeval")), "gates"]
DIGEST = "sha256:" + "ab" * 32
READY_STDOUT = READY["expected"]["modes"]["human"]["stdout"]
READY_BUNDLE = READY["expected"]["bundle"]
BASE = READY["input"]["argv"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("recipe") / "ws"
    build_recipe(workspace)
    return workspace


@pytest.fixture
def ws(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = fresh(template, tmp_path / "cli")
    (workspace / "signing.key").write_bytes(KEY)
    for name in [name for name in os.environ if name.startswith("GIT_")]:
        monkeypatch.delenv(name)
    for name, value in runner_env(workspace).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(workspace)
    return workspace


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(gates, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def spawn(workspace: Path, command: list[str], *args: str) -> tuple[int, str, str]:
    completed = subprocess.run(
        [*command, *args],
        cwd=workspace,
        env=subprocess_env(workspace),
        capture_output=True,
        check=False,
        timeout=120,
    )
    return completed.returncode, completed.stdout.decode(), completed.stderr.decode()


def _pem_pair(directory: Path, name: str) -> tuple[Path, Path]:
    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub.pem"
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


# ---------------------------------------------------------------------------
# help


def test_help_texts() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    assert "Evaluate the nine release gates and sign exact-source candidate decisions." in out
    for command in ("agent-release", "verify-packet", "evaluate"):
        assert command in out
    code, out, _ = invoke("agent-release", "--help")
    assert code == 0
    assert "Bind a release decision to one exact commit and write a signed bundle." in out
    for flag in (
        "--repo-root",
        "--source-sha",
        "--tag",
        "--wheel",
        "--sdist",
        "--tool-catalog",
        "--policy",
        "--evidence",
        "--signing-key-file",
        "--output",
        "--json",
        "--ed25519-key-file",
    ):
        assert flag in out
    code, out, _ = invoke("verify-packet", "--help")
    assert "Verify a candidate packet, or a bundle written by agent-release." in out
    code, out, _ = invoke("evaluate", "--help")
    assert "Evaluate the nine release gates over an evidence file." in out


# ---------------------------------------------------------------------------
# agent-release: exit codes through real processes, all three modes


def _agent_release(ws: Path, mode: str, *extra: str) -> tuple[int, str, str]:
    args = [*BASE, "--output", "out.json", *extra]
    if mode == "script":
        return spawn(ws, [sys.executable, str(SCRIPT)], *args)
    json_flag = ["--json"] if mode == "json" else []
    return spawn(ws, GATES, "agent-release", *args, *json_flag)


@pytest.mark.parametrize("mode", ["human", "json", "script"])
def test_agent_release_exit_codes_in_real_processes(ws: Path, mode: str) -> None:
    code, out, err = _agent_release(ws, mode)
    assert (code, err) == (0, "")
    assert out == READY["expected"]["modes"][mode]["stdout"]
    (ws / "out.json").unlink()
    (ws / "checkout" / "dirty.txt").write_text("x", encoding="utf-8")
    code, out, err = _agent_release(ws, mode)
    assert (code, err) == (1, "")
    packet = json.loads(out)["data"]["packet"] if mode == "json" else json.loads(out)
    assert packet["decision"] == "NOT_READY"
    assert packet["reason_codes"] == ["dirty_tree"]
    code, out, err = _agent_release(ws, mode)
    assert code == 2
    if mode == "human":
        assert (out, err) == ("", "output_unavailable\n")
    elif mode == "json":
        assert json.loads(out) == {
            "command": "gates agent-release",
            "error": {"code": "output_unavailable", "message": "output_unavailable"},
            "ok": False,
        }
    else:
        assert (out, err) == ('{"error_code":"output_unavailable"}\n', "")


def test_repo_root_defaults_to_the_working_directory(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws / "checkout")
    args = ["--source-sha", HEAD, "--signing-key-file", "../signing.key"]
    for flag, name in (
        ("--wheel", "wheel"),
        ("--sdist", "sdist"),
        ("--tool-catalog", "tool_catalog"),
        ("--policy", "policy"),
        ("--evidence", "evidence.json"),
    ):
        args += [flag, f"../{name}"]
    code, out, err = invoke("agent-release", *args, "--output", "../default.json")
    assert (code, out, err) == (0, READY_STDOUT, "")
    (ws / "checkout" / "dirty").write_text("x", encoding="utf-8")
    code, out, _ = invoke("agent-release", *args, "--output", "../dirty.json")
    assert code == 1
    assert json.loads(out)["reason_codes"] == ["dirty_tree"]


@pytest.mark.parametrize("mode", ["human", "json", "script"])
def test_missing_required_flag_is_a_usage_error(ws: Path, mode: str) -> None:
    args = [arg for arg in BASE if arg not in ("--source-sha", HEAD)]
    if mode == "script":
        code, out, err = spawn(ws, [sys.executable, str(SCRIPT)], *args, "--output", "o.json")
    else:
        json_flag = ["--json"] if mode == "json" else []
        code, out, err = invoke("agent-release", *args, "--output", "o.json", *json_flag)
    assert code == 2
    assert out == ""
    assert "Usage:" in err
    assert "--source-sha" in err
    assert not (ws / "o.json").exists()


def test_key_with_trailing_newline_warns_only_at_a_terminal(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _case("ok_signing_key_longer_than_32")
    (ws / "signing.key").write_bytes(bytes.fromhex(case["input"]["signing_key_hex"]))
    expected = case["expected"]["modes"]["human"]
    code, out, err = invoke("agent-release", *BASE, "--output", "a.json")
    assert (code, out, err) == (0, expected["stdout"], "")
    monkeypatch.setattr("sealeval.cli.gates.is_terminal", lambda: True)
    code, out, err = invoke("agent-release", *BASE, "--output", "b.json")
    assert (code, out, err) == (0, expected["stdout"], KEY_NEWLINE_WARNING + "\n")
    assert (ws / "b.json").read_text(encoding="utf-8") == expected["output_file"]


@pytest.mark.parametrize("mode", ["human", "json", "script"])
def test_ed25519_key_errors_are_configuration_errors(ws: Path, mode: str) -> None:
    (ws / "bad.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    for path, code_text in (
        ("none.pem", "ed25519_key_unavailable"),
        ("bad.pem", "ed25519_key_invalid"),
    ):
        extra = ("--ed25519-key-file", path)
        if mode == "script":
            code, out, err = spawn(
                ws, [sys.executable, str(SCRIPT)], *BASE, "--output", "o.json", *extra
            )
            assert (code, out, err) == (2, encode_openmed({"error_code": code_text}) + "\n", "")
        elif mode == "json":
            code, out, err = invoke("agent-release", *BASE, "--output", "o.json", "--json", *extra)
            assert code == 2
            assert json.loads(out)["error"] == {"code": code_text, "message": code_text}
        else:
            code, out, err = invoke("agent-release", *BASE, "--output", "o.json", *extra)
            assert (code, out, err) == (2, "", code_text + "\n")
        assert not (ws / "o.json").exists()


# ---------------------------------------------------------------------------
# Ed25519 bundles and verify-packet


@pytest.fixture
def signed(ws: Path) -> dict[str, Path]:
    private, public = _pem_pair(ws, "release")
    _, other = _pem_pair(ws, "other")
    code, out, err = invoke(
        "agent-release", *BASE, "--output", "bundle.json", "--ed25519-key-file", str(private)
    )
    assert (code, out, err) == (0, READY_STDOUT, "")
    bundle = json.loads((ws / "bundle.json").read_text(encoding="utf-8"))
    packet = ws / "packet.json"
    packet.write_text(json.dumps(bundle["packet"]), encoding="utf-8")
    plain = ws / "plain.json"
    plain.write_text(json.dumps(READY_BUNDLE), encoding="utf-8")
    return {
        "bundle": ws / "bundle.json",
        "packet": packet,
        "plain": plain,
        "public": public,
        "other": other,
        "private": private,
        "key": ws / "signing.key",
    }


def test_ed25519_bundle_keeps_the_reference_documents(ws: Path, signed: dict[str, Path]) -> None:
    bundle = json.loads(signed["bundle"].read_text(encoding="utf-8"))
    assert {key: bundle[key] for key in READY_BUNDLE} == READY_BUNDLE
    detached = bundle["packet_ed25519"]
    assert set(detached) == {"algorithm", "public_key_sha256", "signature"}
    assert detached["algorithm"] == "ed25519"
    assert signed["bundle"].read_bytes().endswith(b"}\n")
    code, out, _ = invoke(
        "agent-release",
        *BASE,
        "--output",
        "json.json",
        "--json",
        "--ed25519-key-file",
        str(signed["private"]),
    )
    assert code == 0
    data = json.loads(out)["data"]
    assert data["packet"] == READY_BUNDLE["packet"]
    assert data["packet_ed25519"]["public_key_sha256"] == detached["public_key_sha256"]


@pytest.mark.parametrize(
    ("document", "flag", "key", "expected"),
    [
        ("bundle", "--ed25519-public-key", "public", (0, "valid: ed25519, decision READY\n")),
        ("bundle", "--ed25519-public-key", "other", (1, "invalid: ed25519\n")),
        ("bundle", "--hmac-key-file", "key", (0, "valid: hmac-sha256, decision READY\n")),
        ("packet", "--hmac-key-file", "key", (0, "valid: hmac-sha256, decision READY\n")),
        ("plain", "--hmac-key-file", "key", (0, "valid: hmac-sha256, decision READY\n")),
        ("packet", "--ed25519-public-key", "public", (1, "invalid: ed25519\n")),
        ("plain", "--ed25519-public-key", "public", (1, "invalid: ed25519\n")),
    ],
)
def test_verify_packet(
    signed: dict[str, Path], document: str, flag: str, key: str, expected: tuple[int, str]
) -> None:
    code, out, err = invoke("verify-packet", str(signed[document]), flag, str(signed[key]))
    assert (code, out, err) == (*expected, "")


def test_verify_packet_rejects_tampering(ws: Path, signed: dict[str, Path]) -> None:
    bundle = json.loads(signed["bundle"].read_text(encoding="utf-8"))
    manifest_changed = json.loads(json.dumps(bundle))
    manifest_changed["manifest"]["artifacts"]["wheel"] = None
    packet_changed = json.loads(json.dumps(bundle))
    packet_changed["packet"]["gates"][0]["sample_size"] = 101
    signature_swapped = json.loads(json.dumps(bundle))
    signature_swapped["packet_ed25519"]["signature"] = "00" * 64
    for index, document in enumerate((manifest_changed, packet_changed, signature_swapped)):
        path = ws / f"tampered-{index}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        for flag, key in (("--hmac-key-file", "key"), ("--ed25519-public-key", "public")):
            code, out, _ = invoke("verify-packet", str(path), flag, str(signed[key]))
            if index == 2 and flag == "--hmac-key-file":
                assert code == 0
            else:
                assert (code, out.split(":")[0]) == (1, "invalid")
    (ws / "wrong.key").write_bytes(b"w" * 32)
    code, out, _ = invoke("verify-packet", str(signed["bundle"]), "--hmac-key-file", "wrong.key")
    assert (code, out) == (1, "invalid: hmac-sha256\n")


def test_verify_packet_warns_about_a_newline_key(ws: Path, signed: dict[str, Path]) -> None:
    (ws / "newline.key").write_bytes(KEY + b"\n")
    code, out, err = invoke(
        "verify-packet", str(signed["packet"]), "--hmac-key-file", "newline.key"
    )
    assert (code, out, err) == (1, "invalid: hmac-sha256\n", KEY_NEWLINE_WARNING + "\n")


@pytest.mark.parametrize(
    ("content", "key_args", "message"),
    [
        pytest.param(None, ("--hmac-key-file", "signing.key"), "packet_unavailable", id="missing"),
        pytest.param(b"{", ("--hmac-key-file", "signing.key"), "packet_invalid", id="not-json"),
        pytest.param(b"{}", ("--hmac-key-file", "signing.key"), "packet_invalid", id="empty"),
        pytest.param(
            b'{"packet": {}, "x": 1}',
            ("--hmac-key-file", "signing.key"),
            "bundle_invalid",
            id="bundle-extra",
        ),
        pytest.param(
            "plain", ("--hmac-key-file", "short.key"), "signing_key_invalid", id="short-key"
        ),
        pytest.param(
            "plain", ("--hmac-key-file", "none.key"), "signing_key_unavailable", id="no-key"
        ),
        pytest.param(
            "plain", ("--ed25519-public-key", "none.pem"), "public_key_unavailable", id="no-pub"
        ),
        pytest.param(
            "plain", ("--ed25519-public-key", "signing.key"), "public_key_invalid", id="bad-pub"
        ),
        pytest.param(
            "plain", ("--ed25519-public-key", "big.pem"), "public_key_unavailable", id="big-pub"
        ),
        pytest.param(
            "plain", ("--ed25519-public-key", "link.pem"), "public_key_unavailable", id="link-pub"
        ),
        pytest.param("plain", ("--hmac-key-file", "big.pem"), "signing_key_invalid", id="big-key"),
        pytest.param(
            "plain", ("--hmac-key-file", "link.pem"), "signing_key_unavailable", id="link-key"
        ),
    ],
)
def test_verify_packet_input_errors(
    ws: Path, content: bytes | str | None, key_args: tuple[str, str], message: str
) -> None:
    (ws / "short.key").write_bytes(KEY[:31])
    # Key files have one reader (sealeval._keys): over 64 KiB, or a symlink, is refused.
    (ws / "big.pem").write_bytes(b"k" * (MAX_KEY_BYTES + 1))
    (ws / "link.pem").symlink_to(ws / "signing.key")
    target = ws / "doc.json"
    if content == "plain":
        target.write_text(json.dumps(READY_BUNDLE), encoding="utf-8")
    elif isinstance(content, bytes):
        target.write_bytes(content)
    code, out, err = invoke("verify-packet", "doc.json", *key_args)
    assert (code, out, err) == (2, "", f"sealeval: error: {message}\n")


@pytest.mark.parametrize(
    "flags",
    [(), ("--hmac-key-file", "signing.key", "--ed25519-public-key", "signing.key")],
    ids=["none", "both"],
)
def test_verify_packet_needs_exactly_one_key(ws: Path, flags: tuple[str, ...]) -> None:
    (ws / "doc.json").write_text(json.dumps(READY_BUNDLE), encoding="utf-8")
    code, out, err = invoke("verify-packet", "doc.json", *flags)
    assert code == 2
    assert out == ""
    assert "exactly one of --hmac-key-file or --ed25519-public-key" in err


def test_verify_packet_in_a_real_process(ws: Path, signed: dict[str, Path]) -> None:
    code, out, err = spawn(
        ws, GATES, "verify-packet", str(signed["bundle"]), "--ed25519-public-key", "release.pub.pem"
    )
    assert (code, out, err) == (0, "valid: ed25519, decision READY\n", "")
    code, out, err = spawn(
        ws, GATES, "verify-packet", str(signed["bundle"]), "--ed25519-public-key", "other.pub.pem"
    )
    assert (code, out, err) == (1, "invalid: ed25519\n", "")


# ---------------------------------------------------------------------------
# evaluate


def _envelope_text(case: str = "recipe") -> str:
    if case == "recipe":
        text = _case("recipe")["input"]["recipe"]["steps"][-1]["content"]
    else:
        text = next(s for s in _case(case)["input"]["setup"] if s["path"] == "evidence.json")[
            "content"
        ]
    assert isinstance(text, str)
    return text


def _write(ws: Path, name: str, document: Any) -> str:
    (ws / name).write_text(document if isinstance(document, str) else json.dumps(document), "utf-8")
    return name


def test_evaluate_ready_table_and_json(ws: Path) -> None:
    envelope = json.loads(_envelope_text())
    array = _write(ws, "array.json", envelope["metrics"])
    code, out, err = invoke("evaluate", array, "--candidate-digest", DIGEST)
    assert (code, err) == (0, "")
    for metric in GATE_METRICS:
        assert metric in out
    assert "decision: READY" in out
    assert "<= 0.0" in out
    assert ">= 0.995" in out
    assert "threshold_satisfied" in out
    assert "FAIL" not in out
    expected = evaluate_agent_release_gates(
        parse_evidence_document(envelope["metrics"]), candidate_digest=DIGEST
    )
    code, out, err = invoke("evaluate", array, "--candidate-digest", DIGEST, "--json")
    assert (code, out, err) == (0, expected.to_json() + "\n", "")
    code, out, err = invoke(
        "evaluate", _write(ws, "env.json", envelope), "--candidate-digest", DIGEST, "--json"
    )
    assert (code, out, err) == (0, expected.to_json() + "\n", "")


def test_evaluate_not_ready(ws: Path) -> None:
    failing = _write(ws, "fail.json", _envelope_text("gate_failed_critical_escape"))
    code, out, _ = invoke("evaluate", failing, "--candidate-digest", DIGEST)
    assert code == 1
    assert "decision: NOT_READY" in out
    assert "threshold_failed" in out
    assert "FAIL" in out
    partial = _write(ws, "partial.json", _envelope_text("gate_missing_evidence_partial"))
    code, out, _ = invoke("evaluate", partial, "--candidate-digest", DIGEST, "--json")
    assert code == 1
    report = json.loads(out)
    assert report["decision"] == "NOT_READY"
    assert report["gate_results"][0]["reason_code"] == "missing_evidence"


def test_evaluate_in_a_real_process(ws: Path) -> None:
    name = _write(ws, "env.json", _envelope_text())
    code, out, err = spawn(ws, GATES, "evaluate", name, "--candidate-digest", DIGEST, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["decision"] == "READY"
    code, out, err = spawn(ws, GATES, "evaluate", "missing.json", "--candidate-digest", DIGEST)
    assert (code, out, err) == (2, "", "sealeval: error: evidence: unavailable\n")


def _metric(**changes: Any) -> dict[str, Any]:
    record = dict(json.loads(_envelope_text())["metrics"][0])
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, "evidence: unavailable", id="missing"),
        pytest.param("{", "evidence: invalid_json", id="not-json"),
        pytest.param("\ufeff[]", "evidence: byte_order_mark", id="bom"),
        pytest.param('[{"a": 1, "a": 2}]', "evidence: duplicate_key", id="duplicate-key"),
        pytest.param("[NaN]", "evidence: non_standard_constant", id="nan"),
        pytest.param("1", "evidence: invalid_document", id="scalar"),
        pytest.param([], "evidence: empty", id="empty"),
        pytest.param([{**_metric(), "x": 1}], "evidence[0]: unknown_field", id="unknown-key"),
        pytest.param(
            [_metric(metric="aggregate_score")],
            "evidence[0].metric: unexpected_metric",
            id="unknown-metric",
        ),
        pytest.param([_metric(), _metric()], "evidence: duplicate_metric", id="duplicate-metric"),
        pytest.param(
            {"schema_version": "x", "source_sha": HEAD, "metrics": []},
            "schema_version: unsupported_version",
            id="envelope-schema",
        ),
        pytest.param(
            [_metric(sample_size=0)], "evidence[0].sample_size: invalid_count", id="sample-size"
        ),
    ],
)
def test_evaluate_input_errors(ws: Path, content: Any, message: str) -> None:
    if content is not None:
        _write(ws, "e.json", content)
    code, out, err = invoke("evaluate", "e.json", "--candidate-digest", DIGEST)
    assert (code, out, err) == (2, "", f"sealeval: error: {message}\n")


def test_evaluate_refuses_a_bad_candidate_digest_and_symlinks(ws: Path) -> None:
    name = _write(ws, "env.json", _envelope_text())
    code, out, err = invoke("evaluate", name, "--candidate-digest", CANARY)
    assert (code, out, err) == (2, "", "sealeval: error: --candidate-digest: invalid_digest\n")
    (ws / "link.json").symlink_to(ws / name)
    code, out, err = invoke("evaluate", "link.json", "--candidate-digest", DIGEST)
    assert (code, out, err) == (2, "", "sealeval: error: evidence: unavailable\n")


def test_evaluate_and_verify_never_echo(ws: Path) -> None:
    folder = ws / CANARY
    folder.mkdir()
    texts: list[str] = []
    for content in (f'{{"{CANARY}": 1}}', f'["{CANARY}"]', json.dumps([_metric(metric=CANARY)])):
        path = folder / f"{CANARY}.json"
        path.write_text(content, encoding="utf-8")
        texts += list(invoke("evaluate", str(path), "--candidate-digest", DIGEST))[1:]
        texts += list(invoke("verify-packet", str(path), "--hmac-key-file", "signing.key"))[1:]
        path.unlink()
    texts += list(invoke("evaluate", f"{CANARY}/none", "--candidate-digest", DIGEST))[1:]
    (folder / "k").write_bytes(CANARY.encode() * 2 + b"\n")
    plain = _write(ws, "plain.json", READY_BUNDLE)
    texts += list(invoke("verify-packet", plain, "--hmac-key-file", f"{CANARY}/k"))[1:]
    texts += list(invoke("verify-packet", plain, "--ed25519-public-key", f"{CANARY}/k"))[1:]
    for text in texts:
        assert CANARY not in text
        assert str(ws) not in text


def test_release_script_command_in_process(ws: Path) -> None:
    result = CliRunner().invoke(release_script, [*BASE, "--output", "s.json"])
    assert (result.exit_code, result.stdout, result.stderr) == (0, READY_STDOUT, "")
    result = CliRunner().invoke(release_script, [*BASE, "--output", "s.json"])
    assert (result.exit_code, result.stdout) == (2, '{"error_code":"output_unavailable"}\n')


def test_evaluate_refuses_an_oversized_file(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sealeval.cli.gates.MAX_EVIDENCE_BYTES", 10)
    name = _write(ws, "env.json", _envelope_text())
    code, out, err = invoke("evaluate", name, "--candidate-digest", DIGEST)
    assert (code, out) == (2, "")
    # the refusal, then the line saying no option lifts this limit
    assert err.splitlines()[0] == "sealeval: error: evidence: too_large"
    assert err.splitlines()[1].startswith("sealeval: this size limit is fixed")
