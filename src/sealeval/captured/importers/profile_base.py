"""The base of the evaluator-native profiles and the JSON helpers they share.

:class:`EvaluatorNativeProfile` is the contract each of the 19 profiles
implements (:mod:`~sealeval.captured.importers.profiles` keeps the delegating
and scalar profiles and the registry, :mod:`~sealeval.captured.importers.batch_profiles`
the batch ones); the helpers normalize export payloads (:func:`plain`), read
tables (:func:`table`) and required members with refusals rooted at the
caller's field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from sealeval._validate import thaw_json
from sealeval.canonical import encode_invarlock
from sealeval.captured.export import EvaluatorExport
from sealeval.captured.importers.jsonl import refuse
from sealeval.captured.likelihood import Source

__all__ = [
    "ERROR_KEYS",
    "LIKELIHOOD_KEYS",
    "MAX_BATCH_ID",
    "MAX_SCALAR_DEPTH",
    "EvaluatorNativeProfile",
    "Row",
    "as_rows",
    "container",
    "depth_within",
    "entries",
    "plain",
    "required",
    "same",
    "single",
    "table",
]

MAX_SCALAR_DEPTH: Final = 32
MAX_BATCH_ID: Final = 4096
ERROR_KEYS: Final = ("message", "error_message", "msg")
LIKELIHOOD_KEYS: Final = ("likelihood", "invarlock_likelihood")

Row = dict[str, Any]


# ---------------------------------------------------------------------------
# JSON normalization (export payloads)


def plain(value: object, where: str) -> Any:
    """Return a plain JSON copy (dicts, lists; key order kept); anything else is refused."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise refuse("non_finite_number", where)
        return value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise refuse("invalid_field", where)
            result[key] = plain(item, where)
        return result
    if isinstance(value, list | tuple):
        return [plain(item, where) for item in value]
    raise refuse("invalid_field", where)


def depth_within(value: object, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects at most ``limit`` levels (the value is level 1)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in item.values())
        elif type(item) is list:
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in item)
    return True


def same(left: object, right: object) -> bool:
    """JSON equality that tells ``1`` from ``1.0`` and ``true`` (equal canonical bytes).

    Key order does not matter. The values are export payload values (checked
    JSON); anything the canonical profile refuses raises
    :class:`~sealeval.errors.CanonicalError`.
    """
    return encode_invarlock(left) == encode_invarlock(right)


def table(value: object, where: str) -> list[Row]:
    """Return a table's rows: an array of row objects, or ``{columns, data}`` zipped."""
    if type(value) is list:
        for position, row in enumerate(value):
            if type(row) is not dict:
                raise refuse("not_object", f"{where}[{position}]")
        return value
    if type(value) is dict and set(value) == {"columns", "data"}:
        columns, data = value["columns"], value["data"]
        if (
            type(columns) is not list
            or any(type(name) is not str for name in columns)
            or len(set(columns)) != len(columns)
            or type(data) is not list
        ):
            raise refuse("invalid_field", where)
        rows: list[Row] = []
        for position, cells in enumerate(data):
            if type(cells) is not list or len(cells) != len(columns):
                raise refuse("invalid_field", f"{where}.data[{position}]")
            rows.append(dict(zip(columns, cells, strict=True)))
        return rows
    raise refuse("invalid_field", where)


def as_rows(value: object) -> object:
    """Export normalization: a ``{columns, data}`` table becomes its row list."""
    if type(value) is dict and set(value) == {"columns", "data"}:
        return table(value, "result")
    return value


# ---------------------------------------------------------------------------
# The profile base


class EvaluatorNativeProfile:
    """One evaluator's profile: native payload ↔ records (an ``EvaluatorProfile``).

    Subclasses implement :meth:`map_payload` (and, for langfuse,
    :meth:`check_identity`); :meth:`records` is the ``EvaluatorProfile``
    entry point used by :func:`~sealeval.captured.export.run_from_evaluator_export`.
    """

    #: The evaluator name (one of the 19).
    name: str = ""

    def native_payload(self, result: object) -> object:
        """Convert an in-memory result to the plain-JSON export payload (insertion order kept)."""
        return plain(result, "result")

    def check_identity(self, payload: Any, source: Source, run_id: str) -> None:
        """Check the payload against the run identity (only langfuse has rules)."""
        del payload, source, run_id

    def map_payload(self, payload: Any) -> Iterator[Row]:
        """Map a plain payload to record mappings, in order."""
        raise NotImplementedError  # pragma: no cover - every profile overrides it

    def records(self, export: EvaluatorExport) -> Iterable[Row]:
        """Map an export's payload (identity checked first) to record mappings."""
        payload = thaw_json(export.payload)
        self.check_identity(payload, export.source, export.run_id)
        return self.map_payload(payload)

    def __repr__(self) -> str:
        """Show the evaluator name."""
        return f"EvaluatorNativeProfile({self.name!r})"


def entries(payload: Any) -> list[Any]:
    """Return a scalar payload's non-empty entry list."""
    if type(payload) is not list:
        raise refuse("invalid_document", "payload")
    if not payload:
        raise refuse("no_records", "payload")
    return payload


# ---------------------------------------------------------------------------
# Delegating profiles


def container(entry: Row, name: str, where: str) -> Row:
    """Return the required object member ``name`` of ``entry``."""
    value = entry.get(name)
    if name not in entry:
        raise refuse("missing_field", f"{where}.{name}")
    if type(value) is not dict:
        raise refuse("invalid_field", f"{where}.{name}")
    return value


def required(obj: Row, name: str, where: str) -> Any:
    """Return the required member ``name`` of ``obj`` (``missing_field`` otherwise)."""
    if name not in obj:
        raise refuse("missing_field", f"{where}.{name}")
    return obj[name]


def single(value: object, where: str) -> Any:
    """Return the one element of a one-element list (``ambiguous_output`` otherwise)."""
    if type(value) is not list or len(value) != 1:
        raise refuse("ambiguous_output", where)
    return value[0]
