"""Runs from live evaluation objects: an Inspect ``EvalLog`` and lm-eval's results dictionary.

Evaluation engineers often hold the result in memory: ``inspect_ai.eval(...)``
returns ``EvalLog`` objects, and ``lm_eval.simple_evaluate(...,
log_samples=True)`` returns a dictionary with the aggregates and every
sample. These functions turn such an object into a run **without writing
files first**, with exactly the rules the file importers apply to what the
tools write on disk (``inspect-eval`` and ``lm-eval-log-samples``,
``docs/importers.md``):

* every sample is serialized as the tool's own writer serializes it (Inspect:
  the pydantic model dumped in JSON mode without ``None`` members; lm-eval:
  ``arguments`` as ``{gen_args_N: {arg_M}}``, responses and the target as
  text), decoded with the importers' strict decoder (bare ``NaN`` is a
  missing score, infinities are refused) and mapped by the file importer's
  own row mapping;
* so the same content gives the **same records**, and with the same
  identities and ``source_digest`` the **same run digest** as importing the
  files (tested on the real ``.eval`` log and lm-eval files).

A live object has no file bytes: ``source_digest`` is ``None`` unless the
caller binds the run to a file it also wrote (pass that file's
``sha256:`` digest). For lm-eval, ``results_digest`` plays the same role for
the ``results_<timestamp>.json`` file the file importer binds into every
record's ``context.lm_eval``.

Refusals are :class:`~sealeval.captured.importers.base.ImportRefusalError`
(closed codes, fields such as ``samples[2].scores``; never values) or
:class:`~sealeval.captured.errors.CapturedRunError` for run rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from sealeval.canonical import encode_python_default
from sealeval.captured.export import capture_evaluator_run
from sealeval.captured.importers.base import ImportOptions
from sealeval.captured.importers.native._common import loads, refuse
from sealeval.captured.importers.native.inspect_eval import sample_record
from sealeval.captured.importers.native.lm_eval_files import (
    multi_filter,
    results_facts,
    row_record,
)
from sealeval.captured.run import UNLIMITED, InputProjection, Limits, Record, Run, ScoreProvenance
from sealeval.captured.service_identity import ServiceIdentity

__all__ = ["run_from_inspect_log", "run_from_lm_eval_results"]

#: Sample members the Inspect mapping drops (``inspect-eval``): not serialized at all.
_INSPECT_DROPPED: Final = frozenset({"events", "events_data"})
_INSPECT_SOURCE: Final = "inspect_ai"
_LM_EVAL_SOURCE: Final = "lm-evaluation-harness"


def _decoded(value: Any, field: str, options: ImportOptions) -> Any:
    """Serialize like the tool's writer (``json.dumps``), then decode strictly like a file."""
    try:
        data = encode_python_default(value, allow_nan=True).encode("utf-8")
    except (TypeError, ValueError, RecursionError, UnicodeError):
        raise refuse("invalid_document", field) from None
    if len(data) > options.max_line_bytes:
        raise refuse("too_large", field)
    decoded, _ = loads(data, field)
    return decoded


def _build(
    records: Iterable[Record],
    *,
    source: Mapping[str, Any],
    run_id: str,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None,
    source_digest: str | None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None,
    input_projection: InputProjection | Mapping[str, Any] | None,
    limits: Limits,
) -> Run:
    if type(run_id) is not str:
        raise refuse("identities_required", "run_id")
    if artifact_digest is None and service_identity is None:
        raise refuse("identities_required", "artifact_digest")
    listed = list(records)
    if not listed:
        raise refuse("no_records", "samples")
    return capture_evaluator_run(
        listed,
        source=source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        source_digest=source_digest,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )


# ---------------------------------------------------------------------------
# Inspect AI


def _inspect_types() -> tuple[type[Any], type[Any]]:
    try:
        from inspect_ai.log import EvalLog, EvalSample  # noqa: PLC0415 - optional extra
    except ImportError:
        raise refuse("importer_failed", "inspect_ai") from None
    return EvalLog, EvalSample


def _inspect_source(log: Any) -> dict[str, str]:
    packages = getattr(log.eval, "packages", None)
    version = packages.get(_INSPECT_SOURCE) if isinstance(packages, Mapping) else None
    if type(version) is not str or not version:
        raise refuse("identities_required", "source")
    return {"name": _INSPECT_SOURCE, "version": version}


def _inspect_records(
    log: Any, samples: Iterable[Any], sample_type: type[Any], options: ImportOptions
) -> Iterator[Record]:
    version = log.version
    if type(version) is not int or version not in (1, 2):
        raise refuse("unsupported_version", "log.version")
    if log.status != "success":
        raise refuse("incomplete_run", "log.status")
    spec = _decoded(log.eval.model_dump(mode="json", exclude_none=True), "log.eval", options)
    config = spec.get("config")
    epochs = config.get("epochs", 1) if type(config) is dict else 1
    if epochs is None:
        epochs = 1
    if type(epochs) is not int or epochs < 1:
        raise refuse("invalid_field", "log.eval.config.epochs")
    facts = {key: spec[key] for key in ("eval_id", "run_id", "task", "model") if key in spec}
    seen: set[str] = set()
    for position, sample in enumerate(samples):
        where = f"samples[{position}]"
        if not isinstance(sample, sample_type):
            raise refuse("invalid_document", where)
        dumped = sample.model_dump(mode="json", exclude_none=True, exclude=set(_INSPECT_DROPPED))
        value = _decoded(dumped, where, options)
        record = sample_record(value, where, epochs=epochs, options=options, nan=True, facts=facts)
        if record.id in seen:
            raise refuse("duplicate_id", f"{where}.id")
        seen.add(record.id)
        yield record


def run_from_inspect_log(
    log: Any,
    *,
    run_id: str,
    artifact_digest: str | None = None,
    samples: Iterable[Any] | None = None,
    source: Mapping[str, Any] | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    source_digest: str | None = None,
    limits: Limits = UNLIMITED,
    options: ImportOptions | None = None,
) -> Run:
    """Build a run from an Inspect AI ``EvalLog`` (what ``inspect_ai.eval`` returns).

    Records follow the ``inspect-eval`` importer's mapping, sample by sample,
    in the order of ``log.samples`` — or of ``samples`` when given, for
    example ``inspect_ai.log.read_eval_log_samples(path)`` with a header-only
    log, which streams a large log in archive order (the order the ``.eval``
    importer reads).

    Args:
        log: an ``inspect_ai.log.EvalLog`` whose ``status`` is ``"success"``.
        run_id: the run's id.
        artifact_digest: the evaluated model artifact (or ``service_identity``).
        samples: the samples to import instead of ``log.samples``.
        source: ``{name, version}``; defaults to ``inspect_ai`` at the version
            the log records in ``eval.packages``.
        service_identity: the hosted service descriptor for hosted models.
        score_provenance: ``{score name: provenance}``.
        input_projection: ``{kind: "json-pointer", pointer}``.
        source_digest: ``sha256:`` of a log file holding the same content, to
            bind the run to it (``None`` otherwise).
        limits: ``UNLIMITED`` or ``INVARLOCK_LIMITS``.
        options: importer options (NaN handling, the largest sample).

    Raises:
        ImportRefusalError: ``invalid_document`` (not an ``EvalLog`` or
            ``EvalSample``), ``unsupported_version``, ``incomplete_run`` (the
            status is not ``success``), ``no_records``, ``duplicate_id``,
            ``identities_required``, ``importer_failed`` (inspect_ai is not
            installed), and the sample refusals of ``inspect-eval``.
    """
    log_type, sample_type = _inspect_types()
    if not isinstance(log, log_type):
        raise refuse("invalid_document", "log")
    options = options or ImportOptions()
    if samples is None:
        if log.samples is None:
            raise refuse("no_records", "samples")
        samples = log.samples
    return _build(
        _inspect_records(log, samples, sample_type, options),
        source=source if source is not None else _inspect_source(log),
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        source_digest=source_digest,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )


# ---------------------------------------------------------------------------
# lm-evaluation-harness


def _written_leaf(value: Any) -> Any:
    """lm-eval writes responses with every leaf as text (``str(value)``), lists kept."""
    if isinstance(value, list | tuple):
        return [_written_leaf(item) for item in value]
    return value if type(value) is str else str(value)


def _written_arguments(value: Any) -> Any:
    """``[(arg_0, arg_1, ...), ...]`` -> ``{gen_args_N: {arg_M: ...}}`` (already written: kept)."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, list | tuple):
        return value
    written: dict[str, Any] = {}
    for index, arguments in enumerate(value):
        items = arguments if isinstance(arguments, list | tuple) else (arguments,)
        written[f"gen_args_{index}"] = {
            f"arg_{position}": item for position, item in enumerate(items)
        }
    return written


def _written_row(row: Any, where: str) -> Any:
    """One sample as lm-eval's sample writer stores it (a mapping copy; nothing else changes)."""
    if not isinstance(row, Mapping):
        raise refuse("invalid_document", where)
    written = dict(row)
    if "arguments" in written:
        written["arguments"] = _written_arguments(written["arguments"])
    for key in ("resps", "filtered_resps"):
        if isinstance(written.get(key), list | tuple):
            written[key] = _written_leaf(written[key])
    if "target" in written and type(written["target"]) is not str:
        written["target"] = str(written["target"])
    return written


def _task_rows(results: Mapping[str, Any], task: str | None) -> tuple[str, Sequence[Any]]:
    samples = results.get("samples")
    if not isinstance(samples, Mapping) or not samples:
        raise refuse("missing_field", "results.samples")
    if task is None:
        if len(samples) != 1:
            raise refuse("adapter_option_invalid", "task")
        task = next(iter(samples))
    if type(task) is not str or task not in samples:
        raise refuse("adapter_option_invalid", "task")
    rows = samples[task]
    if not isinstance(rows, list | tuple):
        raise refuse("invalid_field", "results.samples")
    return task, rows


def run_from_lm_eval_results(
    results: Mapping[str, Any],
    *,
    source_version: str | None = None,
    run_id: str,
    artifact_digest: str | None = None,
    task: str | None = None,
    source: Mapping[str, Any] | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    source_digest: str | None = None,
    results_digest: str | None = None,
    limits: Limits = UNLIMITED,
    options: ImportOptions | None = None,
) -> Run:
    """Build a run of one task from ``lm_eval.simple_evaluate(..., log_samples=True)``'s result.

    The dictionary's ``samples[task]`` rows become records exactly as the
    ``lm-eval-log-samples`` importer maps the ``samples_<task>_<ts>.jsonl``
    file lm-eval writes from them (ids ``<doc_id>/<filter>`` when the task has
    several filters), with the run facts of the dictionary's aggregates
    (``config.model``, ``lm_eval_version``, ``versions``, ``n-shot``, …) in
    ``context.lm_eval``. One run per task, as on disk.

    Args:
        results: the dictionary ``simple_evaluate`` returned.
        source_version: the harness version; defaults to the dictionary's
            ``lm_eval_version`` (``source`` overrides both).
        run_id: the run's id.
        artifact_digest: the evaluated model artifact (or ``service_identity``).
        task: the task to import; may be omitted when there is one.
        source: ``{name, version}`` (default ``lm-evaluation-harness``).
        service_identity: the hosted service descriptor for hosted models.
        score_provenance: ``{score name: provenance}``.
        input_projection: ``{kind: "json-pointer", pointer}``.
        source_digest: ``sha256:`` of the samples file with the same rows, if any.
        results_digest: ``sha256:`` of the results file with the same aggregates,
            if any (the file importer binds it into ``context.lm_eval``).
        limits: ``UNLIMITED`` or ``INVARLOCK_LIMITS``.
        options: importer options (NaN handling, the largest sample).

    Raises:
        ImportRefusalError: ``invalid_document`` (not a mapping, a row not an
            object), ``missing_field`` (no ``samples``), ``adapter_option_invalid``
            (``task`` missing with several tasks, or unknown),
            ``identities_required``, ``no_records``, ``duplicate_id``, and
            the row refusals of ``lm-eval-log-samples``.
    """
    if not isinstance(results, Mapping):
        raise refuse("invalid_document", "results")
    options = options or ImportOptions()
    name, rows = _task_rows(results, task)
    aggregates = {key: value for key, value in results.items() if key != "samples"}
    decoded = _decoded(aggregates, "results", options)
    facts: dict[str, Any] = {}
    if results_digest is not None:
        facts["results_digest"] = results_digest
    facts.update(results_facts(decoded, name))
    facts["task"] = name
    if source is None:
        version = source_version if source_version is not None else decoded.get("lm_eval_version")
        if type(version) is not str or not version:
            raise refuse("identities_required", "source")
        source = {"name": _LM_EVAL_SOURCE, "version": version}
    written = [
        _decoded(_written_row(row, f"rows[{index}]"), f"rows[{index}]", options)
        for index, row in enumerate(rows)
    ]
    multi = multi_filter(row.get("filter") if type(row) is dict else None for row in written)

    def records() -> Iterator[Record]:
        seen: set[str] = set()
        for position, row in enumerate(written):
            where = f"rows[{position}]"
            if type(row) is not dict:
                raise refuse("invalid_document", where)
            plain = row_record(row, where, multi=multi, options=options, nan=True, facts=facts)
            record = Record.from_mapping(plain)
            if record.id in seen:
                raise refuse("duplicate_id", f"{where}.doc_id")
            seen.add(record.id)
            yield record

    return _build(
        records(),
        source=source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        source_digest=source_digest,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
    )
