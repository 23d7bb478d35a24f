"""`sealeval gates run-suite`: executed suites written as source-bound evidence envelopes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.canonical import decode
from sealeval.cli import cli
from sealeval.gates.candidate import parse_evidence_document
from sealeval.gates.evaluation import evaluate_agent_release_gates
from sealeval.gates.suites import bundled_suite_evidence, evidence_envelope

SHA = "0123456789abcdef0123456789abcdef01234567"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("suite", "metrics"),
    [
        ("adversarial", ["unauthorized_action_escape_rate", "unsafe_side_effect_rate"]),
        ("recovery", ["recovery_correctness_rate"]),
    ],
)
def test_run_suite_writes_an_envelope_the_runner_accepts(
    tmp_path: Path, suite: str, metrics: list[str]
) -> None:
    output = tmp_path / f"{suite}.json"
    code, out, err = run("gates", "run-suite", suite, "--source-sha", SHA, "-o", str(output))
    assert (code, err) == (0, "")
    envelope = decode(output.read_bytes())
    assert envelope["source_sha"] == SHA
    evidence = parse_evidence_document(envelope)
    assert [item.metric for item in evidence] == metrics
    assert all(item.metric in out for item in evidence)
    report = evaluate_agent_release_gates(list(evidence), candidate_digest="sha256:" + "1" * 64)
    assert all(r.passed for r in report.gate_results if r.gate.metric in metrics)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["nope", "--source-sha", SHA],
            "sealeval: error: SUITE: unknown_suite",
            id="unknown-suite",
        ),
        pytest.param(
            ["recovery", "--source-sha", "ABC"], "sealeval: error: source_sha_invalid", id="bad-sha"
        ),
    ],
)
def test_run_suite_refusals(tmp_path: Path, args: list[str], message: str) -> None:
    output = tmp_path / "out.json"
    code, out, err = run("gates", "run-suite", *args, "-o", str(output))
    assert (code, out, err) == (2, "", message + "\n")
    assert not output.exists()


def test_run_suite_never_overwrites(tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    output.write_text("keep")
    code, _, err = run("gates", "run-suite", "recovery", "--source-sha", SHA, "-o", str(output))
    assert (code, err) == (2, "sealeval: error: --output: output_exists\n")
    assert output.read_text() == "keep"


def test_envelope_is_deterministic_and_bound_to_the_sha() -> None:
    first = evidence_envelope(bundled_suite_evidence("recovery"), source_sha=SHA)
    second = evidence_envelope(bundled_suite_evidence("recovery"), source_sha=SHA)
    assert first == second
    with pytest.raises(ValueError, match="unknown suite"):
        bundled_suite_evidence("nope")  # type: ignore[arg-type]
