"""``inspect-log-json``: Inspect AI JSON logs (``--log-format json``), every sample shape.

The specified ``inspect-json`` adapter (spec 11 §4) refuses samples it
cannot map one to one: a list target (``ambiguous_expected``), several
epochs (``multiple_epochs``), several choices. This importer reads the same
JSON log exactly as :mod:`~sealeval.captured.importers.native.inspect_eval`
reads the ``.eval`` archive of the same run, so both give the same records:

* the log must be ``version`` 1 or 2 with ``status`` ``success``
  (``incomplete_run`` otherwise; a ``cancelled`` or ``error`` run is read
  with ``allow_partial``, its status kept in ``context.inspect.status``);
  ``eval.config.epochs`` gives the epochs;
* each entry of ``samples`` becomes one record through
  :func:`~sealeval.captured.importers.native.inspect_eval.sample_record`
  (``id``, or ``<id>#<epoch>`` with several epochs; a one-element list target
  unwrapped, longer lists kept);
* a log stating ``results.completed_samples`` (or ``total_samples``) and
  holding fewer samples is refused (``incomplete_export``) unless
  ``allow_partial``.

``adapter="auto"`` tries ``inspect-json`` first and reads the file with this
importer when the specified adapter refuses it. Memory: the document is held
in memory (at most ``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import Ids, check_complete, refuse
from sealeval.captured.importers.native._skeleton import NativeImporter, Stated, read_document
from sealeval.captured.importers.native.inspect_eval import (
    log_header,
    sample_record,
    stated_by_header,
)

__all__ = ["InspectJsonLogImporter"]


class InspectJsonLogImporter(NativeImporter):
    """Inspect AI JSON logs read like ``.eval`` archives (list targets, epochs)."""

    name = "inspect-log-json"

    def detect(self, head: bytes, path: Path) -> bool:
        """Claim nothing: ``inspect-json`` claims these logs and ``auto`` falls back here."""
        del head, path
        return False

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return ``eval.run_id`` and the ``inspect_ai`` package version of the log."""
        log, _ = read_document(path, options)
        return stated_by_header(log)

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per sample (and epoch), in file order."""
        log, nan = read_document(path, options)
        epochs, facts, stated = log_header(log, "", allow_partial=options.allow_partial)
        samples = log.get("samples")
        if samples is None:
            raise refuse("not_results", "samples")
        if type(samples) is not list:
            raise refuse("invalid_field", "samples")
        if not samples:
            raise refuse("no_records", "samples")
        facts.update(check_complete(stated, len(samples), options))
        ids = Ids()
        for position, sample in enumerate(samples):
            where = f"samples[{position}]"
            record = sample_record(
                sample, where, epochs=epochs, options=options, nan=nan, facts=facts
            )
            ids.add(record.id, f"{where}.id")
            yield record
