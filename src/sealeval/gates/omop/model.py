"""The closed OMOP CDM v5.4 model of the guarded loader, its schemas and its error.

Four tables (:data:`OMOP_TABLES`: ``person``, ``visit_occurrence``,
``condition_occurrence``, ``measurement``), their columns, types and required
columns; unknown tables and columns are refused. :func:`omop_ddl` renders the
model's DDL for a supported dialect. Every refusal of the loader is an
:class:`OmopLoaderError` with a closed code and a field name chosen here.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from sealeval.gates.registry import GateError

__all__ = [
    "BATCH_SCHEMA",
    "CDM_VERSION",
    "CHALLENGE_SCHEMA",
    "DIALECTS",
    "MAX_BATCH_ROWS",
    "OMOP_TABLES",
    "PREVIEW_SCHEMA",
    "ROLLBACK_SCHEMA",
    "TABLE_ORDER",
    "ColumnKind",
    "Dialect",
    "OmopColumn",
    "OmopLoaderError",
    "OmopTable",
    "Operation",
    "omop_ddl",
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

INT_RANGES: Final = {
    "integer": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1),
}
#: Integers stored in a numeric column must convert to binary64 exactly.
MAX_EXACT_INT: Final = 2**53
DATE_PATTERN: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DATETIME_PATTERN: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}")


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
TABLE_RANK: Final = {name: rank for rank, name in enumerate(TABLE_ORDER)}
COLUMNS: Final = {
    table.name: {column.name: column for column in table.columns} for table in OMOP_TABLES.values()
}


def check_dialect(dialect: object) -> Dialect:
    """Return the closed dialect (``sqlite``, ``postgresql``) or refuse ``unsupported_dialect``."""
    if dialect == "sqlite" and type(dialect) is str:
        return "sqlite"
    if dialect == "postgresql" and type(dialect) is str:
        return "postgresql"
    raise OmopLoaderError("unsupported_dialect", "dialect")


def omop_ddl(dialect: Dialect) -> tuple[str, ...]:
    """Return the ``CREATE TABLE`` statements of the four modelled tables for ``dialect``.

    Required columns are ``NOT NULL`` and the primary key is declared inline.
    No foreign keys are declared (see ``docs/omop-guarded-loader.md``).
    """
    check_dialect(dialect)
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
