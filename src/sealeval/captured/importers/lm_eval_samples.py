"""``lm-eval-samples``: lm-evaluation-harness ``--log_samples`` JSONL (spec 11 §3).

One harness sample row per line, mapped in file order:

* required: ``doc``, ``target``, ``arguments``, ``filtered_resps`` (presence)
  and ``doc_id`` (a string or integer: the record ``id``);
* ``input = doc``, ``expected = target``, ``context = {arguments,
  upstream_record: <the row>}``;
* ``scores`` = every top-level int or float member except ``doc_id``, with
  its JSON type (a numeric ``target`` becomes a score too, as in the
  reference), merged with ``metadata.invarlock_scores``;
* ``metadata`` = the string members of ``row.metadata`` without
  ``invarlock_`` keys; ``error = "upstream_error"`` for a native error;
* ``output``: ``null`` for an errored row without a response, for a
  likelihood row whose response is ``[null]``, and for a verified
  loglikelihood request; otherwise the single text response (single-element
  lists unwrapped), and any other shape is refused (``ambiguous_output``).

``NaN``: the harness writes samples with Python's ``json.dumps``, which emits
a bare ``NaN`` for a NaN metric. With ``ImportOptions.nan_as_missing_score``
(the default) such a top-level metric is a *missing score*: it is absent from
``scores`` and ``null`` in ``context.upstream_record`` (the source digest
still covers the original bytes). With ``nan_as_missing_score=False`` it is
refused (``non_finite_number``), as the reference does. ``NaN`` anywhere
else, in the structural members, and ``Infinity`` anywhere are refused.

The ``lm-evaluation-harness`` evaluator profile (§8) uses the same mapping
with ``metadata.invarlock_id`` replacing the id; this adapter ignores it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions
from sealeval.captured.importers.jsonl import (
    LinesImporter,
    capture_facts,
    identifier,
    is_number,
    metadata_of,
    refuse,
    sniff,
    tags,
    task_error,
)

__all__ = ["LmEvalSamplesImporter", "harness_record"]

_REQUIRED: Final = ("doc", "target", "arguments", "filtered_resps")
_NEEDED: Final = frozenset({"doc_id", *_REQUIRED})
#: Top-level members that are never a metric (a NaN there is refused).
_STRUCTURAL: Final = frozenset(
    {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "metadata", "error"}
)


def _output(row: dict[str, Any], error: str | None, metadata: dict[str, Any], where: str) -> Any:
    responses = row["filtered_resps"]
    has_facts = "invarlock_likelihood" in metadata
    facts = metadata.get("invarlock_likelihood")
    if error is not None and (responses is None or responses in ([], [None])):
        return None
    if has_facts and responses == [None]:
        return None
    if (
        type(facts) is dict
        and type(responses) is list
        and len(responses) == 1
        and type(responses[0]) is list
        and len(responses[0]) == 2
    ):
        _check_loglikelihood(row, responses[0], facts, where)
        return None
    value = responses
    while type(value) is list and len(value) == 1:
        value = value[0]
    if type(value) is not str:
        raise refuse("ambiguous_output", f"{where}.filtered_resps")
    return value


def _check_loglikelihood(
    row: dict[str, Any], response: list[Any], facts: dict[str, Any], where: str
) -> None:
    """Check a loglikelihood request: the native result must be the facts' measurement."""
    measured, greedy = response
    arguments = row["arguments"]
    logprob_sum = facts.get("logprob_sum")
    if type(arguments) is dict and set(arguments) == {"gen_args_0"}:
        generated = arguments["gen_args_0"]
        if type(generated) is dict and set(generated) == {"arg_0", "arg_1"}:
            arguments = [[generated["arg_0"], generated["arg_1"]]]
            # lm-eval serializes the (logprob, is_greedy) tuple as strings.
            if (
                is_number(logprob_sum)
                and type(measured) is str
                and measured == repr(logprob_sum)
                and greedy in ("True", "False")
                and type(greedy) is str
            ):
                measured, greedy = logprob_sum, greedy == "True"
    if not (
        is_number(measured)
        and is_number(logprob_sum)
        and measured == logprob_sum
        and type(greedy) is bool
        and type(arguments) is list
        and len(arguments) == 1
        and type(arguments[0]) is list
        and len(arguments[0]) == 2
        and type(arguments[0][0]) is str
        and arguments[0][1] == row["target"]
    ):
        raise refuse("likelihood_mismatch", f"{where}.filtered_resps")


def harness_record(row: object, where: str, *, honour_invarlock_id: bool = False) -> dict[str, Any]:
    """Map one harness sample row to a record mapping (§3; the profile honours ``invarlock_id``)."""
    if type(row) is not dict:
        raise refuse("not_object", where)
    if not row.keys() >= _NEEDED:
        raise refuse("missing_field", where)
    doc_id = row["doc_id"]
    # field names are built only for a refusal (this runs once per sample)
    record_id = doc_id if type(doc_id) is str else identifier(doc_id, f"{where}.doc_id")
    metadata = metadata_of(row, where)
    if honour_invarlock_id and "invarlock_id" in metadata:
        record_id = identifier(metadata["invarlock_id"], f"{where}.metadata.invarlock_id")
    native_error = row.get("error")
    error = None if native_error is None else task_error(native_error, f"{where}.error")
    scores = {
        name: value
        for name, value in row.items()
        if (type(value) is float or type(value) is int) and name != "doc_id"
    }
    output = _output(row, error, metadata, where)
    record: dict[str, Any] = {
        "id": record_id,
        "input": row["doc"],
        "expected": row["target"],
        "output": output,
        "scores": scores,
        "metadata": tags(metadata),
        "error": error,
        "context": {"arguments": row["arguments"]},
    }
    return capture_facts(record, metadata, where, upstream=row)


class LmEvalSamplesImporter(LinesImporter):
    """The ``lm-eval-samples`` adapter (see the module docstring)."""

    name = "lm-eval-samples"
    parallel_safe = True

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a first row with the harness's ``doc_id`` and ``doc`` members."""
        del path
        found = sniff(head)
        return found.kind == "object" and {"doc_id", "doc"} <= found.keys()

    def nan_member(self, name: str) -> bool:
        """Tolerate a NaN metric (any non-structural top-level member) as a missing score."""
        return name not in _STRUCTURAL

    def map_row(self, row: dict[str, Any], where: str, options: ImportOptions) -> Any:
        """Map one sample row (§3)."""
        del options
        return harness_record(row, where)
