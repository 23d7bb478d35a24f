"""An Inspect log folder imported as one run per task (``sealeval import --per-task``).

:func:`import_inspect_tasks` is the other mode of the ``inspect-folder``
importer (which reads every task of a folder as slices of one run): each log
of the folder (``*.eval`` archives and JSON logs in the folder itself, the
files ``inspect-folder`` chooses) becomes its own canonical run file, named
after the task it states (``eval.task``), inside a new output folder:

* every log is imported exactly as a single file is (``adapter="auto"``:
  the same records, identities stated by the log, completeness checks);
* the run file is ``<task>.json``, the task with every character outside
  ``A-Z a-z 0-9 . _ -`` replaced by ``_`` (``inspect_evals/gsm8k`` gives
  ``inspect_evals_gsm8k.json``);
* a log that states no task is ``missing_field`` (``eval.task``); two logs
  whose tasks give the same file name are ``ambiguous_format``; a folder
  without logs is ``no_records``;
* the output folder must not exist; the runs are written into a private
  staging folder beside it (the one pack publication uses, locked while it
  is written) and renamed into place once every log has imported, so on any
  refusal nothing is published.

Each run keeps the run id its log states (tasks started by one
``inspect eval`` call share it; their run digests differ).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Unpack

from sealeval._fs import (
    create_directory,
    open_destination_parent,
    translated,
)
from sealeval.captured.importers.base import ImportOptions
from sealeval.captured.importers.inputs import ImportArguments, ImportSummary
from sealeval.captured.importers.native._common import refuse
from sealeval.captured.importers.native.folders import InspectFolderImporter
from sealeval.captured.importers.native.inspect_eval import InspectEvalImporter
from sealeval.captured.importers.native.inspect_log import InspectJsonLogImporter
from sealeval.captured.importers.pipeline import import_run_streaming
from sealeval.captured.staging import staged_publication
from sealeval.errors import OutputError

__all__ = ["TaskRun", "import_inspect_tasks", "task_file_name"]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]")


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One task's run of a per-task import: the task, its run file's name, the summary."""

    task: str
    file: str
    summary: ImportSummary

    def document(self) -> dict[str, Any]:
        """Return the facts as a JSON object (the summary's, plus ``task`` and ``file``)."""
        return {"task": self.task, "file": self.file, **self.summary.document()}

    def __repr__(self) -> str:
        """Show the run file's name and the record count."""
        return f"TaskRun(file={self.file!r}, records={self.summary.record_count})"


def task_file_name(task: str) -> str:
    """Return the run file name for ``task``: unsafe characters become ``_``, then ``.json``."""
    safe = _UNSAFE.sub("_", task)
    return ("_" + safe if safe.startswith(".") else safe) + ".json"


def _tasks(folder: Path, options: ImportOptions) -> list[tuple[str, str, Path]]:
    """Return ``(file name, task, log)`` for every log of the folder, by file name."""
    chosen: dict[str, tuple[str, Path]] = {}
    for _, path, _ in InspectFolderImporter().plan(folder, options).files:
        reader = InspectJsonLogImporter() if path.suffix == ".json" else InspectEvalImporter()
        task = reader.stated(path, options).task
        if task is None:
            raise refuse("missing_field", "eval.task")
        name = task_file_name(task)
        if name in chosen:
            raise refuse("ambiguous_format", "file")
        chosen[name] = (task, path)
    return [(name, task, path) for name, (task, path) in sorted(chosen.items())]


def import_inspect_tasks(
    folder: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    **arguments: Unpack[ImportArguments],
) -> tuple[TaskRun, ...]:
    """Import an Inspect log folder as one run per task into the new folder ``destination``.

    Example::

        runs = import_inspect_tasks("logs/", "runs/", artifact_digest="sha256:...")
        for run in runs:
            print(run.file, run.summary.run_digest)

    ``arguments`` are :func:`~sealeval.captured.importers.import_run_streaming`'s
    (``source``, ``run_id``, ``artifact_digest``, ``service_identity``,
    ``score_provenance``, ``input_projection``, ``limits``, ``options``:
    :class:`~sealeval.captured.importers.inputs.ImportArguments`) and apply to
    every log (a ``run_id`` or version that a log contradicts is
    ``identity_mismatch``); see the module docstring for file names and
    refusals.

    Raises:
        ImportRefusalError: a log refused as a single file would be, or
            ``missing_field`` / ``ambiguous_format`` / ``no_records`` (above).
        OutputError: ``output_exists``, ``output_parent_missing``,
            ``unsafe_destination``, ``output_unwritable`` (the folder).
    """
    options = arguments.get("options") or ImportOptions()
    if os.path.lexists(destination):
        raise OutputError("output_exists", "output")
    planned = _tasks(Path(folder), options)
    with translated(OutputError, "output", default="output_unwritable"):
        parent_fd, name = open_destination_parent(destination)
    target = Path(destination)
    runs: list[TaskRun] = []
    try:
        with staged_publication(parent_fd, name, OutputError) as staging:
            os.close(create_directory(staging, dir_fd=parent_fd))
            for file_name, task, path in planned:
                summary = import_run_streaming(
                    path,
                    target.parent / staging / file_name,
                    adapter="auto",
                    **arguments,
                )
                runs.append(TaskRun(task=task, file=file_name, summary=summary))
    finally:
        os.close(parent_fd)
    return tuple(runs)
