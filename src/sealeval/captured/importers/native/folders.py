"""Whole output folders: an lm-eval ``--output_path`` folder, an Inspect log folder.

A folder imports as one run. The files are chosen first (regular files only,
symlinks never followed, the folder and its direct subfolders only), each is
hashed, and the run's ``source_digest`` is the SHA-256 of the sorted lines
``<relative path> <file digest>`` (:meth:`FolderPlan.digest`); a file that
changes between hashing and the end of the import is refused
(``source_changed``).

* ``lm-eval-folder``: the ``samples_<task>_<timestamp>.jsonl`` files of one
  model subfolder (or of the folder itself), the latest timestamp per task
  unless ``options.timestamp`` names one; records as ``lm-eval-log-samples``
  reads each file, with ids ``<task>/<doc_id>[/<filter>]`` and the task in
  ``metadata.task``; ``options.metadata_fields`` keeps chosen document
  fields as slice tags. Samples of several model subfolders are
  ``ambiguous_format``.
* ``inspect-folder``: every Inspect log in the folder (``*.eval`` archives
  and JSON logs), all tasks as slices of one run: ids ``<task>/<id>``,
  ``metadata.task``; two logs of one task are ``ambiguous_format``.

A folder without such files is ``no_records``; memory is that of the
per-file importers (one line, one member or one document at a time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import open_regular, refuse, scan
from sealeval.captured.importers.native._skeleton import NativeImporter, Stated, read_head
from sealeval.captured.importers.native.inspect_eval import InspectEvalImporter
from sealeval.captured.importers.native.inspect_log import InspectJsonLogImporter
from sealeval.captured.importers.native.lm_eval_files import (
    LmEvalLogSamplesImporter,
    samples_name,
)
from sealeval.captured.run import Record

__all__ = ["FolderImporter", "FolderPlan", "InspectFolderImporter", "LmEvalFolderImporter"]

_CHUNK: Final = 1 << 20
_MAX_FILES: Final = 10_000


@dataclass(frozen=True, slots=True)
class FolderPlan:
    """The files a folder import reads: ``(relative name, path, task)`` and their identities."""

    files: tuple[tuple[str, Path, str], ...]
    digests: tuple[str, ...]
    identities: tuple[tuple[int, ...], ...]

    def __repr__(self) -> str:
        """Show the file count only (never paths)."""
        return f"FolderPlan(files={len(self.files)})"

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the sorted ``<relative name> <file digest>`` lines."""
        lines = sorted(
            f"{name} {digest}\n"
            for (name, _, _), digest in zip(self.files, self.digests, strict=True)
        )
        return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()

    def check_unchanged(self) -> None:
        """Refuse (``source_changed``) when a planned file changed since it was hashed."""
        for (_, path, _), before in zip(self.files, self.identities, strict=True):
            try:
                after = _identity(path.lstat())
            except OSError:
                raise refuse("source_changed", "file") from None
            if after != before:
                raise refuse("source_changed", "file")


def _identity(result: os.stat_result) -> tuple[int, ...]:
    return (result.st_dev, result.st_ino, result.st_size, result.st_mtime_ns, result.st_ctime_ns)


def _regular_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """Yield ``(relative name, path)`` of the regular files in ``folder`` and its subfolders."""
    count = 0
    try:
        with os.scandir(folder) as top:
            entries = sorted(top, key=lambda entry: entry.name)
    except OSError:
        raise refuse("unreadable", "file") from None
    for entry in entries:
        if entry.is_symlink():
            continue
        if entry.is_file(follow_symlinks=False):
            count += 1
            yield entry.name, Path(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            try:
                with os.scandir(entry.path) as inner:
                    children = sorted(inner, key=lambda child: child.name)
            except OSError:
                raise refuse("unreadable", "file") from None
            for child in children:
                if child.is_file(follow_symlinks=False) and not child.is_symlink():
                    count += 1
                    yield f"{entry.name}/{child.name}", Path(child.path)
        if count > _MAX_FILES:
            raise refuse("too_large", "file")


def _hash(path: Path) -> tuple[str, tuple[int, ...]]:
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        status = os.fstat(handle.fileno())
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest(), _identity(status)


class FolderImporter(NativeImporter):
    """A folder read as one run: :meth:`plan` chooses and hashes files, :meth:`read` maps them."""

    def detect(self, head: bytes, path: Path) -> bool:
        """Claim no single file (folders are recognised by :meth:`recognises`)."""
        del head, path
        return False

    def recognises(self, folder: Path) -> bool:
        """Whether ``folder`` holds files of this kind."""
        return bool(self._choose(folder, ImportOptions()))

    def _choose(self, folder: Path, options: ImportOptions) -> list[tuple[str, Path, str]]:
        raise NotImplementedError  # pragma: no cover - every folder importer overrides it

    def plan(self, folder: Path, options: ImportOptions) -> FolderPlan:
        """Choose the files (``no_records`` when none) and hash each one."""
        files = self._choose(folder, options)
        if not files:
            raise refuse("no_records", "file")
        hashed = [_hash(path) for _, path, _ in files]
        return FolderPlan(tuple(files), tuple(d for d, _ in hashed), tuple(i for _, i in hashed))

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the records of every planned file (a folder plan is made first)."""
        plan = self.plan(path, options)
        yield from self.read(plan, options)
        plan.check_unchanged()

    def read(self, plan: FolderPlan, options: ImportOptions) -> RecordSource:
        """Yield the records of the planned files, in plan order."""
        raise NotImplementedError  # pragma: no cover - every folder importer overrides it


def _slice(record: Any, task: str) -> Any:
    """Prefix a record's id with its task and tag the task (a Record or a record mapping)."""
    if isinstance(record, Record):
        return dataclasses.replace(
            record, id=f"{task}/{record.id}", metadata={**record.metadata, "task": task}
        )
    return {
        **record,
        "id": f"{task}/{record['id']}",
        "metadata": {**record["metadata"], "task": task},
    }


class LmEvalFolderImporter(FolderImporter):
    """An lm-eval ``--output_path`` folder (one model subfolder, one samples file per task)."""

    name = "lm-eval-folder"

    def _choose(self, folder: Path, options: ImportOptions) -> list[tuple[str, Path, str]]:
        latest: dict[tuple[str, str], tuple[str, str, Path]] = {}  # (model dir, task)
        for relative, path in _regular_files(folder):
            named = samples_name(path.name)
            if named is None:
                continue
            task, stamp = named
            if options.timestamp is not None and stamp != options.timestamp:
                continue
            model = relative.rpartition("/")[0]
            key = (model, task)
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, relative, path)
        if len({model for model, _ in latest}) > 1:
            raise refuse("ambiguous_format", "file")
        return [(relative, path, task) for (_, task), (_, relative, path) in sorted(latest.items())]

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return the lm-eval version the folder's results files state (all must agree)."""
        versions = {
            LmEvalLogSamplesImporter().stated(file, options)
            for _, file, _ in self._choose(path, options)
        }
        return versions.pop() if len(versions) == 1 else Stated()

    def read(self, plan: FolderPlan, options: ImportOptions) -> RecordSource:
        """Yield each task's records (``lm-eval-log-samples`` rules), ids ``<task>/...``."""
        reader = LmEvalLogSamplesImporter()
        for _, path, task in plan.files:
            for record in reader.records(path, options):
                yield _slice(record, task)


class InspectFolderImporter(FolderImporter):
    """An Inspect log folder (``*.eval`` and JSON logs), all tasks as slices of one run."""

    name = "inspect-folder"

    def _choose(self, folder: Path, options: ImportOptions) -> list[tuple[str, Path, str]]:
        del options
        chosen: list[tuple[str, Path, str]] = []
        for relative, path in _regular_files(folder):
            if "/" in relative:
                continue  # logs sit in the folder itself
            head = read_head(path)
            if InspectEvalImporter().detect(head, path) or (
                path.suffix == ".json" and _inspect_json(head)
            ):
                chosen.append((relative, path, ""))
        return chosen

    def read(self, plan: FolderPlan, options: ImportOptions) -> RecordSource:
        """Yield each log's records with ids ``<task>/<id>``; one log per task."""
        tasks: set[str] = set()
        for _, path, _ in plan.files:
            reader: NativeImporter = (
                InspectJsonLogImporter() if path.suffix == ".json" else InspectEvalImporter()
            )
            task: str | None = None
            for record in reader.records(path, options):
                assert isinstance(record, Record)
                context = record.context
                facts = context.get("inspect") if isinstance(context, Mapping) else None
                found = facts.get("task") if isinstance(facts, Mapping) else None
                if type(found) is not str or not found:
                    raise refuse("missing_field", "eval.task")
                if task is None:
                    if found in tasks:
                        raise refuse("ambiguous_format", "file")
                    task = found
                    tasks.add(task)
                yield _slice(record, task)


def _inspect_json(head: bytes) -> bool:
    shape = scan(head)
    return shape.kind == "object" and "eval" in shape.names() and "version" in shape.names()
