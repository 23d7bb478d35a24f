"""Per-record paired outcomes agree with the stored comparison of every reference pack.

For each reference pack (regenerated vectors included), the viewer's
per-record values, averaged over each scope's usable pairs, must give the
report's baseline and subject means; missing pairs must be the report's
missing ids; and every pair is classified by the metric's direction.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.cli import cli
from sealeval.view import ViewerServer, paired_outcomes
from sealeval.view.outcomes import counts
from support.vectors import vectors_dir

PACKS = sorted(
    path.parent for path in (vectors_dir() / "invarlock" / "packs").glob("*/evidence/manifest.json")
)


@pytest.mark.parametrize("evidence", PACKS, ids=lambda path: path.parent.name)
def test_outcomes_reproduce_the_reports_means_and_missing_ids(evidence: Path) -> None:
    pack = read_evidence_pack(evidence)
    outcomes = paired_outcomes(pack.baseline, pack.subject, pack.policy)
    assert sum(counts(outcomes).values()) == len(outcomes)
    metrics = {metric.name: metric for metric in pack.policy.metrics}
    for entry in pack.report["metrics"]:
        scoped = [
            outcome
            for outcome in outcomes
            if outcome.metric == entry["name"] and entry["slice"] in outcome.scopes
        ]
        assert len(scoped) == entry["count"]
        missing = [outcome.record_id for outcome in scoped if outcome.change == "missing"]
        assert sorted(missing) == sorted(entry["missing_ids"])
        if entry["baseline_mean"] is None:
            continue
        usable = [outcome for outcome in scoped if outcome.change != "missing"]
        for side, mean in (
            ("baseline_value", entry["baseline_mean"]),
            ("subject_value", entry["subject_mean"]),
        ):
            values = [getattr(outcome, side) for outcome in usable]
            assert math.isclose(math.fsum(values) / len(values), mean, rel_tol=1e-9, abs_tol=1e-12)
        metric = metrics[entry["name"]]
        lower_is_better = metric.is_nll or metric.direction != "higher"
        for outcome in usable:
            assert outcome.baseline_value is not None
            assert outcome.subject_value is not None
            difference = outcome.subject_value - outcome.baseline_value
            if lower_is_better:
                difference = -difference
            expected = (
                "improved" if difference > 0 else "regressed" if difference < 0 else "unchanged"
            )
            assert outcome.change == expected
            if outcome.binary and expected != "unchanged":
                assert outcome.transition in ("right → wrong", "wrong → right")


def test_view_command_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def interrupted(self: ViewerServer, poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ViewerServer, "serve_forever", interrupted)
    result = CliRunner().invoke(cli, ["view", str(tmp_path)], prog_name="sealeval")
    assert result.exit_code == 0
    assert result.stdout.startswith("sealeval view: 0 items; open http://127.0.0.1:")
    refused = CliRunner().invoke(cli, ["view", str(tmp_path), "--port", "x"], prog_name="sealeval")
    assert refused.exit_code == 2
    assert "port: invalid_port" in refused.stderr
