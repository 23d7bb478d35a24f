"""Whole output folders import as one run (issue 14): lm-eval ``--output_path``, Inspect logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.importers import ImportOptions, ImportRefusalError, load_run
from support.digests import ARTIFACT
from support.vectors import samples_dir

SAMPLES = samples_dir()
IDENTITY: dict[str, Any] = {  # the source (tool, version) is read from the results files
    "run_id": "folder-1",
    "artifact_digest": ARTIFACT,
}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.fixture
def lm_folder(tmp_path: Path) -> Path:
    """An lm-eval output folder: one model subfolder, two tasks, one older run of toy_gen."""
    model = tmp_path / "out" / "org__model"
    model.mkdir(parents=True)
    for path in (SAMPLES / "lm_eval/out").glob("*/*"):
        shutil.copy(path, model / path.name)
    old = next(model.glob("samples_toy_gen_*.jsonl"))
    older = model / "samples_toy_gen_2020-01-01T00-00-00.000001.jsonl"
    older.write_text(old.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    return tmp_path / "out"


def _expected_ids(folder: Path) -> list[str]:
    """Independent reader: ``task/doc_id[/filter]`` of the latest samples file per task."""
    latest: dict[str, Path] = {}
    for path in sorted(folder.rglob("samples_*.jsonl")):
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        if task not in latest or path.name > latest[task].name:
            latest[task] = path
    ids = []
    for task, path in sorted(latest.items()):
        rows = _rows(path)
        several = len({row["filter"] for row in rows}) > 1
        for row in rows:
            suffix = f"/{row['filter']}" if several else ""
            ids.append(f"{task}/{row['doc_id']}{suffix}")
    return ids


def test_lm_eval_folder_is_one_run_with_tasks_as_slices(lm_folder: Path) -> None:
    run = load_run(lm_folder, "auto", **IDENTITY)
    results = json.loads(next(lm_folder.rglob("results_*.json")).read_text(encoding="utf-8"))
    assert run.header.source.version == results["lm_eval_version"]  # stated by the file
    assert [record.id for record in run] == _expected_ids(lm_folder)
    assert {record.metadata["task"] for record in run} == {"toy_gen", "toy_mc"}
    assert all(record.id.startswith(record.metadata["task"] + "/") for record in run)
    assert run.source_digest is not None


def test_lm_eval_folder_named_timestamp_and_metadata_fields(lm_folder: Path) -> None:
    options = ImportOptions(
        timestamp="2020-01-01T00-00-00.000001", metadata_fields=("doc.question",)
    )
    named = {**IDENTITY, "source": {"name": "lm-eval", "version": "0.4.13"}}  # no results file
    run = load_run(lm_folder, "lm-eval-folder", options=options, **named)
    older = _rows(next(lm_folder.rglob("samples_toy_gen_2020-*.jsonl")))
    assert len(run) == len(older) == 1
    assert run.records[0].id == f"toy_gen/{older[0]['doc_id']}"
    question = older[0]["doc"]["question"]
    assert isinstance(question, str)
    assert run.records[0].metadata["doc.question"] == question


def test_lm_eval_folder_digest_covers_every_file(lm_folder: Path) -> None:
    before = load_run(lm_folder, "auto", **IDENTITY)
    target = next(lm_folder.rglob("samples_toy_mc_*.jsonl"))
    target.write_text(target.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    after = load_run(lm_folder, "auto", **IDENTITY)
    assert before.source_digest != after.source_digest
    assert [r.id for r in before] == [r.id for r in after]


def test_lm_eval_folder_ignores_symlinks_and_refuses_two_models(
    lm_folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(next(lm_folder.rglob("samples_toy_mc_*.jsonl")), outside / "x.jsonl")
    (lm_folder / "org__model" / "samples_evil_2030-01-01T00-00-00.jsonl").symlink_to(
        outside / "x.jsonl"
    )
    run = load_run(lm_folder, "auto", **IDENTITY)
    assert not any(record.id.startswith("evil/") for record in run)
    second = lm_folder / "other__model"
    second.mkdir()
    shutil.copy(next(lm_folder.rglob("samples_toy_mc_*.jsonl")), second)
    with pytest.raises(ImportRefusalError) as refused:
        load_run(lm_folder, "auto", **IDENTITY)
    assert refused.value.code == "ambiguous_format"


def test_empty_folder_and_file_adapter_on_a_folder(tmp_path: Path) -> None:
    named = {**IDENTITY, "source": {"name": "lm-eval", "version": "1"}}
    with pytest.raises(ImportRefusalError) as refused:
        load_run(tmp_path, "auto", **named)
    assert refused.value.code == "unknown_format"
    with pytest.raises(ImportRefusalError) as refused:
        load_run(tmp_path, "lm-eval-folder", **named)
    assert refused.value.code == "no_records"
    with pytest.raises(ImportRefusalError) as refused:
        load_run(tmp_path, "jsonl", **named)
    assert refused.value.code == "not_regular_file"


def test_inspect_folder_all_tasks_as_slices(tmp_path: Path) -> None:
    identity = {**IDENTITY, "source": {"name": "inspect", "version": "any"}}
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(next((SAMPLES / "inspect_ai/logs").glob("*.eval")), logs)
    source = next((SAMPLES / "inspect_ai/logs").glob("*.json"))
    log = json.loads(source.read_text(encoding="utf-8"))
    log["eval"]["task"] = "other_task"
    (logs / "other.json").write_text(json.dumps(log), encoding="utf-8")
    run = load_run(logs, "auto", **identity)
    samples = len(log["samples"])
    assert len(run) == 2 * samples
    tasks = {record.metadata["task"] for record in run}
    assert len(tasks) == 2
    assert "other_task" in tasks
    assert all(record.id.startswith(record.metadata["task"] + "/") for record in run)
    # the same task twice is not one run
    shutil.copy(source, logs / "same.json")
    with pytest.raises(ImportRefusalError) as refused:
        load_run(logs, "auto", **identity)
    assert refused.value.code == "ambiguous_format"
