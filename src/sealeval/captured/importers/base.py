"""The contract every importer implements (the seam between load_run and the formats).

An importer turns one tool's recorded results on disk into canonical records
without re-running anything. ``load_run`` (``sealeval.captured.importers``)
owns everything around it: choosing the importer (by name, or by content for
``adapter="auto"``), hashing the raw source bytes into ``source_digest``,
building the run header (source name/version, run id, artifact digest or
service identity), streaming records into the canonical run, limits, and the
CLI. An importer only:

* says whether a file looks like its format (:meth:`Importer.detect`, from
  the first bytes and the file name only, never by trusting an extension
  alone), and
* yields the records of a file in source order (:meth:`Importer.records`),
  each a :class:`~sealeval.captured.run.Record` or a mapping with exactly the
  record members (``id``, ``input``, ``expected``, ``output``, ``scores``,
  ``metadata``, ``error``, ``context``), retaining errored and null-output
  cases, never dropping one, and never guessing a fact the format cannot
  establish (it refuses with :class:`ImportRefusalError` and a closed code instead).

Importers never echo file content or paths in errors.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

from sealeval.captured.run import Record
from sealeval.errors import CapturedError

__all__ = [
    "DETECT_BYTES",
    "WIDE_DETECT_BYTES",
    "ImportOptions",
    "ImportRefusalError",
    "Importer",
    "LineMapper",
    "RecordSource",
]

#: How many leading bytes ``detect`` receives.
DETECT_BYTES: Final = 65_536
#: How many leading bytes detectors see when the first ``DETECT_BYTES`` matched nothing.
WIDE_DETECT_BYTES: Final = 1 << 20

RecordSource = Iterator[Record | Mapping[str, object]]


class ImportRefusalError(CapturedError):
    """A source file an importer refuses (message ``<field>: <code>``).

    Importers add the codes they need to this closed set in one place, here.

    Attributes:
        remedy: set by the importer where it decides the refusal, when a
            known remedy applies (one of :data:`REMEDIES`), else ``None``; the
            CLI prints that remedy without reading the file again.
    """

    #: What an importer may mark a refusal with: ``allow_partial`` (the
    #: importer's only objection is a short or stopped run, which
    #: ``allow_partial`` lifts), ``deepeval_uploaded`` (a DeepEval
    #: ``.latest_test_run.json`` holding only the link of a run uploaded to
    #: Confident AI: the results are not in the file).
    REMEDIES: ClassVar[frozenset[str]] = frozenset({"allow_partial", "deepeval_uploaded"})

    remedy: str | None

    def __init__(self, code: str, field: str | None = None, *, remedy: str | None = None) -> None:
        """Build the refusal; ``remedy`` must be ``None`` or one of :data:`REMEDIES`."""
        super().__init__(code, field)
        if remedy is not None and remedy not in self.REMEDIES:
            raise RuntimeError("ImportRefusalError: remedy outside its closed set")
        self.remedy = remedy

    @property
    def lifted_by_allow_partial(self) -> bool:
        """Whether ``allow_partial`` lifts this refusal (the importer's mark; nothing re-read)."""
        return self.remedy == "allow_partial"

    module = "sealeval.captured.importers"
    codes = frozenset(
        {
            "not_found",
            "not_regular_file",
            "unreadable",
            "too_large",
            "not_utf8",
            "invalid_json",
            "invalid_jsonl_line",
            "duplicate_key",
            "non_finite_number",
            "invalid_document",
            "unknown_format",
            "ambiguous_format",
            "unsupported_version",
            "missing_id",
            "duplicate_id",
            "missing_field",
            "invalid_field",
            "no_records",
            "expected_unavailable",
            "failed_items_unavailable",
            "unsupported_compression",
            "invalid_archive",
            "adapter_option_invalid",
            # load_run, auto-detection and the specified adapters (spec 11 §1-§8)
            "unknown_adapter",
            "identities_required",
            "identity_override",
            "identity_mismatch",
            "source_changed",
            "importer_failed",
            "byte_order_mark",
            "too_deep",
            "integer_too_long",
            "not_object",
            "unknown_field",
            "invalid_id",
            "score_conflict",
            "non_numeric_score",
            "ambiguous_output",
            "ambiguous_expected",
            "non_text_output",
            "output_required",
            "likelihood_mismatch",
            "incomplete_run",
            "unknown_status",
            "multiple_epochs",
            "inconsistent_failure",
            "unsupported_failure_reason",
            "invalid_evaluation",
            # native importers (importers/native, docs/importers.md "Native formats")
            "attachment_unresolved",
            "filter_unavailable",
            "invalid_companion",
            "inconsistent_events",
            "score_name_collision",
            "not_results",
            "unsupported_case_kind",
            # auto-detection, completeness and parquet (docs/importers.md)
            "incomplete_export",
            "adapter_mismatch",
            "extra_required",
        }
    )


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """Options ``load_run`` passes through to an importer.

    Attributes:
        source_name: the evaluator name the user declared (``--source NAME@VERSION``);
            profile-based importers select their profile by it.
        nan_as_missing_score: for formats whose writers emit bare ``NaN`` tokens
            (Python's ``json.dump`` default), whether such a score is dropped
            from ``scores`` (``True``) or refused (``False``); each importer
            documents its default.
        max_line_bytes: the longest JSONL line accepted.
        allow_partial: import a file holding fewer records than it states
            (``incomplete_export`` otherwise); the counts go into the context.
        metadata_fields: dotted paths into each native row (``doc.subject``)
            whose string values are kept as slice metadata under that name
            (lm-eval samples and folders).
        timestamp: the run timestamp to read from an lm-eval output folder
            (``2024-07-01T00-00-00.000001``); the latest per task otherwise.
    """

    source_name: str | None = None
    nan_as_missing_score: bool = True
    max_line_bytes: int = 134_217_728
    allow_partial: bool = False
    metadata_fields: tuple[str, ...] = ()
    timestamp: str | None = None


@runtime_checkable
class Importer(Protocol):
    """One on-disk format (see the module docstring for the division of work)."""

    #: The adapter name users pass (``--adapter NAME``), lowercase with hyphens.
    name: str

    def detect(self, head: bytes, path: Path) -> bool:
        """Return whether the file whose first bytes are ``head`` is in this format."""
        ...

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's records in source order (raise ImportRefusalError to refuse)."""
        ...


class LineMapper(ABC):
    """Maps the lines of one JSONL file to records, one line at a time.

    A native reader whose records each come from one line (the lm-eval
    samples JSONL) offers one through ``line_mapper(path, options)`` after
    reading what the whole file decides (filters, the results file beside
    it); ``import_run_streaming`` then streams the file through the
    two-process line writer (:mod:`sealeval.captured.importers.parallel`),
    as it does the specified JSONL adapters. :meth:`map_line` runs in both
    processes and must be a pure function of the line; :meth:`accept` runs
    in the parent only, for every record, in file order.
    """

    @abstractmethod
    def map_line(self, line: bytes, where: str) -> tuple[Any, tuple[dict[str, Any], int] | None]:
        """Decode and map one non-blank line (``where`` is ``line[N]``).

        Returns the record and, when the record reuses the decoded row
        unmodified and the row is exactly as the strict decoder returns it,
        ``(row, nesting bound)`` for ``plain_record_bytes(decoded=...)``;
        ``None`` otherwise.
        """

    def accept(self, record_id: object, where: str) -> None:
        """Check one record's id in file order (refuse a repeat); nothing by default."""
        del record_id, where
