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

import csv
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.importers import ImportRefusalError
from sealeval.cli.imports import import_command

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
HELDOUT = Path(__file__).resolve().parents[1] / "fixtures" / "heldout"
SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "evaluators"
ARTIFACT = "sha256:" + "ab" * 32

Counts = tuple[int, int]  # records, errored records


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _has_samples(path: Path) -> bool:
    """Whether an Inspect JSON log of a finished run holds samples (others are in ``REFUSED``)."""
    log = json.loads(path.read_text(encoding="utf-8"))
    return bool(log.get("samples")) and log.get("status") == "success"


def _has_attempts(path: Path) -> bool:
    """Whether a garak report holds attempts (digest-only reports are in ``REFUSED``)."""
    return any(row.get("entry_type") == "attempt" for row in _lines(path))


def lm_eval_lines(path: Path) -> Counts:
    """lm-eval >= 0.4.3: one line per document and filter; no per-sample errors."""
    return len(_lines(path)), 0


def garak_attempts(path: Path) -> Counts:
    """garak: one record per attempt and generation (flat detector results).

    An attempt is its uuid; in an aggregated report whose attempts all carry
    the run's own id as uuid, it is its probe and ``seq``.
    """
    attempts: dict[object, dict[str, object]] = {}
    run = None
    for row in _lines(path):
        if row.get("entry_type") == "init":
            run = row.get("run")
        if row.get("entry_type") == "attempt":
            key = row["uuid"] if row["uuid"] != run else (row["probe_classname"], row["seq"])
            attempts[key] = row  # status 2 replaces status 1
    records = 0
    errored = 0
    for row in attempts.values():
        outputs = row.get("outputs") or []
        assert isinstance(outputs, list)
        generations = max(len(outputs), 1)
        records += generations
        if row.get("status") != 2:
            errored += generations
        else:
            errored += sum(1 for output in outputs if output is None)
    return records, errored


def promptfoo_document(path: Path) -> Counts:
    """promptfoo results.json: ``results.results[]``; provider errors have failureReason 2."""
    rows = json.loads(path.read_text(encoding="utf-8"))["results"]["results"]
    return len(rows), sum(1 for row in rows if row.get("failureReason") == 2)


def mlflow_split_table(path: Path) -> Counts:
    """MLflow 2.x eval_results_table.json: one record per row of ``data``."""
    return len(json.loads(path.read_text(encoding="utf-8"))["data"]), 0


def inspect_json(path: Path) -> Counts:
    """Inspect JSON log: one record per sample object; errored samples carry ``error``."""
    samples = json.loads(path.read_text(encoding="utf-8"))["samples"]
    return len(samples), sum(1 for sample in samples if sample.get("error"))


def inspect_eval(path: Path) -> Counts:
    """Inspect .eval archive: one record per ``samples/*.json`` member; errored ones have ``error``.

    Members written with Zstandard (newer Inspect) cannot be read by
    ``zipfile`` here: their errors are left to the importer tests (``-1``).
    """
    with zipfile.ZipFile(path) as archive:
        members = [info for info in archive.infolist() if info.filename.startswith("samples/")]
        if any(
            info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED) for info in members
        ):
            return len(members), -1
        samples = [json.loads(archive.read(info)) for info in members]
    return len(samples), sum(1 for sample in samples if sample.get("error"))


def openai_evals_log(path: Path) -> Counts:
    """OpenAI Evals record log: one record per distinct ``sample_id``; ``error`` events err it."""
    events = [row for row in _lines(path) if "sample_id" in row]
    samples = {str(row["sample_id"]) for row in events}
    errored = {str(row["sample_id"]) for row in events if row.get("type") == "error"}
    return len(samples), len(errored)


def lighteval_rows(path: Path) -> Counts:
    """LightEval details as JSON lines: one record per row."""
    return len(_lines(path)), 0


def deepeval_test_run(path: Path) -> Counts:
    """DeepEval test run: ``testCases[]``.

    A metric that raised only loses its score (DeepEval has no case-level
    error), so no record is errored.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    cases = document.get("testCases", document.get("testRunData", {}).get("testCases", []))
    return len(cases), 0


def ragas_csv_rows(path: Path) -> Counts:
    """ragas ``to_pandas().to_csv()``: one record per data row after the header; no errors.

    Read with Python's ``csv`` module (quoted cells may span lines; a UTF-8
    byte order mark may lead the header).
    """
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    return len(rows) - 1, 0


def _is_ragas_table(path: Path) -> bool:
    """Whether a ragas CSV holds per-sample rows (a ``user_input`` column), not a summary."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return "user_input" in next(csv.reader(handle))


# (file, independent reader) for files holding per-sample results
IMPORTED: list[tuple[Path, Callable[[Path], Counts]]] = [
    (
        REAL / "lm_eval/gemma-2b/samples_masakhaner_luo_prompt_1_2026-01-16T16-02-26.648276.jsonl",
        lm_eval_lines,
    ),
    (REAL / "promptfoo/french-greeting-test/output.json", promptfoo_document),
    (REAL / "mlflow/finetune-mlx-math-model/eval_results_table.json", mlflow_split_table),
    *[
        (path, inspect_json)
        for path in sorted(REAL.glob("inspect_ai/*.json"))
        if _has_samples(path)
    ],
    *[(path, inspect_eval) for path in sorted(REAL.glob("inspect_ai/*.eval"))],
    *[
        (path, garak_attempts)
        for path in sorted(REAL.glob("garak/*.report.jsonl"))
        if _has_attempts(path)
    ],
    *[(path, deepeval_test_run) for path in sorted(REAL.glob("deepeval/*.json"))],
    *[(path, openai_evals_log) for path in sorted(REAL.glob("openai_evals/*.jsonl"))],
    *[(path, ragas_csv_rows) for path in sorted(REAL.glob("ragas/*.csv")) if _is_ragas_table(path)],
    *[(path, lm_eval_lines) for path in sorted(SAMPLES.glob("lm_eval/out/*/samples_*.jsonl"))],
    *[(path, inspect_json) for path in sorted(SAMPLES.glob("inspect_ai/logs/*.json"))],
    *[(path, inspect_eval) for path in sorted(SAMPLES.glob("inspect_ai/logs/*.eval"))],
    (SAMPLES / "garak/garak.3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.report.jsonl", garak_attempts),
    (SAMPLES / "promptfoo/results.json", promptfoo_document),
    (SAMPLES / "lighteval/details_custom_toy_qa_0.preview.jsonl", lighteval_rows),
    (SAMPLES / "deepeval/results/test_run_20261129_230959.json", deepeval_test_run),
    (SAMPLES / "ragas/evaluation_result.csv", ragas_csv_rows),
    # held out: gathered after the detection rules were written, tested once, not tuned for
    (HELDOUT / "inspect_ai/log_formats.json", inspect_json),
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
    # a cancelled Inspect run whose samples all completed (--allow-partial imports it:
    # test_importers_completeness.py)
    (REAL / "inspect_ai/2025-05-12T20-28-13-04-00_popularity.json", {"incomplete_run"}),
    (SAMPLES / "garak/garak.3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.hitlog.jsonl", {"not_results"}),
    (SAMPLES / "lm_eval/tasks/toy.jsonl", {"unknown_format"}),
    (SAMPLES / "ragas/evaluation_dataset.jsonl", {"unknown_format", "not_results"}),
    # ragas aggregate scores written as CSV (``metric,score``): no per-sample rows
    *[
        (path, {"unknown_format"})
        for path in sorted(REAL.glob("ragas/*.csv"))
        if not _is_ragas_table(path)
    ],
    # promptfoo's CSV export: no importer reads it
    (SAMPLES / "promptfoo/results.csv", {"unknown_format"}),
    # held out: a promptfoo Eval dump whose results were never loaded (``results: []``)
    (HELDOUT / "promptfoo/config-node-package.output.json", {"unknown_format", "not_results"}),
]


def _import(path: Path, tmp_path: Path) -> tuple[int, dict[str, object] | str]:
    """Import with the identities the file states; name a source and run id where it states none."""
    base = [str(path), "--artifact-digest", ARTIFACT, "--json", "-o", str(tmp_path / "run.json")]
    result = CliRunner().invoke(import_command, base)
    for missing, extra in (
        ("source: identities_required", ["--source", "tool@1"]),
        ("--run-id: identities_required", ["--run-id", "real-1"]),
    ):
        if result.exit_code == 2 and missing in result.stderr:
            base += extra
            result = CliRunner().invoke(import_command, base)
    if result.exit_code == 0:
        return 0, json.loads(result.stdout)
    return result.exit_code, result.stderr


@pytest.mark.parametrize(("path", "reader"), IMPORTED, ids=[path.name[:60] for path, _ in IMPORTED])
def test_real_file_imports_with_auto(
    path: Path, reader: Callable[[Path], Counts], tmp_path: Path
) -> None:
    records, errored = reader(path)
    code, summary = _import(path, tmp_path)
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert summary["records"] == records
    if errored >= 0:
        assert summary["errored_records"] == errored
    run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert len(run["records"]) == records


@pytest.mark.parametrize(("path", "codes"), REFUSED, ids=[path.name[:60] for path, _ in REFUSED])
def test_file_without_samples_is_refused(path: Path, codes: set[str], tmp_path: Path) -> None:
    code, stderr = _import(path, tmp_path)
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
EVERY_REAL_FILE = sorted(
    path for folder in (REAL, HELDOUT) for path in folder.rglob("*") if path.is_file()
)


@pytest.mark.parametrize(
    "path",
    EVERY_REAL_FILE,
    ids=[str(path.relative_to(path.parents[1])) for path in EVERY_REAL_FILE],
)
def test_every_gathered_file_imports_or_is_refused_cleanly(path: Path, tmp_path: Path) -> None:
    code, outcome = _import(path, tmp_path)
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
