"""The composite GitHub Action (``action.yml``), run step by step on this machine.

Each ``run:`` step is executed with bash in a subprocess under a simulated
GitHub environment: ``GITHUB_STEP_SUMMARY`` and ``GITHUB_OUTPUT`` files,
``${{ inputs.* }}``, ``${{ steps.*.outputs.* }}`` and ``${{ github.* }}``
expanded into the step's ``env:`` as the runner does, ``if: always()``
honoured, later steps skipped after a failure. The ``uses:`` step
(``actions/upload-artifact``) cannot run here; its inputs are checked
instead. The inputs are real evaluator files from ``../shared/samples``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.integration_samples import (
    BASELINE_ARTIFACT,
    CANDIDATE_ARTIFACT,
    lm_eval_mc_samples,
    lm_eval_version,
    mc_policy,
    mc_provenance,
    write_json,
    write_regressed_mc,
)

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _action() -> dict[str, Any]:
    loaded = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@dataclass
class Job:
    """The outcome of one simulated run of the action."""

    results: dict[str, int | None] = field(
        default_factory=dict
    )  # step name -> exit (None: skipped)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""
    uploads: list[dict[str, str]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(code not in (0, None) for code in self.results.values())


def _expand(text: str, inputs: dict[str, str], job: Job, workspace: Path) -> str:
    def value(match: re.Match[str]) -> str:
        expression = match.group(1)
        parts = expression.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return inputs[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return job.outputs.get(parts[1], {}).get(parts[3], "")
        if expression == "github.action_path":
            return str(ROOT)
        raise AssertionError(f"unsupported expression in action.yml: {expression}")

    return EXPRESSION.sub(value, text)


def _outputs(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, value = line.partition("=")
        found[name] = value
    return found


def run_action(workspace: Path, given: dict[str, str]) -> Job:
    action = _action()
    declared = action["inputs"]
    assert set(given) <= set(declared), "test passes an undeclared input"
    inputs = {name: str(spec.get("default", "")) for name, spec in declared.items()}
    inputs.update(given)
    missing = [name for name, spec in declared.items() if spec.get("required") and not inputs[name]]
    assert not missing
    summary = workspace / "step-summary.md"
    summary.touch()
    job = Job()
    environment = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(workspace),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ROOT),
        "RUNNER_TEMP": str(workspace / "runner-temp"),
        "LANG": "C.UTF-8",
    }
    for index, step in enumerate(action["runs"]["steps"]):
        name = step["name"]
        condition = step.get("if")
        assert condition in (None, "always()"), condition
        if job.failed and condition != "always()":
            job.results[name] = None
            continue
        if "uses" in step:
            job.uploads.append(
                {
                    key: _expand(str(value), inputs, job, workspace)
                    for key, value in step["with"].items()
                }
                | {"uses": step["uses"]}
            )
            job.results[name] = 0
            continue
        assert step["shell"] == "bash"
        output_file = workspace / f"github-output-{index}"
        output_file.touch()
        env = dict(environment, GITHUB_OUTPUT=str(output_file))
        env.update(
            {key: _expand(str(value), inputs, job, workspace) for key, value in step["env"].items()}
        )
        completed = subprocess.run(
            ["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", step["run"]],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        job.results[name] = completed.returncode
        job.logs[name] = completed.stdout + completed.stderr
        if "id" in step:
            job.outputs[step["id"]] = _outputs(output_file)
    job.summary = summary.read_text(encoding="utf-8")
    return job


def _inputs(workspace: Path, candidate: Path, **extra: str) -> dict[str, str]:
    provenance = write_json(workspace / "provenance.json", mc_provenance())
    policy = write_json(workspace / "policy.json", mc_policy())
    return {
        "baseline": str(lm_eval_mc_samples()),
        "candidate": str(candidate),
        "policy": str(policy),
        "adapter": "lm-eval-log-samples",
        "source": f"lm-evaluation-harness@{lm_eval_version()}",
        "baseline-artifact-digest": BASELINE_ARTIFACT,
        "candidate-artifact-digest": CANDIDATE_ARTIFACT,
        "score-provenance": str(provenance),
        "output-dir": "gate-out",
        "install": "false",
        **extra,
    }


def _junit_failures(path: Path) -> int:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    return sum(int(suite.get("failures", "0")) for suite in suites)


def test_action_passes_on_the_same_results_signed(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    subprocess.run(
        [sys.executable, "-m", "sealeval", "evaluate", "--keygen", str(keys)],
        check=True,
        capture_output=True,
    )
    job = run_action(
        tmp_path,
        _inputs(tmp_path, lm_eval_mc_samples(), **{"signing-key": str(keys / "private.pem")}),
    )
    assert not job.failed, job.logs
    assert all(code == 0 for code in job.results.values())
    assert job.outputs["evaluate"]["decision"] == "pass"
    evaluation = json.loads((tmp_path / "gate-out" / "evaluation.json").read_text())
    assert evaluation["authentication"] == "signed"
    assert "Recorded policy result: Policy satisfied" in job.summary
    junit = tmp_path / job.outputs["report"]["junit"]
    assert _junit_failures(junit) == 0
    assert job.uploads == [
        {
            "uses": "actions/upload-artifact@v4",
            "name": "sealeval-evidence",
            "path": "gate-out",
            "if-no-files-found": "error",
        }
    ]
    assert (tmp_path / "gate-out" / "evidence").is_dir()


def test_action_fails_the_job_on_a_regression_and_still_publishes(tmp_path: Path) -> None:
    derived = tmp_path / "derived"
    derived.mkdir()
    job = run_action(tmp_path, _inputs(tmp_path, write_regressed_mc(derived)))
    names = list(job.results)
    assert job.results[names[-1]] == 1  # the gate
    assert all(job.results[name] == 0 for name in names[:-1])  # reports and upload still ran
    assert job.outputs["evaluate"]["decision"] == "regression"
    assert "decision regression" in job.logs[names[-1]]
    assert "Recorded policy result: Policy not met" in job.summary
    assert _junit_failures(tmp_path / "gate-out" / "junit.xml") >= 1
    assert (tmp_path / "gate-out" / "report.html").is_file()


def test_fail_on_regression_tolerates_insufficient_evidence_only(tmp_path: Path) -> None:
    derived = tmp_path / "derived"
    derived.mkdir()
    job = run_action(
        tmp_path, _inputs(tmp_path, write_regressed_mc(derived), **{"fail-on": "regression"})
    )
    assert job.results["Gate on the decision"] == 1


def test_import_refusal_fails_early_and_publishes_no_pack(tmp_path: Path) -> None:
    job = run_action(
        tmp_path, _inputs(tmp_path, lm_eval_mc_samples(), **{"candidate-artifact-digest": "nope"})
    )
    assert job.results["Import the baseline and the candidate"] == 2
    assert job.results["Compare into an evidence pack"] is None
    assert job.results["Publish the reports"] == 2  # always(): says there is no pack
    assert "no evidence pack" in job.summary
    assert job.results["Gate on the decision"] is None
    assert "nope" not in job.logs["Import the baseline and the candidate"]


def test_existing_output_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gate-out").mkdir()
    job = run_action(tmp_path, _inputs(tmp_path, lm_eval_mc_samples()))
    assert job.results["Import the baseline and the candidate"] == 2


def test_inputs_reach_scripts_only_through_the_environment() -> None:
    action = _action()
    declared = set(action["inputs"])
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step["name"]  # no expression injection
        for value in [*step.get("env", {}).values(), *step.get("with", {}).values()]:
            for expression in EXPRESSION.findall(str(value)):
                if expression.startswith("inputs."):
                    assert expression.removeprefix("inputs.") in declared


@pytest.mark.parametrize("name", ["decision", "evidence", "junit"])
def test_outputs_are_wired_to_step_outputs(name: str) -> None:
    action = _action()
    value = action["outputs"][name]["value"]
    step_id = EXPRESSION.fullmatch(value).group(1).split(".")[1]  # type: ignore[union-attr]
    assert step_id in {step.get("id") for step in action["runs"]["steps"]}
