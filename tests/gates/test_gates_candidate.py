"""Exact-source candidate runner: every golden vector, byte for byte, plus the sealeval rules.

The vector file's recipe is built for real once per module (a git repository
with fixed identities and dates, git configuration isolated from the user's),
its commit SHAs are checked, and each scenario then runs in a fresh copy in
all three output modes: CLI human and ``--json`` (the ``gates`` group through
click's CliRunner) and the release-script entry point (a subprocess).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from sealeval.canonical import digest_bytes, digest_openmed, encode_openmed
from sealeval.cli.gates import gates
from sealeval.gates.candidate import (
    BLOCKING_REASON_CODES,
    AgentCandidatePacket,
    CandidateBundle,
    CandidateRunnerError,
    Ed25519SigningKey,
    EvidenceEnvelopeError,
    EvidenceFileEntry,
    GitObservation,
    HmacKey,
    RepositorySnapshot,
    assess_evidence_file,
    decide_candidate,
    ed25519_public_key_sha256,
    is_source_sha,
    load_ed25519_public_key,
    parse_evidence_document,
    sign_packet,
    verify_packet_document,
    verify_packet_ed25519,
)
from sealeval.gates.registry import GateError
from sealeval.gates.runner import (
    AgentReleaseOptions,
    git_environment,
    read_regular_file,
    repository_snapshot,
    run_agent_release,
    write_exclusive,
)
from support.gates_candidate import (
    HEAD,
    KEY,
    READY,
    RECIPE,
    SCRIPT,
    VECTORS,
    _case,
    build_recipe,
    fresh,
    git,
    runner_env,
    subprocess_env,
)
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases

CONTRACTS = PROJECT_ROOT / "contracts"
CONTRACT_BASE = "https://sealeval.dev/contracts/"


# ---------------------------------------------------------------------------
# The deterministic workspace


FIRST = RECIPE["expected"]["first_commit_sha"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workspace = tmp_path_factory.mktemp("recipe") / "ws"
    build_recipe(workspace)
    return workspace


def apply_setup(workspace: Path, case_input: dict[str, Any]) -> None:
    """Write the key file, then apply the scenario's setup steps."""
    (workspace / case_input["key_file"]).write_bytes(bytes.fromhex(case_input["signing_key_hex"]))
    for step in case_input["setup"]:
        target = workspace / step["path"]
        if step["op"] == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            if "content_hex" in step:
                target.write_bytes(bytes.fromhex(step["content_hex"]))
            else:
                target.write_bytes(step["content"].encode("utf-8"))
        elif step["op"] == "remove":
            target.unlink()
        elif step["op"] == "mkdir":
            target.mkdir(parents=True)
        elif step["op"] == "symlink":
            target.symlink_to(step["target"])
        else:
            pytest.fail("vector case shape not understood")


def run_cli(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> tuple[int, str, str]:
    """Run ``gates <args>`` in-process from ``workspace`` with the runner environment."""
    monkeypatch.chdir(workspace)
    for name, value in runner_env(workspace).items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(gates, args, catch_exceptions=False)
    return result.exit_code, result.stdout_bytes.decode("utf-8"), result.stderr_bytes.decode()


def run_script(workspace: Path, args: list[str]) -> tuple[int, str, str]:
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=workspace,
        env=subprocess_env(workspace),
        capture_output=True,
        check=False,
        timeout=120,
    )
    return completed.returncode, completed.stdout.decode(), completed.stderr.decode()


# ---------------------------------------------------------------------------
# Contracts


def contract(name: str) -> dict[str, Any]:
    document = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def _registry() -> Registry:  # type: ignore[type-arg]
    resources = []
    for path in CONTRACTS.glob("*.schema.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        resources.append((document["$id"], Resource.from_contents(document)))
    return Registry().with_resources(resources)  # type: ignore[no-any-return]


def validator(name: str, fragment: str = "") -> Draft202012Validator:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": f"{CONTRACT_BASE}{name}.schema.json{fragment}",
    }
    return Draft202012Validator(schema, registry=_registry())


PACKET_SCHEMA = "openmed.eval.agent_candidate_packet.v1"
MANIFEST_SCHEMA = "openmed.eval.agent_candidate_manifest.v1"
ENVELOPE_SCHEMA = "openmed.eval.agent_release_source.v1.candidate_envelope"


def test_contracts_are_valid_closed_and_identified() -> None:
    for name in (PACKET_SCHEMA, MANIFEST_SCHEMA, ENVELOPE_SCHEMA):
        document = contract(name)
        Draft202012Validator.check_schema(document)
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert document["$id"] == f"{CONTRACT_BASE}{name}.schema.json"
    packet = contract(PACKET_SCHEMA)
    assert packet["properties"]["reason_codes"]["items"]["enum"] == list(BLOCKING_REASON_CODES)


# ---------------------------------------------------------------------------
# Every vector case


def _check_recipe(case: dict[str, Any], template: Path) -> None:
    expected = case["expected"]
    assert git(template, "checkout", "rev-parse", "HEAD") == expected["head_sha"]
    assert git(template, "checkout", "rev-parse", "HEAD~1") == expected["first_commit_sha"]
    for tag, sha in expected["tag_shas"].items():
        assert git(template, "checkout", "rev-parse", f"refs/tags/{tag}^{{commit}}") == sha
    for name, digest in expected["artifact_digests"].items():
        assert digest_bytes((template / name).read_bytes()) == digest
    evidence = (template / "evidence.json").read_bytes()
    assert digest_bytes(evidence) == expected["evidence_file_digest"]
    validator(ENVELOPE_SCHEMA).validate(json.loads(evidence))


def _check_mode(
    mode: str, expected: dict[str, Any], workspace: Path, output: str, result: tuple[int, str, str]
) -> None:
    code, stdout, stderr = result
    assert (code, stdout, stderr) == (expected["exit_code"], expected["stdout"], expected["stderr"])
    written = workspace / output
    if expected["output_file"] is None:
        assert not written.is_file() or written.read_bytes() == b"keep\n", mode
    else:
        assert written.read_bytes() == expected["output_file"].encode("utf-8"), mode


def _check_scenario(
    case: dict[str, Any], template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_input, expected = case["input"], case["expected"]
    modes = expected["modes"]
    assert set(modes) == {"human", "json", "script"}
    argv = [*case_input["argv"], "--output", case_input["output"]]
    for mode in ("human", "json", "script"):
        workspace = fresh(template, tmp_path / mode)
        apply_setup(workspace, case_input)
        if mode == "script":
            result = run_script(workspace, argv)
        else:
            extra = ["--json"] if mode == "json" else []
            result = run_cli(workspace, monkeypatch, ["agent-release", *argv, *extra])
        _check_mode(mode, modes[mode], workspace, case_input["output"], result)
    if "bundle" in expected:
        bundle = expected["bundle"]
        accepted = {
            entry["file_digest"]
            for entry in bundle["manifest"]["evidence"]
            if entry["status"] == "accepted"
        }
        for step in case_input["setup"]:
            content = step.get("content")
            if content is not None and digest_bytes(content.encode("utf-8")) in accepted:
                validator(ENVELOPE_SCHEMA).validate(json.loads(content))
        assert json.loads(modes["human"]["output_file"]) == bundle
        assert encode_openmed(bundle["manifest"]) == expected["manifest_canonical"]
        assert digest_openmed(bundle["manifest"]) == expected["manifest_digest"]
        assert encode_openmed(bundle["packet"]) == expected["packet_canonical"]
        assert bundle["packet"]["signature"] == expected["signature"]
        packet = AgentCandidatePacket.from_dict(bundle["packet"])
        assert packet.verify(bytes.fromhex(case_input["signing_key_hex"]))
        assert CandidateBundle.from_dict(bundle).consistent()
        validator(PACKET_SCHEMA, "#/$defs/bundle").validate(bundle)
    else:
        assert all(mode["exit_code"] == 2 for mode in modes.values())


def _check_hmac(case: dict[str, Any]) -> None:
    signed = sign_packet(case["input"]["unsigned"], bytes.fromhex(case["input"]["key_hex"]))
    expected = case["expected"]
    assert signed["packet_digest"] == expected["packet_digest"]
    assert signed["signature"] == expected["signature"]
    # signed_canonical is the MAC input: the packet with packet_digest, without signature.
    mac_input = {key: value for key, value in signed.items() if key != "signature"}
    assert encode_openmed(mac_input) == expected["signed_canonical"]
    validator(PACKET_SCHEMA).validate(signed)


def _check_packet(case: dict[str, Any]) -> None:
    document, key = case["input"]["packet"], bytes.fromhex(case["input"]["key_hex"])
    expected = case["expected"]
    if expected["from_dict"] == "ok":
        packet = AgentCandidatePacket.from_dict(document)
        assert packet.to_json() == expected["canonical"]
        assert packet.verify(key) is expected["verify"]
        assert packet.verify(HmacKey(key)) is expected["verify"]
        assert verify_packet_document(document, key) is expected["verify"]
        validator(PACKET_SCHEMA).validate(document)
    elif expected["from_dict"] == "error":
        with pytest.raises(CandidateRunnerError) as caught:
            AgentCandidatePacket.from_dict(document)
        assert str(caught.value) == expected["error_code"]
        assert verify_packet_document(document, key) is False
    else:
        pytest.fail("vector case shape not understood")


@pytest.mark.parametrize("case", cases(VECTORS))
def test_vector(
    case: dict[str, Any], template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = case["input"].get("op")
    if op == "recipe":
        _check_recipe(case, template)
    elif op == "scenario":
        _check_scenario(case, template, tmp_path, monkeypatch)
    elif op == "hmac":
        _check_hmac(case)
    elif op == "packet":
        _check_packet(case)
    else:
        pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# The runner beyond the vectors


@pytest.fixture
def workspace(template: Path, tmp_path: Path) -> Path:
    ws = fresh(template, tmp_path / "run")
    (ws / "signing.key").write_bytes(KEY)
    return ws


@pytest.fixture
def git_isolated(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("GIT_"):
            monkeypatch.delenv(name)
    for name, value in runner_env(workspace).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(workspace)
    return workspace


def options(workspace: Path, **changes: Any) -> AgentReleaseOptions:
    values: dict[str, Any] = {
        "repo_root": workspace / "checkout",
        "source_sha": HEAD,
        "wheel": workspace / "wheel",
        "sdist": workspace / "sdist",
        "tool_catalog": workspace / "tool_catalog",
        "policy": workspace / "policy",
        "evidence": (workspace / "evidence.json",),
        "signing_key_file": workspace / "signing.key",
        "output": workspace / "bundle.json",
    }
    values.update(changes)
    return AgentReleaseOptions(**values)


def test_run_matches_the_ready_vector(git_isolated: Path) -> None:
    outcome = run_agent_release(options(git_isolated))
    assert outcome.ready
    assert not outcome.key_ends_with_newline
    expected = READY["expected"]["modes"]["human"]["output_file"]
    assert (git_isolated / "bundle.json").read_text(encoding="utf-8") == expected


def _changing_snapshot(change: Callable[[], None]) -> Callable[..., RepositorySnapshot]:
    calls: list[int] = []

    def snapshot(root: Any, expected_sha: str, tag: str | None) -> RepositorySnapshot:
        if calls:
            change()
        calls.append(1)
        return repository_snapshot(root, expected_sha, tag)

    return snapshot


def test_repository_changed_when_a_file_appears_between_snapshots(git_isolated: Path) -> None:
    snapshot = _changing_snapshot(
        lambda: (git_isolated / "checkout" / "late.txt").write_text("x", encoding="utf-8")
    )
    outcome = run_agent_release(options(git_isolated), snapshot=snapshot)
    manifest = outcome.decision.manifest
    assert manifest["repository"]["tree_status"] == "clean"
    assert manifest["repository_after"]["tree_status"] == "dirty"
    assert manifest["reason_codes"] == ["dirty_tree", "repository_changed"]
    assert outcome.decision.packet.reason_codes == ("dirty_tree", "repository_changed")
    assert not outcome.ready


def test_repository_changed_when_head_moves_between_snapshots(git_isolated: Path) -> None:
    snapshot = _changing_snapshot(
        lambda: git(
            git_isolated,
            "checkout",
            "commit",
            "--quiet",
            "--no-gpg-sign",
            "--allow-empty",
            "-m",
            "late",
            env={"GIT_AUTHOR_DATE": "2026-01-03T00:00:00+00:00"},
        )
    )
    outcome = run_agent_release(options(git_isolated), snapshot=snapshot)
    manifest = outcome.decision.manifest
    assert manifest["repository_after"]["git_sha"] not in (None, HEAD)
    assert manifest["reason_codes"] == ["repository_changed", "sha_mismatch"]
    assert not outcome.ready


def test_identical_snapshots_do_not_add_repository_changed() -> None:
    observation = GitObservation(head=HEAD, status="")
    before = RepositorySnapshot.from_observation(HEAD, observation)
    after = RepositorySnapshot.from_observation(HEAD, observation)
    decision = decide_candidate(
        expected_sha=HEAD,
        before=before,
        after=after,
        artifacts=dict.fromkeys(("wheel", "sdist", "tool_catalog", "policy"), "sha256:" + "0" * 64),
        evidence=[],
        key=KEY,
    )
    assert "repository_changed" not in decision.manifest["reason_codes"]
    changed = RepositorySnapshot.from_observation(HEAD, GitObservation(head=HEAD, status="?? x"))
    decision = decide_candidate(
        expected_sha=HEAD,
        before=before,
        after=changed,
        artifacts={},
        evidence=[],
        key=KEY,
    )
    assert decision.manifest["reason_codes"] == [
        "dirty_tree",
        "evidence_missing",
        "policy_missing",
        "repository_changed",
        "sdist_missing",
        "tool_catalog_missing",
        "wheel_missing",
    ]


def test_git_environment_is_scrubbed_of_redirecting_variables() -> None:
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/x",
        "GIT_DIR": "/elsewhere/.git",
        "GIT_WORK_TREE": "/elsewhere",
        "GIT_INDEX_FILE": "/elsewhere/index",
        "GIT_OBJECT_DIRECTORY": "/elsewhere/objects",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": "/elsewhere/objects",
        "GIT_COMMON_DIR": "/elsewhere",
        "GIT_NAMESPACE": "ns",
        "GIT_CONFIG_PARAMETERS": "'core.excludesfile'='/x'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.excludesFile",
        "GIT_CONFIG_VALUE_0": "/x",
        "GIT_EXEC_PATH": "/evil",
        "GIT_REPLACE_REF_BASE": "refs/other/",
        "GIT_CEILING_DIRECTORIES": "/tmp",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
    }
    assert git_environment(source) == {
        "PATH": "/usr/bin",
        "HOME": "/home/x",
        "GIT_CEILING_DIRECTORIES": "/tmp",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
    }


def test_redirecting_git_variables_do_not_change_the_result(
    git_isolated: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    git(tmp_path, "decoy", "init", "--quiet", "--initial-branch=main")
    git(tmp_path, "decoy", "commit", "--quiet", "--no-gpg-sign", "--allow-empty", "-m", "d")
    ignore_all = tmp_path / "ignore_all"
    ignore_all.write_text("*\n", encoding="utf-8")
    (git_isolated / "checkout" / "untracked.txt").write_text("u", encoding="utf-8")
    redirect = {
        "GIT_DIR": str(decoy / ".git"),
        "GIT_WORK_TREE": str(decoy),
        "GIT_INDEX_FILE": str(tmp_path / "no-index"),
        "GIT_OBJECT_DIRECTORY": str(decoy / ".git" / "objects"),
        "GIT_COMMON_DIR": str(decoy / ".git"),
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.excludesFile",
        "GIT_CONFIG_VALUE_0": str(ignore_all),
    }
    for name, value in redirect.items():
        monkeypatch.setenv(name, value)
    outcome = run_agent_release(options(git_isolated))
    repository = outcome.decision.manifest["repository"]
    assert repository["git_sha"] == HEAD
    assert repository["reason_codes"] == ["dirty_tree"]
    (git_isolated / "checkout" / "untracked.txt").unlink()
    (git_isolated / "bundle.json").unlink()
    outcome = run_agent_release(options(git_isolated))
    expected = READY["expected"]["modes"]["human"]["output_file"]
    assert (git_isolated / "bundle.json").read_text(encoding="utf-8") == expected


def test_status_does_not_write_the_checked_repository(git_isolated: Path) -> None:
    index = git_isolated / "checkout" / ".git" / "index"
    before = index.read_bytes()
    (git_isolated / "checkout" / "source.txt").touch()
    repository_snapshot(git_isolated / "checkout", HEAD, None)
    assert index.read_bytes() == before


def _run_error(workspace: Path, **changes: Any) -> str:
    with pytest.raises(CandidateRunnerError) as caught:
        run_agent_release(options(workspace, **changes))
    assert not (workspace / "bundle.json").exists() or "output" in changes
    return str(caught.value)


def test_key_file_must_be_a_regular_non_symlink_file(git_isolated: Path) -> None:
    (git_isolated / "link.key").symlink_to(git_isolated / "signing.key")
    assert _run_error(git_isolated, signing_key_file=git_isolated / "link.key") == (
        "signing_key_unavailable"
    )
    assert _run_error(git_isolated, signing_key_file=git_isolated / "checkout") == (
        "signing_key_unavailable"
    )
    os.mkfifo(git_isolated / "fifo.key")
    assert _run_error(git_isolated, signing_key_file=git_isolated / "fifo.key") == (
        "signing_key_unavailable"
    )
    (git_isolated / "short.key").write_bytes(KEY[:31])
    assert _run_error(git_isolated, signing_key_file=git_isolated / "short.key") == (
        "signing_key_invalid"
    )
    (git_isolated / "huge.key").write_bytes(b"k" * (1 << 17))
    assert _run_error(git_isolated, signing_key_file=git_isolated / "huge.key") == (
        "signing_key_invalid"
    )


def test_key_errors_come_before_source_sha_errors(git_isolated: Path) -> None:
    missing = git_isolated / "nope.key"
    assert _run_error(git_isolated, signing_key_file=missing, source_sha="X") == (
        "signing_key_unavailable"
    )
    assert _run_error(git_isolated, source_sha=HEAD.upper()) == "source_sha_invalid"


def test_symlinked_or_special_inputs_count_as_missing(git_isolated: Path) -> None:
    (git_isolated / "ev_link.json").symlink_to(git_isolated / "evidence.json")
    os.mkfifo(git_isolated / "ev_fifo.json")
    os.mkfifo(git_isolated / "wheel_fifo")
    outcome = run_agent_release(
        options(
            git_isolated,
            wheel=git_isolated / "wheel_fifo",
            evidence=(git_isolated / "ev_link.json", git_isolated / "ev_fifo.json"),
        )
    )
    manifest = outcome.decision.manifest
    assert manifest["artifacts"]["wheel"] is None
    assert [entry["status"] for entry in manifest["evidence"]] == ["evidence_missing"] * 2
    assert manifest["reason_codes"] == ["evidence_missing", "wheel_missing"]


def test_read_regular_file_hashes_the_opened_descriptor(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    (tmp_path / "big").write_bytes(data)
    assert read_regular_file(tmp_path / "big", limit=1 << 30) == (digest_bytes(data), data)
    assert read_regular_file(tmp_path / "big", limit=10) == (digest_bytes(data), None)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    assert read_regular_file(tmp_path / "link", limit=10) is None
    assert read_regular_file(tmp_path / "missing", limit=10) is None
    assert read_regular_file(tmp_path, limit=10) is None
    assert read_regular_file("", limit=10) is None
    assert read_regular_file("a\x00b", limit=10) is None


def test_oversized_evidence_is_hashed_and_invalid(
    git_isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sealeval.gates.runner.MAX_EVIDENCE_BYTES", 100)
    outcome = run_agent_release(options(git_isolated))
    entry = outcome.decision.manifest["evidence"][0]
    assert entry == {
        "file_digest": RECIPE["expected"]["evidence_file_digest"],
        "metric_count": 0,
        "status": "evidence_invalid",
    }


@pytest.mark.parametrize("kind", ["file", "directory", "dangling-symlink", "symlink-to-file"])
def test_output_is_created_exclusively(git_isolated: Path, kind: str) -> None:
    output = git_isolated / "out.json"
    target = git_isolated / "target.json"
    if kind == "file":
        output.write_bytes(b"keep")
    elif kind == "directory":
        output.mkdir()
    elif kind == "dangling-symlink":
        output.symlink_to(target)
    else:
        target.write_bytes(b"keep")
        output.symlink_to(target)
    assert _run_error(git_isolated, output=output) == "output_unavailable"
    if kind == "dangling-symlink":
        assert not target.exists()
    if kind == "symlink-to-file":
        assert target.read_bytes() == b"keep"
    if kind == "file":
        assert output.read_bytes() == b"keep"


def test_a_failed_write_leaves_no_partial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(_fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("sealeval.gates.runner.os.fsync", refuse)
    with pytest.raises(CandidateRunnerError) as caught:
        write_exclusive(tmp_path / "out.json", b"{}\n")
    assert str(caught.value) == "output_unavailable"
    assert not (tmp_path / "out.json").exists()


def test_tag_name_with_undecodable_bytes_is_digested_not_echoed(git_isolated: Path) -> None:
    tag = "bad\udcff"
    outcome = run_agent_release(options(git_isolated, tag=tag))
    repository = outcome.decision.manifest["repository"]
    assert repository["tag_digest"] == digest_bytes(b"bad\xff")
    assert repository["reason_codes"] == ["tag_unavailable"]


def test_linked_worktree_is_a_repository(git_isolated: Path) -> None:
    git(git_isolated, "checkout", "worktree", "add", "--quiet", "--detach", "../linked", HEAD)
    outcome = run_agent_release(options(git_isolated, repo_root=git_isolated / "linked"))
    # The main checkout now records the linked worktree, but that is not a tree change.
    assert outcome.decision.manifest["repository"]["reason_codes"] == []
    assert outcome.ready


# ---------------------------------------------------------------------------
# Never echo


def test_canary_never_appears_in_any_output(
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    workspace = fresh(template, tmp_path / CANARY)
    canary_dir = workspace / CANARY
    canary_dir.mkdir()
    (canary_dir / f"{CANARY}.key").write_bytes(CANARY.encode() * 2 + b"\n")
    shutil.copy(workspace / "evidence.json", canary_dir / f"{CANARY}.json")
    (canary_dir / f"{CANARY}-bad.json").write_text(f'{{"{CANARY}": 1}}', encoding="utf-8")
    base = [
        "--repo-root",
        "checkout",
        "--source-sha",
        HEAD,
        "--wheel",
        f"{CANARY}/wheel-{CANARY}",
        "--sdist",
        "sdist",
        "--tool-catalog",
        "tool_catalog",
        "--policy",
        "policy",
        "--tag",
        CANARY,
        "--evidence",
        f"{CANARY}/{CANARY}.json",
        "--evidence",
        f"{CANARY}/{CANARY}-bad.json",
        "--signing-key-file",
        f"{CANARY}/{CANARY}.key",
    ]
    texts: list[str] = []
    for index, mode in enumerate(([], ["--json"])):
        output = f"{CANARY}/{CANARY}-{index}.json"
        code, out, err = run_cli(
            workspace, monkeypatch, ["agent-release", *base, "--output", output, *mode]
        )
        assert code == 1
        texts += [out, err, (workspace / output).read_text(encoding="utf-8")]
        code, out, err = run_cli(
            workspace, monkeypatch, ["agent-release", *base, "--output", output, *mode]
        )
        assert code == 2
        texts += [out, err]
    code, out, err = run_script(workspace, [*base, "--output", f"{CANARY}/{CANARY}-s.json"])
    assert code == 1
    texts += [out, err, (workspace / CANARY / f"{CANARY}-s.json").read_text(encoding="utf-8")]
    bad_sha = [*base, "--source-sha", f"{CANARY}", "--output", "x.json"]
    texts += list(run_script(workspace, bad_sha)[1:])
    missing_key = [*base, "--signing-key-file", f"{CANARY}/missing", "--output", "x.json"]
    texts += list(run_script(workspace, missing_key)[1:])
    for error in (
        CandidateRunnerError("signing_key_unavailable"),
        CandidateRunnerError("packet_invalid"),
    ):
        texts += [str(error), repr(error)]
    texts += [repr(HmacKey(CANARY.encode() * 2)), str(HmacKey(CANARY.encode() * 2))]
    texts.append(caplog.text)
    for text in texts:
        assert CANARY not in text
        assert CANARY.encode().hex() not in text
        assert str(tmp_path) not in text


def test_evidence_parse_errors_never_echo() -> None:
    for document in (
        {CANARY: 1},
        {"schema_version": CANARY, "source_sha": HEAD, "metrics": []},
        [{CANARY: 1}],
        [{"metric": CANARY}],
    ):
        with pytest.raises((EvidenceEnvelopeError, GateError)) as caught:
            parse_evidence_document(document)
        assert CANARY not in str(caught.value)
        assert CANARY not in repr(caught.value)


# ---------------------------------------------------------------------------
# Pure core


def test_source_sha_grammar() -> None:
    assert is_source_sha(HEAD)
    assert is_source_sha("a" * 64)
    for value in (HEAD.upper(), HEAD[:39], "a" * 41, "a" * 63, HEAD + "\n", None, 1, b"a" * 40):
        assert not is_source_sha(value)


@pytest.mark.parametrize(
    ("observation", "expected"),
    [
        pytest.param(GitObservation(None, None), ("unknown", None, ["repository_unavailable"])),
        pytest.param(GitObservation("garbage", ""), ("unknown", None, ["repository_unavailable"])),
        pytest.param(GitObservation(HEAD, None), ("unknown", None, ["repository_unavailable"])),
        pytest.param(GitObservation(HEAD, ""), ("clean", HEAD, [])),
        pytest.param(GitObservation(HEAD, "?? x"), ("dirty", HEAD, ["dirty_tree"])),
        pytest.param(GitObservation(FIRST, ""), ("clean", FIRST, ["sha_mismatch"])),
        pytest.param(GitObservation("b" * 64, ""), ("clean", "b" * 64, ["sha_mismatch"])),
        pytest.param(
            GitObservation(None, None, tag="t", tag_commit=HEAD),
            ("unknown", None, ["repository_unavailable"]),
        ),
        pytest.param(
            GitObservation(HEAD, " M a", tag="t", tag_commit=FIRST),
            ("dirty", HEAD, ["dirty_tree", "tag_mismatch"]),
        ),
        pytest.param(
            GitObservation(HEAD, "", tag="", tag_commit=None), ("clean", HEAD, ["tag_unavailable"])
        ),
    ],
)
def test_snapshot_rules(observation: GitObservation, expected: tuple[Any, ...]) -> None:
    snapshot = RepositorySnapshot.from_observation(HEAD, observation)
    assert (snapshot.tree_status, snapshot.git_sha, list(snapshot.reason_codes)) == expected
    if observation.tag is None:
        assert snapshot.tag_digest is None
    else:
        assert snapshot.tag_digest == digest_bytes(observation.tag.encode())
    assert snapshot.tag_sha == (observation.tag_commit if observation.tag is not None else None)
    validator(MANIFEST_SCHEMA, "#/$defs/repository").validate(snapshot.to_dict())


def _envelope(**changes: Any) -> dict[str, Any]:
    document = json.loads(_case("recipe")["input"]["recipe"]["steps"][-1]["content"])
    assert isinstance(document, dict)
    document.update(changes)
    return document


def _assess(data: bytes) -> tuple[str, int]:
    entry = assess_evidence_file(data, expected_sha=HEAD)
    assert entry.file_digest == digest_bytes(data)
    return entry.status, entry.metric_count


def test_evidence_encodings_follow_json_autodetection() -> None:
    text = json.dumps(_envelope())
    for encoded in (
        text.encode("utf-8"),
        b"\xef\xbb\xbf" + text.encode("utf-8"),
        text.encode("utf-16"),
        text.encode("utf-16-le"),
        text.encode("utf-16-be"),
        text.encode("utf-32"),
        text.encode("utf-32-le"),
        text.encode("utf-32-be"),
    ):
        assert _assess(encoded) == ("accepted", 9)
    assert _assess(b"\xff" + text.encode("utf-8")) == ("evidence_invalid", 0)
    assert _assess(b"{}") == ("evidence_invalid", 0)
    assert _assess(b"[]") == ("evidence_invalid", 0)
    assert _assess(b"") == ("evidence_invalid", 0)
    assert _assess(b"\x00\x00") == ("evidence_invalid", 0)


def _metric(index: int = 0, **changes: Any) -> dict[str, Any]:
    record = dict(_envelope()["metrics"][index])
    record.update(changes)
    return record


@pytest.mark.parametrize(
    ("document", "status"),
    [
        pytest.param(_envelope(extra=1), "evidence_invalid", id="extra-top-key"),
        pytest.param({"schema_version": "x"}, "evidence_invalid", id="missing-top-keys"),
        pytest.param(_envelope(schema_version="v2"), "evidence_invalid", id="schema"),
        pytest.param(_envelope(source_sha=HEAD.upper()), "evidence_invalid", id="sha-grammar"),
        pytest.param(_envelope(source_sha=1), "evidence_invalid", id="sha-type"),
        pytest.param(_envelope(source_sha=FIRST), "evidence_sha_mismatch", id="sha-mismatch"),
        pytest.param(
            _envelope(source_sha=FIRST, metrics=[]),
            "evidence_sha_mismatch",
            id="sha-before-metrics",
        ),
        pytest.param(_envelope(metrics={}), "evidence_invalid", id="metrics-object"),
        pytest.param(_envelope(metrics=[1]), "evidence_invalid", id="metric-not-object"),
        pytest.param(
            _envelope(metrics=[{k: v for k, v in _metric().items() if k != "ci_lower"}]),
            "evidence_invalid",
            id="metric-missing-key",
        ),
        pytest.param(
            _envelope(metrics=[_metric(slices=[{**_metric()["slices"][0], "x": 1}])]),
            "evidence_invalid",
            id="slice-extra-key",
        ),
        pytest.param(
            _envelope(metrics=[_metric(slices=[[]])]), "evidence_invalid", id="slice-not-object"
        ),
        pytest.param(
            _envelope(metrics=[_metric(slices="x")]), "evidence_invalid", id="slices-string"
        ),
        pytest.param(
            _envelope(metrics=[_metric(value=0.5)]), "evidence_invalid", id="rate-mismatch"
        ),
        pytest.param(
            _envelope(metrics=[_metric(sample_size=True)]), "evidence_invalid", id="bool-count"
        ),
        pytest.param(
            _envelope(metrics=[_metric(), _metric()]), "accepted", id="duplicate-inside-file"
        ),
    ],
)
def test_evidence_statuses(document: Any, status: str) -> None:
    assert _assess(json.dumps(document).encode())[0] == status


@pytest.mark.parametrize(
    "token", ["NaN", "Infinity", "-Infinity", "1e400"], ids=["nan", "inf", "-inf", "overflow"]
)
def test_evidence_refuses_non_finite_tokens(token: str) -> None:
    text = json.dumps(_envelope()).replace('"ci_lower": null', f'"ci_lower": {token}', 1)
    assert _assess(text.encode()) == ("evidence_invalid", 0)


def test_duplicate_inside_one_file_discards_every_copy() -> None:
    before = RepositorySnapshot.from_observation(HEAD, GitObservation(HEAD, ""))
    entry = assess_evidence_file(
        json.dumps(_envelope(metrics=[_metric(0), _metric(0), _metric(1)])).encode(),
        expected_sha=HEAD,
    )
    assert (entry.status, entry.metric_count) == ("accepted", 3)
    decision = decide_candidate(
        expected_sha=HEAD,
        before=before,
        after=before,
        artifacts={},
        evidence=[entry],
        key=KEY,
    )
    reasons = decision.manifest["reason_codes"]
    assert "evidence_duplicate_metric" in reasons
    gates_by_metric = {gate.metric: gate for gate in decision.packet.gates}
    assert gates_by_metric["unauthorized_action_escape_rate"].reason_code == "missing_evidence"
    assert gates_by_metric["approval_bypass_rate"].reason_code == "threshold_satisfied"


def test_decide_candidate_refuses_bad_configuration() -> None:
    before = RepositorySnapshot.from_observation(HEAD, GitObservation(HEAD, ""))
    kwargs: dict[str, Any] = {"before": before, "after": before, "artifacts": {}, "evidence": []}
    with pytest.raises(CandidateRunnerError, match=r"^source_sha_invalid$"):
        decide_candidate(expected_sha="x", key=KEY, **kwargs)
    with pytest.raises(CandidateRunnerError, match=r"^signing_key_invalid$"):
        decide_candidate(expected_sha=HEAD, key=KEY[:31], **kwargs)
    with pytest.raises(CandidateRunnerError, match=r"^signing_key_invalid$"):
        decide_candidate(expected_sha=HEAD, key="k" * 40, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(CandidateRunnerError, match=r"^signing_key_invalid$"):
        sign_packet({}, KEY[:5])


def test_evidence_entries_are_sorted_by_canonical_text() -> None:
    before = RepositorySnapshot.from_observation(HEAD, GitObservation(HEAD, ""))
    entries = [
        EvidenceFileEntry(None, 0, "evidence_missing"),
        EvidenceFileEntry("sha256:" + "f" * 64, 0, "evidence_invalid"),
        EvidenceFileEntry("sha256:" + "0" * 64, 0, "evidence_sha_mismatch"),
    ]
    decision = decide_candidate(
        expected_sha=HEAD, before=before, after=before, artifacts={}, evidence=entries, key=KEY
    )
    assert [entry["file_digest"] for entry in decision.manifest["evidence"]] == [
        "sha256:" + "0" * 64,
        "sha256:" + "f" * 64,
        None,
    ]
    validator(MANIFEST_SCHEMA).validate(decision.manifest)
    validator(PACKET_SCHEMA).validate(decision.packet.to_dict())


_METRIC_FIELDS = (
    "ci_lower",
    "ci_upper",
    "event_count",
    "evidence_digest",
    "limitations",
    "metric",
    "sample_size",
    "schema_version",
    "slices",
    "value",
)
_PACKET_PATHS = (
    ("decision",),
    ("gates",),
    ("gates", 0),
    ("gates", 3, "event_count"),
    ("gates", 8, "sample_size"),
    ("gates", 1, "metric"),
    ("manifest_digest",),
    ("reason_codes",),
    ("packet_digest",),
    ("signature",),
    ("schema_version",),
)


def _ready_packet() -> dict[str, Any]:
    packet = READY["expected"]["bundle"]["packet"]
    assert isinstance(packet, dict)
    return json.loads(json.dumps(packet))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda p: p["gates"][0].update(sample_size=True), id="bool-sample-size"),
        pytest.param(lambda p: p["gates"][0].update(slice_count=-1), id="negative-slices"),
        pytest.param(lambda p: p["gates"][0].update(event_count=1.0), id="float-event-count"),
        pytest.param(lambda p: p["gates"][0].update(reason_code="x"), id="gate-reason"),
        pytest.param(lambda p: p["gates"][0].pop("slice_count"), id="gate-missing-key"),
        pytest.param(lambda p: p["gates"].__setitem__(0, []), id="gate-not-object"),
        pytest.param(lambda p: p.update(gates={}), id="gates-object"),
        pytest.param(lambda p: p.update(reason_codes="dirty_tree"), id="reasons-string"),
        pytest.param(lambda p: p.update(reason_codes=[1]), id="reason-int"),
        pytest.param(
            lambda p: p.update(reason_codes=["dirty_tree", "dirty_tree"], decision="NOT_READY"),
            id="reasons-duplicate",
        ),
        pytest.param(lambda p: p.update(decision="MAYBE"), id="decision-vocabulary"),
        pytest.param(lambda p: p.update(decision=None), id="decision-null"),
        pytest.param(lambda p: p.update(signature="sha256:" + "A" * 64), id="signature-format"),
        pytest.param(lambda p: p.update(schema_version=None), id="schema-null"),
        pytest.param(lambda p: p.pop("signature"), id="missing-signature"),
    ],
)
def test_packet_parse_refusals(mutate: Callable[[dict[str, Any]], Any]) -> None:
    packet = _ready_packet()
    mutate(packet)
    with pytest.raises(CandidateRunnerError) as caught:
        AgentCandidatePacket.from_dict(packet)
    assert str(caught.value) == "packet_invalid"
    assert verify_packet_document(packet, KEY) is False


def test_packet_verify_never_raises() -> None:
    packet = AgentCandidatePacket.from_dict(_ready_packet())
    assert packet.verify(KEY)
    assert packet.verify(KEY + b"\n") is False
    for key in (b"", KEY[:31], "k" * 64, None, 1, bytearray(KEY)):
        assert packet.verify(key) is False  # type: ignore[arg-type]
    for document in (None, [], "x", {"decision": "READY"}, 1.5):
        assert verify_packet_document(document, KEY) is False
    tuple_gates = {**_ready_packet(), "gates": tuple(_ready_packet()["gates"])}
    assert AgentCandidatePacket.from_dict(tuple_gates).verify(KEY)


def test_an_invalid_packet_cannot_be_constructed() -> None:
    packet = AgentCandidatePacket.from_dict(_ready_packet())
    fields = {
        "decision": packet.decision,
        "gates": packet.gates,
        "manifest_digest": packet.manifest_digest,
        "reason_codes": packet.reason_codes,
        "report_digest": packet.report_digest,
        "packet_digest": packet.packet_digest,
        "signature": packet.signature,
    }
    assert AgentCandidatePacket(**fields) == packet
    for changes in (
        {"gates": list(packet.gates)},
        {"gates": ({},) * 9},
        {"gates": packet.gates[:8]},
        {"reason_codes": ["dirty_tree"]},
        {"reason_codes": ("dirty_tree",)},
        {"signature": None},
        {"decision": "NOT_READY"},
    ):
        with pytest.raises(CandidateRunnerError, match=r"^packet_invalid$"):
            AgentCandidatePacket(**{**fields, **changes})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(
    metric=st.fixed_dictionaries({}, optional=dict.fromkeys(_METRIC_FIELDS, _JSON)),
    slot=st.sampled_from(_METRIC_FIELDS),
    value=_JSON,
)
def test_evidence_assessment_never_raises(metric: dict[str, Any], slot: str, value: Any) -> None:
    record = {**_metric(), **metric, slot: value}
    document = {**_envelope(), "metrics": [record]}
    entry = assess_evidence_file(json.dumps(document).encode(), expected_sha=HEAD)
    assert entry.status in ("accepted", "evidence_invalid")


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(_PACKET_PATHS), value=_JSON)
def test_packet_verification_never_raises(path: tuple[Any, ...], value: Any) -> None:
    document = _ready_packet()
    target: Any = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    result = verify_packet_document(document, KEY)
    assert result is (document == _ready_packet())


def test_hmac_key_hides_its_material() -> None:
    key = HmacKey(KEY)
    assert repr(key) == str(key) == "HmacKey(<redacted>)"
    assert KEY.hex() not in repr(key)
    assert key.usable
    assert not key.ends_with_newline
    assert HmacKey(KEY + b"\n").ends_with_newline
    assert not HmacKey(b"short").usable
    with pytest.raises(CandidateRunnerError, match=r"^signing_key_invalid$"):
        HmacKey("text")  # type: ignore[arg-type]
    with pytest.raises(CandidateRunnerError, match=r"^signing_key_invalid$"):
        HmacKey(b"short").mac(b"x")


# ---------------------------------------------------------------------------
# Ed25519 and bundles


@pytest.fixture(scope="module")
def ed25519_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def test_ed25519_detached_signature_round_trip(ed25519_pem: bytes) -> None:
    signer = Ed25519SigningKey.from_pem(ed25519_pem)
    assert "PRIVATE" not in repr(signer)
    assert repr(signer) == f"Ed25519SigningKey(public_key_sha256={signer.public_key_sha256!r})"
    public = signer.public_key()
    public_pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert ed25519_public_key_sha256(load_ed25519_public_key(public_pem)) == (
        signer.public_key_sha256
    )
    packet = AgentCandidatePacket.from_dict(_ready_packet())
    detached = signer.sign_packet(packet)
    validator(PACKET_SCHEMA, "#/$defs/packet_ed25519").validate(detached)
    assert verify_packet_ed25519(packet, detached, public)
    other = Ed25519PrivateKey.generate().public_key()
    assert not verify_packet_ed25519(packet, detached, other)
    for broken in (
        {**detached, "algorithm": "ed448"},
        {**detached, "signature": detached["signature"].upper()},
        {**detached, "signature": "00" * 64},
        {**detached, "public_key_sha256": "sha256:" + "0" * 64},
        {**detached, "extra": 1},
        None,
        [],
    ):
        assert not verify_packet_ed25519(packet, broken, public)
    tampered = _ready_packet()
    tampered["gates"][0]["sample_size"] = 101
    assert not verify_packet_ed25519(AgentCandidatePacket.from_dict(tampered), detached, public)


def test_ed25519_key_loading_refusals() -> None:
    rsa_pem = generate_private_key(public_exponent=65537, key_size=1024).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    encrypted = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    for data in (rsa_pem, encrypted, b"", CANARY.encode()):
        with pytest.raises(CandidateRunnerError) as caught:
            Ed25519SigningKey.from_pem(data)
        assert str(caught.value) == "ed25519_key_invalid"
    rsa_public = (
        generate_private_key(public_exponent=65537, key_size=1024)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    for data in (rsa_public, b"", CANARY.encode()):
        with pytest.raises(CandidateRunnerError) as caught:
            load_ed25519_public_key(data)
        assert str(caught.value) == "public_key_invalid"
    with pytest.raises(CandidateRunnerError, match=r"^ed25519_key_invalid$"):
        Ed25519SigningKey("x")  # type: ignore[arg-type]


def test_run_with_ed25519_keeps_the_reference_packet(
    git_isolated: Path, ed25519_pem: bytes
) -> None:
    (git_isolated / "ed.pem").write_bytes(ed25519_pem)
    outcome = run_agent_release(options(git_isolated, ed25519_key_file=git_isolated / "ed.pem"))
    bundle = json.loads((git_isolated / "bundle.json").read_text(encoding="utf-8"))
    reference = READY["expected"]["bundle"]
    assert {key: bundle[key] for key in reference} == reference
    assert set(bundle) == {*reference, "packet_ed25519"}
    parsed = CandidateBundle.from_dict(bundle)
    public = Ed25519SigningKey.from_pem(ed25519_pem).public_key()
    assert verify_packet_ed25519(parsed.packet, parsed.packet_ed25519, public)
    assert outcome.decision.packet_ed25519 == bundle["packet_ed25519"]
    validator(PACKET_SCHEMA, "#/$defs/bundle").validate(bundle)


def test_ed25519_key_file_errors(git_isolated: Path) -> None:
    assert _run_error(git_isolated, ed25519_key_file=git_isolated / "none.pem") == (
        "ed25519_key_unavailable"
    )
    (git_isolated / "bad.pem").write_bytes(b"not a key")
    assert _run_error(git_isolated, ed25519_key_file=git_isolated / "bad.pem") == (
        "ed25519_key_invalid"
    )


def test_bundle_parsing_and_consistency() -> None:
    bundle = json.loads(json.dumps(READY["expected"]["bundle"]))
    parsed = CandidateBundle.from_dict(bundle)
    assert parsed.consistent()
    assert parsed.packet_ed25519 is None
    tampered = json.loads(json.dumps(bundle))
    tampered["manifest"]["artifacts"]["wheel"] = None
    assert not CandidateBundle.from_dict(tampered).consistent()
    for broken in (
        [],
        {**bundle, "extra": 1},
        {**bundle, "manifest": []},
        {**bundle, "manifest": {**bundle["manifest"], "schema_version": "x"}},
        {**bundle, "manifest_digest": "x"},
        {**bundle, "packet_ed25519": "x"},
        {**bundle, "packet_ed25519": None},
    ):
        with pytest.raises(CandidateRunnerError, match=r"^bundle_invalid$"):
            CandidateBundle.from_dict(broken)
    with pytest.raises(CandidateRunnerError, match=r"^packet_invalid$"):
        CandidateBundle.from_dict({**bundle, "packet": {}})
    odd = CandidateBundle(
        manifest={"x": float("nan")},
        manifest_digest=parsed.manifest_digest,
        packet=parsed.packet,
    )
    assert not odd.consistent()


# ---------------------------------------------------------------------------
# Strict evidence parsing (sealeval gates evaluate)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param("x", "evidence: invalid_document", id="string"),
        pytest.param({**_envelope(), "x": 1}, "evidence: unknown_field", id="envelope-extra"),
        pytest.param({"metrics": []}, "evidence: missing_field", id="envelope-missing"),
        pytest.param(
            _envelope(schema_version="v2"), "schema_version: unsupported_version", id="schema"
        ),
        pytest.param(_envelope(source_sha="x"), "source_sha: invalid_sha", id="sha"),
        pytest.param(_envelope(metrics={}), "metrics: invalid_sequence", id="metrics-object"),
        pytest.param(_envelope(metrics=[]), "metrics: empty", id="metrics-empty"),
        pytest.param([], "evidence: empty", id="array-empty"),
        pytest.param([1], "evidence[0]: invalid_document", id="array-item"),
        pytest.param([{**_metric(), "x": 1}], "evidence[0]: unknown_field", id="metric-extra"),
        pytest.param(
            [{k: v for k, v in _metric().items() if k != "value"}],
            "evidence[0]: missing_field",
            id="metric-missing",
        ),
        pytest.param(
            [_metric(metric="aggregate_score")],
            "evidence[0].metric: unexpected_metric",
            id="metric-unknown",
        ),
        pytest.param(
            [_metric(), _metric(slices={})], "evidence[1].slices: invalid_sequence", id="slices"
        ),
        pytest.param(
            [_metric(slices=[{"slice_ref": "a"}])],
            "evidence[0].slices[0]: missing_field",
            id="slice-missing",
        ),
        pytest.param(
            _envelope(metrics=[_metric(value="x")]),
            "metrics[0].value: invalid_number",
            id="metric-value",
        ),
        pytest.param(
            _envelope(metrics=[_metric(value=0.5)]),
            "metrics[0].metric: rate_count_mismatch",
            id="metric-rate",
        ),
    ],
)
def test_strict_evidence_refusals(document: Any, message: str) -> None:
    with pytest.raises((EvidenceEnvelopeError, GateError)) as caught:
        parse_evidence_document(document)
    assert str(caught.value) == message


def test_strict_evidence_accepts_both_forms() -> None:
    envelope = _envelope()
    from_envelope = parse_evidence_document(envelope)
    from_array = parse_evidence_document(envelope["metrics"])
    assert from_envelope == from_array
    assert len(from_array) == 9


@pytest.fixture(autouse=True)
def _no_git_leak() -> Iterator[None]:
    """Fail if a test leaves a git variable that would redirect later tests."""
    yield
    assert "GIT_DIR" not in os.environ
