"""Files that state their own totals and hold fewer records (issue 14, completeness).

lm-eval states ``n-samples`` in the ``results_*.json`` beside the samples,
promptfoo ``results.stats`` (successes + failures + errors), Inspect
``results.completed_samples`` / ``total_samples``. A file holding fewer
records is refused (``incomplete_export``, nothing published) unless
``--allow-partial``, which records the stated and present counts in every
record's context. The expected counts are computed here from the files, not
by the importer. An Inspect log ``cancelled`` by its user is ``incomplete_run``
unless ``--allow-partial``, which reads the samples it holds and records the
planned and present counts.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import sealeval.cli.imports as imports_module
from sealeval.captured.importers import ImportOptions, ImportRefusalError, load_run
from sealeval.cli.imports import import_command
from sealeval.errors import SealevalError
from support.digests import ARTIFACT
from support.refusals import CANARY
from support.vectors import samples_dir

SAMPLES = samples_dir()
LM_EVAL = next(SAMPLES.glob("lm_eval/out/*"))
INSPECT_LOG = next(SAMPLES.glob("inspect_ai/logs/*.json"))
SHORT = "sealeval: error: file: incomplete_export\n"
PARTIAL_HINT = (
    "sealeval: --allow-partial imports the samples this file holds "
    "(the stated and present counts go into each record's context)\n"
)


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
    assert (code, stderr) == (2, SHORT + PARTIAL_HINT)
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
    assert (code, stderr) == (2, SHORT + PARTIAL_HINT)
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
    assert (code, stderr) == (2, SHORT + PARTIAL_HINT)
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
    log = json.loads(INSPECT_LOG.read_text("utf-8"))
    results = log["results"]
    stated = results.get("completed_samples", results.get("total_samples"))
    log["samples"] = log["samples"][: stated - 1]
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    code, stderr = _import(path, tmp_path / "a.json")
    assert (code, stderr) == (2, SHORT + PARTIAL_HINT)
    code, stderr = _import(path, tmp_path / "b.json", "--allow-partial")
    assert code == 0, stderr
    facts = _contexts(tmp_path / "b.json", "inspect")
    assert {(fact["stated_samples"], fact["present_samples"]) for fact in facts} == {
        (stated, stated - 1)
    }


def _cancelled(tmp_path: Path, keep: int | None = None, status: str = "cancelled") -> Path:
    """The sample Inspect JSON log, marked ``status`` (its first ``keep`` samples)."""
    log = json.loads(INSPECT_LOG.read_text("utf-8"))
    log["status"] = status
    log["samples"] = log["samples"][:keep]
    path = tmp_path / "cancelled.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    return path


def _planned(log: dict[str, Any]) -> int:
    """What the run planned, read here: the dataset's sample ids times the epochs."""
    epochs = log["eval"]["config"].get("epochs") or 1
    return len(log["eval"]["dataset"]["sample_ids"]) * epochs


@pytest.mark.parametrize(
    ("status", "keep"),
    [("cancelled", None), ("cancelled", 2), ("error", 2)],
    ids=["cancelled-all-samples", "cancelled-fewer-samples", "error-fewer-samples"],
)
def test_unfinished_inspect_log_needs_allow_partial(
    tmp_path: Path, status: str, keep: int | None
) -> None:
    path = _cancelled(tmp_path, keep, status)
    log = json.loads(path.read_text("utf-8"))
    code, stderr = _import(path, tmp_path / "a.json")
    assert (code, stderr) == (2, "sealeval: error: status: incomplete_run\n" + PARTIAL_HINT)
    assert not (tmp_path / "a.json").exists()
    code, stderr = _import(path, tmp_path / "b.json", "--allow-partial")
    assert code == 0, stderr
    facts = _contexts(tmp_path / "b.json", "inspect")
    assert len(facts) == len(log["samples"])
    assert {
        (fact["status"], fact["stated_samples"], fact["present_samples"]) for fact in facts
    } == {(status, _planned(log), len(log["samples"]))}


def test_cancelled_eval_archive_reads_like_the_json_log(tmp_path: Path) -> None:
    """The same cancelled run written as ``.eval`` gives the same records as the JSON log."""
    path = _cancelled(tmp_path)
    log = json.loads(path.read_text("utf-8"))
    archive = tmp_path / "cancelled.eval"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("header.json", json.dumps({**log, "samples": None}))
        for sample in log["samples"]:
            zipped.writestr(f"samples/{sample['id']}_epoch_1.json", json.dumps(sample))
    identity: dict[str, Any] = {
        "source": {"name": "inspect_ai", "version": log["eval"]["packages"]["inspect_ai"]},
        "run_id": log["eval"]["run_id"],
        "artifact_digest": ARTIFACT,
    }
    with pytest.raises(ImportRefusalError) as refused:
        load_run(archive, "auto", **identity)
    assert (refused.value.code, refused.value.field) == ("incomplete_run", "header.status")
    allowed = ImportOptions(allow_partial=True)
    from_eval = load_run(archive, "auto", options=allowed, **identity)
    from_json = load_run(path, "auto", options=allowed, **identity)
    assert [record.id for record in from_eval] == [str(s["id"]) for s in log["samples"]]
    assert [(r.id, r.scores, r.context["inspect"]) for r in from_eval] == [
        (r.id, r.scores, r.context["inspect"]) for r in from_json
    ]


def test_cancelled_log_stays_refused_by_the_specified_adapter(tmp_path: Path) -> None:
    """``--adapter inspect-json`` is as strict as the reference, even with --allow-partial."""
    path = _cancelled(tmp_path)
    code, stderr = _import(
        path, tmp_path / "a.json", "--adapter", "inspect-json", "--allow-partial"
    )
    assert (code, stderr) == (
        2,
        "sealeval: hint: --adapter inspect-log-json (or auto) reads this file\n"
        "sealeval: error: status: incomplete_run\n",
    )
    assert not (tmp_path / "a.json").exists()


@pytest.mark.parametrize("status", ["started"])
def test_a_running_log_stays_refused(tmp_path: Path, status: str) -> None:
    """Only a run that stopped is lifted: a running log is refused, without the remedy."""
    path = _cancelled(tmp_path, status=status)
    for extra in ((), ("--allow-partial",)):
        code, stderr = _import(path, tmp_path / "a.json", *extra)
        assert code == 2
        assert "incomplete_run" in stderr or "unknown_status" in stderr
        assert "--allow-partial imports" not in stderr
        assert not (tmp_path / "a.json").exists()
    log = json.loads(path.read_text("utf-8"))
    with pytest.raises(SealevalError) as refused:
        load_run(
            path,
            "inspect-log-json",
            source={"name": "inspect_ai", "version": log["eval"]["packages"]["inspect_ai"]},
            run_id=log["eval"]["run_id"],
            artifact_digest=ARTIFACT,
            options=ImportOptions(allow_partial=True),
        )
    assert (refused.value.code, refused.value.field) == ("incomplete_run", "status")


def _short_file(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A file whose only fault is being short or stopped, and the refusal line it gets."""
    if kind == "lm-eval":
        return _lm_eval_folder(tmp_path, "toy_mc", keep=1)[0], SHORT
    if kind == "promptfoo":
        return _promptfoo(tmp_path, drop=3)[0], SHORT
    return _cancelled(tmp_path, 2), "sealeval: error: status: incomplete_run\n"


@pytest.mark.parametrize("kind", ["lm-eval", "promptfoo", "inspect-cancelled"])
def test_the_remedy_is_the_importers_mark_and_the_file_is_not_read_again(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI prints --allow-partial from the refusal's mark; it never imports the file twice.

    After the refusal the file is replaced by one no reader accepts: a second
    read (the old re-import with --allow-partial) would find nothing to lift.
    """
    path, refusal = _short_file(tmp_path, kind)
    marks: list[bool] = []
    real = imports_module.import_run_streaming

    def spied(*args: Any, **kwargs: Any) -> Any:
        try:
            return real(*args, **kwargs)
        except ImportRefusalError as error:
            if error.code in {"incomplete_export", "incomplete_run"}:
                marks.append(error.lifted_by_allow_partial)
                path.write_bytes(b"{" + CANARY.encode())
            raise

    monkeypatch.setattr(imports_module, "import_run_streaming", spied)
    monkeypatch.setattr(imports_module, "load_run", None)  # no second import path at all
    code, stderr = _import(path, tmp_path / "a.json")
    assert (code, stderr) == (2, refusal + PARTIAL_HINT)
    assert CANARY not in stderr
    assert marks == [True]  # one refusal, marked by the importer
    assert not (tmp_path / "a.json").exists()


@pytest.mark.parametrize(
    ("status", "adapter", "lifted"),
    [
        ("cancelled", "auto", True),
        ("error", "inspect-log-json", True),
        ("started", "inspect-log-json", False),
        ("cancelled", "inspect-json", False),  # the specified adapter never reads a partial run
    ],
)
def test_the_importer_marks_what_allow_partial_lifts(
    tmp_path: Path, status: str, adapter: str, lifted: bool
) -> None:
    path = _cancelled(tmp_path, 2, status)
    log = json.loads(path.read_text("utf-8"))
    with pytest.raises(ImportRefusalError) as refused:
        load_run(
            path,
            adapter,
            source={"name": "inspect_ai", "version": log["eval"]["packages"]["inspect_ai"]},
            run_id=log["eval"]["run_id"],
            artifact_digest=ARTIFACT,
        )
    assert refused.value.code == "incomplete_run"
    assert refused.value.lifted_by_allow_partial is lifted


def test_a_refusal_mark_is_from_a_closed_set() -> None:
    assert ImportRefusalError("incomplete_export", "file").remedy is None
    assert not ImportRefusalError("incomplete_export", "file").lifted_by_allow_partial
    with pytest.raises(RuntimeError) as caught:
        ImportRefusalError("incomplete_export", "file", remedy=CANARY)
    assert CANARY not in str(caught.value)
