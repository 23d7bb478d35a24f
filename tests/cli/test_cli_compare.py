"""``sealeval compare``: every comparisons.json vector via the CLI, exit codes, output, no echo."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.captured.scorers import BINARY_KINDS
from sealeval.cli._common import CONTEXT_SETTINGS
from sealeval.cli.compare import EXIT_POLICY_NOT_PASSED, compare_command
from support.captured_comparison import _runtime_deviation, map_reference_error
from support.refusals import CANARY
from support.vectors import cases, load, vectors_dir

VECTORS = "invarlock/comparisons.json"
ERROR_LINE = re.compile(r"sealeval: error: ([A-Za-z0-9_.\[\]-]+): ([a-z0-9_]+)\n")
RE_IMPORT = (
    "sealeval: re-import the runs with --score-provenance FILE naming the policy's accepted "
    "provenance for its score key (sealeval import --help)\n"
)


# The CLI roots library fields at the file they concern (the runs and the policy are read by
# the CLI): a read-time run refusal under the run's side, a policy refusal under ``policy``.
#: What the user typed for compare's inputs: a refusal names it, not the library's field.
TYPED = {
    "baseline": "BASELINE",
    "subject": "SUBJECT",
    "policy": "--policy",
    "max_bootstrap_draws": "--max-bootstrap-draws",
    "decision_order": "--decision-order",
}


def cli_field(cls: str, field: str, side: str | None) -> str:
    if side is not None:
        return f"{side}.{field}"
    if cls == "ComparisonPolicyError":
        return f"policy.{field}"
    return TYPED.get(field, field)


def _invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(compare_command, [str(arg) for arg in args], catch_exceptions=False)


def _run_path(relative: str) -> Path:
    return vectors_dir() / "invarlock" / relative


def _case(name: str) -> dict[str, Any]:
    for case in load(VECTORS)["cases"]:
        if case["name"] == name:
            return case  # type: ignore[no-any-return]
    raise AssertionError(name)


def _argv(case_input: dict[str, Any], folder: Path, *extra: str) -> list[str]:
    policy = folder / "policy.json"
    policy.write_text(json.dumps(case_input["policy"]), encoding="utf-8")
    argv = [
        str(_run_path(case_input["baseline"])),
        str(_run_path(case_input["subject"])),
        "--policy",
        str(policy),
        *extra,
    ]
    if "max_bootstrap_draws" in case_input:
        draws = case_input["max_bootstrap_draws"]
        argv += ["--unlimited-draws"] if draws is None else ["--max-bootstrap-draws", str(draws)]
    return argv


@pytest.mark.parametrize("case", cases(VECTORS))
def test_comparison_vector_through_cli(case: dict[str, Any], tmp_path: Path) -> None:
    expected = case["expected"]
    result = _invoke(*_argv(case["input"], tmp_path, "--json"))
    if set(expected) == {"decision", "report", "report_canonical", "report_digest"}:
        assert result.stdout_bytes == expected["report_canonical"].encode("utf-8")
        assert result.stderr == ""
        assert result.exit_code == (0 if expected["decision"] == "pass" else 7)
    elif set(expected) == {"error"}:
        mapped = map_reference_error(case["input"], expected["error"]["message"])
        if mapped is None:
            pytest.fail("unmapped reference message")
        if _runtime_deviation(case["name"]) is not None:
            assert result.exit_code in (0, 7)
            return
        cls, code, field, side = mapped
        assert result.exit_code == 2
        assert result.stdout == ""
        first, *hints = result.stderr.splitlines(keepends=True)
        assert ERROR_LINE.fullmatch(first) is not None
        assert first == f"sealeval: error: {cli_field(cls, field, side)}: {code}\n"
        if code == "provenance_mismatch":  # the remedy: re-import with the provenance
            assert hints == [RE_IMPORT]
        else:  # at most the line naming what lifts a cap or the budget (options only)
            assert len(hints) <= 1
            assert all(line.startswith("sealeval: ") for line in hints)
            assert all(not line.startswith("sealeval: error:") for line in hints)
    else:
        pytest.fail("vector case shape not understood")


def test_table_output(tmp_path: Path) -> None:
    case = _case("text-20-multi-metric-slices")
    result = _invoke(*_argv(case["input"], tmp_path))
    report = case["expected"]["report"]
    assert result.exit_code == (0 if report["decision"] == "pass" else EXIT_POLICY_NOT_PASSED)
    out = result.stdout
    assert "captured comparison" in out
    # Every metric and slice the report names, in the table (facts of the case, not literals).
    for entry in report["metrics"]:
        assert entry["name"] in out
        if entry["slice"] != "overall":
            assert entry["slice"] in out
        for reason in entry["reasons"]:
            assert reason in out
    # Numbers as the HTML report shows them (four significant digits, the entry's unit).
    ratio = next(e["ratio"] for e in report["metrics"] if e.get("ratio") is not None)
    assert f"{ratio:.4g} ratio" in out
    for entry in report["metrics"]:
        if entry["interval"] is not None:
            scale = 100.0 if entry["kind"] in BINARY_KINDS else 1.0
            low, high = (entry["interval"][end] * scale for end in ("lower", "upper"))
            assert f"{low:.4g} to {high:.4g}" in out
    assert f"decision: {report['decision']}" in out
    assert case["expected"]["report_digest"] in out.split("report digest:")[1]
    # no ids or captured text in the table
    first = json.loads(_run_path(case["input"]["baseline"]).read_bytes())["records"][0]
    assert first["id"] not in out
    assert str(first["expected"]) not in out


def test_pass_exits_zero(tmp_path: Path) -> None:
    case = _case("perfect-tie-n2000")
    result = _invoke(*_argv(case["input"], tmp_path))
    assert result.exit_code == 0
    assert "decision: pass" in result.stdout


def test_decision_order_option(tmp_path: Path) -> None:
    case = _case("perfect-tie-n10")
    reference = _invoke(*_argv(case["input"], tmp_path, "--json"))
    assert reference.exit_code == 7
    assert json.loads(reference.stdout)["decision"] == "regression"
    explicit = _invoke(*_argv(case["input"], tmp_path, "--json", "--decision-order", "reference"))
    assert explicit.stdout_bytes == reference.stdout_bytes
    width_first = _invoke(
        *_argv(case["input"], tmp_path, "--json", "--decision-order", "width_first")
    )
    assert width_first.exit_code == 7
    document = json.loads(width_first.stdout)
    assert document["decision"] == "insufficient_evidence"
    assert document["decision_rule"] == "sealeval/width-first-v1"
    table = _invoke(*_argv(case["input"], tmp_path, "--decision-order", "width_first"))
    assert "width first" in table.stdout
    assert "interval is too wide" in table.stdout
    refused = _invoke(*_argv(case["input"], tmp_path, "--decision-order", CANARY))
    assert refused.exit_code == 2
    assert refused.stderr == "sealeval: error: --decision-order: invalid_decision_order\n"
    assert CANARY not in refused.output


@pytest.mark.parametrize("value", ["-1", "abc", "1e3", "1_000", " 12", "+5", "1.0", "9" * 31])
def test_invalid_budget_option(value: str, tmp_path: Path) -> None:
    case = _case("text-20-token-f1")
    result = _invoke(*_argv(case["input"], tmp_path, "--max-bootstrap-draws", value))
    assert result.exit_code == 2
    assert result.stderr == "sealeval: error: --max-bootstrap-draws: invalid_budget\n"
    assert result.stdout == ""


def test_budget_options(tmp_path: Path) -> None:
    case = _case("text-20-token-f1")
    records = len(json.loads(_run_path(case["input"]["baseline"]).read_bytes())["records"])
    needed = str(records * 2048)
    assert _invoke(*_argv(case["input"], tmp_path, "--max-bootstrap-draws", needed)).exit_code in (
        0,
        7,
    )
    short = _invoke(*_argv(case["input"], tmp_path, "--max-bootstrap-draws", str(int(needed) - 1)))
    assert short.exit_code == 2
    # the plan is printed up front, then the refusal and the options that lift it
    assert short.stderr.splitlines() == [
        f"planned bootstrap draws: {int(needed):,} (work budget: {int(needed) - 1:,})",
        "sealeval: error: --max-bootstrap-draws: work_budget_exceeded",
        "sealeval: raise the work budget with --max-bootstrap-draws N, or --unlimited-draws",
    ]
    assert short.stdout == ""
    assert _invoke(*_argv(case["input"], tmp_path, "--unlimited-draws")).exit_code in (0, 7)
    both = _invoke(
        *_argv(case["input"], tmp_path, "--unlimited-draws", "--max-bootstrap-draws", "5")
    )
    assert both.exit_code == 2
    assert both.stderr == "sealeval: error: --max-bootstrap-draws: conflicting_options\n"


def test_file_errors_never_echo_paths(tmp_path: Path) -> None:
    case = _case("text-20-exact-loose")
    argv = _argv(case["input"], tmp_path)
    missing = tmp_path / f"{CANARY}.json"
    folder = tmp_path / CANARY
    folder.mkdir()
    invalid = tmp_path / "invalid.json"
    invalid.write_text('{"format": ' + json.dumps(CANARY), encoding="utf-8")
    not_a_run = tmp_path / "not-a-run.json"
    not_a_run.write_text(json.dumps({"format": CANARY}), encoding="utf-8")
    bad_policy = tmp_path / "bad-policy.json"
    bad_policy.write_text(json.dumps({**case["input"]["policy"], "format": CANARY}), "utf-8")
    expectations = [
        ([str(missing), argv[1], *argv[2:]], "BASELINE: not_found"),
        ([argv[0], str(folder), *argv[2:]], "SUBJECT: not_regular_file"),
        ([argv[0], str(invalid), *argv[2:]], "SUBJECT: invalid_json"),
        ([str(not_a_run), argv[1], *argv[2:]], "BASELINE: missing_field"),
        ([*argv[:2], "--policy", str(missing)], "--policy: not_found"),
        ([*argv[:2], "--policy", str(invalid)], "--policy: invalid_json"),
        ([*argv[:2], "--policy", str(bad_policy)], "policy.format: invalid_constant"),
    ]
    for arguments, line in expectations:
        result = _invoke(*arguments)
        assert result.exit_code == 2, line
        assert result.stderr.splitlines()[0] == f"sealeval: error: {line}"
        if line == "SUBJECT: invalid_json":  # not a run file: import it first
            assert "sealeval import FILE -o RUN.json" in result.stderr.splitlines()[1]
        assert CANARY not in result.output
        assert str(tmp_path) not in result.output


def test_run_content_never_reaches_the_output(tmp_path: Path) -> None:
    rows = [
        {
            "id": f"{CANARY}-{index}",
            "input": CANARY,
            "expected": "alpha",
            "output": None if index == 0 else CANARY,
            "scores": {},
            "metadata": {"k": CANARY},
            "error": None,
            "context": {},
        }
        for index in range(3)
    ]
    for side, artifact in (("baseline", "1"), ("subject", "2")):
        document = {
            "format": "invarlock/evaluation-run-v1",
            "source": {"name": "unit", "version": "1"},
            "run_id": "run",
            "artifact_digest": "sha256:" + artifact * 64,
            "source_digest": None,
            "score_provenance": {},
            "records": rows,
        }
        (tmp_path / f"{side}.json").write_text(json.dumps(document), encoding="utf-8")
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
                "minimum_count": 1,
                "maximum_regression": 0.5,
                "maximum_interval_width": 2,
            }
        ],
        "slices": [{"name": "k", "where": {"k": CANARY}}],
    }
    (tmp_path / "policy.json").write_text(json.dumps(policy), encoding="utf-8")
    argv = [
        tmp_path / "baseline.json",
        tmp_path / "subject.json",
        "--policy",
        tmp_path / "policy.json",
    ]
    table = _invoke(*argv)
    assert table.exit_code == 7  # one pair misses its output
    assert CANARY not in table.output
    assert "missing results" in table.stdout
    # Refusals never echo either: the subject's expected answer changes.
    changed = json.loads((tmp_path / "subject.json").read_text(encoding="utf-8"))
    changed["records"][1]["expected"] = CANARY
    (tmp_path / "subject.json").write_text(json.dumps(changed), encoding="utf-8")
    refused = _invoke(*argv)
    assert refused.exit_code == 2
    assert refused.stderr == "sealeval: error: subject.records[1].expected: expected_changed\n"
    assert CANARY not in refused.output


def test_policy_names_are_shown_literally(tmp_path: Path) -> None:
    case = _case("zero-record-slice")
    policy = json.loads(json.dumps(case["input"]["policy"]))
    policy["metrics"][0]["name"] = "[bold]x[/bold]\u009b31m"
    result = _invoke(*_argv({**case["input"], "policy": policy}, tmp_path))
    assert result.exit_code == 7
    assert "[bold]x[/bold]" in result.stdout
    assert "\u009b" not in result.stdout
    assert "\\u009b31m" in result.stdout


def test_help_and_settings() -> None:
    assert compare_command.context_settings == CONTEXT_SETTINGS
    result = CliRunner().invoke(compare_command, ["--help"])
    assert result.exit_code == 0
    for option in (
        "--policy",
        "--json",
        "--decision-order",
        "--max-bootstrap-draws",
        "--unlimited-draws",
    ):
        assert option in result.output
    assert CliRunner().invoke(compare_command, ["-h"]).exit_code == 0


def test_missing_arguments_are_usage_errors(tmp_path: Path) -> None:
    result = CliRunner().invoke(compare_command, [str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 2
    assert str(tmp_path) not in result.output
