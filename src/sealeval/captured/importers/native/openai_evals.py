"""``openai-evals-log``: an OpenAI Evals (``oaieval --record_path``) JSONL event log.

The log's first line is ``{"spec": ...}`` (eval name, completion functions,
run config, ``run_id``), the second ``{"final_report": ..., "run_id"}``; every
other line is an event ``{run_id, event_id, sample_id, type, data,
created_by, created_at}``. Events are **not** in sample order (samples are
shuffled with a seed) and a sample's events may be far apart, so all events
are grouped by ``sample_id`` first; records come in the order in which each
sample first appears. The mapping follows the reference ``openai-evals``
profile (spec 11 §8.2):

* ``id``: ``sample_id`` (``<base_eval>.<split>.<index>``).
* ``input``: ``sampling.data.prompt``. A log without a ``sampling`` event for
  the sample (completion functions that record none, such as ``dummy``) does
  not carry the prompt: ``input`` is ``null`` and
  ``context.openai_evals.input_recorded`` is ``false``; the importer never
  reads the registry to fill it in.
* ``expected``: ``match.data.expected`` (``null`` without a ``match`` event).
* ``output``: ``match.data.sampled``, else ``sampling.data.sampled`` (a
  one-element list unwrapped).
* ``scores``: ``match`` (1/0 from the boolean ``correct``) plus every numeric
  member of ``metrics`` events.
* ``metadata``: ``model`` (``sampling.data.model``).
* ``error``: the ``error`` events' messages joined with ``"; "`` (cut to 4096
  code points).
* ``context``: ``upstream_record`` (``{sample_id, events}``) and
  ``openai_evals`` (``run_id``, ``eval_name``, ``input_recorded``).

Consistency (``inconsistent_events``): every ``run_id`` agrees; ``event_id``s
are unique non-negative integers; a sample has at most one ``sampling`` and
one ``match`` event, and ``prompt``/``sampled`` present in both agree. A
sample with neither a ``sampled`` value nor an ``error`` event is
``missing_field``. Unknown event types are kept in context. ``NaN`` metric
values are missing scores (default) or ``non_finite_number``; elsewhere they
become ``null``.

Memory: every event is held until the end of the file (grouping needs the
whole log); lines are read one at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Scores,
    build_record,
    error_text,
    iter_jsonl,
    number,
    open_regular,
    refuse,
    scan,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
)
from sealeval.captured.run import Record

__all__ = ["OpenAIEvalsLogImporter"]

_SPEC_HINTS: Final = frozenset({"eval_name", "completion_fns", "run_config", "base_eval"})


@dataclass(slots=True)
class _Sample:
    events: list[dict[str, Any]] = field(default_factory=list)
    sampling: dict[str, Any] | None = None
    match: dict[str, Any] | None = None
    metrics: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class OpenAIEvalsLogImporter(NativeImporter):
    """OpenAI Evals event logs (``spec`` line, ``final_report`` line, events)."""

    name = "openai-evals-log"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise a first line ``{"spec": {...}}`` with an eval spec's members."""
        del path
        shape = scan(head)
        return (
            shape.kind == "object"
            and "spec" in shape.names()
            and len(_SPEC_HINTS & shape.names("spec")) >= 2
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Group the events by sample; yield one record per sample."""
        samples: dict[str, _Sample] = {}
        run: dict[str, Any] = {}
        event_ids: set[int] = set()
        with open_regular(path) as handle:
            for where, row, nan in iter_jsonl(handle, options):
                clean = without_nan(row) if nan else row
                _line(row, clean, where, samples=samples, run=run, event_ids=event_ids)
        if not samples:
            raise refuse("no_records", "file")
        facts: dict[str, Any] = {key: run[key] for key in ("run_id", "eval_name") if key in run}
        for position, (sample_id, sample) in enumerate(samples.items()):
            yield _record(sample_id, sample, f"samples[{position}]", facts, options)


def _line(
    row: dict[str, Any],
    clean: dict[str, Any],
    where: str,
    *,
    samples: dict[str, _Sample],
    run: dict[str, Any],
    event_ids: set[int],
) -> None:
    run_id = clean.get("run_id")
    if "sample_id" not in row and ("spec" in row or "final_report" in row):
        spec = clean.get("spec")
        if type(spec) is dict:
            run_id = spec.get("run_id", run_id)
            if type(spec.get("eval_name")) is str:
                run["eval_name"] = spec["eval_name"]
        _same_run(run, run_id, where)
        return
    _same_run(run, run_id, where)
    sample_id = row.get("sample_id")
    kind = row.get("type")
    data = clean.get("data")
    if type(sample_id) is not str or not sample_id or type(kind) is not str:
        raise refuse("invalid_field", where)
    if type(data) is not dict:
        raise refuse("invalid_field", f"{where}.data")
    event_id = row.get("event_id")
    if event_id is not None:
        if type(event_id) is not int or event_id < 0 or event_id in event_ids:
            raise refuse("inconsistent_events", f"{where}.event_id")
        event_ids.add(event_id)
    sample = samples.setdefault(sample_id, _Sample())
    sample.events.append(clean)
    if kind in ("sampling", "match"):
        if getattr(sample, kind) is not None:
            raise refuse("inconsistent_events", where)
        setattr(sample, kind, data)
    elif kind == "metrics":
        sample.metrics.append((row["data"], where))
    elif kind == "error":
        message = data.get("message")
        sample.errors.append(message if type(message) is str and message else "upstream_error")


def _same_run(run: dict[str, Any], run_id: object, where: str) -> None:
    if run_id is None:
        return
    if type(run_id) is not str:
        raise refuse("invalid_field", f"{where}.run_id")
    if run.setdefault("run_id", run_id) != run_id:
        raise refuse("inconsistent_events", f"{where}.run_id")


def _record(
    sample_id: str, sample: _Sample, where: str, facts: dict[str, Any], options: ImportOptions
) -> Record:
    sampling = sample.sampling or {}
    match = sample.match or {}
    for key in ("prompt", "sampled"):
        if key in sampling and key in match and not _agree(sampling[key], match[key]):
            raise refuse("inconsistent_events", f"{where}.{key}")
    if "sampled" in match:
        output = match["sampled"]
    elif "sampled" in sampling:
        output = sampling["sampled"]
        if type(output) is list and len(output) == 1:
            output = output[0]
    elif sample.errors:
        output = None
    else:
        raise refuse("missing_field", f"{where}.sampled")
    scores = Scores(f"{where}.scores")
    correct = match.get("correct")
    if type(correct) is bool:
        scores.add("match", 1.0 if correct else 0.0)
    for data, event_where in sample.metrics:
        for name, value in data.items():
            scores.add(name, number(value, f"{event_where}.data", options))
    metadata = {"model": sampling["model"]} if type(sampling.get("model")) is str else {}
    return build_record(
        where,
        record_id=sample_id,
        input_value=sampling.get("prompt"),
        expected=match.get("expected"),
        output=output,
        scores=scores.values,
        metadata=metadata,
        error=error_text("; ".join(sample.errors)) if sample.errors else None,
        context={
            "upstream_record": {"sample_id": sample_id, "events": sample.events},
            "openai_evals": {**facts, "input_recorded": "prompt" in sampling},
        },
    )


def _agree(sampling_value: Any, match_value: Any) -> bool:
    if sampling_value == match_value:
        return True
    return type(sampling_value) is list and sampling_value[:1] == [match_value]
