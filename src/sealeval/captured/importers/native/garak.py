"""``garak-report``: a garak ``garak.<run_id>.report.jsonl`` (scored attempts).

A garak report is JSONL whose entries carry an ``entry_type``: ``start_run
setup`` (configuration), ``init`` (version, run id), ``attempt``, ``eval``
(pass counts per probe x detector), ``completion``, and in newer releases
more (``digest``, ...; unknown types are skipped). An attempt is written
twice: with ``status`` 1 once its outputs are generated and with ``status`` 2
once the detectors scored them. Only status-2 entries become records (the
status-1 entry is the same attempt, unscored); the entries of one ``uuid``
must have increasing status and the same prompt (``inconsistent_events``).
An attempt that never reached status 2 (an interrupted run) is not dropped:
it becomes errored records at the end (``"Garak attempt incomplete"``).
The mapping follows the reference ``garak`` profile (spec 11 §8.2), one
record per generation:

* ``id``: ``<uuid>:<generation index>`` (``<uuid>:0`` without outputs).
  An aggregated report (``python -m garak.analyze.aggregate_reports``, garak
  0.14 pre-releases) overwrites every attempt's ``uuid`` with the aggregate
  run's id (the ``init`` entry's ``run``), keeping ``probe_classname`` and
  ``seq`` (the attempt's index within its probe): an attempt whose ``uuid``
  is the run's own id is named ``<probe_classname>#<seq>`` instead (``seq``
  must then be a non-negative integer, ``missing_id`` otherwise; two such
  attempts of one probe and ``seq``, as when two reports of the same probe
  are aggregated, are ``inconsistent_events``).
* ``input``: the prompt text when the prompt is one turn (``prompt.turns[0]
  .content.text``, or a plain string in old releases); the prompt object
  (the conversation) otherwise.
* ``expected``: ``null``: red-teaming has no reference answer (``goal`` says
  what the probe tries to elicit; it is in context).
* ``output``: the generation's ``text`` (``null`` when the target returned
  nothing).
* ``scores``: ``<detector>``: the generation's value in
  ``detector_results.<detector>`` (1.0 = hit, the probe succeeded / unsafe;
  0.0 = pass; ``null`` = not evaluated, no score). Detector lists must align
  with the outputs (``inconsistent_events``).
* ``metadata``: ``probe`` (``probe_classname``).
* ``error``: ``"Garak generation returned no output"`` for a null generation,
  ``"Garak attempt incomplete"`` for an attempt without a status-2 entry.
* ``context``: ``upstream_record`` (the attempt entry), ``generation`` (the
  index) and ``garak`` (``run_id``, ``garak_version`` from the run entries).

The ``.hitlog.jsonl`` beside a report lists only the generations a detector
flagged; it is recognised and refused (``not_results``). ``NaN`` detector
values are missing scores (default) or ``non_finite_number``.

Memory: one line at a time plus the status-1 entries still waiting for
their status-2 entry (garak writes those per probe).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import DETECT_BYTES, ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Ids,
    Scores,
    build_record,
    first_object,
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

__all__ = ["GarakReportImporter"]

_RUN_ENTRIES: Final = frozenset({"start_run setup", "init"})
_KNOWN_ENTRIES: Final = frozenset(
    {"start_run setup", "init", "attempt", "eval", "completion", "digest"}
)
_HIT_KEYS: Final = frozenset({"attempt_id", "detector", "probe", "output"})
_INCOMPLETE: Final = "Garak attempt incomplete"
_NO_OUTPUT: Final = "Garak generation returned no output"


class GarakReportImporter(NativeImporter):
    """garak report JSONL (status-2 attempts; the hit log is refused)."""

    name = "garak-report"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise a report (first entry a run or attempt entry) or a hit log."""
        del path
        first = first_object(head)
        if first is not None:
            return first.get("entry_type") in _KNOWN_ENTRIES or first.keys() >= _HIT_KEYS
        keys = scan(head).names()
        return ("entry_type" in keys and bool({"_config.version", "meta"} & keys)) or (
            keys >= _HIT_KEYS
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the records of every scored attempt, then of unfinished ones."""
        with open_regular(path) as handle:
            head = handle.read(DETECT_BYTES)
        first = first_object(head)
        keys = first.keys() if first is not None else scan(head).names()
        if keys >= _HIT_KEYS and "entry_type" not in keys:
            raise refuse("not_results", "file")
        facts: dict[str, Any] = {}
        run: object = None  # the ``init`` entry's run id
        attempts = _Attempts()
        ids = Ids()
        count = 0
        attempted = False
        with open_regular(path) as handle:
            for where, row, nan in iter_jsonl(handle, options):
                entry_type = row.get("entry_type")
                if type(entry_type) is not str:
                    raise refuse("missing_field", f"{where}.entry_type")
                attempted = attempted or entry_type == "attempt"
                if entry_type in _RUN_ENTRIES:
                    _run_facts(row, facts)
                    run = row.get("run") if entry_type == "init" else run
                if entry_type != "attempt":
                    continue
                key = _attempt_key(row, where, run)
                if not attempts.scored(row, where, nan, key):
                    continue
                for record in _attempt(row, where, facts, options, key=key, complete=True):
                    ids.add(record.id, f"{where}.uuid")
                    count += 1
                    yield record
        for key, (entry, where) in attempts.pending.items():
            for record in _attempt(entry, where, facts, options, key=key, complete=False):
                ids.add(record.id, f"{where}.uuid")
                count += 1
                yield record
        if not attempted:  # a digest or run entries only: aggregates, no attempts
            raise refuse("not_results", "file")
        if count == 0:
            raise refuse("no_records", "file")


class _Attempts:
    """The attempt entries seen: status-1 entries waiting for status 2, and finished uuids."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[dict[str, Any], str]] = {}
        self.done: set[str] = set()

    def scored(self, row: dict[str, Any], where: str, nan: bool, uuid: str) -> bool:
        """Check an attempt entry (named ``uuid``, :func:`_attempt_key`) against the earlier ones.

        Return whether it is scored.
        """
        status = row.get("status")
        if type(status) is not int or status not in (0, 1, 2):
            raise refuse("invalid_field", f"{where}.status")
        earlier = self.pending.get(uuid)
        if uuid in self.done or (
            earlier is not None
            and (earlier[0]["status"] >= status or earlier[0].get("prompt") != row.get("prompt"))
        ):
            raise refuse("inconsistent_events", f"{where}.status")
        if status < 2:
            self.pending[uuid] = (without_nan(row) if nan else row, where)
            return False
        self.pending.pop(uuid, None)
        self.done.add(uuid)
        return True


def _attempt_key(row: dict[str, Any], where: str, run: object) -> str:
    """Name an attempt: its ``uuid``, or ``<probe_classname>#<seq>`` in an aggregated report."""
    uuid = row.get("uuid")
    if type(uuid) is not str or not uuid:
        raise refuse("missing_id", f"{where}.uuid")
    if uuid != run:
        return uuid
    probe, seq = row.get("probe_classname"), row.get("seq")
    if type(probe) is not str or not probe:
        raise refuse("missing_id", f"{where}.probe_classname")
    if type(seq) is not int or seq < 0:
        raise refuse("missing_id", f"{where}.seq")
    return f"{probe}#{seq}"


def _run_facts(row: dict[str, Any], facts: dict[str, Any]) -> None:
    for key, name in (
        ("transient.run_id", "run_id"),
        ("run", "run_id"),
        ("garak_version", "garak_version"),
        ("_config.version", "garak_version"),
    ):
        if type(row.get(key)) is str:
            facts.setdefault(name, row[key])


def _prompt(prompt: Any) -> Any:
    if type(prompt) is dict:
        turns = prompt.get("turns")
        if type(turns) is list and len(turns) == 1 and type(turns[0]) is dict:
            content = turns[0].get("content")
            if type(content) is dict and type(content.get("text")) is str:
                return content["text"]
    return prompt


def _text(output: Any, field: str) -> str | None:
    if output is None or type(output) is str:
        return output
    if type(output) is dict:
        text = output.get("text")
        if text is None or type(text) is str:
            return text
    raise refuse("invalid_field", field)


def _attempt(
    entry: dict[str, Any],
    where: str,
    facts: dict[str, Any],
    options: ImportOptions,
    *,
    key: str,
    complete: bool,
) -> list[Record]:
    outputs = entry.get("outputs")
    if outputs is None:
        outputs = []
    if type(outputs) is not list:
        raise refuse("invalid_field", f"{where}.outputs")
    results = entry.get("detector_results")
    if results is None:
        results = {}
    if type(results) is not dict:
        raise refuse("invalid_field", f"{where}.detector_results")
    nested = any(
        type(values) is list and any(type(value) is list for value in values)
        for values in results.values()
    )
    for values in results.values():
        if type(values) is not list or (not nested and outputs and len(values) != len(outputs)):
            raise refuse("inconsistent_events", f"{where}.detector_results")
    if nested:
        return [
            _attempt_record(
                entry,
                where,
                key=key,
                facts=facts,
                options=options,
                results=results,
                outputs=outputs,
                complete=complete,
            )
        ]
    clean = without_nan(entry)
    probe = entry.get("probe_classname")
    metadata = {"probe": probe} if type(probe) is str else {}
    prompt = _prompt(clean.get("prompt"))
    records = []
    for index in range(max(len(outputs), 1)):
        text = _text(outputs[index], f"{where}.outputs") if outputs else None
        scores = Scores(f"{where}.detector_results")
        for detector, values in results.items():
            if index < len(values):
                scores.add(detector, number(values[index], f"{where}.detector_results", options))
        error = None if complete else _INCOMPLETE
        if error is None and text is None:
            error = _NO_OUTPUT
        records.append(
            build_record(
                where,
                record_id=f"{key}:{index}",
                input_value=prompt,
                expected=None,
                output=text,
                scores=scores.values,
                metadata=metadata,
                error=error,
                context={"upstream_record": clean, "generation": index, "garak": facts},
            )
        )
    return records


def _attempt_record(
    entry: dict[str, Any],
    where: str,
    *,
    key: str,
    facts: dict[str, Any],
    options: ImportOptions,
    results: dict[str, Any],
    outputs: list[Any],
    complete: bool,
) -> Record:
    """One record for an attempt whose detector results are nested per generation.

    Recent garak pre-releases write ``{"detector": [[g0, g1, ...]]}``. The
    attempt is one record (id ``<uuid>``, :func:`_attempt_key`); each detector's score is the
    highest of its per-generation values (garak counts an attempt as a hit
    when any generation is); the per-generation values stay in
    ``context.generation_results``.
    """
    field = f"{where}.detector_results"
    scores = Scores(field)
    per_generation: dict[str, list[Any]] = {}
    for detector, values in results.items():
        flat: list[Any] = []
        for value in values:
            flat.extend(value if type(value) is list else [value])
        numbers = [number(value, field, options) for value in flat]
        present = [value for value in numbers if value is not None]
        scores.add(detector, max(present) if present else None)
        per_generation[detector] = numbers
    texts = [_text(output, f"{where}.outputs") for output in outputs]
    output: Any = texts[0] if len(texts) == 1 else (texts or None)
    error = None if complete else _INCOMPLETE
    if error is None and output is None:
        error = _NO_OUTPUT
    clean = without_nan(entry)
    probe = entry.get("probe_classname")
    return build_record(
        where,
        record_id=key,
        input_value=_prompt(clean.get("prompt")),
        expected=None,
        output=output,
        scores=scores.values,
        metadata={"probe": probe} if type(probe) is str else {},
        error=error,
        context={
            "upstream_record": clean,
            "generation_results": per_generation,
            "garak": facts,
        },
    )
