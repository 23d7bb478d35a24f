"""Every size-cap and work-budget refusal names what lifts it (or says nothing does).

The closed ``<field>: <code>`` line stays; the line under it is the remedy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from sealeval.captured import evaluate as evaluate_module
from sealeval.captured import verification as verification_module
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.planning import DEFAULT_WORK_BUDGET
from sealeval.captured.run import COMPAT_MAX_BYTES, Limits
from sealeval.captured.run import reader as reader_module
from sealeval.cli import report as report_module
from sealeval.cli._remedies import ENVELOPE_REMEDY, FIXED_LIMIT, limit_remedy
from sealeval.cli.compare import compare_command
from sealeval.cli.evaluate import evaluate_command
from sealeval.cli.report import report_command
from sealeval.cli.verify import verify_command
from support.captured_verify import pack_workspace
from support.vectors import load, pack_folder, vectors_dir

PACK = "json-200-signed"


def _invoke(command: Any, *args: str | Path) -> Any:
    return CliRunner().invoke(command, [str(arg) for arg in args], catch_exceptions=False)


def _compare_inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    case = next(
        case["input"]
        for case in load("invarlock/comparisons.json")["cases"]
        if case["name"] == "text-20-multi-metric-slices"
    )
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(case["policy"]), encoding="utf-8")
    root = vectors_dir() / "invarlock"
    return root / case["baseline"], root / case["subject"], policy


def _lines(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if not line.startswith("planned")]


def test_compare_run_over_the_envelope_names_uncapped(tmp_path: Path) -> None:
    _baseline, subject, policy = _compare_inputs(tmp_path)
    big = tmp_path / "big.json"
    with big.open("wb") as handle:  # sparse: one byte over the 128 MiB file cap
        handle.truncate(COMPAT_MAX_BYTES + 1)
    refused = _invoke(compare_command, big, subject, "--policy", policy)
    assert refused.exit_code == 2
    assert _lines(refused) == [
        "sealeval: error: BASELINE: too_large",
        f"sealeval: {ENVELOPE_REMEDY}",
    ]
    assert str(big) not in refused.output
    lifted = _invoke(compare_command, big, subject, "--policy", policy, "--uncapped")
    assert lifted.exit_code == 2  # read now, and refused for what it holds (not JSON)
    assert _lines(lifted)[0] == "sealeval: error: BASELINE: invalid_json"
    assert f"sealeval: {ENVELOPE_REMEDY}" not in _lines(lifted)


def test_compare_uncapped_gives_the_same_report_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline, subject, policy = _compare_inputs(tmp_path)
    plain = _invoke(compare_command, baseline, subject, "--policy", policy, "--json")
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)  # stream even small runs
    streamed = _invoke(
        compare_command, baseline, subject, "--policy", policy, "--json", "--uncapped"
    )
    assert streamed.exit_code == plain.exit_code
    assert streamed.stdout_bytes == plain.stdout_bytes
    # a non-canonical run falls back to the whole-file read (same report)
    loose = tmp_path / "loose.json"
    loose.write_text(json.dumps(json.loads(baseline.read_bytes()), indent=1), encoding="utf-8")
    again = _invoke(compare_command, loose, subject, "--policy", policy, "--json", "--uncapped")
    assert again.stdout_bytes == plain.stdout_bytes


def test_compare_fixed_limit_says_no_option_lifts_it(tmp_path: Path) -> None:
    baseline, subject, policy = _compare_inputs(tmp_path)
    extension = tmp_path / "extension.json"
    extension.write_bytes(b" " * 65_537)
    refused = _invoke(
        compare_command, baseline, subject, "--policy", policy, "--extension", extension
    )
    assert refused.exit_code == 2
    assert _lines(refused) == [
        "sealeval: error: --extension: too_large",
        f"sealeval: {FIXED_LIMIT}",
    ]


def _tight_packs(monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
    """The reference's pack envelope with a one-record cap (the vector pack exceeds it)."""
    tight = dataclasses.replace(module.REFERENCE_PACK_LIMITS, max_records=1)
    monkeypatch.setattr(module, "REFERENCE_PACK_LIMITS", tight)


def test_report_over_the_envelope_names_uncapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tight_packs(monkeypatch, report_module)
    evidence = pack_folder(PACK) / "evidence"
    refused = _invoke(report_command, evidence)
    assert refused.exit_code == 2
    error, remedy = refused.stderr.splitlines()
    assert error.startswith("sealeval: error: ")
    assert error.endswith(": too_many_records")
    assert remedy == f"sealeval: {ENVELOPE_REMEDY}"
    assert _invoke(report_command, evidence, "--uncapped").exit_code == 0


def _verify_args(workspace: Path, tmp_path: Path, receipt: str) -> list[str | Path]:
    return [
        workspace / "evidence",
        "--trust-profile",
        workspace / "trust" / "trust-inputs.json",
        "--receipt",
        tmp_path / receipt,
    ]


def test_verify_over_the_envelope_and_over_the_budget_name_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = pack_workspace(PACK, tmp_path / "packs")
    _tight_packs(monkeypatch, verification_module)
    capped = _invoke(verify_command, *_verify_args(workspace, tmp_path, "r1.json"))
    assert capped.exit_code == 4
    assert capped.stdout.startswith("FAIL ")
    assert capped.stdout.splitlines()[0].endswith(": too_many_records")
    assert capped.stderr.splitlines() == [f"sealeval: {ENVELOPE_REMEDY}"]
    lifted = _invoke(verify_command, *_verify_args(workspace, tmp_path, "r2.json"), "--uncapped")
    assert lifted.exit_code in (0, 7)
    planned = lifted.stderr.splitlines()
    assert len(planned) == 1
    assert planned[0].endswith(f"(work budget: {DEFAULT_WORK_BUDGET:,})")
    short = _invoke(
        verify_command,
        *_verify_args(workspace, tmp_path, "r3.json"),
        "--uncapped",
        "--max-bootstrap-draws",
        "1",
    )
    assert short.exit_code == 2
    assert short.stderr.splitlines()[1:] == [
        "sealeval: error: --max-bootstrap-draws: local_work_budget_exceeded",
        "sealeval: raise the work budget with --max-bootstrap-draws N",
    ]
    assert short.stderr.splitlines()[0].endswith("(work budget: 1)")
    assert not (tmp_path / "r3.json").exists()


def test_evaluate_over_the_envelope_names_uncapped_and_its_default_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = pack_folder(PACK) / "request"
    request = shutil.copytree(source, tmp_path / "request") / "request.yaml"
    monkeypatch.setattr(evaluate_module, "INVARLOCK_LIMITS", Limits(max_records=2))
    refused = _invoke(evaluate_command, request, "--unsigned", "--preflight")
    assert refused.exit_code == 2
    assert _lines(refused) == [
        "sealeval: error: comparison.baseline.records: too_many_records",
        f"sealeval: {ENVELOPE_REMEDY}",
    ]
    monkeypatch.undo()
    within = _invoke(evaluate_command, request, "--unsigned", "--preflight", "--json")
    beyond = _invoke(evaluate_command, request, "--unsigned", "--preflight", "--json", "--uncapped")
    # within the envelope the preflight states the reference's default, beyond it sealeval's
    assert json.loads(within.stdout)["max_bootstrap_draws"] == DEFAULT_MAX_BOOTSTRAP_DRAWS
    assert json.loads(beyond.stdout)["max_bootstrap_draws"] == DEFAULT_WORK_BUDGET
    assert sorted(os.listdir(request.parent)) == sorted(os.listdir(source))  # nothing written


@pytest.mark.parametrize(
    ("command", "code", "field", "options", "expected"),
    [
        ("compare", "too_large", "baseline", {}, ENVELOPE_REMEDY),
        ("compare", "too_many_records", "subject.records", {}, ENVELOPE_REMEDY),
        ("compare", "too_large", "baseline", {"uncapped": True}, FIXED_LIMIT),
        ("compare", "too_large", "policy", {}, FIXED_LIMIT),
        ("evaluate", "too_large", "comparison.subject.path", {}, ENVELOPE_REMEDY),
        ("evaluate", "too_large", "request", {}, FIXED_LIMIT),
        ("evaluate", "too_large", "comparison.policy", {}, FIXED_LIMIT),
        ("evaluate", "too_many_cases", "comparison.baseline.case_set", {}, ENVELOPE_REMEDY),
        ("verify", "too_large", "baseline", {}, ENVELOPE_REMEDY),
        ("verify", "too_large", "receipt", {}, FIXED_LIMIT),
        ("report", "too_many_records", "subject", {"uncapped": True}, None),
        ("import", "too_large", "line[3]", {}, FIXED_LIMIT),
        ("import", "too_many_records", "records", {}, None),
        ("compare", "invalid_json", "baseline", {}, None),
    ],
    ids=[
        "compare-run-size",
        "compare-record-count",
        "compare-already-uncapped",
        "compare-policy-is-fixed",
        "evaluate-run-size",
        "evaluate-request-is-fixed",
        "evaluate-policy-is-fixed",
        "evaluate-case-set",
        "verify-pack-run",
        "verify-receipt-is-fixed",
        "report-already-uncapped",
        "import-line-is-fixed",
        "import-without-compat-has-no-cap",
        "not-a-limit",
    ],
)
def test_limit_remedy_table(
    command: str, code: str, field: str, options: dict[str, bool], expected: str | None
) -> None:
    assert limit_remedy(command, code, field, **options) == expected


def test_other_commands_say_a_size_limit_is_fixed() -> None:
    """Commands without a cap option (session, manifest, gates, ...) share ``refusals_exit``."""
    from sealeval.captured.errors import CapturedRunError  # noqa: PLC0415
    from sealeval.cli._common import refusals_exit  # noqa: PLC0415

    @click.command()
    @click.argument("code")
    @refusals_exit
    def refusing(code: str) -> None:
        raise CapturedRunError(code, "run")

    too_large = CliRunner().invoke(refusing, ["too_large"])
    assert too_large.exit_code == 2
    assert too_large.stderr.splitlines() == [
        "sealeval: error: run: too_large",
        f"sealeval: {FIXED_LIMIT}",
    ]
    other = CliRunner().invoke(refusing, ["not_found"])
    assert other.stderr.splitlines() == ["sealeval: error: run: not_found"]
