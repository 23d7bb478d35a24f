"""Import recorded evaluation results as canonical runs: ``load_run`` and its adapters.

:func:`load_run` turns a file in one of the supported formats into a
validated :class:`~sealeval.captured.run.Run` without re-running anything;
:func:`import_run_streaming` writes the canonical run file instead, streaming
records from the source into a :class:`~sealeval.captured.run.RunWriter`
while it is hashed (the ``sealeval import`` command). Both take the same
arguments (spec ``11-adapters.md`` §1):

* ``adapter``: one of :data:`SPECIFIED_ADAPTERS` (``invarlock``, ``jsonl``,
  ``inspect-json``, ``lm-eval-samples``, ``promptfoo-jsonl``,
  ``langfuse-json``, ``evaluator-json``, ``evaluator-native-json``), a native
  format of :mod:`sealeval.captured.importers.native`, or ``"auto"``
  (recognised from the file's content: ``unknown_format`` when nothing
  matches, ``ambiguous_format`` when several formats do).
* ``source`` (``{name, version}``), ``run_id`` and ``artifact_digest`` or
  ``service_identity``: required for every adapter but ``invarlock``
  (``identities_required``), which refuses them all (``identity_override``);
  plus optional ``score_provenance`` and ``input_projection``.
* ``limits``: :data:`~sealeval.captured.run.UNLIMITED` (default: no record
  cap) or :data:`~sealeval.captured.run.INVARLOCK_LIMITS` (the reference's
  50,000 records / 128 MiB, for runs meant for invarlock).
* ``options``: :class:`~sealeval.captured.importers.base.ImportOptions`.

``source_digest`` is the SHA-256 of the raw source bytes. Single-document
formats are read once (≤ ``limits.max_file_bytes``). JSONL formats are
streamed line by line: :func:`load_run` reads them once, hashing as it goes;
:func:`import_run_streaming` must know the digest before the run header is
fixed, so it hashes the file first and re-hashes the bytes it parses,
refusing a file that changed in between (``source_changed``). Large JSONL
sources are streamed with a worker process that encodes part of the records
(see "Two processes for large JSONL imports" below); the output and every
refusal are those of the one-process import. Streamed sources have no size
cap unless ``limits`` caps records (then the reference's file cap applies
too).

Refusals are :class:`~sealeval.errors.SealevalError` subclasses with closed
codes and library-chosen fields (never file content or paths):
:class:`~sealeval.captured.importers.base.ImportRefusalError` (files, formats,
adapters), :class:`~sealeval.captured.CapturedRunError` (run rules),
:class:`~sealeval.errors.OutputError` (the destination).
"""

from __future__ import annotations

from sealeval.captured.importers.base import (
    DETECT_BYTES,
    Importer,
    ImportOptions,
    ImportRefusalError,
)
from sealeval.captured.importers.inputs import ImportSummary, Progress
from sealeval.captured.importers.per_task import TaskRun, import_inspect_tasks
from sealeval.captured.importers.pipeline import import_run_streaming, load_run
from sealeval.captured.importers.profiles import PROFILES, EvaluatorNativeProfile, profile_for
from sealeval.captured.importers.registry import (
    AUTO,
    SPECIFIED_ADAPTERS,
    adapter_names,
    detect_adapter,
    get_importer,
    importers,
)

__all__ = [
    "AUTO",
    "DETECT_BYTES",
    "PROFILES",
    "SPECIFIED_ADAPTERS",
    "EvaluatorNativeProfile",
    "ImportOptions",
    "ImportRefusalError",
    "ImportSummary",
    "Importer",
    "Progress",
    "TaskRun",
    "adapter_names",
    "detect_adapter",
    "get_importer",
    "import_inspect_tasks",
    "import_run_streaming",
    "importers",
    "load_run",
    "profile_for",
]
