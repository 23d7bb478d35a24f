"""An Inspect log folder imported as one run per task (``--per-task``, issue 14).

Folders are assembled from real Inspect logs (``tests/fixtures/real/inspect_ai``);
the tasks are read here from each log's header, not by the importer. Each
task's run must be byte for byte the run of its log imported alone.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.importers import (
    ImportRefusalError,
    import_inspect_tasks,
    import_run_streaming,
)
from sealeval.captured.importers.per_task import task_file_name
from sealeval.cli.imports import import_command
from sealeval.errors import OutputError
from support.digests import ARTIFACT

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "inspect_ai"
LOGS = (  # three tasks, one with a slash in its name (log version 3)
    "log_images.json",
    "log_streaming.eval",
    "log_message_deduplication.eval",
)


def _task(log: Path) -> str:
    if log.suffix == ".eval":
        with zipfile.ZipFile(log) as archive:
            header = json.loads(archive.read("header.json"))
    else:
        header = json.loads(log.read_text("utf-8"))
    task = header["eval"]["task"]
    assert isinstance(task, str)
    return task


def _folder(tmp_path: Path, names: tuple[str, ...] = LOGS) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    for name in names:
        shutil.copy(REAL / name, folder / name)
    return folder


def test_one_run_per_task_equals_each_log_alone(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    runs = import_inspect_tasks(folder, tmp_path / "runs", artifact_digest=ARTIFACT)
    tasks = {_task(folder / name): name for name in LOGS}
    assert sorted(run.task for run in runs) == sorted(tasks)
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == sorted(
        run.file for run in runs
    )
    for run in runs:
        alone = tmp_path / f"alone-{run.file}"
        summary = import_run_streaming(
            folder / tasks[run.task], alone, adapter="auto", artifact_digest=ARTIFACT
        )
        assert (tmp_path / "runs" / run.file).read_bytes() == alone.read_bytes()
        assert run.summary.run_digest == summary.run_digest
        assert run.document()["task"] == run.task
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_task_file_names_are_safe() -> None:
    assert (
        task_file_name("inspect_test_utils/guess_number") == "inspect_test_utils_guess_number.json"
    )
    assert task_file_name("../x") == "_.._x.json"
    assert task_file_name("a b") == "a_b.json"


@pytest.mark.parametrize(
    ("names", "code"),
    [
        (("log_streaming.eval", "log_read_sample.eval"), "ambiguous_format"),  # one task twice
        ((), "no_records"),
    ],
    ids=["two-logs-one-task", "no-logs"],
)
def test_folder_refusals_publish_nothing(names: tuple[str, ...], code: str, tmp_path: Path) -> None:
    folder = _folder(tmp_path, names)
    with pytest.raises(ImportRefusalError) as refused:
        import_inspect_tasks(folder, tmp_path / "runs", artifact_digest=ARTIFACT)
    assert refused.value.code == code
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]


def test_a_log_refused_midway_publishes_nothing(tmp_path: Path) -> None:
    """The cancelled log sorts after the others: they were staged, then removed."""
    folder = _folder(tmp_path, (*LOGS, "2025-05-12T20-28-13-04-00_no-samples.json"))
    with pytest.raises(ImportRefusalError) as refused:
        import_inspect_tasks(folder, tmp_path / "runs", artifact_digest=ARTIFACT)
    assert refused.value.code == "incomplete_run"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["logs"]


def test_existing_destination_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(OutputError) as refused:
        import_inspect_tasks(folder, tmp_path / "runs", artifact_digest=ARTIFACT)
    assert refused.value.code == "output_exists"
    assert list((tmp_path / "runs").iterdir()) == []


def test_cli_per_task(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    base = [str(folder), "--per-task", "--artifact-digest", ARTIFACT]
    result = CliRunner().invoke(import_command, [*base, "-o", str(tmp_path / "a")])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(LOGS)
    for line in lines:
        name, digest = line.split(" ")
        assert (tmp_path / "a" / name).is_file()
        assert digest.startswith("sha256:")
    assert len(result.stderr.splitlines()) == len(LOGS)
    result = CliRunner().invoke(import_command, [*base, "--json", "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert sorted(run["task"] for run in document["runs"]) == sorted(
        _task(folder / name) for name in LOGS
    )


@pytest.mark.parametrize(
    ("where", "extra"),
    [("file", []), ("folder", ["--adapter", "lm-eval-folder"])],
    ids=["a-file", "another-adapter"],
)
def test_cli_per_task_needs_an_inspect_folder(where: str, extra: list[str], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    path = folder / LOGS[0] if where == "file" else folder
    argv = [str(path), "--per-task", "--artifact-digest", ARTIFACT, "-o", str(tmp_path / "a")]
    result = CliRunner().invoke(import_command, [*argv, *extra])
    assert result.exit_code == 2
    assert result.stderr == "sealeval: error: per_task: adapter_option_invalid\n"
    assert not (tmp_path / "a").exists()
