"""``sealeval evaluate`` and ``sealeval verify`` through the command line (exit codes 0/2/4/6/7)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sealeval.captured.verify as verify_module
import sealeval.cli as cli_package
from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.captured.policy import ComparisonPolicyError
from sealeval.captured.signing import load_verify_key
from sealeval.cli._common import CONTEXT_SETTINGS, DECISION_ORDER_CHOICES, printable
from sealeval.cli.evaluate import evaluate_command
from sealeval.cli.verify import dump_json, verify_command
from support.captured_verify import (
    VERIFY_MESSAGES,
    pack_dir_workspace,
    pack_workspace,
    private_cases,
    private_load,
)
from support.vectors import pack_folder, vectors_dir, writable_copy

V = vectors_dir() / "invarlock"
MAIN = "text-20-exact-signed"
CANARY = "CANARYc1iq"
SIGNER = V / "keys" / "evidence-signer" / "private.pem"


def _invoke(command: Any, args: list[str], env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(command, args, env=env, catch_exceptions=False)


def _verify(args: list[str]) -> Result:
    return _invoke(verify_command, args)


# ---------------------------------------------------------------------------
# The real command line: the console script once `evaluate`/`verify` are registered,
# until then a separate interpreter running the command objects.

_RUNNERS = {
    "verify": "from sealeval.cli.verify import verify_command as c; c(prog_name='sealeval verify')",
    "evaluate": (
        "from sealeval.cli.evaluate import evaluate_command as c; c(prog_name='sealeval evaluate')"
    ),
}


def real_cli(command: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``sealeval <command> ARGS`` in a new process; return the completed process."""
    script = Path(sys.executable).with_name("sealeval")
    registered = command in cli_package.cli.commands
    if registered and script.exists():
        argv = [str(script), command, *args]
    else:
        argv = [sys.executable, "-c", _RUNNERS[command], *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=120)


# ---------------------------------------------------------------------------
# verify.json: every case through the command


def _verify_workspace(case: dict[str, Any], tmp_path: Path) -> Path:
    """The case's pack folder copied writable; the evidence argument made to point at pack_dir."""
    inputs = case["input"]
    cwd, pack = pack_dir_workspace(inputs["pack_dir"], tmp_path)
    evidence = cwd / inputs["command"][1]
    if not evidence.exists():
        shutil.copytree(pack, evidence)
    return cwd


def _check_failure_json(stdout: dict[str, Any], expected: dict[str, Any]) -> None:
    message = expected["errors"][0]
    if message not in VERIFY_MESSAGES:
        pytest.fail(f"unknown reference message: {message[:120]}")
    _, code, field = VERIFY_MESSAGES[message]
    assert stdout["errors"] == [f"{field}: {code}"]
    for member in ("format_version", "kind", "ok", "integrity_ok", "policy_verdict", "decision"):
        assert stdout[member] == expected[member]
    assert stdout["scoring_assurance"] is None
    assert stdout["signed_receipt"] == expected["signed_receipt"]
    if "reason" in expected:
        if expected["reason"] in ("local_work_budget_exceeded", "receipt_publication_failed"):
            assert stdout["reason"] == expected["reason"]
        else:  # the reference's reason is its message; ours is a closed reason
            assert stdout["reason"] == "invalid_verification_inputs"
        assert set(stdout) == set(expected)
    elif expected["integrity_ok"] is False:
        assert set(stdout) == set(expected)  # 4 / 6: no reason
    else:
        # Expected deviation: the reference omits `reason` for the mixed-options usage
        # refusal; sealeval gives every exit-2 result its closed reason.
        assert set(stdout) == {*expected, "reason"}
        assert stdout["reason"] == "invalid_verification_inputs"


@pytest.mark.parametrize("case", private_cases("invarlock/verify.json"))
def test_verify_vectors_through_the_command(case: dict[str, Any], tmp_path: Path) -> None:
    inputs, expected = case["input"], case["expected"]
    cwd = _verify_workspace(case, tmp_path)
    os.chdir(cwd)
    args = inputs["command"][1:]
    result = _verify(args)
    if set(expected) == {"first", "second"}:
        first, second = expected["first"], expected["second"]
        assert result.exit_code == first["exit_code"]
        assert json.loads(result.stdout) == first["stdout_json"]
        again = _verify(args)
        assert again.exit_code == second["exit_code"] == 2
        _check_failure_json(json.loads(again.stdout), second["stdout_json"])
        return
    assert result.exit_code == expected["exit_code"]
    stdout = json.loads(result.stdout)
    assert result.stdout == dump_json(stdout)
    if stdout["ok"] or stdout["integrity_ok"]:
        assert stdout == expected["stdout_json"]
    else:
        _check_failure_json(stdout, expected["stdout_json"])
    receipt = cwd / args[args.index("--receipt") + 1]
    if expected.get("receipt_file") is None:
        assert not receipt.exists()
        return
    assert receipt.read_bytes() == (V / expected["receipt_file"]).read_bytes()
    assert stat.S_IMODE(receipt.stat().st_mode) == 0o600


@pytest.fixture
def main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = pack_workspace(MAIN, tmp_path)
    monkeypatch.chdir(cwd)
    return cwd


PROFILE = ["--trust-profile", "trust/trust-inputs.json"]


def test_verify_text_output_matches_the_reference(tmp_path: Path) -> None:
    case = next(
        c for c in private_load("invarlock/cli.json")["cases"] if c["name"].startswith("verify-")
    )
    cwd, _ = pack_dir_workspace(case["input"]["cwd"].split(" ")[0], tmp_path)
    os.chdir(cwd)
    result = _verify(case["input"]["command"][1:])
    expected = case["expected"]
    assert result.exit_code == expected["exit_code"] == 7
    lines, reference = result.stdout.splitlines(), expected["stdout_text"].splitlines()
    assert lines[:-1] == reference[:-1]
    # Expected deviation: sealeval names the receipt by its file name, never by a path.
    assert reference[-1].endswith("/out/text-mode.receipt.json")
    assert lines[-1] == "Receipt text-mode.receipt.json"


def test_verify_text_outputs(main: Path) -> None:
    passed = _verify(["evidence", *PROFILE, "--receipt", "out/a.json"])
    assert passed.exit_code == 0
    assert passed.stdout.splitlines()[:5] == [
        "PASS Independent captured verification complete",
        "Evidence integrity: verified",
        "Policy result: pass",
        "Independent captured replay complete",
        "Recorded decision: pass",
    ]
    rejected = _verify(["tampered/corrupted-signature", *PROFILE, "--receipt", "out/b.json"])
    assert rejected.exit_code == 6
    assert rejected.stdout == (
        "FAIL signature: signature_invalid\n"
        "Evidence integrity: not verified; no acceptance established\n"
        "Receipt b.json\n"
    )
    contract = _verify(["tampered/extra-file", *PROFILE, "--receipt", "out/c.json"])
    assert contract.exit_code == 4
    assert contract.stdout.startswith("FAIL pack: unknown_entry\n")
    (main / "nothing").mkdir()
    unidentified = _verify(["nothing", *PROFILE, "--receipt", "out/d.json"])
    assert unidentified.exit_code == 4
    assert "Receipt" not in unidentified.stdout
    assert not (main / "out" / "d.json").exists()
    incomplete = _verify(["evidence", *PROFILE, "--receipt", "evidence/x.json"])
    assert incomplete.exit_code == 2
    assert incomplete.stdout == ""
    assert incomplete.stderr == "sealeval: error: --receipt: inside_pack\n"


def test_unidentified_pack_json_has_no_receipt(main: Path) -> None:
    result = _verify([str(main / "missing"), *PROFILE, "--receipt", "out/r.json", "--json"])
    assert result.exit_code == 4
    stdout = json.loads(result.stdout)
    assert (stdout["signed_receipt"], stdout["integrity_ok"]) == (None, False)
    assert stdout["errors"] == ["pack: not_directory"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--receipt", "r.json", "--json"], "anchors.baseline_run_digest: missing_input"),
        ([*PROFILE, "--json"], "receipt: missing_input"),
        ([*PROFILE, "--receipt", "r.json", "--max-bootstrap-draws", "-1", "--json"], None),
        (
            [*PROFILE, "--receipt", "r.json", "--max-bootstrap-draws", "x1", "--json"],
            "max_bootstrap_draws: invalid_budget",
        ),
        (
            [*PROFILE, "--expected-signer", "sha256:" + "0" * 64, "--receipt", "r", "--json"],
            "expected_signer: mixed_trust_inputs",
        ),
        (
            [*PROFILE, "--verifier-key", "trust/verifier.pem", "--receipt", "r", "--json"],
            "verifier_signing_key: mixed_trust_inputs",
        ),
        (
            ["--trust-profile", "trust/policy.json", "--receipt", "r", "--json"],
            "trust_profile: unknown_field",
        ),
        (
            ["--trust-profile", "out/none.json", "--receipt", "r", "--json"],
            "trust_profile: not_found",
        ),
    ],
)
def test_verify_usage_refusals(main: Path, args: list[str], error: str | None) -> None:
    result = _verify(["evidence", *args])
    assert result.exit_code == 2
    if error is None:  # click refuses "-1" as an unknown option value shape
        return
    stdout = json.loads(result.stdout)
    assert stdout["errors"] == [error]
    assert stdout["reason"] == "invalid_verification_inputs"
    assert stdout["integrity_ok"] is None
    assert not (main / "out").exists()


def test_environment_options_do_not_count_as_mixed(main: Path) -> None:
    env = {"SEALEVAL_POLICY": "trust-different-policy/policy.json"}
    result = _invoke(
        verify_command, ["evidence", *PROFILE, "--receipt", "out/r.json", "--json"], env=env
    )
    assert result.exit_code == 0  # the profile's own policy is used, the environment ignored


def test_explicit_options_from_the_environment(main: Path) -> None:
    profile = json.loads((main / "trust" / "trust-inputs.json").read_bytes())
    anchors = profile["anchors"]
    env = {
        "SEALEVAL_POLICY": "trust/policy.json",
        "SEALEVAL_EXPECTED_BASELINE_RUN": anchors["baseline_run_digest"],
        "SEALEVAL_EXPECTED_SUBJECT_RUN": anchors["subject_run_digest"],
        "SEALEVAL_EXPECTED_REQUEST_DIGEST": anchors["request_digest"],
        "SEALEVAL_EXPECTED_SIGNER": anchors["evidence_signer_fingerprint"],
        "SEALEVAL_VERIFIER_SIGNING_KEY": "trust/verifier.pem",
        "SEALEVAL_VERIFIER_IDENTITY": "recipient-qa",
    }
    result = _invoke(verify_command, ["evidence", "--receipt", "out/r.json"], env=env)
    assert result.exit_code == 0
    explicit = pack_folder(MAIN) / "verify" / "explicit-anchors.receipt.json"
    assert (main / "out" / "r.json").read_bytes() == explicit.read_bytes()


def test_receipt_publication_failure_is_incomplete(main: Path) -> None:
    (main / "blocker").write_text("x", "utf-8")
    result = _verify(["evidence", *PROFILE, "--receipt", "blocker/r.json", "--json"])
    assert result.exit_code == 2
    stdout = json.loads(result.stdout)
    assert (stdout["reason"], stdout["errors"]) == (
        "receipt_publication_failed",
        ["receipt: publication_failed"],
    )
    (main / "dangling.json").symlink_to(main / "nowhere")
    result = _verify(["evidence", *PROFILE, "--receipt", "dangling.json", "--json"])
    assert json.loads(result.stdout)["reason"] == "receipt_publication_failed"


def test_unsupported_scoring_environment_reason(
    main: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unsupported(policy: object) -> None:
        raise ComparisonPolicyError(
            "unsupported_unicode_version", "metrics[0].configuration.unicode_version"
        )

    monkeypatch.setattr(verify_module, "check_runtime", unsupported)
    result = _verify(["evidence", *PROFILE, "--receipt", "out/r.json", "--json"])
    assert result.exit_code == 2
    stdout = json.loads(result.stdout)
    assert stdout["reason"] == "unsupported_scoring_environment"
    assert not (main / "out" / "r.json").exists()


def test_json_output_escapes_control_characters() -> None:
    assert dump_json({"a": "x\x9by\x7f", "b": "é"}) == '{"a":"x\\u009by\\u007f","b":"é"}\n'
    assert printable("a\u202eb\x85") == "a\\u202eb\\u0085"


@pytest.mark.parametrize(
    ("pack", "status"),
    [
        ("evidence", 0),
        ("tampered/extra-file", 4),
        ("tampered/resigned-lying-report", 6),
    ],
)
def test_verify_exit_codes_through_the_real_cli(main: Path, pack: str, status: int) -> None:
    process = real_cli("verify", [pack, *PROFILE, "--receipt", "out/r.json", "--json"], main)
    assert process.returncode == status, process.stderr
    assert json.loads(process.stdout)["signed_receipt"] == "r.json"
    process = real_cli("verify", [pack, *PROFILE, "--receipt", f"{pack}/r.json"], main)
    assert process.returncode == 2
    assert process.stderr == "sealeval: error: --receipt: inside_pack\n"


def test_verify_policy_failure_through_the_real_cli(tmp_path: Path) -> None:
    cwd = pack_workspace("perfect-tie-20-signed", tmp_path)
    process = real_cli("verify", ["evidence", *PROFILE, "--receipt", "r.json"], cwd)
    assert process.returncode == 7
    assert process.stdout.startswith("FAIL captured evidence does not satisfy the approved policy")


def test_verify_help_and_settings() -> None:
    assert verify_command.context_settings == CONTEXT_SETTINGS
    assert evaluate_command.context_settings == CONTEXT_SETTINGS
    result = _verify(["-h"])
    assert result.exit_code == 0
    for option in (
        "--trust-profile",
        "--expected-baseline-run",
        "--expected-signer",
        "--verifier-signing-key",
        "--receipt",
        "--max-bootstrap-draws",
    ):
        assert option in result.stdout


def test_verify_never_echoes_canaries(main: Path) -> None:
    folder = main / CANARY
    folder.mkdir()
    (folder / "trust.json").write_text(json.dumps({CANARY: CANARY}), "utf-8")
    runs = [
        ["evidence", "--trust-profile", f"{CANARY}/trust.json", "--receipt", f"{CANARY}/r"],
        ["evidence", "--trust-profile", f"{CANARY}/none.json", "--receipt", f"{CANARY}/r"],
        [
            "evidence",
            "--policy",
            f"{CANARY}/p.json",
            "--expected-baseline-run",
            CANARY,
            "--receipt",
            f"{CANARY}/r",
        ],
        [f"{CANARY}/pack", *PROFILE, "--receipt", f"{CANARY}/r"],
    ]
    for args in runs:
        for extra in ([], ["--json"]):
            result = _verify([*args, *extra])
            assert result.exit_code in (2, 4)
            assert CANARY not in result.stdout + result.stderr
            assert str(main) not in result.stdout + result.stderr


# ---------------------------------------------------------------------------
# evaluate: packs.json (every pack rebuilt byte for byte through the command)


def _request_workspace(name: str, tmp_path: Path, pack: Path | None = None) -> Path:
    """Pack case ``name``'s folder (or ``pack``) copied writable, the signer key as signer.pem."""
    cwd = writable_copy(pack or pack_folder(name), tmp_path / name)
    shutil.copyfile(SIGNER, cwd / "request" / "signer.pem")
    return cwd / "request"


def _pack_files(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("case", private_cases("invarlock/packs.json"))
def test_evaluate_pack_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    inputs, expected = case["input"], case["expected"]
    pack = V / Path(inputs["request_dir"]).parent  # the case names its request
    request_dir = _request_workspace(case["name"], tmp_path, pack)
    os.chdir(request_dir)
    args = inputs["command"][1:]
    preflight = _invoke(evaluate_command, [*args, "--preflight"])
    reference = expected["evaluate_preflight"]
    assert preflight.exit_code == reference["exit_code"] == 0
    stdout = json.loads(preflight.stdout)
    # Expected deviation: paths are request-relative (the reference prints absolute ones).
    assert reference["stdout_json"]["output"].endswith("/" + stdout.pop("output"))
    assert stdout == {k: v for k, v in reference["stdout_json"].items() if k != "output"}
    assert not list(request_dir.glob("*evidence*"))  # preflight writes nothing
    result = _invoke(evaluate_command, args)
    assert result.exit_code == expected["evaluate"]["exit_code"] == 0
    stdout = json.loads(result.stdout)
    evidence = stdout.pop("evidence")
    assert expected["evaluate"]["stdout_json"]["evidence"].endswith("/" + evidence)
    assert stdout == {
        k: v for k, v in expected["evaluate"]["stdout_json"].items() if k != "evidence"
    }
    published = request_dir / evidence
    assert _pack_files(published) == _pack_files(V / expected["evidence_dir"])
    for relative, facts in expected["inventory_as_published"]["files"].items():
        assert oct(stat.S_IMODE((published / relative).stat().st_mode)) == facts["mode"]
    assert stdout["pack_manifest_digest"] == expected["pack_manifest_digest"]


# ---------------------------------------------------------------------------
# evaluate: cli.json (every case; report cases through `report`)

#: Every distinct reference message of cli.json -> our "<field>: <code>".
CLI_MESSAGES = {
    "output.evidence already exists": "output.evidence: output_exists",
    "unsigned mode cannot be combined with a signing key": "signing_key: signing_mode_conflict",
    "captured evaluation requires an Ed25519 signing key": "signing_key: signing_key_required",
    "override must be a safe relative reference": "output.evidence: outside_root",
    "a request or exactly one setup action is required": "request: request_required",
    "planned case set has duplicate case IDs": "cases: duplicate_id",
    "keygen directory must not already exist": "output: output_exists",
    "captured preflight failed: comparison plans 2760704 bootstrap draws; local budget is 1000. "
    "Increase the local budget only on a suitable host; the complete policy has not been "
    "evaluated.": "max_bootstrap_draws: work_budget_exceeded",
    "captured subject binding is invalid": "subject: digest_mismatch",
    "report destination must remain outside the immutable evidence pack": (
        "outputs.markdown: destination_inside_pack"
    ),
    "init directory must not already exist": None,  # --init: see the deviation below
}


def _cli_workspace(case: dict[str, Any], tmp_path: Path) -> Path:
    cwd_text = case["input"].get("cwd")
    if cwd_text is None:
        tmp_path.mkdir(exist_ok=True)
        return tmp_path
    # cli.json is not regenerated: its cases name the shared pack folders they ran in.
    folder = V / Path(cwd_text.split(" ")[0]).parent
    request_dir = _request_workspace(folder.name, tmp_path, folder)
    if case["input"]["command"][0] == "verify":
        return request_dir.parent
    return request_dir


def _planned_cases(request_dir: Path, frozen_text: str, duplicate: bool) -> None:
    """A planned case set for --freeze-cases: the reference's frozen cases, order reversed."""
    document = json.loads(frozen_text)
    document["cases"].reverse()
    if duplicate:
        document["cases"].append(document["cases"][0])
    name = "cases-dup.json" if duplicate else "cases.json"
    (request_dir / name).write_text(json.dumps(document), "utf-8")


FROZEN_TEXT = next(
    case["expected"]["output_file_text"]
    for case in private_load("invarlock/cli.json")["cases"]
    if case["name"] == "evaluate-freeze-cases"
)


def _check_cli_error(stdout: dict[str, Any], expected: dict[str, Any]) -> None:
    message = expected["errors"][0]
    if message not in CLI_MESSAGES:
        pytest.fail(f"unknown reference message: {message[:120]}")
    assert stdout["errors"] == [CLI_MESSAGES[message]]
    assert set(stdout) == set(expected)
    for member, value in expected.items():
        if member not in ("errors", "requested_outputs"):
            assert stdout[member] == value, member


@pytest.mark.parametrize("case", private_cases("invarlock/cli.json"))
def test_cli_vectors(case: dict[str, Any], tmp_path: Path) -> None:
    command, expected = case["input"]["command"], case["expected"]
    cwd = _cli_workspace(case, tmp_path)
    os.chdir(cwd)
    if command == ["--version"]:
        # Expected deviation: `sealeval --version` names sealeval, not the reference.
        assert expected["stdout_text"].startswith("InvarLock ")
        return
    if "--init" in command:
        # Not implemented: the reference's starter content is its own prose. We refuse
        # the option as a usage error (exit 2).
        if case["name"] == "evaluate-init-existing":
            assert CLI_MESSAGES[expected["stdout_json"]["errors"][0]] is None
        result = _invoke(evaluate_command, command[1:])
        assert result.exit_code == 2
        assert "No such option" in result.stderr
        return
    if case["name"] == "evaluate-existing-destination":
        # The reference ran this after publishing the request's default destination.
        shutil.copytree(cwd.parent / "evidence", cwd / "evidence")
    if "--freeze-cases" in command:
        _planned_cases(cwd, FROZEN_TEXT, duplicate="cases-dup.json" in command)
    if command[0] == "report":
        assert importlib.util.find_spec("sealeval.cli.report") is not None
        report_command = importlib.import_module("sealeval.cli.report").report_command

        vector_root = V if command[1].startswith("packs/") else cwd
        os.chdir(vector_root if "--markdown" not in command else tmp_path)
        args = command[1:]
        if "--markdown" in command:
            shutil.copytree(V / command[1], tmp_path / "evidence")
            args = ["evidence", *command[2:]]
        result = _invoke(report_command, args)
        assert result.exit_code == expected["exit_code"] == 2
        _check_cli_error(json.loads(result.stdout), expected["stdout_json"])
        return
    target = verify_command if command[0] == "verify" else evaluate_command
    result = _invoke(target, command[1:])
    assert result.exit_code == expected["exit_code"]
    if "stdout_text" in expected:
        text = expected["stdout_text"]
        if text == "":
            assert result.stdout == ""
            assert "--fail-on-policy cannot be used with --preflight" in result.stderr
            return
        lines, reference = result.stdout.splitlines(), text.splitlines()
        assert lines[:-1] == reference[:-1]
        # Expected deviation: request-relative paths, receipt named by its file name.
        last = lines[-1].split(" ", 1)[1]
        assert reference[-1].endswith("/" + last)
        return
    stdout = json.loads(result.stdout)
    reference = expected["stdout_json"]
    if not reference.get("ok", True):
        _check_cli_error(stdout, reference)
        return
    if command[1] == "--keygen":
        assert stdout["details"]["private_key"] == reference["details"]["private_key"]
        fingerprint = stdout["details"]["public_key_fingerprint"]
        assert fingerprint.startswith("sha256:")
        assert {k: v for k, v in stdout.items() if k != "details"} == {
            k: v for k, v in reference.items() if k != "details"
        }
        for name, mode in expected["file_modes"].items():
            assert oct(stat.S_IMODE((cwd / "newkeys" / name).stat().st_mode)) == mode
        return
    if command[1] == "--freeze-cases":
        assert stdout == reference
        assert (cwd / "cases.frozen.json").read_text("utf-8") == expected["output_file_text"]
        return
    evidence = stdout.pop("evidence")
    assert reference["evidence"].endswith("/" + evidence)
    assert stdout == {k: v for k, v in reference.items() if k != "evidence"}


# ---------------------------------------------------------------------------
# evaluate: behaviours beyond the vectors


@pytest.fixture
def request_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = _request_workspace(MAIN, tmp_path)
    shutil.copytree(pack_folder(MAIN) / "evidence", directory / "evidence")
    monkeypatch.chdir(directory)
    return directory


def test_env_key_is_used_and_ignored_under_unsigned(request_dir: Path) -> None:
    env = {"SEALEVAL_SIGNING_KEY": "signer.pem"}
    signed = _invoke(evaluate_command, ["request.yaml", "--output", "s", "--json"], env=env)
    assert json.loads(signed.stdout)["authentication"] == "signed"
    unsigned = _invoke(
        evaluate_command, ["request.yaml", "--unsigned", "--output", "u", "--json"], env=env
    )
    assert unsigned.exit_code == 0
    assert json.loads(unsigned.stdout)["authentication"] == "unsigned_local"
    assert read_evidence_pack(request_dir / "u").signed is False


def test_preflight_text_and_failures(request_dir: Path) -> None:
    result = _invoke(evaluate_command, ["request.yaml", "--unsigned", "--preflight", "-o"])
    assert result.exit_code == 2
    result = _invoke(
        evaluate_command, ["request.yaml", "--unsigned", "--preflight", "--output", "p"]
    )
    assert result.exit_code == 0
    assert result.stdout.startswith("Captured preflight passed")
    assert not (request_dir / "p").exists()
    failed = _invoke(evaluate_command, ["request.yaml", "--unsigned", "--preflight", "--json"])
    assert failed.exit_code == 2
    assert json.loads(failed.stdout) == {
        "errors": ["output.evidence: output_exists"],
        "execution_mode": "captured",
        "format_version": "invarlock/evaluation-preflight-v3",
        "kind": "captured",
        "ok": False,
        "requested_authentication": "unsigned_local",
    }
    budget = _invoke(
        evaluate_command, ["request.yaml", "--unsigned", "--max-bootstrap-draws", "1e3"]
    )
    assert (budget.exit_code, budget.stderr) == (
        2,
        "sealeval: error: --max-bootstrap-draws: invalid_budget\n",
    )


def test_setup_action_refusals(request_dir: Path) -> None:
    conflicting = _invoke(evaluate_command, ["--keygen", "k", "--freeze-cases", "c", "--json"])
    assert conflicting.exit_code == 2
    assert json.loads(conflicting.stdout)["errors"] == ["setup: conflicting_actions"]
    with_request = _invoke(evaluate_command, ["request.yaml", "--keygen", "k"])
    assert (with_request.exit_code, with_request.stderr) == (
        2,
        "sealeval: error: setup: conflicting_actions\n",
    )
    with_option = _invoke(evaluate_command, ["--keygen", "k", "--unsigned"])
    assert with_option.exit_code == 2
    stray_output = _invoke(evaluate_command, ["--keygen", "k", "--case-set-output", "x"])
    assert stray_output.stderr == (
        "sealeval: error: --case-set-output: case_set_output_without_freeze\n"
    )
    stray = _invoke(evaluate_command, ["request.yaml", "--case-set-output", "x"])
    assert stray.exit_code == 2
    assert "--case-set-output requires --freeze-cases" in stray.stderr
    no_request = _invoke(evaluate_command, [])
    assert (no_request.exit_code, no_request.stderr) == (
        2,
        "sealeval: error: REQUEST: request_required\n",
    )
    (request_dir / "bad.json").write_text("{", "utf-8")
    bad = _invoke(evaluate_command, ["--freeze-cases", "bad.json", "--json"])
    assert json.loads(bad.stdout)["errors"] == ["case_set: invalid_json"]
    assert not (request_dir / "k").exists()


def test_setup_text_outputs(request_dir: Path) -> None:
    keygen = _invoke(evaluate_command, ["--keygen", "keys"])
    assert keygen.exit_code == 0
    assert keygen.stdout.startswith("Key pair written; public key fingerprint sha256:")
    _planned_cases(request_dir, FROZEN_TEXT, duplicate=False)
    frozen = _invoke(evaluate_command, ["--freeze-cases", "cases.json"])
    assert frozen.exit_code == 0
    assert frozen.stdout.startswith("Case set frozen: 20 cases; sha256:")


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["request.yaml", "--signing-key", "signer.pem", "--output", "a", "--json"], 0),
        (["request.yaml", "--output", "b", "--json"], 2),
        (["request.yaml", "--unsigned", "--preflight", "--fail-on-policy"], 2),
    ],
)
def test_evaluate_exit_codes_through_the_real_cli(
    request_dir: Path, args: list[str], status: int
) -> None:
    process = real_cli("evaluate", args, request_dir)
    assert process.returncode == status, process.stderr


def test_evaluate_fail_on_policy_through_the_real_cli(tmp_path: Path) -> None:
    directory = _request_workspace("perfect-tie-20-signed", tmp_path)
    process = real_cli(
        "evaluate", ["request.yaml", "--unsigned", "--fail-on-policy", "--output", "e"], directory
    )
    assert process.returncode == 7
    assert process.stdout.startswith(
        "Captured evidence created\nRecorded policy result: regression"
    )
    keys = real_cli("evaluate", ["--keygen", "newkeys", "--json"], directory)
    assert keys.returncode == 0
    fingerprint = json.loads(keys.stdout)["details"]["public_key_fingerprint"]
    assert fingerprint == load_verify_key(directory / "newkeys" / "public.pem").fingerprint


def test_built_pack_verifies_end_to_end(tmp_path: Path) -> None:
    """evaluate with a fresh key, then verify with anchors from the evaluate result."""
    directory = _request_workspace(MAIN, tmp_path)
    os.chdir(directory)
    assert _invoke(evaluate_command, ["--keygen", "keys"]).exit_code == 0
    result = _invoke(
        evaluate_command,
        ["request.yaml", "--signing-key", "keys/private.pem", "--output", "built", "--json"],
    )
    built = json.loads(result.stdout)
    pack = read_evidence_pack(directory / "built")
    assert pack.signer is not None
    verified = _invoke(
        verify_command,
        [
            "built",
            "--policy",
            "policy.json",
            "--expected-baseline",
            built["baseline_run_digest"],
            "--expected-subject",
            built["subject_run_digest"],
            "--expected-request-digest",
            built["request_digest"],
            "--expected-signer",
            pack.signer.fingerprint,
            "--verifier-key",
            str(V / "keys" / "verifier" / "private.pem"),
            "--verifier-identity",
            "ci",
            "--receipt",
            "receipts/built.json",
            "--json",
        ],
    )
    assert verified.exit_code == 0, verified.stdout
    assert json.loads(verified.stdout)["pack_manifest_digest"] == built["pack_manifest_digest"]


def test_evaluate_never_echoes_canaries(request_dir: Path) -> None:
    folder = request_dir / CANARY
    folder.mkdir()
    (folder / "request.yaml").write_text(f"{CANARY}: [\n", "utf-8")
    for args in (
        [f"{CANARY}/request.yaml", "--unsigned"],
        ["request.yaml", "--signing-key", f"{CANARY}/key.pem", "--output", CANARY],
        ["request.yaml", "--unsigned", "--output", f"../{CANARY}"],
        ["--freeze-cases", f"{CANARY}/none.json"],
    ):
        for extra in ([], ["--json"]):
            result = _invoke(evaluate_command, [*args, *extra])
            assert result.exit_code == 2
            assert CANARY not in result.stdout + result.stderr
            assert str(request_dir) not in result.stdout + result.stderr


# ---------------------------------------------------------------------------
# Beyond the reference's caps: evaluate/verify/report --uncapped

_CAP = 50_000


def _uncapped_request(root: Path, records: int) -> None:
    """Two canonical runs of ``records`` cases, an exact_match policy and a request."""
    from sealeval.captured import make_run, write_run  # noqa: PLC0415

    (root / "inputs").mkdir(parents=True)
    for side, name in enumerate(("baseline", "subject")):
        rows = (
            {
                "id": f"case-{index:06d}",
                "input": f"q{index}",
                "expected": "yes",
                "output": "yes" if (index + side) % 7 else "no",
            }
            for index in range(records)
        )
        run = make_run(
            rows,
            source={"name": "bench", "version": "1"},
            run_id=name,
            artifact_digest="sha256:" + str(side + 1) * 64,
        )
        write_run(run, root / "inputs" / f"{name}.json")
    policy = {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [
            {
                "name": "exact",
                "kind": "exact_match",
                "configuration": {},
                "direction": "higher",
                "unit": "score",
                "aggregation": "mean",
                "minimum_count": 100,
                "maximum_regression": 0.02,
                "maximum_interval_width": 0.05,
            }
        ],
        "slices": [],
    }
    (root / "policy.json").write_text(json.dumps(policy), encoding="utf-8")
    (root / "request.yaml").write_text(
        "format_version: invarlock/evaluation-request-v2\n"
        "execution: {mode: captured}\n"
        "comparison:\n"
        "  baseline: {path: inputs/baseline.json, adapter: invarlock}\n"
        "  subject: {path: inputs/subject.json, adapter: invarlock}\n"
        "  policy: policy.json\n"
        "output: {evidence: evidence}\n",
        encoding="utf-8",
    )


def _anchored_verify_args(
    pack: str, document: dict[str, Any], signer: Any, verifier: Any, receipt: Path
) -> list[str]:
    """``verify`` arguments anchored to what ``evaluate --json`` reported."""
    return [
        pack,
        "--policy",
        "policy.json",
        "--expected-baseline-run",
        document["baseline_run_digest"],
        "--expected-subject-run",
        document["subject_run_digest"],
        "--expected-request-digest",
        document["request_digest"],
        "--expected-signer",
        signer.fingerprint,
        "--verifier-signing-key",
        str(verifier.private_key),
        "--verifier-identity",
        "test",
        "--receipt",
        str(receipt),
        "--json",
    ]


def test_uncapped_pack_beyond_the_reference_record_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50,001 records: refused by default (the reference's cap), built and verified uncapped."""
    import sealeval.captured.pack_reader as reader_module  # noqa: PLC0415
    import sealeval.captured.request.files as request_module  # noqa: PLC0415
    from sealeval.captured.signing import generate_key_directory  # noqa: PLC0415
    from sealeval.cli.report import report_command  # noqa: PLC0415

    # Stream the (small) run files too, so the streamed paths run end to end.
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(request_module, "STREAM_MIN_BYTES", 0)
    root = tmp_path / "request"
    _uncapped_request(root, _CAP + 1)
    signer = generate_key_directory(tmp_path / "signer")
    verifier = generate_key_directory(tmp_path / "verifier")
    monkeypatch.chdir(root)
    base = ["request.yaml", "--signing-key", str(signer.private_key), "--json"]
    refused = _invoke(evaluate_command, base)
    assert refused.exit_code == 2
    assert json.loads(refused.output)["errors"] == ["comparison.baseline.records: too_many_records"]
    assert not (root / "evidence").exists()
    built = _invoke(evaluate_command, [*base, "--uncapped"])
    assert built.exit_code == 0, built.output
    document = json.loads(built.output)
    capped = _invoke(
        verify_command,
        _anchored_verify_args("evidence", document, signer, verifier, tmp_path / "r1.json"),
    )
    assert capped.exit_code == 4
    assert json.loads(capped.output)["errors"] == ["baseline: too_many_records"]
    verified = _invoke(
        verify_command,
        [
            *_anchored_verify_args("evidence", document, signer, verifier, tmp_path / "r2.json"),
            "--uncapped",
        ],
    )
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.output)["integrity_ok"] is True
    assert (tmp_path / "r2.json").is_file()
    assert _invoke(report_command, ["evidence", "--json"]).exit_code == 2
    shown = _invoke(report_command, ["evidence", "--json", "--uncapped"])
    assert shown.exit_code == 0


def test_cli_commands_load_lazily() -> None:
    """`sealeval verify` imports neither the session store nor the gates; unknown names exit 2."""
    code = (
        "import sys, sealeval.cli.verify; "
        "print('sealeval.session.store' in sys.modules, 'sealeval.gates.registry' in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["False", "False"]
    assert CliRunner().invoke(cli_package.cli, ["no-such-command"]).exit_code == 2
    assert sorted(cli_package.cli.commands) == sorted(cli_package.COMMANDS)


def test_width_first_packs_are_an_explicit_opt_in_on_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evaluate/verify/report --decision-order width_first; the default refuses such a pack."""
    from sealeval.captured import comparison  # noqa: PLC0415
    from sealeval.captured import pack_reader as reader_module  # noqa: PLC0415
    from sealeval.captured.signing import generate_key_directory  # noqa: PLC0415
    from sealeval.cli.report import report_command  # noqa: PLC0415

    assert reader_module.WIDTH_FIRST_RULE == comparison.WIDTH_FIRST_RULE
    assert reader_module.DECISION_ORDERS == comparison.DECISION_ORDERS
    assert reader_module.DECISION_ORDERS == DECISION_ORDER_CHOICES
    root = tmp_path / "request"
    _uncapped_request(root, 300)
    signer = generate_key_directory(tmp_path / "signer")
    verifier = generate_key_directory(tmp_path / "verifier")
    monkeypatch.chdir(root)
    base = ["request.yaml", "--signing-key", str(signer.private_key), "--json"]
    documents = {}
    for order in ("width_first", "reference"):
        built = _invoke(
            evaluate_command, [*base, "--decision-order", order, "--output", f"pack-{order}"]
        )
        assert built.exit_code == 0, built.output
        documents[order] = json.loads(built.output)
    stored = json.loads((root / "pack-width_first" / "reports/evaluation.report.json").read_bytes())
    assert stored["decision_rule"] == "sealeval/width-first-v1"

    def verify(order: str, flag: str, receipt: str) -> Any:
        args = _anchored_verify_args(
            f"pack-{order}", documents[order], signer, verifier, tmp_path / receipt
        )
        return _invoke(verify_command, [*args, "--decision-order", flag])

    refused = verify("width_first", "reference", "r1.json")
    assert refused.exit_code == 4
    assert json.loads(refused.output)["errors"] == ["report: invalid_payload"]
    assert (tmp_path / "r1.json").is_file()  # identified: a signed rejection receipt
    accepted = verify("width_first", "width_first", "r2.json")
    # verified; 300 cases give an interval too wide for the policy: insufficient_evidence
    assert accepted.exit_code == 7, accepted.output
    summary = json.loads(accepted.output)
    assert summary["integrity_ok"] is True
    assert summary["metric_summaries"][0]["reasons"] == ["interval is too wide"]
    assert verify("reference", "width_first", "r3.json").exit_code == 4
    assert verify("reference", "reference", "r4.json").exit_code in (0, 7)
    assert _invoke(report_command, ["pack-width_first", "--json"]).exit_code == 2
    shown = _invoke(
        report_command, ["pack-width_first", "--json", "--decision-order", "width_first"]
    )
    assert shown.exit_code == 0, shown.output
    bad = CliRunner().invoke(evaluate_command, [*base, "--decision-order", "sideways"])
    assert bad.exit_code == 2


def test_uncapped_native_sides_are_imported_streamed_with_the_same_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evaluate --uncapped` on jsonl sides: held and streamed (threshold 0) give one pack."""
    import sealeval.captured.evaluate as evaluate_module  # noqa: PLC0415

    cwd = writable_copy(pack_folder("native-jsonl-signed"), tmp_path / "pack")
    monkeypatch.chdir(cwd / "request")
    base = ["request.yaml", "--unsigned", "--uncapped", "--json"]
    held = _invoke(evaluate_command, [*base, "--output", "held"])
    assert held.exit_code == 0, held.output
    monkeypatch.setattr(evaluate_module, "STREAM_MIN_BYTES", 0)
    streamed = _invoke(evaluate_command, [*base, "--output", "streamed"])
    assert streamed.exit_code == 0, streamed.output
    first, second = json.loads(held.output), json.loads(streamed.output)
    assert {first.pop("evidence"), second.pop("evidence")} == {"held", "streamed"}
    assert first == second

    def files(folder: Path) -> dict[str, bytes]:
        return {
            path.relative_to(folder).as_posix(): path.read_bytes()
            for path in folder.rglob("*")
            if path.is_file()
        }

    assert files(cwd / "request" / "held") == files(cwd / "request" / "streamed")


def test_printable_escapes_by_one_pinned_unicode_version() -> None:
    """U+0897 (Unicode 16.0) is unassigned in 15.0.0 and escaped on every interpreter."""
    assert printable("a\u0897b") == "a\\u0897b"
    assert printable("name\u200b\n") == "name\\u200b\\u000a"
    assert printable("caf\u00e9") == "caf\u00e9"
