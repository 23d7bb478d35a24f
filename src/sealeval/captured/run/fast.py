"""The plain-record fast path: canonical record bytes straight from plain ``dict`` records.

:func:`plain_record_bytes` gives the same bytes and the same refusals as
building a :class:`~sealeval.captured.run.Record`, or ``None`` when the record
is not plain enough to take the shortcut (the caller then builds the record).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any, Final

from sealeval._validate import (
    MAX_LONG_TEXT,
    MAX_MEMBERS,
    MAX_SHORT_TEXT,
    MAX_VALUE_DEPTH,
    plain_json,
)
from sealeval.canonical import plain_canonical
from sealeval.captured.run.model import RECORD_MEMBERS, RECORD_NEEDED

# ---------------------------------------------------------------------------
# The plain-record fast path

_PLAIN_MEMBERS: Final = frozenset(RECORD_MEMBERS[:8])
_PLAIN_NEEDED: Final = frozenset(RECORD_NEEDED)
_PLAIN_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")
# A record score int is refused when float() overflows; below 2**1023 it never does.
_SCORE_INT_BITS: Final = 1023
# Integers of more than 4300 digits are refused whatever the host setting; the C
# encoder refuses them by itself only while the host limit is on and at most that.
_MAX_INT_DIGITS: Final = 4300
_get_int_digits: Final = getattr(sys, "get_int_max_str_digits", lambda: _MAX_INT_DIGITS)


#: The default of an absent ``scores``/``metadata``/``context`` on the fast path
#: (only ever read and encoded, never handed out).
_NO_MEMBERS: Final[dict[str, Any]] = {}


#: A record object of a run document has exactly these many members (no likelihood).
PLAIN_MEMBER_COUNT: Final = 8


def _plain_scores(scores: object) -> bool:
    """Whether plain ``scores`` pass Record's rules (finiteness: left to the encoder)."""
    if type(scores) is not dict or len(scores) > MAX_MEMBERS:
        return False
    for key, value in scores.items():
        kind = type(value)
        if type(key) is not str or (
            kind is not float and (kind is not int or value.bit_length() > _SCORE_INT_BITS)
        ):
            return False
    return True


def _plain_members(record: dict[str, Any]) -> bool:
    """Whether a plain record's members, id, scores, metadata and error pass Record's rules."""
    if not (record.keys() <= _PLAIN_MEMBERS and record.keys() >= _PLAIN_NEEDED):
        return False  # unknown_field, missing_field, or likelihood (the Record path)
    record_id = record["id"]
    if (
        type(record_id) is not str
        or not 0 < len(record_id) <= MAX_SHORT_TEXT
        or _CONTROL_CHARS.search(record_id) is not None
    ):
        return False
    if not _plain_scores(record.get("scores", _NO_MEMBERS)):
        return False
    metadata = record.get("metadata", _NO_MEMBERS)
    if type(metadata) is not dict or len(metadata) > MAX_MEMBERS:
        return False
    for key, value in metadata.items():
        if type(key) is not str or type(value) is not str or len(value) > MAX_LONG_TEXT:
            return False
    error = record.get("error")
    return error is None or (type(error) is str and len(error) <= MAX_LONG_TEXT)


def _plain_within(value: object, max_depth: int, trusted: set[int], height: int) -> bool:
    """:func:`plain_json`, but a container in ``trusted`` (``height`` deep) is not walked."""
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return kind in _PLAIN_SCALARS
    if id(value) in trusted and height <= max_depth:
        return True
    if not max_depth:
        return False
    max_depth -= 1
    children: Iterable[Any] = value  # type: ignore[assignment]
    if kind is dict:
        mapping: dict[Any, Any] = value  # type: ignore[assignment]
        if not all(type(key) is str for key in mapping):
            return False
        children = mapping.values()
    for child in children:
        if type(child) not in _PLAIN_SCALARS and not _plain_within(
            child, max_depth, trusted, height
        ):
            return False
    return True


def _plain_values(
    record: dict[str, Any],
    values: tuple[Any, ...],
    decoded: tuple[dict[str, Any], int] | None,
) -> bool:
    """Whether every value has the plain shape; see :func:`plain_record_bytes`."""
    try:
        if decoded is None:
            for value in values:
                if type(value) not in _PLAIN_SCALARS and not plain_json(value):
                    return False
        elif decoded[0] is record:
            # the record is the decoded row: its values are the row's own members
            # (or the empty default), nested less deep than the row
            return True
        else:
            row, height = decoded
            trusted = {id(row)}
            for item in row.values():
                if type(item) not in _PLAIN_SCALARS:
                    trusted.add(id(item))
            for value in values:
                if type(value) not in _PLAIN_SCALARS and not _plain_within(
                    value, MAX_VALUE_DEPTH, trusted, height
                ):
                    return False
    except RecursionError:  # a host recursion limit below the depth limit
        return False
    return True


def plain_record_bytes(
    record: dict[str, Any], *, decoded: tuple[dict[str, Any], int] | None = None
) -> tuple[str, bytes] | None:
    """Return ``(id, canonical bytes without the LF)`` of a plain record, or ``None``.

    The fast path of :meth:`RunEncoder.add` for records given as a plain
    ``dict`` of plain JSON values (what importers make from ``json.loads``):
    one :func:`~sealeval.captured.errors.plain_json` walk per value, the
    text, score and metadata rules of :class:`Record`, then one call of the C
    JSON encoder — no frozen copy, no per-mapping ``default`` hook. It only
    *accepts*: ``None`` means "not shown valid here" (a rule broken, or a
    record outside the fast path: ``likelihood``, a retained
    ``context.input_projection``, read-only mappings, subclasses, integers
    while the host disables its digit limit) and the caller builds a
    :class:`Record`, which accepts or names the refusal exactly as before.
    So the fast path never changes a refusal, and the bytes it returns equal
    ``Record.from_mapping(record).to_canonical()[:-1]`` (pinned by a
    property test). Never raises.

    ``decoded`` is ``(row, height)`` when the record was mapped from ``row``,
    an object exactly as the strict JSON decoder returned it (exact JSON types,
    ``str`` keys, nested at most ``height`` deep) and not modified since (see
    ``LinesImporter.parallel_safe``): the row and its members are then not
    walked again where they appear in the record (within the depth limit).
    """
    if type(record) is not dict or not _plain_members(record):
        return None
    context = record.get("context", _NO_MEMBERS)
    if type(context) is dict and "input_projection" in context:
        return None  # the binding is replayed by Record
    input_value = record["input"]
    expected = record["expected"]
    output = record["output"]
    if not _plain_values(record, (input_value, expected, output, context), decoded):
        return None
    if not 0 < _get_int_digits() <= _MAX_INT_DIGITS:
        return None
    record_id: str = record["id"]
    data = plain_canonical(
        {
            "context": context,
            "error": record.get("error"),
            "expected": expected,
            "id": record_id,
            "input": input_value,
            "metadata": record.get("metadata", _NO_MEMBERS),
            "output": output,
            "scores": record.get("scores", _NO_MEMBERS),
        }
    )
    return None if data is None else (record_id, data)
