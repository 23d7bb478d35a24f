"""``sealeval demo``'s captured section: real tool files through every step, each output checked."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.run import read_run
from sealeval.captured.signing import load_verify_key
from sealeval.cli import cli
from sealeval.cli import demo as demo_module
from sealeval.cli.demo import demo
from support.vectors import PROJECT_ROOT

BUNDLED = PROJECT_ROOT / "src" / "sealeval" / "_data" / "demo" / "captured"
SAMPLE = PROJECT_ROOT.parent / "shared" / "samples" / "evaluators" / "ragas"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "demo-out"
    result = CliRunner().invoke(cli, ["demo", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.stdout[-3000:]
    return out / "captured", result.stdout


def test_bundled_files_are_the_real_sample_and_its_generated_edit() -> None:
    baseline = (BUNDLED / "baseline.jsonl").read_bytes()
    assert baseline == (SAMPLE / "evaluation_result.records.jsonl").read_bytes()
    generated = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "scripts" / "demo" / "make_candidate.py")],
        check=True,
        capture_output=True,
    ).stdout
    assert generated == (BUNDLED / "candidate.jsonl").read_bytes()
    changed = [
        (old, new)
        for old, new in zip(baseline.splitlines(), generated.splitlines(), strict=True)
        if old != new
    ]
    assert len(changed) == 1


def test_imports_write_both_runs(demo_run: tuple[Path, str]) -> None:
    folder, stdout = demo_run
    for name in ("baseline", "candidate"):
        run = read_run(folder / f"{name}.run.json")
        assert run.run_id == name
        assert len(run.records) == 3
        assert f"--run-id {name}" in " ".join(stdout.split())
    assert "--adapter auto" in " ".join(stdout.split())


def test_compare_evaluate_verify_and_report_outputs(demo_run: tuple[Path, str]) -> None:
    folder, stdout = demo_run
    flat = " ".join(stdout.split())
    assert "6. Captured runs" in flat
    assert "decision: pass" in flat
    evidence = folder / "evidence"
    for member in ("manifest.json", "manifest.signature.json", "checksums.sha256", "request.json"):
        assert (evidence / member).is_file()
    trust = json.loads((folder / "trust.json").read_text(encoding="utf-8"))
    signer = load_verify_key(folder / "keys" / "public.pem").fingerprint
    assert trust["anchors"]["evidence_signer_fingerprint"] == signer
    assert trust["anchors"]["baseline_run_digest"] in flat
    assert "PASS Independent captured verification complete" in flat
    receipt = json.loads((folder / "receipt.json").read_text(encoding="utf-8"))
    assert json.dumps(receipt).count(signer.removeprefix("sha256:")) >= 1
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html")
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert markdown.startswith("# ")
    suites = ET.fromstring((folder / "junit.xml").read_bytes())
    cases = suites.findall(".//testcase")
    assert len(cases) == 2
    assert not suites.findall(".//failure")
    assert f"open the HTML report: {(folder / 'report.html').resolve().as_uri()}" in flat


def test_a_misbehaving_captured_step_fails_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo_module, "_CAPTURED_SOURCE", "no-version")
    result = CliRunner().invoke(
        cli, ["demo", "--out", str(tmp_path / "out")], catch_exceptions=False
    )
    assert result.exit_code == 1
    assert "demo did not behave as expected" in result.stdout
    assert not (tmp_path / "out" / "captured" / "report.html").exists()


def test_the_demo_runs_only_as_a_subcommand(tmp_path: Path) -> None:
    # It runs sealeval commands through the group that invoked it (no import of the group).
    out = tmp_path / "demo-out"
    with pytest.raises(TypeError):
        CliRunner().invoke(demo, ["--out", str(out)], catch_exceptions=False)
    assert not out.exists()
