"""Files that state their own totals and hold fewer records (issue 14, completeness).

lm-eval states ``n-samples`` in the ``results_*.json`` beside the samples,
promptfoo ``results.stats`` (successes + failures + errors), Inspect
``results.completed_samples`` / ``total_samples``. A file holding fewer
records is refused (``incomplete_export``, nothing published) unless
``--allow-partial``, which records the stated and present counts in every
record's context. The expected counts are computed here from the files, not
by the importer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sealeval.captured.importers import ImportOptions, ImportRefusalError, load_run
from sealeval.cli.imports import import_command

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "evaluators"
ARTIFACT = "sha256:" + "cd" * 32
LM_EVAL = next(SAMPLES.glob("lm_eval/out/*"))


def _import(path: Path, out: Path, *extra: str) -> tuple[int, str]:
    """Import with the identities the file states; name those it does not state."""
    argv = [str(path), "--artifact-digest", ARTIFACT, "-o", str(out), *extra]
    result = CliRunner().invoke(import_command, argv)
    for missing, option in (
        ("source: identities_required", ["--source", "tool@1"]),
        ("--run-id: identities_required", ["--run-id", "partial-1"]),
    ):
        if result.exit_code == 2 and missing in result.stderr:
            argv += option
            result = CliRunner().invoke(import_command, argv)
    return result.exit_code, result.stderr


def _lm_eval_folder(tmp_path: Path, task: str, keep: int) -> tuple[Path, int, int]:
    """Copy the lm-eval output folder; keep the first ``keep`` documents of ``task``.

    Returns the samples file, the documents ``n-samples`` states for the task
    and the documents the cut file holds.
    """
    folder = tmp_path / LM_EVAL.name
    shutil.copytree(LM_EVAL, folder)
    samples = next(folder.glob(f"samples_{task}_*.jsonl"))
    rows = [json.loads(line) for line in samples.read_text("utf-8").splitlines() if line]
    kept_docs = sorted({row["doc_id"] for row in rows})[:keep]
    lines = [json.dumps(row) for row in rows if row["doc_id"] in kept_docs]
    samples.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = json.loads(next(folder.glob("results_*.json")).read_text("utf-8"))
    return samples, results["n-samples"][task]["effective"], len(kept_docs)


def _contexts(run_file: Path, member: str) -> list[dict[str, Any]]:
    run = json.loads(run_file.read_text("utf-8"))
    return [record["context"][member] for record in run["records"]]


@pytest.mark.parametrize("task", ["toy_gen", "toy_mc"])  # two filters; one filter
def test_lm_eval_samples_fewer_than_n_samples(task: str, tmp_path: Path) -> None:
    samples, stated, present = _lm_eval_folder(tmp_path, task, keep=2)
    assert present < stated
    code, stderr = _import(samples, tmp_path / "a.json")
    assert (code, stderr) == (2, "sealeval: error: file: incomplete_export\n")
    assert not (tmp_path / "a.json").exists()
    code, stderr = _import(samples, tmp_path / "b.json", "--allow-partial")
    assert code == 0, stderr
    facts = _contexts(tmp_path / "b.json", "lm_eval")
    assert facts
    assert all(
        (fact["stated_samples"], fact["present_samples"]) == (stated, present) for fact in facts
    )


def test_lm_eval_complete_samples_record_no_counts(tmp_path: Path) -> None:
    samples, stated, present = _lm_eval_folder(tmp_path, "toy_mc", keep=10**6)
    assert present == stated
    code, stderr = _import(samples, tmp_path / "a.json")
    assert code == 0, stderr
    run = json.loads((tmp_path / "a.json").read_text("utf-8"))
    assert all("stated_samples" not in json.dumps(record) for record in run["records"])


def test_lm_eval_folder_with_a_short_task(tmp_path: Path) -> None:
    samples, _, _ = _lm_eval_folder(tmp_path, "toy_gen", keep=1)
    code, stderr = _import(samples.parent, tmp_path / "a.json")
    assert (code, stderr) == (2, "sealeval: error: file: incomplete_export\n")
    assert _import(samples.parent, tmp_path / "b.json", "--allow-partial")[0] == 0


def test_lm_eval_named_reader_checks_n_samples(tmp_path: Path) -> None:
    """The library call with the native reader named: refused, then counts with allow_partial."""
    samples, stated, present = _lm_eval_folder(tmp_path, "toy_mc", keep=1)
    identity: dict[str, Any] = {
        "source": {"name": "lm-evaluation-harness", "version": "0.4.13"},
        "run_id": "r",
        "artifact_digest": ARTIFACT,
    }
    with pytest.raises(ImportRefusalError) as refused:
        load_run(samples, "lm-eval-log-samples", **identity)
    assert (refused.value.code, refused.value.field) == ("incomplete_export", "file")
    run = load_run(
        samples, "lm-eval-log-samples", options=ImportOptions(allow_partial=True), **identity
    )
    assert len(run) == present
    assert {record.context["lm_eval"]["stated_samples"] for record in run} == {stated}


def _promptfoo(tmp_path: Path, drop: int) -> tuple[Path, int, int]:
    document = json.loads((SAMPLES / "promptfoo/results.json").read_text("utf-8"))
    stats = document["results"]["stats"]
    stated = stats["successes"] + stats["failures"] + stats["errors"]
    rows = document["results"]["results"]
    del rows[len(rows) - drop :]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path, stated, len(rows)


def test_promptfoo_results_fewer_than_stats(tmp_path: Path) -> None:
    path, stated, present = _promptfoo(tmp_path, drop=3)
    assert 0 < present < stated
    code, stderr = _import(path, tmp_path / "a.json")
    assert (code, stderr) == (2, "sealeval: error: file: incomplete_export\n")
    assert not (tmp_path / "a.json").exists()
    code, stderr = _import(path, tmp_path / "b.json", "--allow-partial")
    assert code == 0, stderr
    facts = _contexts(tmp_path / "b.json", "promptfoo")
    assert len(facts) == present
    assert all(fact == {"stated_samples": stated, "present_samples": present} for fact in facts)


def test_promptfoo_complete_results_record_no_counts(tmp_path: Path) -> None:
    path, stated, present = _promptfoo(tmp_path, drop=0)
    assert present == stated
    assert _import(path, tmp_path / "a.json")[0] == 0
    run = json.loads((tmp_path / "a.json").read_text("utf-8"))
    assert all("promptfoo" not in record["context"] for record in run["records"])


def test_inspect_log_fewer_than_completed_samples(tmp_path: Path) -> None:
    log = json.loads(next(SAMPLES.glob("inspect_ai/logs/*.json")).read_text("utf-8"))
    results = log["results"]
    stated = results.get("completed_samples", results.get("total_samples"))
    log["samples"] = log["samples"][: stated - 1]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    code, stderr = _import(path, tmp_path / "a.json")
    assert (code, stderr) == (2, "sealeval: error: file: incomplete_export\n")
    code, stderr = _import(path, tmp_path / "b.json", "--allow-partial")
    assert code == 0, stderr
    facts = _contexts(tmp_path / "b.json", "inspect")
    assert {(fact["stated_samples"], fact["present_samples"]) for fact in facts} == {
        (stated, stated - 1)
    }
