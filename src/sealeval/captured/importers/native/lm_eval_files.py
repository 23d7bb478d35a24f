"""``lm-eval-log-samples``: lm-evaluation-harness ``--log_samples`` files, both layouts.

Two layouts exist on disk:

* **0.4.3 and later** (mid-2024 onwards): ``samples_<task>_<timestamp>.jsonl``,
  real JSONL, one line per document **and filter**, with ``filter``,
  ``metrics``, ``doc_hash``, ``prompt_hash``, ``target_hash`` and
  ``arguments`` as ``{gen_args_N: {arg_0, arg_1}}``; aggregates in
  ``results_<timestamp>.json`` beside it. Auto-detection leaves this layout to
  the specified ``lm-eval-samples`` adapter; select this importer by name for
  files that adapter refuses (several filters, multiple choice).
* **0.4.0-0.4.2**: ``<model_args>_<task>.jsonl`` holding one JSON *array*
  (written with ``indent=2``, despite the name), rows without ``filter``,
  ``metrics`` or hashes, ``arguments`` as a list of argument lists; aggregates
  in ``results.json``. Auto-detection claims this layout.

Records follow the reference ``lm-eval-samples`` rules (spec 11 §3) for ids,
inputs and scores, so the same results give the same records in either
layout and through either adapter where both read a file:

* ``id``: ``doc_id`` (string or integer). lm-eval repeats every document once
  per filter; when a file holds more than one filter (a first pass collects
  them), every id is ``<doc_id>/<filter>`` and ``metadata.filter`` names the
  filter. A 0.4.0-0.4.2 file repeating a ``doc_id`` is refused
  (``filter_unavailable``): that layout does not record which filter a row
  belongs to.
* ``input``: ``doc`` (the dataset row); the rendered prompt is in
  ``context.arguments``.
* ``expected``: ``target`` as recorded (for multiple choice, the gold index).
* ``output``: ``filtered_resps`` with one-element lists unwrapped when that
  reaches a string (generation); otherwise the value as recorded (multiple
  choice: one ``[loglikelihood, is_greedy]`` pair per choice); ``null`` for
  an errored row without responses.
* ``scores``: every top-level int or float member except ``doc_id`` and
  ``target`` (the reference also takes a numeric ``target``; a target is not a
  score). Booleans and non-numeric metric values (corpus-level metrics such
  as BLEU store ``[references, prediction]``) are not scores; a bare ``NaN``
  is a missing score (default) or ``non_finite_number``.
* ``metadata``: the string members of ``row.metadata``, ``filter`` (with
  several filters) and ``task`` (when the task is known), so that policies can
  slice by task.
* ``error``: the reference's ``task_error`` (lm-eval has no per-row error; a
  failing request aborts the run).
* ``context``: ``arguments``, ``upstream_record`` (the row) and ``lm_eval``:
  the task (from the file name), and, when the results file of the same run
  sits beside the samples, ``results_digest`` (SHA-256 of its bytes, binding
  it into the run digest), ``lm_eval_version``, ``model``, ``model_args``,
  ``model_name``, ``date``, ``task_version``, ``n_shot``.

Completeness: the results file's ``n-samples[<task>]`` (``effective``, else
``original``) states how many documents the task evaluated; a samples file
holding fewer distinct ``doc_id`` is refused (``incomplete_export``) unless
``allow_partial``, which adds ``stated_samples`` and ``present_samples`` to
``context.lm_eval``.

Memory: JSONL is read twice, one line at a time (filters and distinct
documents first, then records); the array layout is one document held in memory (at most
``max_line_bytes``).

Speed: :meth:`LmEvalLogSamplesImporter.line_mapper` hands a JSONL file's lines
to ``import_run_streaming``'s two-process line writer (as for the specified
adapters), the first pass stopping at the second filter unless the results
file states a count to check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from sealeval.captured.importers.base import (
    WIDE_DETECT_BYTES,
    ImportOptions,
    LineMapper,
    RecordSource,
)
from sealeval.captured.importers.native._common import (
    MAX_ERROR_LENGTH,
    NAN,
    Ids,
    Shape,
    check_complete,
    decode_jsonl_line,
    identifier,
    iter_jsonl,
    iter_jsonl_rows,
    open_regular,
    read_companion,
    record_row,
    refuse,
    scan,
    sibling,
    tags,
    task_error,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
    Stated,
    read_head,
    read_value,
)

__all__ = [
    "LmEvalLogSamplesImporter",
    "chosen_fields",
    "multi_filter",
    "results_facts",
    "row_record",
    "samples_name",
]

_ROW_KEYS: Final = frozenset({"doc_id", "doc", "target", "arguments", "filtered_resps"})
_REQUIRED: Final = ("doc", "target", "arguments", "filtered_resps")
_NOT_SCORES: Final = frozenset({"doc_id", "target"})
_RESULTS_KEYS: Final = frozenset({"results", "versions", "configs"})
_NEW_NAME: Final = re.compile(
    r"samples_(?P<task>.+)_(?P<stamp>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}(?:\.[0-9]+)?)\.jsonl"
)


class LmEvalLogSamplesImporter(NativeImporter):
    """lm-evaluation-harness per-sample logs (0.4.0-0.4.2 arrays, ≥0.4.3 JSONL)."""

    name = "lm-eval-log-samples"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise the 0.4.0-0.4.2 array layout, or a results file (refused: ``not_results``)."""
        del path
        shape = scan(head)
        if shape.kind == "array":
            return shape.names(0) >= _ROW_KEYS
        return _is_results(shape)

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return ``lm_eval_version`` of the results file beside the samples (no run id)."""
        del options
        layout = "array" if scan(read_head(path)).kind == "array" else "lines"
        version = _facts(path, layout=layout).get("lm_eval_version")
        return Stated(
            source_name="lm-evaluation-harness",
            source_version=version if type(version) is str and version else None,
        )

    def falls_short(self, path: Path, options: ImportOptions) -> bool:
        """Whether the results file beside states more documents than these samples hold.

        ``auto`` then reads a >= 0.4.3 samples file with this reader rather than
        the specified ``lm-eval-samples`` adapter (which reads one file only), so
        the shortfall is refused (``incomplete_export``) or, with
        ``allow_partial``, recorded.
        """
        if scan(read_head(path)).kind == "array":
            return False  # auto already reads the 0.4.0-0.4.2 layout with this reader
        _, stated = _read_results(path, layout="lines")
        if stated is None:
            return False
        with open_regular(path) as handle:
            _, documents = _first_pass(handle, options)
        return 0 < documents < stated

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per row, in file order."""
        shape = scan(read_head(path))
        if shape.kind != "array" and "doc_id" not in shape.names():
            # a results file's identifying members can follow a long ``configs`` block
            shape = scan(read_head(path, WIDE_DETECT_BYTES))
        if _is_results(shape):
            raise refuse("not_results", "file")
        if shape.kind == "array":
            yield from self._array(path, options)
        else:
            for record, _ in self._lines(path, options):
                yield record

    def streams_lines(self, path: Path) -> bool:
        """Whether :meth:`line_mapper` maps this file (the >= 0.4.3 JSONL layout)."""
        shape = scan(read_head(path))
        return shape.kind != "array" and "doc_id" in shape.names()

    def line_mapper(self, path: Path, options: ImportOptions) -> LineMapper | None:
        """Return the mapper of a JSONL file's lines (``None`` for the array layout).

        Reads the results file beside the samples and makes the first pass
        (filters; distinct documents when the results file states a count,
        refused ``incomplete_export`` as :meth:`records` does).
        """
        if not self.streams_lines(path):
            return None
        return self._mapper(path, options)

    def decoded_records(
        self, path: Path, options: ImportOptions
    ) -> Iterator[tuple[Any, tuple[dict[str, Any], int] | None]]:
        """Yield :meth:`records`' records, each with ``(row, nesting bound)`` when known.

        The pair is given for a record mapped from a row exactly as the strict
        decoder returns it and not modified (a line without ``NaN``), so the
        run writer need not walk the row's members again
        (``plain_record_bytes(decoded=...)``); ``None`` otherwise.
        """
        shape = scan(read_head(path))
        if shape.kind == "array" or "doc_id" not in shape.names():
            for record in self.records(path, options):
                yield record, None
            return
        yield from self._lines(path, options)

    def _array(self, path: Path, options: ImportOptions) -> RecordSource:
        rows, nan = read_value(path, options)
        if type(rows) is not list:
            raise refuse("invalid_document", "file")
        facts, stated = _read_results(path, layout="array")
        multi = multi_filter((row.get("filter") if type(row) is dict else None) for row in rows)
        documents = {_doc_key(row.get("doc_id")) for row in rows if type(row) is dict}
        partial = check_complete(stated, len(documents), options)
        if partial:
            facts = {**facts, **partial}
        ids = Ids()
        for position, row in enumerate(rows):
            where = f"rows[{position}]"
            if type(row) is not dict:
                raise refuse("invalid_document", where)
            record = row_record(row, where, multi=multi, options=options, nan=nan, facts=facts)
            if "filter" not in row and record["id"] in ids:
                raise refuse("filter_unavailable", f"{where}.doc_id")
            ids.add(record["id"], f"{where}.doc_id")
            yield record
        if not rows:
            raise refuse("no_records", "file")

    def _mapper(self, path: Path, options: ImportOptions) -> _Lines:
        facts, stated = _read_results(path, layout="lines")
        with open_regular(path) as handle:
            if stated is None:  # nothing to count: stop at the second filter
                multi = multi_filter(_filters(handle, options))
            else:
                names, documents = _first_pass(handle, options)
                multi = multi_filter(names)
                partial = check_complete(stated, documents, options)
                if partial:
                    facts = {**facts, **partial}
        return _Lines(multi=multi, options=options, facts=facts)

    def _lines(
        self, path: Path, options: ImportOptions
    ) -> Iterator[tuple[dict[str, Any], tuple[dict[str, Any], int] | None]]:
        mapper = self._mapper(path, options)
        count = 0
        with open_regular(path) as handle:
            for where, row, nan, height in iter_jsonl_rows(handle, options):
                record = mapper.map_row(row, where, nan=nan)
                mapper.accept(record["id"], where)
                count += 1
                yield record, None if height is None else (row, height)
        if count == 0:
            raise refuse("no_records", "file")


class _Lines(LineMapper):
    """Maps the lines of one >= 0.4.3 samples file (what the first pass decided, fixed)."""

    __slots__ = ("_facts", "_ids", "_multi", "_options")

    def __init__(self, *, multi: bool, options: ImportOptions, facts: dict[str, Any]) -> None:
        """Keep the first pass's decisions; no ids seen yet."""
        self._multi = multi
        self._options = options
        self._facts = facts
        self._ids = Ids()

    def map_row(self, row: dict[str, Any], where: str, *, nan: bool) -> dict[str, Any]:
        """Map one decoded row."""
        return row_record(
            row, where, multi=self._multi, options=self._options, nan=nan, facts=self._facts
        )

    def map_line(
        self, line: bytes, where: str
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], int] | None]:
        """Decode and map one non-blank line (``(row, bound)`` for a row read the fast way)."""
        row, nan, height = decode_jsonl_line(line, where)
        return self.map_row(row, where, nan=nan), None if height is None else (row, height)

    def accept(self, record_id: object, where: str) -> None:
        """Refuse a repeated id (``duplicate_id`` at ``line[N].doc_id``)."""
        self._ids.add(str(record_id), f"{where}.doc_id")


def chosen_fields(row: dict[str, Any], paths: tuple[str, ...]) -> dict[str, str]:
    """Return the string values at dotted ``paths`` of a row (``doc.subject``), by path.

    A path that is missing or not a short string gives nothing: slice tags are
    chosen by the user, never guessed.
    """
    chosen: dict[str, str] = {}
    for dotted in paths:
        value: Any = row
        for part in dotted.split("."):
            value = value.get(part) if type(value) is dict else None
        if type(value) is str and len(value) <= MAX_ERROR_LENGTH:
            chosen[dotted] = value
    return chosen


def _is_results(shape: Shape) -> bool:
    """Whether the head is an lm-eval results file (aggregates, not samples)."""
    names = shape.names()
    return shape.kind == "object" and names >= _RESULTS_KEYS and "doc_id" not in names


def _filters(handle: IO[bytes], options: ImportOptions) -> Iterator[object]:
    for _, row, _ in iter_jsonl(handle, options):
        yield row.get("filter")


def _first_pass(handle: IO[bytes], options: ImportOptions) -> tuple[list[object], int]:
    """Return the filter names that occur (each once) and the number of distinct documents."""
    names: list[object] = []
    documents: set[tuple[str, object]] = set()
    for _, row, _ in iter_jsonl(handle, options):
        name = row.get("filter")
        if name not in names:
            names.append(name)
        documents.add(_doc_key(row.get("doc_id")))
    return names, len(documents)


def _doc_key(doc_id: Any) -> tuple[str, object]:
    """Return a hashable key telling documents apart (``doc_id`` 1 and ``"1"`` differ)."""
    return (type(doc_id).__name__, doc_id if type(doc_id) in (int, str) else repr(doc_id))


def multi_filter(filters: Iterable[object]) -> bool:
    """Whether the rows name more than one filter (every row is re-checked when mapped)."""
    seen: set[str | None] = set()
    for name in filters:
        seen.add(name if type(name) is str else None)
        if len(seen) > 1:
            return True
    return False


def row_record(
    row: dict[str, Any],
    where: str,
    *,
    multi: bool,
    options: ImportOptions,
    nan: bool,
    facts: dict[str, Any],
) -> dict[str, Any]:
    """Map one samples row to a record mapping (see the module docstring).

    ``multi``: the file holds several filters (:func:`multi_filter`); ``nan``:
    the row may hold ``NaN``; ``facts``: the run facts for ``context.lm_eval``.
    """
    for key in _REQUIRED:
        if key not in row:
            raise refuse("missing_field", f"{where}.{key}")
    doc_id = identifier(row.get("doc_id"), f"{where}.doc_id")
    scores: dict[str, int | float] = {}
    for key, value in row.items():  # number() and Scores.add, inlined (one call per row)
        kind = type(value)
        if kind is not int and kind is not float and value is not NAN:
            continue  # booleans, text, lists: not scores
        if key in _NOT_SCORES:
            continue
        if value is NAN:
            if not options.nan_as_missing_score:
                raise refuse("non_finite_number", f"{where}.scores")
            continue
        if not key:
            raise refuse("invalid_field", f"{where}.scores")
        scores[key] = value
    error = task_error(row.get("error"), f"{where}.error")
    clean = without_nan(row) if nan else row
    metadata = tags(clean.get("metadata"))
    if type(facts.get("task")) is str:
        metadata["task"] = facts["task"]
    metadata.update(chosen_fields(clean, options.metadata_fields))
    record_id = doc_id
    if multi:
        name = clean.get("filter")
        if type(name) is not str:
            raise refuse("invalid_field", f"{where}.filter")
        record_id = f"{doc_id}/{name}"
        metadata["filter"] = name
    return record_row(
        record_id=record_id,
        input_value=clean["doc"],
        expected=clean["target"],
        output=_output(clean["filtered_resps"], error),
        scores=scores,
        metadata=metadata,
        error=error,
        context={"arguments": clean["arguments"], "upstream_record": clean, "lm_eval": facts},
    )


def _output(value: Any, error: str | None) -> Any:
    if error is not None and value in (None, [], [None]):
        return None
    unwrapped = value
    while type(unwrapped) is list and len(unwrapped) == 1:
        unwrapped = unwrapped[0]
    if type(unwrapped) is str or unwrapped is None:
        return unwrapped
    return value


def samples_name(name: str) -> tuple[str, str] | None:
    """Split ``samples_<task>_<timestamp>.jsonl`` into its task and timestamp (else ``None``)."""
    match = _NEW_NAME.fullmatch(name)
    return None if match is None else (match["task"], match["stamp"])


def _facts(path: Path, *, layout: str) -> dict[str, Any]:
    """Collect the run facts of the results file beside the samples and the task name."""
    return _read_results(path, layout=layout)[0]


def _read_results(path: Path, *, layout: str) -> tuple[dict[str, Any], int | None]:
    """Return the run facts (:func:`_facts`) and the task's ``n-samples``."""
    match = _NEW_NAME.fullmatch(path.name)
    task = match["task"] if match is not None else None
    if match is not None:
        companion = sibling(path, f"results_{match['stamp']}.json")
    else:
        companion = sibling(path, "results.json") if layout == "array" else None
    facts: dict[str, Any] = {}
    stated = None
    if companion is not None:
        read = read_companion(companion, "results")
        if type(read.value) is not dict:
            raise refuse("invalid_companion", "results")
        facts["results_digest"] = read.digest
        task = task or _task_from_configs(path, read.value.get("configs"))
        facts.update(results_facts(read.value, task))
        stated = _n_samples(read.value.get("n-samples"), task)
    if task is not None:
        facts["task"] = task
    return facts, stated


def _n_samples(table: Any, task: str | None) -> int | None:
    """``n-samples[task]``: ``effective`` (documents after ``--limit``), else ``original``."""
    entry = table.get(task) if type(table) is dict and task is not None else None
    if type(entry) is not dict:
        return None
    for key in ("effective", "original"):
        value = entry.get(key)
        if type(value) is int and value >= 0:
            return value
    return None


def _task_from_configs(path: Path, configs: Any) -> str | None:
    """Name the task of a 0.4.0-0.4.2 file (``<model_args>_<task>.jsonl``) from the configs."""
    if type(configs) is not dict:
        return None
    names = [name for name in configs if path.name.endswith(f"_{name}.jsonl")]
    return max(names, key=len) if names else None


def results_facts(results: dict[str, Any], task: str | None) -> dict[str, Any]:
    """Return the run facts a results document states (model, version, date, task's n-shot)."""
    facts: dict[str, Any] = {}
    config = results.get("config")
    if type(config) is dict:
        facts.update(
            {
                key: config[key]
                for key in ("model", "model_args")
                if type(config.get(key)) in (str, dict)
            }
        )
    facts.update(
        {
            key: results[key]
            for key in ("lm_eval_version", "model_name", "date")
            if type(results.get(key)) in (str, int, float)
        }
    )
    for key, name in (("versions", "task_version"), ("n-shot", "n_shot")):
        table = results.get(key)
        if task is not None and type(table) is dict and type(table.get(task)) in (str, int, float):
            facts[name] = table[task]
    return facts
