"""``sealeval compare --uncapped`` never holds the runs: same output as the held path.

Without ``--extension``, ``--uncapped`` routes through ``compare_run_files``
(and ``scope_values_files`` for the means of unevaluated entries), so its
memory is bounded by the records. Each vector pack's runs are compared both
ways: the table, the ``--json`` bytes, the exit code and the refusals must be
identical, and no run is read whole on the streamed path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.cli.compare import compare_command
from support.captured_streaming import spy_held_runs
from support.vectors import pack_folder

CANARY = "STREAMED-COMPARE-CANARY-5120"


def _packs() -> list[Any]:
    names = ("missing-insufficient-signed", "text-200-multi-signed", "case-set-pinned-signed")
    return [pytest.param(pack_folder(name) / "evidence", id=name) for name in names]


def _invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(
        compare_command, [str(arg) for arg in args], catch_exceptions=False, env={"COLUMNS": "100"}
    )


@pytest.fixture
def no_held_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count whole-run reads and in-memory comparisons while the command runs."""
    return spy_held_runs(monkeypatch)


@pytest.mark.parametrize("evidence", _packs())
def test_uncapped_compare_streams_to_the_same_output(
    evidence: Path, no_held_runs: list[str]
) -> None:
    runs = (evidence / "records" / "baseline.json", evidence / "records" / "subject.json")
    policy = evidence / "inputs" / "policy.json"
    report = json.loads((evidence / "reports" / "evaluation.report.json").read_bytes())
    unevaluated = any(entry["interval"] is None for entry in report["metrics"])
    for extra in ((), ("--json",)):
        held = _invoke(*runs, "--policy", policy, *extra)
        assert no_held_runs
        no_held_runs.clear()
        streamed = _invoke(*runs, "--policy", policy, *extra, "--uncapped")
        assert no_held_runs == []
        assert (streamed.exit_code, streamed.stdout) == (held.exit_code, held.stdout)
        assert streamed.exit_code in (0, 7)
        if unevaluated and not extra:  # the means came from the streamed scope values
            assert "scored pairs" in streamed.stdout


def test_streamed_refusals_match_the_held_path(tmp_path: Path) -> None:
    evidence = pack_folder("text-20-exact-signed") / "evidence"
    good = evidence / "records" / "baseline.json"
    policy = evidence / "inputs" / "policy.json"
    broken_run = tmp_path / "broken.json"
    broken_run.write_text(CANARY, encoding="utf-8")
    broken_policy = tmp_path / "policy.json"
    broken_policy.write_text("{" + CANARY, encoding="utf-8")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(json.loads(good.read_bytes()), indent=1), encoding="utf-8")
    other = evidence / "records" / "subject.json"
    for arguments in (
        (broken_run, other, "--policy", policy),
        (good, broken_run, "--policy", policy),
        (good, broken_run, "--policy", broken_policy),  # the run is refused before the policy
        (good, other, "--policy", broken_policy),
        (pretty, other, "--policy", policy),  # strict JSON, not canonical: read whole
        (tmp_path / "missing.json", other, "--policy", policy),
    ):
        held = _invoke(*arguments)
        streamed = _invoke(*arguments, "--uncapped")
        assert (streamed.exit_code, streamed.stdout, streamed.stderr) == (
            held.exit_code,
            held.stdout,
            held.stderr,
        )
        assert CANARY not in streamed.output
