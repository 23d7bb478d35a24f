"""The command line guides: outputs print what the next command needs; refusals name options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.cli import cli

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
CANARY = "CANARY-91c2-do-not-echo"


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(tmp_path)
    for kind in ("policy", "request"):
        assert _invoke("init", kind)[0] == 0
    assert _invoke("evaluate", "--keygen", "keys")[0] == 0
    code, out, _ = _invoke("evaluate", "request.yaml", "--signing-key", "keys/private.pem")
    assert code == 0
    return out


def test_evaluate_prints_the_digests_and_the_verify_command(published: str) -> None:
    fields = dict(line.split(": ", 1) for line in published.splitlines() if ": sha256:" in line)
    for name in (
        "Pack manifest digest",
        "Baseline run digest",
        "Subject run digest",
        "Request digest",
        "Policy digest",
        "Signer fingerprint",
    ):
        assert DIGEST.fullmatch(fields[name]), name
    command = next(line.strip() for line in published.splitlines() if "sealeval verify" in line)
    assert f"--expected-baseline-run {fields['Baseline run digest']}" in command
    assert f"--expected-subject-run {fields['Subject run digest']}" in command
    assert f"--expected-request-digest {fields['Request digest']}" in command
    assert f"--expected-signer {fields['Signer fingerprint']}" in command


def test_the_printed_verify_command_verifies(published: str) -> None:
    command = next(line.strip() for line in published.splitlines() if "sealeval verify" in line)
    args = command.split()[1:]
    filled = {"POLICY": "policy.yaml", "KEY": "keys/private.pem", "ID": "example.org/verifier"}
    code, out, err = _invoke(*[filled.get(arg, arg) for arg in args])
    assert code == 0, err
    assert "Policy result: pass" in out


def test_missing_anchors_name_every_missing_option(published: str) -> None:
    digests = DIGEST.findall(published)
    code, _, err = _invoke(
        "verify",
        "evidence",
        "--receipt",
        "receipt.json",
        "--expected-subject-run",
        digests[2],
        "--policy",
        "policy.yaml",
    )
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == "sealeval: error: anchors.baseline_run_digest: missing_input"
    missing = lines[1].removeprefix("sealeval: missing: ").split(", ")
    assert missing == [
        "--expected-baseline-run",
        "--expected-request-digest",
        "--expected-signer",
        "--verifier-identity",
        "--verifier-signing-key",
    ]
    assert "--trust-profile" in lines[2]


def test_missing_receipt_names_the_option(published: str) -> None:
    code, _, err = _invoke("verify", "evidence", "--trust-profile", f"{CANARY}.json")
    assert code == 2
    assert CANARY not in err
