"""Per-record paired outcomes agree with the stored comparison of every reference pack.

For each reference pack (regenerated vectors included), the viewer's
per-record values, averaged over each scope's usable pairs, must give the
report's baseline and subject means; missing pairs must be the report's
missing ids; and every pair is classified by the metric's direction. The
streamed outcomes (:func:`iter_pack_outcomes`, what the pages use) are the
held ones, in the same order, and the cases page keeps the held selection.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.pack_reader import (
    UNCAPPED_PACK_LIMITS,
    EvidencePackError,
    read_evidence_pack,
)
from sealeval.cli import cli
from sealeval.view import ViewerServer, iter_pack_outcomes, pages, paired_outcomes, scan
from sealeval.view.load import Loader
from sealeval.view.outcomes import CHANGES, counts
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


@pytest.mark.parametrize("evidence", PACKS, ids=lambda path: path.parent.name)
def test_streamed_outcomes_are_the_held_ones_in_order(evidence: Path) -> None:
    # as the viewer reads packs (small run files are held anyway, so both forms are at hand)
    pack = read_evidence_pack(evidence, limits=UNCAPPED_PACK_LIMITS, runs="outline")
    expected = paired_outcomes(*pack.held_runs(), pack.policy)
    assert expected
    assert tuple(iter_pack_outcomes(pack)) == expected


def _copied(evidence: Path, tmp_path: Path) -> Path:
    root = tmp_path / "folder"
    shutil.copytree(evidence, root / "evidence")
    for directory, _, names in os.walk(root):
        os.chmod(directory, 0o700)
        for name in names:
            os.chmod(Path(directory) / name, 0o600)
    return root


def _larger_pack(below: int = 262_144) -> Path:
    """The pack with the largest baseline file under ``below`` bytes (many rows, still fast)."""
    sizes = {path: (path / "records" / "baseline.json").stat().st_size for path in PACKS}
    return max((path for path in PACKS if sizes[path] < below), key=sizes.__getitem__)


def test_cases_page_keeps_the_held_selection_under_the_row_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _copied(_larger_pack(), tmp_path)
    (item,) = scan(root).items
    loaded = Loader(root).load(item)
    assert loaded.error is None
    held = paired_outcomes(*read_evidence_pack(root / "evidence").held_runs(), loaded.value.policy)
    monkeypatch.setattr(pages, "MAX_ROWS", 7)
    for change in ("all", "unchanged", "flipped"):
        body = pages.case_page(loaded, {"change": change})
        wanted = [
            outcome
            for outcome in held
            if change in ("all", outcome.change)
            or (change == "flipped" and outcome.change in ("regressed", "improved"))
        ]
        wanted.sort(key=lambda outcome: CHANGES.index(outcome.change))
        assert change != "all" or len(wanted) > 7
        shown = re.findall(r'<tr class="(\w+)" data-id="([^"]*)">', body)
        assert shown == [(outcome.change, outcome.record_id) for outcome in wanted[:7]]
        note = f"{min(len(wanted), 7)} of {len(wanted)} matching pairs shown ({len(held)} "
        assert note in body


def test_a_run_file_changed_after_loading_shows_the_closed_code(tmp_path: Path) -> None:
    root = _copied(PACKS[0], tmp_path)
    (item,) = scan(root).items
    loader = Loader(root)
    loaded = loader.load(item)
    assert loaded.error is None
    assert 'id="error-code"' not in pages.case_page(loaded, {})
    subject = root / "evidence" / "records" / "subject.json"
    replacement = subject.with_name("subject.new")
    replacement.write_bytes(subject.read_bytes())  # same bytes, another file
    os.replace(replacement, subject)
    for body in (pages.case_page(loaded, {}), pages.item_page(loaded)):
        assert '<code id="error-code">file_changed</code>' in body
        assert str(tmp_path) not in body
        assert "subject.json" not in body


def test_bytes_that_are_not_the_examined_run_are_refused_at_the_end(tmp_path: Path) -> None:
    pack = read_evidence_pack(_larger_pack(), runs="outline")
    # the subject file read against the baseline's digest: not the examined run's bytes
    other = dataclasses.replace(pack, subject=pack.baseline)
    with pytest.raises(EvidencePackError) as caught:
        tuple(iter_pack_outcomes(other))
    assert (caught.value.code, caught.value.status) == ("file_changed", 6)
