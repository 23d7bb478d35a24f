"""The SQL dialects of the loader (PostgreSQL, SQLite): statements and value conversion.

Every identifier interpolated into a statement comes from the closed model
(:data:`~sealeval.gates.omop.model.OMOP_TABLES`), never from input; every value
is a driver parameter, converted to and from each dialect's representation here.
"""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Final

from sealeval.gates.omop.model import (
    INT_RANGES,
    Dialect,
    OmopColumn,
    OmopTable,
)

__all__: list[str] = []


def _placeholder(dialect: Dialect) -> str:
    return "?" if dialect == "sqlite" else "%s"


# Every identifier interpolated below comes from the closed model (OMOP_TABLES),
# never from input; every value is a driver parameter.


def sql_insert(table: OmopTable, dialect: Dialect) -> str:
    """Return the parameterised ``INSERT`` of every column of ``table``."""
    columns = ", ".join(table.column_names)
    marks = ", ".join(_placeholder(dialect) for _ in table.columns)
    return f"INSERT INTO {table.name} ({columns}) VALUES ({marks})"  # noqa: S608


def sql_select(table: OmopTable, dialect: Dialect, *, by_key: bool, lock: bool = False) -> str:
    """Return the parameterised ``SELECT`` of ``table`` (by primary key; locking on PostgreSQL)."""
    columns = ", ".join(table.column_names)
    if not by_key:
        return f"SELECT {columns} FROM {table.name}"  # noqa: S608
    suffix = " FOR UPDATE" if lock and dialect == "postgresql" else ""
    where = f"{table.primary_key} = {_placeholder(dialect)}"
    return f"SELECT {columns} FROM {table.name} WHERE {where}{suffix}"  # noqa: S608


def sql_delete(table: OmopTable, dialect: Dialect) -> str:
    """Return the parameterised ``DELETE`` of one row of ``table`` by primary key."""
    return f"DELETE FROM {table.name} WHERE {table.primary_key} = {_placeholder(dialect)}"  # noqa: S608


def to_db(column: OmopColumn, value: object, dialect: Dialect) -> object:
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


UNREADABLE: Final = _Unreadable()


def from_db(column: OmopColumn, value: object) -> object:
    """Return the normalized form of a value read from the target, or ``UNREADABLE``."""
    if value is None:
        return None
    kind = column.kind
    result: object = UNREADABLE
    if kind in INT_RANGES:
        result = value if type(value) is int else UNREADABLE
    elif kind == "numeric":
        finite_decimal = isinstance(value, decimal.Decimal) and value.is_finite()
        if finite_decimal or type(value) is float or type(value) is int:
            number = float(value)  # type: ignore[arg-type]
            result = number + 0.0 if math.isfinite(number) else UNREADABLE
    elif type(value) is str:
        result = value
    elif (kind == "date" and type(value) is datetime.date) or (
        kind == "datetime" and type(value) is datetime.datetime and value.tzinfo is None
    ):
        result = value.isoformat()
    return result
