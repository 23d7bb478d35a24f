"""The pytest plugin (entry point ``pytest11``) in a real pytest run, JUnit XML included."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from _integration_samples import (
    BASELINE_ARTIFACT,
    CANDIDATE_ARTIFACT,
    inspect_eval_log,
    inspect_version,
    lm_eval_mc_samples,
    lm_eval_version,
    mc_policy,
    mc_provenance,
    policy,
    provenance,
    write_regressed_mc,
)
from sealeval.captured import Run, write_run
from sealeval.captured.importers import load_run
from sealeval.integrations import GateInputError
from sealeval.pytest_plugin import PROPERTIES, RegressionError, assert_no_regression

pytest_plugins = ["pytester"]

CANARY = "CANARY-plugin-93ab"


def _mc(path: Path, run_id: str, artifact: str) -> Run:
    return load_run(
        path,
        "lm-eval-log-samples",
        source={"name": "lm-evaluation-harness", "version": lm_eval_version()},
        run_id=run_id,
        artifact_digest=artifact,
        score_provenance=mc_provenance(),
    )


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """Canonical run files: the real baseline, the same results as candidate, a regressed one."""
    folder = tmp_path / "derived"
    folder.mkdir()
    files = {
        "baseline": _mc(lm_eval_mc_samples(), "baseline", BASELINE_ARTIFACT),
        "same": _mc(lm_eval_mc_samples(), "candidate", CANDIDATE_ARTIFACT),
        "regressed": _mc(write_regressed_mc(folder), "candidate", CANDIDATE_ARTIFACT),
    }
    paths = {}
    for name, run in files.items():
        paths[name] = tmp_path / f"{name}.run.json"
        write_run(run, paths[name])
    paths["policy"] = tmp_path / "policy.json"
    paths["policy"].write_text(json.dumps(mc_policy()), encoding="utf-8")
    return paths


def _properties(junit: Path) -> dict[str, dict[str, str]]:
    tree = ET.parse(junit)
    found: dict[str, dict[str, str]] = {}
    for case in tree.iter("testcase"):
        found[case.get("name", "")] = {
            prop.get("name", ""): prop.get("value", "") for prop in case.iter("property")
        }
    return found


def test_plugin_passes_fails_and_records_digests_in_junit(
    pytester: pytest.Pytester, runs: dict[str, Path]
) -> None:
    pytester.makepyfile(
        test_gate=f"""
        from sealeval.pytest_plugin import assert_no_regression

        BASELINE = {str(runs["baseline"])!r}
        POLICY = {str(runs["policy"])!r}

        def test_same_results(sealeval_compare):
            report = sealeval_compare(BASELINE, {str(runs["same"])!r}, POLICY)
            assert report.decision == "pass"

        def test_regressed(sealeval_compare):
            sealeval_compare(BASELINE, {str(runs["regressed"])!r}, POLICY)

        def test_function_form(record_property):
            assert_no_regression(
                BASELINE, {str(runs["regressed"])!r}, POLICY, record_property=record_property
            )
        """
    )
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--junitxml={junit}")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert "RegressionError: sealeval: decision regression" in output
    assert "acc [overall]: regression" in output
    assert "subject mean fails absolute bounds" in output
    properties = _properties(junit)
    assert set(properties) == {"test_same_results", "test_regressed", "test_function_form"}
    for name, recorded in properties.items():
        assert list(recorded) == list(PROPERTIES), name
        assert all(
            value.startswith("sha256:") for key, value in recorded.items() if "digest" in key
        )
    assert properties["test_same_results"]["sealeval.decision"] == "pass"
    assert properties["test_regressed"]["sealeval.decision"] == "regression"
    baseline = load_run(runs["baseline"])
    assert properties["test_regressed"]["sealeval.baseline_run_digest"] == baseline.digest
    assert (
        properties["test_regressed"]["sealeval.candidate_run_digest"]
        == load_run(runs["regressed"]).digest
    )
    tree = ET.parse(junit)
    failures = [case for case in tree.iter("testcase") if case.find("failure") is not None]
    assert {case.get("name") for case in failures} == {"test_regressed", "test_function_form"}
    for case in failures:
        message = case.find("failure").get("message", "")  # type: ignore[union-attr]
        assert "decision regression" in message


def test_insufficient_evidence_fails_unless_allowed() -> None:
    source = {"name": "inspect_ai", "version": inspect_version()}

    def run(artifact: str) -> Run:
        # the log states its own run id (a contradicting one is refused): the two runs
        # differ by the artifact evaluated
        return load_run(
            inspect_eval_log(),
            "inspect-eval",
            source=source,
            artifact_digest=artifact,
            score_provenance=provenance(),
        )

    baseline, candidate = run(BASELINE_ARTIFACT), run(CANDIDATE_ARTIFACT)
    recorded: list[tuple[str, Any]] = []
    with pytest.raises(RegressionError) as caught:
        assert_no_regression(
            baseline, candidate, policy(), record_property=lambda k, v: recorded.append((k, v))
        )
    message = str(caught.value)
    assert message.startswith("sealeval: decision insufficient_evidence")
    assert "missing results" in message
    assert dict(recorded)["sealeval.decision"] == "insufficient_evidence"
    report = assert_no_regression(baseline, candidate, policy(), allow_insufficient_evidence=True)
    assert report.decision == "insufficient_evidence"


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        pytest.param((1, "x", {}), "baseline", id="baseline-not-a-run"),
        pytest.param(("x", None, {}), "candidate", id="candidate-not-a-run"),
    ],
)
def test_wrong_argument_kinds_are_refused(
    arguments: tuple[Any, Any, Any], field: str, runs: dict[str, Path]
) -> None:
    baseline, candidate, policy_value = arguments
    baseline = runs["baseline"] if baseline == "x" else baseline
    candidate = runs["same"] if candidate == "x" else candidate
    with pytest.raises(GateInputError) as caught:
        assert_no_regression(baseline, candidate, policy_value)
    assert (caught.value.code, caught.value.field) == ("invalid_type", field)


def test_bad_policy_is_refused_with_a_code_and_no_echo(runs: dict[str, Path]) -> None:
    with pytest.raises(GateInputError) as caught:
        assert_no_regression(runs["baseline"], runs["same"], 3.5)
    assert (caught.value.code, caught.value.field) == ("invalid_type", "policy")
    broken = {**mc_policy(), "format": CANARY}
    with pytest.raises(Exception) as refused:  # the policy layer's own refusal
        assert_no_regression(runs["baseline"], runs["same"], broken)
    assert CANARY not in str(refused.value)
    assert getattr(refused.value, "code", None)
