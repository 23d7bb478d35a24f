"""Captured evaluation runs (``invarlock/evaluation-run-v1``): records, runs, digests, I/O.

A run is the normalized, hashable form of one evaluator's results (spec
10-run-records.md): a header (``source``, ``run_id``, ``artifact_digest`` or a
hosted ``service_identity``, ``source_digest``, ``score_provenance``) and an
ordered, non-empty list of records. Every type here validates itself once on
construction and is immutable afterwards (tuples, read-only mappings, frozen
JSON values), so code that receives a :class:`Run` never re-validates it.

Entry points:

* :func:`make_run` — build a run from caller records (make_run semantics:
  defaults for ``scores``/``metadata``/``error``/``context``, closed members).
* :func:`run_from_document` / :func:`parse_run` / :func:`read_run` — a run
  document (parsed value / strict JSON bytes / file), validated once.
* :func:`run_digest` — ``digest(run)``; computed once, at construction.
* :func:`write_run` — canonical bytes, atomic no-clobber publication, mode 0600.
* :class:`RunEncoder`, :class:`RunWriter` — build a canonical run record by
  record while hashing it; memory does not grow with the text already written.
  Plain ``dict`` records take a fast path (:func:`plain_record_bytes`) with
  the same bytes and refusals as :class:`Record`.
* :class:`RunReader` — stream the records of a canonical run file.
* :class:`InputProjection`, :func:`project_record` — JSON-pointer input
  projections with their replayable binding in ``context.input_projection``.

Record count and size are uncapped unless a :class:`Limits` says otherwise;
:data:`INVARLOCK_LIMITS` is the reference's 50,000-record / 128 MiB envelope,
to be used for documents meant for invarlock.

The package's modules, each with one job (import from this face, not from them):

* :mod:`~sealeval.captured.run.model` — limits, provenance, projections, records, header;
* :mod:`~sealeval.captured.run.fast` — the plain-record fast path;
* :mod:`~sealeval.captured.run.document` — :class:`Run`, building, parsing, reading, digest;
* :mod:`~sealeval.captured.run.writer` — streaming encoder, writer, :func:`write_run`;
* :mod:`~sealeval.captured.run.reader` — streaming :class:`RunReader`.
"""

from __future__ import annotations

from sealeval.captured.run.document import (
    Run,
    RunSummary,
    make_run,
    parse_run,
    paused_full_collections,
    read_file_bytes,
    read_run,
    run_digest,
    run_from_decoded,
    run_from_document,
)
from sealeval.captured.run.fast import plain_record_bytes
from sealeval.captured.run.model import (
    COMPAT_MAX_BYTES,
    COMPAT_MAX_RECORDS,
    INVARLOCK_LIMITS,
    PROJECTION_KIND,
    PROVENANCE_KINDS,
    RECORD_MEMBERS,
    RUN_FORMAT,
    UNLIMITED,
    InputProjection,
    Limits,
    ProjectionBinding,
    Record,
    RunHeader,
    ScoreProvenance,
    project_record,
)
from sealeval.captured.run.reader import STREAM_MIN_BYTES, RunReader, read_canonical_run
from sealeval.captured.run.writer import RunEncoder, RunWriter, write_run

__all__ = [
    "COMPAT_MAX_BYTES",
    "COMPAT_MAX_RECORDS",
    "INVARLOCK_LIMITS",
    "PROJECTION_KIND",
    "PROVENANCE_KINDS",
    "RECORD_MEMBERS",
    "RUN_FORMAT",
    "STREAM_MIN_BYTES",
    "UNLIMITED",
    "InputProjection",
    "Limits",
    "ProjectionBinding",
    "Record",
    "Run",
    "RunEncoder",
    "RunHeader",
    "RunReader",
    "RunSummary",
    "RunWriter",
    "ScoreProvenance",
    "make_run",
    "parse_run",
    "paused_full_collections",
    "plain_record_bytes",
    "project_record",
    "read_canonical_run",
    "read_file_bytes",
    "read_run",
    "run_digest",
    "run_from_decoded",
    "run_from_document",
    "write_run",
]
