"""Staging a batch: row validation and normalization, ordering, digests, the rollback plan.

:func:`stage_omop_batch` validates and normalizes rows, orders them
deterministically (table order, then ascending primary key), digests each row
and the batch, and builds the rollback plan (one DELETE by primary key per row,
children first) with its own, independently computed ``rollback_digest``.
:meth:`StagedBatch.preview` describes the effect on the target without any row
value. Pure: no I/O.
"""

from __future__ import annotations

import datetime
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import check_exact
from sealeval.canonical import digest_openmed, is_digest
from sealeval.gates.omop.model import (
    BATCH_SCHEMA,
    CDM_VERSION,
    COLUMNS,
    DATE_PATTERN,
    DATETIME_PATTERN,
    INT_RANGES,
    MAX_BATCH_ROWS,
    MAX_EXACT_INT,
    OMOP_TABLES,
    ROLLBACK_SCHEMA,
    TABLE_ORDER,
    TABLE_RANK,
    Dialect,
    OmopColumn,
    OmopLoaderError,
    Operation,
)
from sealeval.gates.omop.preview import (
    LoadPreview,
    TablePreview,
    preview_payload,
)
from sealeval.gates.omop.sql import sql_delete

__all__ = ["OmopRow", "RollbackStep", "StagedBatch", "stage_omop_batch"]

# ---------------------------------------------------------------------------
# Row validation and normalization


def _normalize_number(column: OmopColumn, value: object, where: str) -> object:
    """Return an integer or numeric column value, or refuse it."""
    if column.kind in INT_RANGES:
        if type(value) is not int:
            raise OmopLoaderError("invalid_type", where)
        low, high = INT_RANGES[column.kind]
        if not low <= value <= high:
            raise OmopLoaderError("out_of_range", where)
        return value
    if type(value) is int:
        if abs(value) > MAX_EXACT_INT:
            raise OmopLoaderError("out_of_range", where)
        return float(value)
    if type(value) is not float:
        raise OmopLoaderError("invalid_type", where)
    if not math.isfinite(value):
        raise OmopLoaderError("invalid_value", where)
    return value + 0.0  # -0.0 becomes 0.0: SQL NUMERIC has no negative zero


def _normalize_text(column: OmopColumn, value: str, where: str) -> str:
    """Return a varchar, date or datetime column value, or refuse it."""
    if column.kind == "varchar":
        if len(value) > (column.max_length or 0):
            raise OmopLoaderError("too_long", where)
        if "\x00" in value:
            raise OmopLoaderError("invalid_value", where)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise OmopLoaderError("invalid_value", where) from None
        return value
    is_date = column.kind == "date"
    if (DATE_PATTERN if is_date else DATETIME_PATTERN).fullmatch(value) is None:
        raise OmopLoaderError("invalid_value", where)
    try:
        if is_date:
            datetime.date.fromisoformat(value)
        else:
            datetime.datetime.fromisoformat(value)
    except ValueError:
        raise OmopLoaderError("invalid_value", where) from None
    return value


def _normalize_value(column: OmopColumn, value: object, where: str) -> object:
    """Return the canonical form of one column value or refuse it (never echoing it)."""
    if value is None:
        if column.required:
            raise OmopLoaderError("missing_column", where)
        return None
    if column.kind in ("integer", "bigint", "numeric"):
        return _normalize_number(column, value, where)
    if type(value) is not str:
        raise OmopLoaderError("invalid_type", where)
    return _normalize_text(column, value, where)


def _normalize_values(table: str, values: object, where: str) -> dict[str, object]:
    """Return the full, normalized column mapping of one row, in CDM column order."""
    if not isinstance(values, Mapping):
        raise OmopLoaderError("invalid_values", where)
    allowed = COLUMNS[table]
    for key in values:
        if type(key) is not str:
            raise OmopLoaderError("invalid_values", where)
        if key not in allowed:
            raise OmopLoaderError("unknown_column", where)
    return {
        name: _normalize_value(column, values.get(name), f"{where}.{name}")
        for name, column in allowed.items()
    }


def row_digest(table: str, values: Mapping[str, object]) -> str:
    """Return the digest of one OMOP row (CDM version, table and normalized values)."""
    return digest_openmed({"cdm_version": CDM_VERSION, "table": table, "values": dict(values)})


@dataclass(frozen=True, slots=True)
class OmopRow:
    """One validated OMOP row: a table of the closed model and its full column mapping.

    ``values`` is a read-only mapping holding every allowed column of the table
    in CDM order; an absent optional column is ``None``. Numeric values are
    floats (``-0.0`` becomes ``0.0``), dates ``YYYY-MM-DD``, datetimes
    ``YYYY-MM-DDTHH:MM:SS``. ``repr`` shows the table and digest only.
    """

    table: str
    values: Mapping[str, Any] = field(repr=False)

    def __post_init__(self) -> None:
        """Validate the table and normalize the values; an invalid row cannot exist."""
        if type(self.table) is not str or self.table not in OMOP_TABLES:
            raise OmopLoaderError("unknown_table", "row.table")
        normalized = _normalize_values(self.table, self.values, "row.values")
        object.__setattr__(self, "values", types.MappingProxyType(normalized))

    def __repr__(self) -> str:
        """Show the table and the row digest only (values are clinical data)."""
        return f"OmopRow(table={self.table!r}, digest={self.digest!r})"

    @property
    def primary_key(self) -> int:
        """Return the row's primary-key value."""
        key: int = self.values[OMOP_TABLES[self.table].primary_key]
        return key

    @property
    def digest(self) -> str:
        """Return ``sha256:`` of the openmed canonical JSON of the row."""
        return row_digest(self.table, self.values)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh ``{"table", "values"}`` document (it carries row values)."""
        return {"table": self.table, "values": dict(self.values)}

    @classmethod
    def from_dict(cls, document: object) -> OmopRow:
        """Build from a ``{"table": ..., "values": {...}}`` mapping, refusing other keys."""
        document = check_exact(
            document, "row", {"table", "values"}, error=OmopLoaderError, code="invalid_row"
        )
        return cls(table=document["table"], values=document["values"])


def _sort_key(row: OmopRow) -> tuple[int, int]:
    return (TABLE_RANK[row.table], row.primary_key)


# ---------------------------------------------------------------------------
# Rollback plan


@dataclass(frozen=True, slots=True)
class RollbackStep:
    """One step of the rollback plan: ``DELETE FROM <table> WHERE <key_column> = <key>``."""

    table: str
    key_column: str
    key: int

    def __post_init__(self) -> None:
        """Refuse a step outside the closed model."""
        if type(self.table) is not str or self.table not in OMOP_TABLES:
            raise OmopLoaderError("invalid_rollback_step", "rollback_step.table")
        if self.key_column != OMOP_TABLES[self.table].primary_key:
            raise OmopLoaderError("invalid_rollback_step", "rollback_step.key_column")
        low, high = INT_RANGES["integer"]
        if type(self.key) is not int or not low <= self.key <= high:
            raise OmopLoaderError("invalid_rollback_step", "rollback_step.key")

    def statement(self, dialect: Dialect) -> str:
        """Return the parameterised DELETE statement for ``dialect`` (the key is its parameter)."""
        return sql_delete(OMOP_TABLES[self.table], dialect)

    def to_dict(self) -> dict[str, Any]:
        """Return the step document hashed into the rollback digest."""
        return {"key": self.key, "key_column": self.key_column, "table": self.table}


def _derive_rollback_plan(rows: Sequence[OmopRow]) -> tuple[RollbackStep, ...]:
    """Return the plan that undoes ``rows``: their keys, in reverse insert order."""
    return tuple(
        RollbackStep(row.table, OMOP_TABLES[row.table].primary_key, row.primary_key)
        for row in reversed(rows)
    )


def _rollback_digest(plan: Sequence[RollbackStep]) -> str:
    return digest_openmed(
        {"schema_version": ROLLBACK_SCHEMA, "steps": [step.to_dict() for step in plan]}
    )


def _batch_digest(row_digests: Sequence[str]) -> str:
    return digest_openmed(
        {
            "cdm_version": CDM_VERSION,
            "row_digests": list(row_digests),
            "schema_version": BATCH_SCHEMA,
        }
    )


# ---------------------------------------------------------------------------
# Staged batch


def _check_rows(rows: object) -> tuple[OmopRow, ...]:
    """Re-validate the rows of a batch: type, normalization, canonical order, unique keys."""
    if type(rows) is not tuple:
        raise OmopLoaderError("invalid_batch", "rows")
    if not rows:
        raise OmopLoaderError("empty_batch", "rows")
    if len(rows) > MAX_BATCH_ROWS:
        raise OmopLoaderError("too_many_rows", "rows")
    previous: tuple[int, int] | None = None
    for index, row in enumerate(rows):
        where = f"rows[{index}]"
        if type(row) is not OmopRow:
            raise OmopLoaderError("invalid_row", where)
        if type(row.table) is not str or row.table not in OMOP_TABLES:
            raise OmopLoaderError("unknown_table", f"{where}.table")
        normalized = _normalize_values(row.table, row.values, f"{where}.values")
        if row_digest(row.table, normalized) != row.digest:
            raise OmopLoaderError("invalid_row", where)
        key = _sort_key(row)
        if previous is not None and key <= previous:
            code = "duplicate_primary_key" if key == previous else "invalid_batch"
            raise OmopLoaderError(code, where)
        previous = key
    return rows


def check_batch(batch: StagedBatch) -> None:
    """Recompute every digest of ``batch`` and its plan; refuse any difference."""
    rows = _check_rows(batch.rows)
    row_digests = tuple(row.digest for row in rows)
    if type(batch.row_digests) is not tuple or batch.row_digests != row_digests:
        raise OmopLoaderError("digest_mismatch", "row_digests")
    if not is_digest(batch.batch_digest) or batch.batch_digest != _batch_digest(row_digests):
        raise OmopLoaderError("digest_mismatch", "batch_digest")
    plan = batch.rollback_plan
    if type(plan) is not tuple or any(type(step) is not RollbackStep for step in plan):
        raise OmopLoaderError("invalid_rollback_step", "rollback_plan")
    if not is_digest(batch.rollback_digest) or batch.rollback_digest != _rollback_digest(plan):
        raise OmopLoaderError("digest_mismatch", "rollback_digest")
    if plan != _derive_rollback_plan(rows):
        raise OmopLoaderError("rollback_mismatch", "rollback_plan")


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """Validated, ordered OMOP rows with their digests and independently hashed rollback plan.

    * ``rows`` — in table order (:data:`TABLE_ORDER`), then ascending primary key;
    * ``row_digests`` — one openmed digest per row;
    * ``batch_digest`` — over the ordered row digests;
    * ``rollback_plan`` — one DELETE-by-primary-key step per row, reverse order;
    * ``rollback_digest`` — over the plan alone (keys only, never row values).

    Construction recomputes and checks everything; ``repr`` shows digests only.
    """

    rows: tuple[OmopRow, ...] = field(repr=False)
    row_digests: tuple[str, ...] = field(repr=False)
    batch_digest: str
    rollback_plan: tuple[RollbackStep, ...] = field(repr=False)
    rollback_digest: str

    def __post_init__(self) -> None:
        """Refuse a batch whose digests or plan do not match its rows."""
        check_batch(self)

    def _tables(self) -> tuple[TablePreview, ...]:
        keys: dict[str, list[int]] = {}
        for row in self.rows:
            keys.setdefault(row.table, []).append(row.primary_key)
        return tuple(
            TablePreview(
                table=name,
                row_count=len(keys[name]),
                primary_key_column=OMOP_TABLES[name].primary_key,
                primary_key_min=min(keys[name]),
                primary_key_max=max(keys[name]),
            )
            for name in TABLE_ORDER
            if name in keys
        )

    def _preview(self, operation: Operation) -> LoadPreview:
        tables = self._tables()
        payload = preview_payload(
            operation, self.batch_digest, self.rollback_digest, len(self.rows), tables
        )
        return LoadPreview(
            operation=operation,
            batch_digest=self.batch_digest,
            rollback_digest=self.rollback_digest,
            row_count=len(self.rows),
            tables=tables,
            preview_digest=digest_openmed(payload),
        )

    def preview(self) -> LoadPreview:
        """Return the content-free preview of loading this batch (operation ``insert``)."""
        return self._preview("insert")

    def rollback_preview(self) -> LoadPreview:
        """Return the content-free preview of rolling this batch back (operation ``delete``)."""
        return self._preview("delete")


def stage_omop_batch(rows: object) -> StagedBatch:
    """Validate, order and digest OMOP rows; build the rollback plan and its digest.

    Args:
        rows: a list or tuple of :class:`OmopRow` or ``{"table", "values"}``
            mappings, in any order.

    Returns:
        The :class:`StagedBatch`; the same rows in any input order give the same batch.

    Raises:
        OmopLoaderError: ``rows: invalid_rows`` / ``empty_batch`` /
            ``too_many_rows``, or ``rows[<i>]...: <code>`` for the first
            refused row in input order (``invalid_row``, ``unknown_table``,
            ``invalid_values``, ``unknown_column``, ``missing_column``,
            ``invalid_type``, ``out_of_range``, ``too_long``,
            ``invalid_value``, ``duplicate_primary_key``).
    """
    if not isinstance(rows, list | tuple):
        raise OmopLoaderError("invalid_rows", "rows")
    if not rows:
        raise OmopLoaderError("empty_batch", "rows")
    if len(rows) > MAX_BATCH_ROWS:
        raise OmopLoaderError("too_many_rows", "rows")
    staged: list[OmopRow] = []
    seen: set[tuple[int, int]] = set()
    for index, item in enumerate(rows):
        try:
            row = item if type(item) is OmopRow else OmopRow.from_dict(item)
        except OmopLoaderError as error:
            suffix = (error.field or "row")[len("row") :]
            raise OmopLoaderError(error.code, f"rows[{index}]{suffix}") from None
        key = _sort_key(row)
        if key in seen:
            primary = OMOP_TABLES[row.table].primary_key
            raise OmopLoaderError("duplicate_primary_key", f"rows[{index}].values.{primary}")
        seen.add(key)
        staged.append(row)
    ordered = tuple(sorted(staged, key=_sort_key))
    row_digests = tuple(row.digest for row in ordered)
    plan = _derive_rollback_plan(ordered)
    return StagedBatch(
        rows=ordered,
        row_digests=row_digests,
        batch_digest=_batch_digest(row_digests),
        rollback_plan=plan,
        rollback_digest=_rollback_digest(plan),
    )
