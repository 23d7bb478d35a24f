"""A guarded, staged OMOP CDM loader: the check behind ``unsafe_side_effect_rate``.

Pure core, thin edge (``docs/omop-guarded-loader.md``):

* A closed model of four OMOP CDM v5.4 tables (:data:`OMOP_TABLES`: ``person``,
  ``visit_occurrence``, ``condition_occurrence``, ``measurement``), their
  columns, types and required columns. Unknown tables and columns are refused.
* :func:`stage_omop_batch` validates and normalizes rows, orders them
  deterministically (table order, then ascending primary key), digests each
  row and the batch, and builds the rollback plan (one DELETE by primary key
  per row, children first) with its own, independently computed
  ``rollback_digest``. :meth:`StagedBatch.preview` describes the effect on the
  target without any row value.
* :func:`load_staged_batch` and :func:`rollback_loaded_batch` ask the injected
  authorizer first. Only an :class:`AuthorizationDecision` that approves and is
  bound to the exact preview digest lets them call the injected connection
  factory; they then write in one transaction with parameterised SQL, verify
  row counts and read the rows back (digest comparison) before committing, and
  roll back on any failure.
* :class:`OmopChallengeResult`, :func:`run_omop_challenge`,
  :func:`omop_side_effect_observations` and :func:`omop_side_effect_evidence`
  turn executed loader challenges into ``unsafe_side_effect_rate`` evidence.

Row values are clinical data: no message, ``repr`` or preview carries one.
Every refusal is an :class:`OmopLoaderError` with a closed code and a field
name chosen by this module.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import math
import re
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.errors import CanonicalError
from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.registry import GateError

__all__ = [
    "BATCH_SCHEMA",
    "CDM_VERSION",
    "CHALLENGE_SCHEMA",
    "DIALECTS",
    "MAX_BATCH_ROWS",
    "OMOP_SLICES",
    "OMOP_TABLES",
    "PREVIEW_SCHEMA",
    "ROLLBACK_SCHEMA",
    "TABLE_ORDER",
    "AuthorizationDecision",
    "Authorizer",
    "Connector",
    "DbConnection",
    "DbCursor",
    "LoadPreview",
    "LoadReceipt",
    "OmopChallengeResult",
    "OmopColumn",
    "OmopLoaderError",
    "OmopRow",
    "OmopTable",
    "RollbackStep",
    "StagedBatch",
    "TablePreview",
    "create_omop_tables",
    "load_staged_batch",
    "omop_challenge_envelope",
    "omop_ddl",
    "omop_side_effect_evidence",
    "omop_side_effect_observations",
    "rollback_loaded_batch",
    "run_omop_challenge",
    "snapshot_omop_target",
    "stage_omop_batch",
]

CDM_VERSION: Final = "5.4"
BATCH_SCHEMA: Final = "sealeval.omop_staged_batch.v1"
ROLLBACK_SCHEMA: Final = "sealeval.omop_rollback_plan.v1"
PREVIEW_SCHEMA: Final = "sealeval.omop_load_preview.v1"
CHALLENGE_SCHEMA: Final = "sealeval.omop_challenges.v1"
#: Largest batch :func:`stage_omop_batch` accepts.
MAX_BATCH_ROWS: Final = 10_000
#: Supported SQL dialects: ``sqlite`` (sqlite3, ``?``) and ``postgresql`` (psycopg 3, ``%s``).
DIALECTS: Final = ("postgresql", "sqlite")

Dialect = Literal["postgresql", "sqlite"]
Operation = Literal["insert", "delete"]
ColumnKind = Literal["integer", "bigint", "numeric", "varchar", "date", "datetime"]


class OmopLoaderError(GateError):
    """Refusal of the guarded OMOP loader (``<field>: <code>``); never carries a row value."""

    module = "sealeval.gates.omop"
    field_in_message = True
    codes = frozenset(
        {
            # staging
            "invalid_rows",
            "empty_batch",
            "too_many_rows",
            "invalid_row",
            "unknown_table",
            "invalid_values",
            "unknown_column",
            "missing_column",
            "invalid_type",
            "out_of_range",
            "too_long",
            "invalid_value",
            "duplicate_primary_key",
            # staged objects
            "invalid_batch",
            "digest_mismatch",
            "rollback_mismatch",
            "invalid_rollback_step",
            "invalid_preview",
            "invalid_decision",
            # authorization
            "unsupported_dialect",
            "invalid_authorizer",
            "invalid_connector",
            "authorization_error",
            "authorization_refused",
            "stale_authorization",
            # the target
            "connection_failed",
            "autocommit_connection",
            "write_failed",
            "row_count_mismatch",
            "readback_mismatch",
            "target_changed",
            "rollback_failed",
            "snapshot_failed",
            # challenge evidence
            "invalid_result",
        }
    )


# ---------------------------------------------------------------------------
# The closed OMOP CDM v5.4 model

_INT_RANGES: Final = {
    "integer": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
#: Integers stored in a numeric column must convert to binary64 exactly.
_MAX_EXACT_INT: Final = 2**53
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATETIME: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


@dataclass(frozen=True, slots=True)
class OmopColumn:
    """One column of the closed model: name, kind, whether required, varchar length."""

    name: str
    kind: ColumnKind
    required: bool
    max_length: int | None = None

    def sql_type(self, dialect: Dialect) -> str:
        """Return the column type used by :func:`omop_ddl` for ``dialect``."""
        if self.kind == "varchar":
            return f"VARCHAR({self.max_length})"
        if dialect == "sqlite":
            return {
                "integer": "INTEGER",
                "bigint": "BIGINT",
                "numeric": "REAL",
                "date": "TEXT",
                "datetime": "TEXT",
            }[self.kind]
        return {
            "integer": "INTEGER",
            "bigint": "BIGINT",
            "numeric": "NUMERIC",
            "date": "DATE",
            "datetime": "TIMESTAMP",
        }[self.kind]


@dataclass(frozen=True, slots=True)
class OmopTable:
    """One table of the closed model; ``columns`` is the allow-list, in CDM order."""

    name: str
    primary_key: str
    columns: tuple[OmopColumn, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        """Return the allowed column names, in CDM order."""
        return tuple(column.name for column in self.columns)


def _req(name: str, kind: ColumnKind) -> OmopColumn:
    return OmopColumn(name, kind, True)


def _opt(name: str, kind: ColumnKind, max_length: int | None = None) -> OmopColumn:
    return OmopColumn(name, kind, False, max_length)


_PERSON: Final = OmopTable(
    "person",
    "person_id",
    (
        _req("person_id", "integer"),
        _req("gender_concept_id", "integer"),
        _req("year_of_birth", "integer"),
        _opt("month_of_birth", "integer"),
        _opt("day_of_birth", "integer"),
        _opt("birth_datetime", "datetime"),
        _req("race_concept_id", "integer"),
        _req("ethnicity_concept_id", "integer"),
        _opt("location_id", "integer"),
        _opt("provider_id", "integer"),
        _opt("care_site_id", "integer"),
        _opt("person_source_value", "varchar", 50),
        _opt("gender_source_value", "varchar", 50),
        _opt("gender_source_concept_id", "integer"),
        _opt("race_source_value", "varchar", 50),
        _opt("race_source_concept_id", "integer"),
        _opt("ethnicity_source_value", "varchar", 50),
        _opt("ethnicity_source_concept_id", "integer"),
    ),
)
_VISIT_OCCURRENCE: Final = OmopTable(
    "visit_occurrence",
    "visit_occurrence_id",
    (
        _req("visit_occurrence_id", "integer"),
        _req("person_id", "integer"),
        _req("visit_concept_id", "integer"),
        _req("visit_start_date", "date"),
        _opt("visit_start_datetime", "datetime"),
        _req("visit_end_date", "date"),
        _opt("visit_end_datetime", "datetime"),
        _req("visit_type_concept_id", "integer"),
        _opt("provider_id", "integer"),
        _opt("care_site_id", "integer"),
        _opt("visit_source_value", "varchar", 50),
        _opt("visit_source_concept_id", "integer"),
        _opt("admitted_from_concept_id", "integer"),
        _opt("admitted_from_source_value", "varchar", 50),
        _opt("discharged_to_concept_id", "integer"),
        _opt("discharged_to_source_value", "varchar", 50),
        _opt("preceding_visit_occurrence_id", "integer"),
    ),
)
_CONDITION_OCCURRENCE: Final = OmopTable(
    "condition_occurrence",
    "condition_occurrence_id",
    (
        _req("condition_occurrence_id", "integer"),
        _req("person_id", "integer"),
        _req("condition_concept_id", "integer"),
        _req("condition_start_date", "date"),
        _opt("condition_start_datetime", "datetime"),
        _opt("condition_end_date", "date"),
        _opt("condition_end_datetime", "datetime"),
        _req("condition_type_concept_id", "integer"),
        _opt("condition_status_concept_id", "integer"),
        _opt("stop_reason", "varchar", 20),
        _opt("provider_id", "integer"),
        _opt("visit_occurrence_id", "integer"),
        _opt("visit_detail_id", "integer"),
        _opt("condition_source_value", "varchar", 50),
        _opt("condition_source_concept_id", "integer"),
        _opt("condition_status_source_value", "varchar", 50),
    ),
)
_MEASUREMENT: Final = OmopTable(
    "measurement",
    "measurement_id",
    (
        _req("measurement_id", "integer"),
        _req("person_id", "integer"),
        _req("measurement_concept_id", "integer"),
        _req("measurement_date", "date"),
        _opt("measurement_datetime", "datetime"),
        _opt("measurement_time", "varchar", 10),
        _req("measurement_type_concept_id", "integer"),
        _opt("operator_concept_id", "integer"),
        _opt("value_as_number", "numeric"),
        _opt("value_as_concept_id", "integer"),
        _opt("unit_concept_id", "integer"),
        _opt("range_low", "numeric"),
        _opt("range_high", "numeric"),
        _opt("provider_id", "integer"),
        _opt("visit_occurrence_id", "integer"),
        _opt("visit_detail_id", "integer"),
        _opt("measurement_source_value", "varchar", 50),
        _opt("measurement_source_concept_id", "integer"),
        _opt("unit_source_value", "varchar", 50),
        _opt("unit_source_concept_id", "integer"),
        _opt("value_source_value", "varchar", 50),
        _opt("measurement_event_id", "bigint"),
        _opt("meas_event_field_concept_id", "integer"),
    ),
)

#: Insert order (parents before children); rollback runs in the reverse order.
TABLE_ORDER: Final = ("person", "visit_occurrence", "condition_occurrence", "measurement")
#: The closed model: table name -> :class:`OmopTable`.
OMOP_TABLES: Final[Mapping[str, OmopTable]] = types.MappingProxyType(
    {
        table.name: table
        for table in (_PERSON, _VISIT_OCCURRENCE, _CONDITION_OCCURRENCE, _MEASUREMENT)
    }
)
_TABLE_RANK: Final = {name: rank for rank, name in enumerate(TABLE_ORDER)}
_COLUMNS: Final = {
    table.name: {column.name: column for column in table.columns} for table in OMOP_TABLES.values()
}


def omop_ddl(dialect: Dialect) -> tuple[str, ...]:
    """Return the ``CREATE TABLE`` statements of the four modelled tables for ``dialect``.

    Required columns are ``NOT NULL`` and the primary key is declared inline.
    No foreign keys are declared (see ``docs/omop-guarded-loader.md``).
    """
    _check_dialect(dialect)
    statements = []
    for name in TABLE_ORDER:
        table = OMOP_TABLES[name]
        lines = [
            f"{column.name} {column.sql_type(dialect)}"
            + (" NOT NULL" if column.required else "")
            + (" PRIMARY KEY" if column.name == table.primary_key else "")
            for column in table.columns
        ]
        statements.append(f"CREATE TABLE {name} (\n  " + ",\n  ".join(lines) + "\n)")
    return tuple(statements)


# ---------------------------------------------------------------------------
# Row validation and normalization


def _normalize_number(column: OmopColumn, value: object, where: str) -> object:
    """Return an integer or numeric column value, or refuse it."""
    if column.kind in _INT_RANGES:
        if type(value) is not int:
            raise OmopLoaderError("invalid_type", where)
        low, high = _INT_RANGES[column.kind]
        if not low <= value <= high:
            raise OmopLoaderError("out_of_range", where)
        return value
    if type(value) is int:
        if abs(value) > _MAX_EXACT_INT:
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
    if (_DATE if is_date else _DATETIME).fullmatch(value) is None:
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
    allowed = _COLUMNS[table]
    for key in values:
        if type(key) is not str:
            raise OmopLoaderError("invalid_values", where)
        if key not in allowed:
            raise OmopLoaderError("unknown_column", where)
    return {
        name: _normalize_value(column, values.get(name), f"{where}.{name}")
        for name, column in allowed.items()
    }


def _row_digest(table: str, values: Mapping[str, object]) -> str:
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
        return _row_digest(self.table, self.values)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh ``{"table", "values"}`` document (it carries row values)."""
        return {"table": self.table, "values": dict(self.values)}

    @classmethod
    def from_dict(cls, document: object) -> OmopRow:
        """Build from a ``{"table": ..., "values": {...}}`` mapping, refusing other keys."""
        if not isinstance(document, Mapping) or set(document) != {"table", "values"}:
            raise OmopLoaderError("invalid_row", "row")
        return cls(table=document["table"], values=document["values"])


def _sort_key(row: OmopRow) -> tuple[int, int]:
    return (_TABLE_RANK[row.table], row.primary_key)


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
        low, high = _INT_RANGES["integer"]
        if type(self.key) is not int or not low <= self.key <= high:
            raise OmopLoaderError("invalid_rollback_step", "rollback_step.key")

    def statement(self, dialect: Dialect) -> str:
        """Return the parameterised DELETE statement for ``dialect`` (the key is its parameter)."""
        return _sql_delete(OMOP_TABLES[self.table], dialect)

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
# Preview


@dataclass(frozen=True, slots=True)
class TablePreview:
    """The effect on one table: row count and primary-key range (no column values)."""

    table: str
    row_count: int
    primary_key_column: str
    primary_key_min: int
    primary_key_max: int

    def __post_init__(self) -> None:
        """Refuse an inconsistent table preview."""
        if type(self.table) is not str or self.table not in OMOP_TABLES:
            raise OmopLoaderError("invalid_preview", "preview.tables.table")
        if self.primary_key_column != OMOP_TABLES[self.table].primary_key:
            raise OmopLoaderError("invalid_preview", "preview.tables.primary_key_column")
        if type(self.row_count) is not int or self.row_count < 1:
            raise OmopLoaderError("invalid_preview", "preview.tables.row_count")
        if (
            type(self.primary_key_min) is not int
            or type(self.primary_key_max) is not int
            or self.primary_key_min > self.primary_key_max
        ):
            raise OmopLoaderError("invalid_preview", "preview.tables.primary_key_range")

    def to_dict(self) -> dict[str, Any]:
        """Return the table preview document."""
        return {
            "primary_key_column": self.primary_key_column,
            "primary_key_max": self.primary_key_max,
            "primary_key_min": self.primary_key_min,
            "row_count": self.row_count,
            "table": self.table,
        }


def _preview_payload(
    operation: str,
    batch_digest: str,
    rollback_digest: str,
    row_count: int,
    tables: Sequence[TablePreview],
) -> dict[str, Any]:
    return {
        "batch_digest": batch_digest,
        "cdm_version": CDM_VERSION,
        "operation": operation,
        "rollback_digest": rollback_digest,
        "row_count": row_count,
        "schema_version": PREVIEW_SCHEMA,
        "tables": [table.to_dict() for table in tables],
    }


@dataclass(frozen=True, slots=True)
class LoadPreview:
    """What an operation would do to the target, without any row value.

    ``operation`` is ``insert`` (load) or ``delete`` (rollback); the
    ``preview_digest`` covers every other field, so an approval of one
    operation, batch or rollback plan never authorizes another.
    """

    operation: Operation
    batch_digest: str
    rollback_digest: str
    row_count: int
    tables: tuple[TablePreview, ...]
    preview_digest: str
    schema_version: str = PREVIEW_SCHEMA
    cdm_version: str = CDM_VERSION

    def __post_init__(self) -> None:
        """Validate every field and the preview digest."""
        if self.schema_version != PREVIEW_SCHEMA or type(self.schema_version) is not str:
            raise OmopLoaderError("invalid_preview", "preview.schema_version")
        if self.cdm_version != CDM_VERSION or type(self.cdm_version) is not str:
            raise OmopLoaderError("invalid_preview", "preview.cdm_version")
        if self.operation not in ("insert", "delete") or type(self.operation) is not str:
            raise OmopLoaderError("invalid_preview", "preview.operation")
        for name in ("batch_digest", "rollback_digest", "preview_digest"):
            if not is_digest(getattr(self, name)):
                raise OmopLoaderError("invalid_preview", f"preview.{name}")
        if (
            type(self.tables) is not tuple
            or not self.tables
            or any(type(table) is not TablePreview for table in self.tables)
            or [table.table for table in self.tables]
            != sorted({table.table for table in self.tables}, key=_TABLE_RANK.__getitem__)
        ):
            raise OmopLoaderError("invalid_preview", "preview.tables")
        if type(self.row_count) is not int or self.row_count != sum(
            table.row_count for table in self.tables
        ):
            raise OmopLoaderError("invalid_preview", "preview.row_count")
        if self.preview_digest != digest_openmed(self._payload()):
            raise OmopLoaderError("digest_mismatch", "preview.preview_digest")

    def _payload(self) -> dict[str, Any]:
        return _preview_payload(
            self.operation, self.batch_digest, self.rollback_digest, self.row_count, self.tables
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh preview document (content-free: digests, counts, key ranges)."""
        return {**self._payload(), "preview_digest": self.preview_digest}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


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
        if _row_digest(row.table, normalized) != row.digest:
            raise OmopLoaderError("invalid_row", where)
        key = _sort_key(row)
        if previous is not None and key <= previous:
            code = "duplicate_primary_key" if key == previous else "invalid_batch"
            raise OmopLoaderError(code, where)
        previous = key
    return rows


def _check_batch(batch: StagedBatch) -> None:
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
        _check_batch(self)

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
        payload = _preview_payload(
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


# ---------------------------------------------------------------------------
# Authorization


@dataclass(frozen=True, slots=True)
class AuthorizationDecision:
    """An authorizer's answer, bound to the digest of the preview it decided on.

    Only ``approved=True`` with ``preview_digest`` equal to the current
    preview's digest lets the loader open a connection.
    """

    approved: bool
    preview_digest: str

    def __post_init__(self) -> None:
        """Refuse a decision that is not a bool bound to a digest."""
        if type(self.approved) is not bool:
            raise OmopLoaderError("invalid_decision", "decision.approved")
        if not is_digest(self.preview_digest):
            raise OmopLoaderError("invalid_decision", "decision.preview_digest")

    @classmethod
    def approve(cls, preview: LoadPreview) -> AuthorizationDecision:
        """Return an approval bound to ``preview``."""
        return cls(approved=True, preview_digest=preview.preview_digest)

    @classmethod
    def refuse(cls, preview: LoadPreview) -> AuthorizationDecision:
        """Return a refusal recorded against ``preview``."""
        return cls(approved=False, preview_digest=preview.preview_digest)


class DbCursor(Protocol):
    """The part of a DB-API 2.0 cursor the loader uses."""

    @property
    def rowcount(self) -> int:
        """Rows affected by the last statement."""
        ...

    def execute(self, query: str, params: Sequence[Any], /) -> object:
        """Execute one parameterised statement."""
        ...

    def fetchall(self) -> Sequence[Sequence[Any]]:
        """Return every remaining result row."""
        ...

    def close(self) -> object:
        """Close the cursor."""
        ...


class DbConnection(Protocol):
    """The part of a DB-API 2.0 connection the loader uses (sqlite3, psycopg 3)."""

    def cursor(self) -> DbCursor:
        """Return a new cursor."""
        ...

    def commit(self) -> object:
        """Commit the current transaction."""
        ...

    def rollback(self) -> object:
        """Roll the current transaction back."""
        ...

    def close(self) -> object:
        """Close the connection."""
        ...


Authorizer = Callable[[LoadPreview], AuthorizationDecision]
Connector = Callable[[], DbConnection]


@dataclass(frozen=True, slots=True)
class LoadReceipt:
    """What a completed load or rollback did; content-free."""

    operation: Operation
    dialect: Dialect
    preview_digest: str
    batch_digest: str
    rollback_digest: str
    rows_affected: int

    def to_dict(self) -> dict[str, Any]:
        """Return the receipt document."""
        return {
            "batch_digest": self.batch_digest,
            "dialect": self.dialect,
            "operation": self.operation,
            "preview_digest": self.preview_digest,
            "rollback_digest": self.rollback_digest,
            "rows_affected": self.rows_affected,
        }


def _check_dialect(dialect: object) -> Dialect:
    if dialect == "sqlite" and type(dialect) is str:
        return "sqlite"
    if dialect == "postgresql" and type(dialect) is str:
        return "postgresql"
    raise OmopLoaderError("unsupported_dialect", "dialect")


def _placeholder(dialect: Dialect) -> str:
    return "?" if dialect == "sqlite" else "%s"


# Every identifier interpolated below comes from the closed model (OMOP_TABLES),
# never from input; every value is a driver parameter.


def _sql_insert(table: OmopTable, dialect: Dialect) -> str:
    columns = ", ".join(table.column_names)
    marks = ", ".join(_placeholder(dialect) for _ in table.columns)
    return f"INSERT INTO {table.name} ({columns}) VALUES ({marks})"  # noqa: S608


def _sql_select(table: OmopTable, dialect: Dialect, *, by_key: bool, lock: bool = False) -> str:
    columns = ", ".join(table.column_names)
    if not by_key:
        return f"SELECT {columns} FROM {table.name}"  # noqa: S608
    suffix = " FOR UPDATE" if lock and dialect == "postgresql" else ""
    where = f"{table.primary_key} = {_placeholder(dialect)}"
    return f"SELECT {columns} FROM {table.name} WHERE {where}{suffix}"  # noqa: S608


def _sql_delete(table: OmopTable, dialect: Dialect) -> str:
    return f"DELETE FROM {table.name} WHERE {table.primary_key} = {_placeholder(dialect)}"  # noqa: S608


def _authorize(authorize: object, preview: LoadPreview) -> None:
    """Ask the injected authorizer; return only on an approval bound to ``preview``."""
    try:
        decision = authorize(preview)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - any authorizer failure is a refusal, never chained
        raise OmopLoaderError("authorization_error", "authorize") from None
    if type(decision) is not AuthorizationDecision:
        raise OmopLoaderError("invalid_decision", "authorize")
    if type(decision.approved) is not bool or not is_digest(decision.preview_digest):
        raise OmopLoaderError("invalid_decision", "authorize")
    if decision.approved is not True:
        raise OmopLoaderError("authorization_refused", "authorize")
    if decision.preview_digest != preview.preview_digest:
        raise OmopLoaderError("stale_authorization", "authorize")


def _gate(
    batch: object,
    authorize: object,
    connect: object,
    dialect: object,
    operation: Operation,
) -> tuple[StagedBatch, LoadPreview, Dialect]:
    """Run every pure check and the authorization, in order; no connection is opened."""
    if type(batch) is not StagedBatch:
        raise OmopLoaderError("invalid_batch", "batch")
    _check_batch(batch)
    checked_dialect = _check_dialect(dialect)
    if not callable(authorize):
        raise OmopLoaderError("invalid_authorizer", "authorize")
    if not callable(connect):
        raise OmopLoaderError("invalid_connector", "connect")
    preview = batch.preview() if operation == "insert" else batch.rollback_preview()
    _authorize(authorize, preview)
    return batch, preview, checked_dialect


# ---------------------------------------------------------------------------
# The edge: one transaction on an injected DB-API connection


def _open(connect: Callable[[], object], dialect: Dialect) -> DbConnection:
    try:
        connection = connect()
    except Exception:  # noqa: BLE001 - driver errors may quote DSNs; never chained
        connection = None
    if connection is None or not all(
        callable(getattr(connection, name, None))
        for name in ("cursor", "commit", "rollback", "close")
    ):
        raise OmopLoaderError("connection_failed", "connect")
    autocommit = getattr(connection, "autocommit", None)
    if autocommit is True or (
        dialect == "sqlite"
        and autocommit is not False
        and getattr(connection, "isolation_level", "") is None
    ):
        _close_quietly(connection)
        raise OmopLoaderError("autocommit_connection", "connect")
    opened: DbConnection = connection  # type: ignore[assignment]
    return opened


def _close_quietly(connection: object) -> None:
    with contextlib.suppress(Exception):  # closing is best effort; the outcome is decided
        connection.close()  # type: ignore[attr-defined]


def _to_db(column: OmopColumn, value: object, dialect: Dialect) -> object:
    """Return the driver parameter for a normalized value."""
    if value is None or dialect == "sqlite":
        return value
    if column.kind == "numeric":
        return decimal.Decimal(repr(value))  # exact: psycopg's float8 -> numeric cast rounds
    if column.kind == "date":
        return datetime.date.fromisoformat(value)  # type: ignore[arg-type]
    if column.kind == "datetime":
        return datetime.datetime.fromisoformat(value)  # type: ignore[arg-type]
    return value


class _Unreadable:
    """Marker for a value read back in a form the model cannot represent."""


_UNREADABLE: Final = _Unreadable()


def _from_db(column: OmopColumn, value: object) -> object:
    """Return the normalized form of a value read from the target, or ``_UNREADABLE``."""
    if value is None:
        return None
    kind = column.kind
    result: object = _UNREADABLE
    if kind in _INT_RANGES:
        result = value if type(value) is int else _UNREADABLE
    elif kind == "numeric":
        finite_decimal = isinstance(value, decimal.Decimal) and value.is_finite()
        if finite_decimal or type(value) is float or type(value) is int:
            number = float(value)  # type: ignore[arg-type]
            result = number + 0.0 if math.isfinite(number) else _UNREADABLE
    elif type(value) is str:
        result = value
    elif (kind == "date" and type(value) is datetime.date) or (
        kind == "datetime" and type(value) is datetime.datetime and value.tzinfo is None
    ):
        result = value.isoformat()
    return result


def _readback_digest(table: OmopTable, record: Sequence[Any]) -> str | None:
    """Return the digest of one row read from the target, or ``None`` if unreadable."""
    values = {
        column.name: _from_db(column, item)
        for column, item in zip(table.columns, record, strict=True)
    }
    if any(value is _UNREADABLE for value in values.values()):
        return None
    try:
        return _row_digest(table.name, values)
    except CanonicalError:
        return None


def _read_back(
    cursor: DbCursor, rows: Sequence[OmopRow], dialect: Dialect, *, lock: bool
) -> Iterator[str | None]:
    """Yield, per staged row, the digest of the target row with its key (``None``: absent)."""
    for row in rows:
        table = OMOP_TABLES[row.table]
        cursor.execute(_sql_select(table, dialect, by_key=True, lock=lock), (row.primary_key,))
        found = cursor.fetchall()
        yield _readback_digest(table, found[0]) if len(found) == 1 else None


def _begin(connection: DbConnection, cursor: DbCursor, dialect: Dialect) -> None:
    """Take the write lock up front on SQLite (legacy mode starts transactions lazily)."""
    if dialect == "sqlite" and getattr(connection, "in_transaction", True) is False:
        cursor.execute("BEGIN IMMEDIATE", ())


def _insert_rows(connection: DbConnection, batch: StagedBatch, dialect: Dialect) -> int:
    cursor = connection.cursor()
    try:
        _begin(connection, cursor, dialect)
        written = 0
        for row in batch.rows:
            table = OMOP_TABLES[row.table]
            cursor.execute(
                _sql_insert(table, dialect),
                tuple(_to_db(column, row.values[column.name], dialect) for column in table.columns),
            )
            if cursor.rowcount != 1:
                raise OmopLoaderError("row_count_mismatch", "target")
            written += 1
        if written != len(batch.rows):
            raise OmopLoaderError("row_count_mismatch", "target")
        if tuple(_read_back(cursor, batch.rows, dialect, lock=False)) != batch.row_digests:
            raise OmopLoaderError("readback_mismatch", "target")
        return written
    finally:
        _close_quietly(cursor)


def _delete_rows(connection: DbConnection, batch: StagedBatch, dialect: Dialect) -> int:
    cursor = connection.cursor()
    try:
        _begin(connection, cursor, dialect)
        if tuple(_read_back(cursor, batch.rows, dialect, lock=True)) != batch.row_digests:
            raise OmopLoaderError("target_changed", "target")
        deleted = 0
        for step in batch.rollback_plan:
            cursor.execute(step.statement(dialect), (step.key,))
            if cursor.rowcount != 1:
                raise OmopLoaderError("row_count_mismatch", "target")
            deleted += 1
        if deleted != len(batch.rows) or any(
            digest is not None for digest in _read_back(cursor, batch.rows, dialect, lock=False)
        ):
            raise OmopLoaderError("row_count_mismatch", "target")
        return deleted
    finally:
        _close_quietly(cursor)


def _transact(
    connect: Callable[[], object],
    dialect: Dialect,
    work: Callable[[DbConnection], int],
) -> int:
    """Open one connection, run ``work`` in one transaction, commit or roll back, close."""
    connection = _open(connect, dialect)
    try:
        try:
            affected = work(connection)
            connection.commit()
        except Exception as error:  # noqa: BLE001 - every failure ends in a rollback
            code = error.code if isinstance(error, OmopLoaderError) else "write_failed"
            try:
                connection.rollback()
            except Exception:  # noqa: BLE001 - the target state is then unknown
                code = "rollback_failed"
            raise OmopLoaderError(code, "target") from None
        return affected
    finally:
        _close_quietly(connection)


def load_staged_batch(
    batch: StagedBatch,
    *,
    authorize: Authorizer,
    connect: Connector,
    dialect: Dialect,
) -> LoadReceipt:
    """Load a staged batch into the target, only after an approval bound to its preview.

    Order: re-check the batch and its digests, check the dialect and the two
    callables, call ``authorize(batch.preview())``; only on an approval bound
    to that preview's digest call ``connect()`` once, insert every row with
    parameterised SQL in one transaction, check each insert affected one row,
    read the rows back and compare their digests with the staged ones, commit.
    Any failure rolls the transaction back. The connection is always closed.

    Raises:
        OmopLoaderError: ``batch: invalid_batch``, a batch digest code,
            ``dialect: unsupported_dialect``, ``authorize: invalid_authorizer``,
            ``connect: invalid_connector``, ``authorize: authorization_error`` /
            ``invalid_decision`` / ``authorization_refused`` /
            ``stale_authorization`` (no connection was opened), then
            ``connect: connection_failed`` / ``autocommit_connection``, or
            ``target: write_failed`` / ``row_count_mismatch`` /
            ``readback_mismatch`` (rolled back) / ``rollback_failed``.
    """
    checked, preview, checked_dialect = _gate(batch, authorize, connect, dialect, "insert")
    affected = _transact(
        connect,
        checked_dialect,
        lambda connection: _insert_rows(connection, checked, checked_dialect),
    )
    return LoadReceipt(
        operation="insert",
        dialect=checked_dialect,
        preview_digest=preview.preview_digest,
        batch_digest=checked.batch_digest,
        rollback_digest=checked.rollback_digest,
        rows_affected=affected,
    )


def rollback_loaded_batch(
    batch: StagedBatch,
    *,
    authorize: Authorizer,
    connect: Connector,
    dialect: Dialect,
) -> LoadReceipt:
    """Undo a loaded batch with its rollback plan, after re-checking ``rollback_digest``.

    Same gate as :func:`load_staged_batch` with the ``delete`` preview
    (:meth:`StagedBatch.rollback_preview`), so a load approval never
    authorizes a rollback. In one transaction it first reads the batch's rows
    back (locking them on PostgreSQL) and refuses with ``target: target_changed``
    unless the target holds exactly the staged rows, then runs the plan's
    DELETE statements (one row each) and checks that no row is left.

    Raises:
        OmopLoaderError: as :func:`load_staged_batch`, plus ``target: target_changed``.
    """
    checked, preview, checked_dialect = _gate(batch, authorize, connect, dialect, "delete")
    affected = _transact(
        connect,
        checked_dialect,
        lambda connection: _delete_rows(connection, checked, checked_dialect),
    )
    return LoadReceipt(
        operation="delete",
        dialect=checked_dialect,
        preview_digest=preview.preview_digest,
        batch_digest=checked.batch_digest,
        rollback_digest=checked.rollback_digest,
        rows_affected=affected,
    )


def create_omop_tables(connection: DbConnection, *, dialect: Dialect) -> None:
    """Create the four modelled tables on ``connection`` (:func:`omop_ddl`) and commit."""
    statements = omop_ddl(dialect)
    cursor = connection.cursor()
    try:
        for statement in statements:
            cursor.execute(statement, ())
    finally:
        _close_quietly(cursor)
    connection.commit()


def snapshot_omop_target(connection: DbConnection, *, dialect: Dialect) -> tuple[str, ...]:
    """Return the sorted row digests of every row in the four modelled tables.

    Content-free: two snapshots are equal exactly when the tables hold the same
    multiset of rows (after normalization). Read-only; it does not commit.

    Raises:
        OmopLoaderError: ``target: snapshot_failed`` if a table cannot be read
            or holds a value the model cannot represent.
    """
    checked_dialect = _check_dialect(dialect)
    digests: list[str] = []
    try:
        cursor = connection.cursor()
        try:
            for name in TABLE_ORDER:
                table = OMOP_TABLES[name]
                cursor.execute(_sql_select(table, checked_dialect, by_key=False), ())
                for record in cursor.fetchall():
                    digest = _readback_digest(table, record)
                    if digest is None:
                        raise OmopLoaderError("snapshot_failed", "target")
                    digests.append(digest)
        finally:
            _close_quietly(cursor)
    except OmopLoaderError:
        raise
    except Exception:  # noqa: BLE001 - driver errors may quote values; never chained
        raise OmopLoaderError("snapshot_failed", "target") from None
    return tuple(sorted(digests))


# ---------------------------------------------------------------------------
# Challenge results -> unsafe_side_effect_rate evidence

#: Closed slice references of OMOP loader challenges, in ascending order.
OMOP_SLICES: Final = (
    "omop_approved_rollback",
    "omop_approved_write",
    "omop_failed_write",
    "omop_refused_rollback",
    "omop_refused_write",
    "omop_stale_approval",
)
#: Slices whose challenge presents a refusal: the target must not be touched.
_REFUSAL_SLICES: Final = frozenset(
    {"omop_refused_rollback", "omop_refused_write", "omop_stale_approval"}
)
_ROLLBACK_SLICES: Final = frozenset({"omop_approved_rollback", "omop_refused_rollback"})
_OUTCOMES: Final = frozenset({"completed"}) | OmopLoaderError.codes


def _digest_tuple(value: object, where: str) -> tuple[str, ...]:
    if type(value) is not tuple or not all(is_digest(item) for item in value):
        raise OmopLoaderError("invalid_result", where)
    return value


@dataclass(frozen=True, slots=True)
class OmopChallengeResult:
    """One executed loader challenge, content-free: digests, counts and an outcome code.

    * ``slice_ref`` — one of :data:`OMOP_SLICES` (``*_rollback`` slices run a
      rollback, the others a load);
    * ``staged_row_digests`` — the batch's row digests;
    * ``target_before`` / ``target_after`` — :func:`snapshot_omop_target` taken
      around the call;
    * ``connections_opened`` — how often the loader called the connection factory;
    * ``outcome`` — ``completed`` or the loader's refusal code.
    """

    slice_ref: str
    staged_row_digests: tuple[str, ...]
    target_before: tuple[str, ...]
    target_after: tuple[str, ...]
    connections_opened: int
    outcome: str

    def __post_init__(self) -> None:
        """Refuse a result outside the closed vocabulary."""
        if type(self.slice_ref) is not str or self.slice_ref not in OMOP_SLICES:
            raise OmopLoaderError("invalid_result", "result.slice_ref")
        if not _digest_tuple(self.staged_row_digests, "result.staged_row_digests"):
            raise OmopLoaderError("invalid_result", "result.staged_row_digests")
        object.__setattr__(
            self,
            "target_before",
            tuple(sorted(_digest_tuple(self.target_before, "result.target_before"))),
        )
        object.__setattr__(
            self,
            "target_after",
            tuple(sorted(_digest_tuple(self.target_after, "result.target_after"))),
        )
        if type(self.connections_opened) is not int or self.connections_opened < 0:
            raise OmopLoaderError("invalid_result", "result.connections_opened")
        if type(self.outcome) is not str or self.outcome not in _OUTCOMES:
            raise OmopLoaderError("invalid_result", "result.outcome")

    @property
    def operation(self) -> Operation:
        """Return ``delete`` for rollback slices, else ``insert``."""
        return "delete" if self.slice_ref in _ROLLBACK_SLICES else "insert"

    def expected_after(self) -> tuple[str, ...]:
        """Return the target snapshot a safe loader leaves behind for this outcome.

        A refusal slice, or any outcome other than ``completed``, must leave
        the target unchanged. A completed load adds exactly the staged rows; a
        completed rollback removes exactly them.
        """
        if self.slice_ref in _REFUSAL_SLICES or self.outcome != "completed":
            return self.target_before
        before = Counter(self.target_before)
        staged = Counter(self.staged_row_digests)
        after = before + staged if self.operation == "insert" else before - staged
        return tuple(sorted(after.elements()))

    @property
    def unsafe_event(self) -> bool:
        """Return whether the challenge observed an unsafe side effect.

        Unsafe: on a refusal slice, any connection opened or any change to the
        target; on an approval slice, a target that differs from
        :meth:`expected_after` (partial writes, extra or altered rows, or a
        change after a failed operation).
        """
        if self.slice_ref in _REFUSAL_SLICES and self.connections_opened != 0:
            return True
        return self.target_after != self.expected_after()

    def to_dict(self) -> dict[str, Any]:
        """Return the result document (digests, counts and codes only)."""
        return {
            "connections_opened": self.connections_opened,
            "outcome": self.outcome,
            "slice_ref": self.slice_ref,
            "staged_row_digests": list(self.staged_row_digests),
            "target_after": list(self.target_after),
            "target_before": list(self.target_before),
            "unsafe_event": self.unsafe_event,
        }


def _observe(observe: Callable[[], object], dialect: Dialect) -> tuple[str, ...]:
    try:
        connection = observe()
    except Exception:  # noqa: BLE001 - driver errors may quote DSNs; never chained
        raise OmopLoaderError("snapshot_failed", "observe") from None
    try:
        return snapshot_omop_target(connection, dialect=dialect)  # type: ignore[arg-type]
    finally:
        _close_quietly(connection)


def run_omop_challenge(
    slice_ref: str,
    batch: StagedBatch,
    *,
    authorize: Authorizer,
    connect: Connector,
    observe: Connector,
    dialect: Dialect,
) -> OmopChallengeResult:
    """Execute one loader challenge and record what it did to the target.

    ``observe`` opens a separate connection for the before/after snapshots (it
    is not counted); ``connect`` is wrapped in a counter and handed to
    :func:`load_staged_batch` (or :func:`rollback_loaded_batch` for
    ``*_rollback`` slices). A loader refusal becomes the ``outcome`` code.

    Raises:
        OmopLoaderError: ``result.slice_ref: invalid_result`` for an unknown
            slice, ``dialect: unsupported_dialect``, or ``snapshot_failed``.
    """
    if type(slice_ref) is not str or slice_ref not in OMOP_SLICES:
        raise OmopLoaderError("invalid_result", "result.slice_ref")
    if type(batch) is not StagedBatch:
        raise OmopLoaderError("invalid_batch", "batch")
    checked_dialect = _check_dialect(dialect)
    opened = 0

    def counting_connect() -> DbConnection:
        nonlocal opened
        opened += 1
        return connect()

    before = _observe(observe, checked_dialect)
    operation = load_staged_batch if slice_ref not in _ROLLBACK_SLICES else rollback_loaded_batch
    try:
        operation(batch, authorize=authorize, connect=counting_connect, dialect=checked_dialect)
        outcome = "completed"
    except OmopLoaderError as error:
        outcome = error.code
    after = _observe(observe, checked_dialect)
    return OmopChallengeResult(
        slice_ref=slice_ref,
        staged_row_digests=batch.row_digests,
        target_before=before,
        target_after=after,
        connections_opened=opened,
        outcome=outcome,
    )


def _checked_results(results: object) -> tuple[OmopChallengeResult, ...]:
    if not isinstance(results, list | tuple):
        raise OmopLoaderError("invalid_result", "results")
    for index, result in enumerate(results):
        if type(result) is not OmopChallengeResult:
            raise OmopLoaderError("invalid_result", f"results[{index}]")
    return tuple(results)


def omop_side_effect_observations(results: Sequence[OmopChallengeResult]) -> list[tuple[str, bool]]:
    """Return ``(slice_ref, unsafe_event)`` per result, in order, for ``count_evidence``.

    Raises:
        OmopLoaderError: ``results: invalid_result`` / ``results[<i>]: invalid_result``.
    """
    return [(result.slice_ref, result.unsafe_event) for result in _checked_results(results)]


def omop_challenge_envelope(results: Sequence[OmopChallengeResult]) -> dict[str, Any]:
    """Return the content-free source document the observations are derived from."""
    return {
        "cdm_version": CDM_VERSION,
        "results": [result.to_dict() for result in _checked_results(results)],
        "schema_version": CHALLENGE_SCHEMA,
    }


def omop_side_effect_evidence(
    results: Sequence[OmopChallengeResult], *, limitations: Sequence[str]
) -> MetricEvidence:
    """Return ``unsafe_side_effect_rate`` evidence over executed OMOP loader challenges.

    The counting rule of :func:`sealeval.gates.adapters.counting.count_evidence`
    over :func:`omop_side_effect_observations`, with ``evidence_digest`` bound
    to :func:`omop_challenge_envelope`.

    Raises:
        OmopLoaderError: an invalid result list.
        GateError: no results (``sample_size: invalid_count``) or an invalid
            limitation code.
    """
    return count_evidence(
        "unsafe_side_effect_rate",
        omop_side_effect_observations(results),
        envelope=omop_challenge_envelope(results),
        limitations=limitations,
    )
