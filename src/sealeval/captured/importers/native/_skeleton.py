"""The skeleton every native importer follows.

A native importer is a :class:`NativeImporter`: a class with an adapter
``name``, a ``detect(head, path)`` that recognises its layout from the first
bytes (:func:`~sealeval.captured.importers.native._common.scan`), and a
``records(path, options)`` generator that reads the file with the shared
readers and yields records built with
:func:`~sealeval.captured.importers.native._common.build_record`.
The readers are:

* :func:`read_document`: a whole JSON document (bounded by
  ``options.max_line_bytes``) that must be an object;
* :func:`read_head`: the first :data:`~sealeval.captured.importers.base.DETECT_BYTES`
  of a file, for importers that pick a layout before reading;
* :func:`~sealeval.captured.importers.native._common.iter_jsonl` and
  :func:`~sealeval.captured.importers.native._common.iter_table` for lines and
  tables.

Each importer only maps its format's members; the files, the lenient JSON
(``NaN``), the ids, scores and refusals come from the shared modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sealeval.captured.importers.base import DETECT_BYTES, ImportOptions, RecordSource
from sealeval.captured.importers.native._common import loads, open_regular, read_bounded, refuse

__all__ = ["NativeImporter", "Stated", "read_document", "read_head", "read_value"]


@dataclass(frozen=True, slots=True)
class Stated:
    """The identities a result file states about itself (each ``None`` when it does not).

    ``source_name`` is the tool's conventional name, used only when the user
    gives no ``--source``; ``source_version`` and ``run_id`` are compared with
    what the user gives (a contradiction is ``identity_mismatch``).
    """

    source_name: str | None = None
    source_version: str | None = None
    run_id: str | None = None
    #: The task the file's results belong to (Inspect ``eval.task``), where it says.
    task: str | None = None

    def __repr__(self) -> str:
        """Never show stated values."""
        return "Stated(...)"


class NativeImporter:
    """The base of every native importer (implements ``Importer``)."""

    #: The adapter name users pass (``--adapter NAME``).
    name: str = ""

    def detect(self, head: bytes, path: Path) -> bool:
        """Return whether the file whose first bytes are ``head`` is in this format."""
        raise NotImplementedError  # pragma: no cover - every importer overrides it

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's records in source order (raise ImportRefusalError to refuse)."""
        raise NotImplementedError  # pragma: no cover - every importer overrides it

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return the identities the file states (none by default)."""
        del path, options
        return Stated()

    def __repr__(self) -> str:
        """Show the class name (never a path or content)."""
        return f"{type(self).__name__}()"


def read_document(path: Path, options: ImportOptions) -> tuple[dict[str, Any], bool]:
    """Read a whole JSON document that must be an object; return it and whether it may hold NaN.

    Raises:
        ImportRefusalError: a file refusal, a decoding refusal
            (:func:`~sealeval.captured.importers.native._common.loads`), or
            ``invalid_document`` when the value is not an object.
    """
    value, nan = read_value(path, options)
    if type(value) is not dict:
        raise refuse("invalid_document", "file")
    return value, nan


def read_value(path: Path, options: ImportOptions) -> tuple[Any, bool]:
    """Read a whole JSON document of any kind (bounded by ``options.max_line_bytes``)."""
    with open_regular(path) as handle:
        raw = read_bounded(handle, options.max_line_bytes)
    return loads(raw, "file")


def read_head(path: Path, limit: int = DETECT_BYTES) -> bytes:
    """Return the first ``limit`` (:data:`DETECT_BYTES`) bytes of a regular file."""
    with open_regular(path) as handle:
        try:
            return handle.read(limit)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
