"""``sealeval manifest`` and ``sealeval demo`` through the CLI, with exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from sealeval.canonical import decode
from sealeval.cli import cli
from sealeval.manifest import SealedWorkflowManifest, verify_at_evaluation_start
from sealeval.manifest.components import digest_file, digest_tree
from support.contracts import schema

ARTIFACTS = {
    "container": "container",
    "model": "model",
    "policy": "policy.yaml",
    "post-processing": "post_processing.py",
    "prompt": "prompt.txt",
    "threshold": "threshold.json",
    "tokenizer": "tokenizer",
    "tool-inventory": "tool_inventory.yaml",
}


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = tmp_path / "artifacts"
    source = resources.files("sealeval") / "_data" / "demo" / "artifacts"
    with resources.as_file(source) as path:
        shutil.copytree(path, root)
    return root


def _component_args(root: Path, skip: str = "") -> list[str]:
    args: list[str] = []
    for option, relative in ARTIFACTS.items():
        if option != skip:
            args += [f"--{option}", str(root / relative)]
    return args


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_digest_command_prints_one_digest(artifacts: Path) -> None:
    code, out, _ = run("manifest", "digest", "file", str(artifacts / "prompt.txt"))
    assert code == 0
    assert out == digest_file(artifacts / "prompt.txt") + "\n"
    code, out, _ = run("manifest", "digest", "tree", str(artifacts / "model"))
    assert (code, out) == (0, digest_tree(artifacts / "model") + "\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["weights", "x"], "kind: unknown_kind", id="unknown-kind"),
        pytest.param(["file", "/nonexistent/PHI-CANARY"], "path: not_found", id="not-found"),
        pytest.param(["config", "prompt.txt"], "path: unknown_format", id="unknown-format"),
    ],
)
def test_digest_command_refusals(args: list[str], message: str) -> None:
    code, out, err = run("manifest", "digest", *args)
    assert code == 2
    assert out == ""
    assert err == f"sealeval: error: {message}\n"


def test_seal_then_verify_eligible_then_tampered(artifacts: Path, tmp_path: Path) -> None:
    output = tmp_path / "manifest.json"
    code, out, err = run("manifest", "seal", *_component_args(artifacts), "-o", str(output))
    assert (code, err) == (0, "")
    sealed = SealedWorkflowManifest.from_json(output.read_bytes())
    assert out == sealed.manifest_digest + "\n"
    assert output.read_text(encoding="ascii") == sealed.to_json()

    code, out, _ = run("manifest", "verify", str(output), *_component_args(artifacts), "--json")
    assert code == 0
    document = decode(out)
    Draft202012Validator(schema("openmed.eval.workflow_sealed_manifest_verification.v1")).validate(
        document
    )
    assert document["reason_codes"] == ["eligible"]
    assert out == verify_at_evaluation_start(sealed, sealed.component_digests).to_json() + "\n"

    code, out, _ = run("manifest", "verify", str(output), *_component_args(artifacts))
    assert code == 0
    assert "eligible for sealed results" in out

    shard = artifacts / "model" / "weights-00001-of-00002.bin"
    data = bytearray(shard.read_bytes())
    data[0] ^= 0xFF
    shard.write_bytes(bytes(data))
    code, out, _ = run("manifest", "verify", str(output), *_component_args(artifacts), "--json")
    assert code == 1
    assert decode(out) == {
        "affected_components": ["model"],
        "eligible_for_sealed_results": False,
        "reason_codes": ["component_digest_mismatch"],
        "schema_version": "openmed.eval.workflow_sealed_manifest_verification.v1",
    }
    code, out, _ = run("manifest", "verify", str(output), *_component_args(artifacts))
    assert code == 1
    assert "NOT eligible" in out
    assert "component_digest_mismatch" in out


def test_seal_with_precomputed_digest_and_kind(artifacts: Path, tmp_path: Path) -> None:
    given = "sha256:" + "ab" * 32
    output = tmp_path / "m.json"
    code, _, err = run(
        "manifest", "seal", *_component_args(artifacts, skip="container"),
        "--digest", f"container={given}", "--kind", "prompt=file", "-o", str(output),
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(output.read_text())["component_digests"]["container"] == given


def test_verify_reports_missing_components_as_not_eligible(artifacts: Path, tmp_path: Path) -> None:
    output = tmp_path / "m.json"
    assert run("manifest", "seal", *_component_args(artifacts), "-o", str(output))[0] == 0
    code, out, _ = run(
        "manifest", "verify", str(output), *_component_args(artifacts, skip="model"), "--json"
    )
    assert code == 1
    assert decode(out)["reason_codes"] == ["incomplete_evaluation_snapshot"]


def test_verify_of_a_non_manifest_json_is_not_eligible(artifacts: Path, tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("42")
    code, out, _ = run(
        "manifest", "verify", str(tmp_path / "m.json"), *_component_args(artifacts), "--json"
    )
    assert code == 1
    assert decode(out)["reason_codes"] == ["invalid_manifest"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(
            ["--digest", "model"], "digest: invalid_assignment", id="digest-without-value"
        ),
        pytest.param(
            ["--digest", "weights=sha256:" + "0" * 64],
            "component: unknown_component",
            id="unknown-component",
        ),
        pytest.param(
            ["--digest", "container=PHI-CANARY"],
            "component_digests.container: invalid_digest",
            id="bad-digest",
        ),
        pytest.param(
            [
                "--digest",
                "container=sha256:" + "0" * 64,
                "--digest",
                "container=sha256:" + "1" * 64,
            ],
            "digest: duplicate_component",
            id="digest-twice",
        ),
        pytest.param(["--kind", "prompt=weights"], "kind: unknown_kind", id="unknown-kind"),
        pytest.param(
            ["--digest", "model=sha256:" + "0" * 64],
            "component_digests: invalid_keys",
            id="path-and-digest",
        ),
    ],
)
def test_seal_usage_refusals(
    artifacts: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    code, _, err = run(
        "manifest", "seal", *_component_args(artifacts), *extra, "-o", str(tmp_path / "m.json")
    )
    assert (code, err) == (2, f"sealeval: error: {message}\n")
    assert not (tmp_path / "m.json").exists()


def test_seal_refuses_missing_component_and_existing_output(
    artifacts: Path, tmp_path: Path
) -> None:
    code, _, err = run(
        "manifest",
        "seal",
        *_component_args(artifacts, skip="threshold"),
        "-o",
        str(tmp_path / "m.json"),
    )
    assert (code, err) == (2, "sealeval: error: component_digests: invalid_keys\n")
    existing = tmp_path / "existing.json"
    existing.write_text("keep me")
    code, _, err = run("manifest", "seal", *_component_args(artifacts), "-o", str(existing))
    assert (code, err) == (2, "sealeval: error: --output: output_exists\n")
    assert existing.read_text() == "keep me"
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "nowhere.json")
    code, _, err = run("manifest", "seal", *_component_args(artifacts), "-o", str(link))
    assert (code, err) == (2, "sealeval: error: --output: output_exists\n")
    assert not (tmp_path / "nowhere.json").exists()
    code, _, err = run(
        "manifest", "seal", *_component_args(artifacts), "-o", str(tmp_path / "no" / "m.json")
    )
    assert (code, err) == (2, "sealeval: error: --output: output_parent_missing\n")


def test_verify_refuses_unreadable_manifest(artifacts: Path, tmp_path: Path) -> None:
    (tmp_path / "dup.json").write_text('{"a": 1, "a": 2}')
    for path, message in [
        (tmp_path / "dup.json", "manifest: invalid_document"),
        (tmp_path / "missing.json", "manifest: not_found"),
    ]:
        code, out, err = run("manifest", "verify", str(path), *_component_args(artifacts))
        assert (code, out, err) == (2, "", f"sealeval: error: {message}\n")


def test_errors_never_echo_paths_or_values(artifacts: Path, tmp_path: Path) -> None:
    canary = "PHI-CANARY-patient-jane-doe-MRN-0042"
    secret_dir = tmp_path / canary
    secret_dir.mkdir()
    (secret_dir / "policy.yaml").write_text(f"a: 1\na: {canary}\n")
    code, out, err = run("manifest", "digest", "config", str(secret_dir / "policy.yaml"))
    assert code == 2
    assert canary not in out + err
    args = [*_component_args(artifacts, skip="policy"), "--policy", str(secret_dir / "policy.yaml")]
    code, out, err = run("manifest", "seal", *args, "-o", str(secret_dir / "m.json"))
    assert code == 2
    assert canary not in out + err


def test_demo_runs_and_reruns_into_its_own_folder(tmp_path: Path) -> None:
    out_dir = tmp_path / "demo-out"
    for _ in range(2):
        code, out, err = run("demo", "--out", str(out_dir))
        assert (code, err) == (0, "")
        assert "NOT eligible" in out
        assert "demo complete" in out
    sealed = SealedWorkflowManifest.from_json((out_dir / "manifest.json").read_bytes())
    tampered = decode((out_dir / "verification-tampered.json").read_bytes())
    assert tampered["affected_components"] == ["model"]
    assert decode((out_dir / "verification-unchanged.json").read_bytes())["reason_codes"] == [
        "eligible"
    ]
    assert sealed.manifest_digest.startswith("sha256:")
    baseline = decode((out_dir / "gates-baseline_pass.json").read_bytes())
    failure = decode((out_dir / "gates-critical_failure.json").read_bytes())
    assert (baseline["decision"], failure["decision"]) == ("READY", "NOT_READY")
    assert baseline["candidate_digest"] == sealed.manifest_digest


def test_demo_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("x")
    code, _, err = run("demo", "--out", str(tmp_path / "mine"))
    assert (code, err) == (2, "sealeval: error: out: demo_dir_not_ours\n")
    assert (tmp_path / "mine" / "precious.txt").exists()


def test_console_script_runs() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "sealeval", "--version"], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0
    assert completed.stdout.startswith("sealeval, version ")
