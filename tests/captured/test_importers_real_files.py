"""Real result files import with ``--adapter auto`` (issue 14).

Each case names a real file (``tests/fixtures/real``, provenance in
``tests/fixtures/README.md``; and the evaluator samples of
``../shared/samples/evaluators``) and an independent small reader, written
here from the tool's documented layout and not calling the importer, that
counts the file's records and errored records. The import through the CLI
(``sealeval import --adapter auto --json``) must give the same counts. Files
holding no per-sample results must be refused with a closed code.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.importers import ImportRefusalError
from sealeval.cli.imports import import_command
from support.captured_real_files import (
    Counts,
    deepeval_test_run,
    garak_attempts,
    has_attempts,
    has_samples,
    import_with_auto,
    inspect_eval,
    inspect_json,
    is_ragas_table,
    lighteval_rows,
    lm_eval_lines,
    mlflow_split_table,
    openai_evals_log,
    promptfoo_document,
    ragas_csv_rows,
)
from support.digests import ARTIFACT
from support.vectors import samples_dir

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
SAMPLES = samples_dir()
# (file, independent reader) for files holding per-sample results
IMPORTED: list[tuple[Path, Callable[[Path], Counts]]] = [
    (
        REAL / "lm_eval/gemma-2b/samples_masakhaner_luo_prompt_1_2026-01-16T16-02-26.648276.jsonl",
        lm_eval_lines,
    ),
    (REAL / "promptfoo/french-greeting-test/output.json", promptfoo_document),
    (REAL / "mlflow/finetune-mlx-math-model/eval_results_table.json", mlflow_split_table),
    *[(path, inspect_json) for path in sorted(REAL.glob("inspect_ai/*.json")) if has_samples(path)],
    *[(path, inspect_eval) for path in sorted(REAL.glob("inspect_ai/*.eval"))],
    *[
        (path, garak_attempts)
        for path in sorted(REAL.glob("garak/*.report.jsonl"))
        if has_attempts(path)
    ],
    *[(path, deepeval_test_run) for path in sorted(REAL.glob("deepeval/*.json"))],
    *[(path, openai_evals_log) for path in sorted(REAL.glob("openai_evals/*.jsonl"))],
    *[(path, ragas_csv_rows) for path in sorted(REAL.glob("ragas/*.csv")) if is_ragas_table(path)],
    *[(path, lm_eval_lines) for path in sorted(SAMPLES.glob("lm_eval/out/*/samples_*.jsonl"))],
    *[(path, inspect_json) for path in sorted(SAMPLES.glob("inspect_ai/logs/*.json"))],
    *[(path, inspect_eval) for path in sorted(SAMPLES.glob("inspect_ai/logs/*.eval"))],
    (SAMPLES / "garak/garak.3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.report.jsonl", garak_attempts),
    (SAMPLES / "promptfoo/results.json", promptfoo_document),
    (SAMPLES / "lighteval/details_custom_toy_qa_0.preview.jsonl", lighteval_rows),
    (SAMPLES / "deepeval/results/test_run_20261129_230959.json", deepeval_test_run),
    (SAMPLES / "ragas/evaluation_result.csv", ragas_csv_rows),
]

# files holding no per-sample results: refused with a closed code
REFUSED: list[tuple[Path, set[str]]] = [
    (
        REAL / "garak/test_buff_single324c0df5-e18b-4ca2-ab0d-8c51e5ba6129.report.jsonl",
        {"not_results"},
    ),
    (
        next(SAMPLES.glob("lm_eval/out/*/results_*.json")),
        {"not_results"},
    ),
    # a 117 KB results file whose identifying members follow a long ``configs`` block
    (next(REAL.glob("lm_eval/*/results_*.json")), {"not_results"}),
    # a cancelled Inspect run that wrote no samples
    (REAL / "inspect_ai/2025-05-12T20-28-13-04-00_no-samples.json", {"incomplete_run"}),
    (SAMPLES / "garak/garak.3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.hitlog.jsonl", {"not_results"}),
    (SAMPLES / "lm_eval/tasks/toy.jsonl", {"unknown_format"}),
    (SAMPLES / "ragas/evaluation_dataset.jsonl", {"unknown_format", "not_results"}),
    # ragas aggregate scores written as CSV (``metric,score``): no per-sample rows
    *[
        (path, {"unknown_format"})
        for path in sorted(REAL.glob("ragas/*.csv"))
        if not is_ragas_table(path)
    ],
    # promptfoo's CSV export: no importer reads it
    (SAMPLES / "promptfoo/results.csv", {"unknown_format"}),
]


@pytest.mark.parametrize(("path", "reader"), IMPORTED, ids=[path.name[:60] for path, _ in IMPORTED])
def test_real_file_imports_with_auto(
    path: Path, reader: Callable[[Path], Counts], tmp_path: Path
) -> None:
    records, errored = reader(path)
    code, summary = import_with_auto(path, tmp_path)
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert summary["records"] == records
    if errored >= 0:
        assert summary["errored_records"] == errored
    run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert len(run["records"]) == records


@pytest.mark.parametrize(("path", "codes"), REFUSED, ids=[path.name[:60] for path, _ in REFUSED])
def test_file_without_samples_is_refused(path: Path, codes: set[str], tmp_path: Path) -> None:
    code, stderr = import_with_auto(path, tmp_path)
    assert code == 2
    assert isinstance(stderr, str)
    assert stderr.startswith("sealeval: error: ")
    assert stderr.splitlines()[0].rsplit(": ", 1)[1] in codes  # a remedy line may follow
    assert not (tmp_path / "run.json").exists()


def test_identities_stated_by_the_file_are_used_and_checked(tmp_path: Path) -> None:
    """Inspect and promptfoo state their run id and version; contradictions are refused."""
    log_path = next(SAMPLES.glob("inspect_ai/logs/*.json"))
    log = json.loads(log_path.read_text(encoding="utf-8"))
    stated_run, version = log["eval"]["run_id"], log["eval"]["packages"]["inspect_ai"]
    base = [str(log_path), "--artifact-digest", ARTIFACT, "-o", str(tmp_path / "a.json")]
    assert CliRunner().invoke(import_command, base).exit_code == 0
    run = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert run["run_id"] == stated_run
    assert run["source"]["version"] == version
    for extra, field in (
        (["--run-id", stated_run + "-other"], "--run-id"),
        (["--source", "inspect_ai@0.0.0-not-it"], "source.version"),
    ):
        refused = CliRunner().invoke(import_command, [*base[:-1], str(tmp_path / "b.json"), *extra])
        assert refused.exit_code == 2
        assert refused.stderr == f"sealeval: error: {field}: identity_mismatch\n"
        assert not (tmp_path / "b.json").exists()
    agreeing = [*base[:-1], str(tmp_path / "c.json"), "--run-id", stated_run]
    assert CliRunner().invoke(import_command, agreeing).exit_code == 0
    document = json.loads((REAL / "promptfoo/french-greeting-test/output.json").read_text("utf-8"))
    promptfoo = [str(REAL / "promptfoo/french-greeting-test/output.json"), "--artifact-digest"]
    result = CliRunner().invoke(
        import_command, [*promptfoo, ARTIFACT, "-o", str(tmp_path / "p.json")]
    )
    assert result.exit_code == 0, result.stderr
    run = json.loads((tmp_path / "p.json").read_text(encoding="utf-8"))
    assert run["run_id"] == document["evalId"]
    assert run["source"]["version"] == document["metadata"]["promptfooVersion"]


# Every gathered file, whatever the lists above say about it: ``auto`` either
# imports it (a run with at least one record, as many as the summary states) or
# refuses it with one of the importers' closed codes, publishing nothing.
# (The held-out files are checked by ``test_importers_heldout.py``.)
EVERY_REAL_FILE = sorted(path for path in REAL.rglob("*") if path.is_file())


@pytest.mark.parametrize(
    "path",
    EVERY_REAL_FILE,
    ids=[str(path.relative_to(path.parents[1])) for path in EVERY_REAL_FILE],
)
def test_every_gathered_file_imports_or_is_refused_cleanly(path: Path, tmp_path: Path) -> None:
    code, outcome = import_with_auto(path, tmp_path)
    if code == 0:
        assert isinstance(outcome, dict)
        run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
        assert outcome["records"] == len(run["records"]) > 0
        return
    assert code == 2
    assert isinstance(outcome, str)
    first = outcome.splitlines()[0]  # a remedy line may follow
    field, refusal = first.removeprefix("sealeval: error: ").rsplit(": ", 1)
    assert refusal in ImportRefusalError.codes
    assert field
    assert not (tmp_path / "run.json").exists()


def test_the_gathered_files_span_the_issue_minimum() -> None:
    """At least 25 real files across at least 8 tool folders (issue 14)."""
    real = [path for path in REAL.rglob("*") if path.is_file()]
    assert len(real) >= 25
    assert len({path.relative_to(REAL).parts[0] for path in real}) >= 8
