"""``sealeval plan``: the CLI over sealeval.captured.planning (real run files, real policies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from sealeval.canonical import decode
from sealeval.captured import write_run
from sealeval.captured.planning import plan_from_run
from sealeval.cli import cli
from support.captured_planning import _baseline, _metric, _policy
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT


def _files(tmp_path: Path, policy: dict[str, Any] | None = None) -> tuple[Path, Path]:
    policy_path = tmp_path / "policy.json"
    policy_path.write_text(json.dumps(policy or _policy()), encoding="utf-8")
    run_path = tmp_path / "baseline.json"
    write_run(_baseline(), run_path)
    return policy_path, run_path


def _schema() -> dict[str, Any]:
    path = PROJECT_ROOT / "contracts" / "sealeval.sample-size-plan-v1.schema.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_plan_from_a_baseline_run_json_matches_the_library(tmp_path: Path) -> None:
    policy_path, run_path = _files(tmp_path)
    result = CliRunner().invoke(
        cli, ["plan", "--policy", str(policy_path), "--baseline", str(run_path), "--json"]
    )
    assert result.exit_code == 0, result.output
    document = decode(result.output)
    jsonschema.validate(document, _schema())
    library = plan_from_run(_baseline(), _policy())
    assert document["entries"] == [plan.to_dict() for plan in library]
    assert [(row["metric"], row["slice"]) for row in document["entries"]] == [
        ("exact_match", "overall"),
        ("exact_match", "hard"),
    ]


def test_plan_table_names_every_metric_and_slice_and_the_next_step(tmp_path: Path) -> None:
    policy_path, run_path = _files(tmp_path)
    result = CliRunner().invoke(
        cli, ["plan", "--policy", str(policy_path), "--baseline", str(run_path)]
    )
    assert result.exit_code == 0
    assert "exact_match" in result.output
    assert "hard" in result.output
    assert "overall" in result.output
    total = max(plan.total_cases or 0 for plan in plan_from_run(_baseline(), _policy()))
    assert f"collect at least {total:,} paired cases" in result.output


def test_plan_from_stated_rates(tmp_path: Path) -> None:
    policy = _policy()
    policy["metrics"].append(_metric("token_f1", configuration={"unicode_version": "15.0.0"}))
    policy_path, _run = _files(tmp_path, policy)
    result = CliRunner().invoke(
        cli,
        [
            "plan",
            "--policy",
            str(policy_path),
            "--rate",
            "exact_match=0.85",
            "--rate",
            "token_f1=0.2",
            "--power",
            "0.9",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    document = decode(result.output)
    jsonschema.validate(document, _schema())
    assert document["assumptions"]["power"] == 0.9
    assert len(document["entries"]) == 4
    assert all(row["status"] == "planned" for row in document["entries"])


@pytest.mark.parametrize(
    ("arguments", "field", "code"),
    [
        pytest.param([], "baseline", "missing_option", id="neither"),
        pytest.param(
            ["--rate", "exact_match=0.8", "--baseline", "B"],
            "baseline",
            "conflicting_options",
            id="both",
        ),
        pytest.param(["--rate", f"exact_match={CANARY}"], "rate[0]", "invalid_rate", id="rate"),
        pytest.param(["--rate", f"{CANARY}=0.5"], "rate[0]", "unknown_metric", id="unknown"),
        pytest.param(
            ["--rate", "exact_match=0.5", "--rate", "exact_match=0.6"],
            "rate[1]",
            "duplicate_metric",
            id="duplicate",
        ),
        pytest.param(["--rate", "exact_match=1.5"], "rates[0]", "invalid_rate", id="rate-range"),
        pytest.param(
            ["--rate", "exact_match=0.5", "--power", "0.2"], "power", "invalid_power", id="power"
        ),
        pytest.param(
            ["--rate", "exact_match=0.5", "--power", "nan"],
            "power",
            "invalid_value",
            id="power-nan",
        ),
        pytest.param(
            ["--rate", "exact_match=0.5", "--method", "wald"],
            "method",
            "invalid_method",
            id="method",
        ),
    ],
)
def test_plan_refusals_name_the_option_never_the_value(
    tmp_path: Path, arguments: list[str], field: str, code: str
) -> None:
    policy_path, _run = _files(tmp_path)
    arguments = [str(tmp_path / "baseline.json") if a == "B" else a for a in arguments]
    result = CliRunner().invoke(cli, ["plan", "--policy", str(policy_path), *arguments])
    assert result.exit_code == 2
    assert f"sealeval: error: {field}: {code}" in result.output
    assert CANARY not in result.output


def test_plan_refuses_a_bad_policy_and_run_without_echo(tmp_path: Path) -> None:
    policy_path, run_path = _files(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": CANARY}), encoding="utf-8")
    result = CliRunner().invoke(cli, ["plan", "--policy", str(bad), "--baseline", str(run_path)])
    assert result.exit_code == 2
    assert result.output.startswith("sealeval: error: policy: ")
    assert CANARY not in result.output
    result = CliRunner().invoke(cli, ["plan", "--policy", str(policy_path), "--baseline", str(bad)])
    assert result.exit_code == 2
    assert result.output.startswith("sealeval: error: baseline: ")
    assert CANARY not in result.output
