"""Load previews: what a load or rollback would do to the target, without any row value.

A :class:`LoadPreview` (``sealeval.omop_load_preview.v1``) lists per-table row
counts and digests; an authorizer approves exactly one preview digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.gates.omop.model import (
    CDM_VERSION,
    OMOP_TABLES,
    PREVIEW_SCHEMA,
    TABLE_RANK,
    OmopLoaderError,
    Operation,
)

__all__ = ["LoadPreview", "TablePreview"]

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


def preview_payload(
    operation: str,
    batch_digest: str,
    rollback_digest: str,
    row_count: int,
    tables: Sequence[TablePreview],
) -> dict[str, Any]:
    """Return the preview document whose canonical digest is ``preview_digest``."""
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
            != sorted({table.table for table in self.tables}, key=TABLE_RANK.__getitem__)
        ):
            raise OmopLoaderError("invalid_preview", "preview.tables")
        if type(self.row_count) is not int or self.row_count != sum(
            table.row_count for table in self.tables
        ):
            raise OmopLoaderError("invalid_preview", "preview.row_count")
        if self.preview_digest != digest_openmed(self._payload()):
            raise OmopLoaderError("digest_mismatch", "preview.preview_digest")

    def _payload(self) -> dict[str, Any]:
        return preview_payload(
            self.operation, self.batch_digest, self.rollback_digest, self.row_count, self.tables
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh preview document (content-free: digests, counts, key ranges)."""
        return {**self._payload(), "preview_digest": self.preview_digest}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())
