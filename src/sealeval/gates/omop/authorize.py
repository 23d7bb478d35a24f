"""Authorization before any connection: decisions, the DB-API protocols, receipts.

Only an :class:`AuthorizationDecision` that approves and is bound to the exact
preview digest lets the loader call the injected connection factory;
``gate_operation`` runs every pure check and the authorization, in order, before one is
opened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sealeval.canonical import is_digest
from sealeval.gates.omop.model import (
    Dialect,
    OmopLoaderError,
    Operation,
    check_dialect,
)
from sealeval.gates.omop.preview import (
    LoadPreview,
)
from sealeval.gates.omop.stage import (
    StagedBatch,
    check_batch,
)

__all__ = [
    "AuthorizationDecision",
    "Authorizer",
    "Connector",
    "DbConnection",
    "DbCursor",
    "LoadReceipt",
]

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


def gate_operation(
    batch: object,
    authorize: object,
    connect: object,
    dialect: object,
    operation: Operation,
) -> tuple[StagedBatch, LoadPreview, Dialect]:
    """Run every pure check and the authorization, in order; no connection is opened."""
    if type(batch) is not StagedBatch:
        raise OmopLoaderError("invalid_batch", "batch")
    check_batch(batch)
    checked_dialect = check_dialect(dialect)
    if not callable(authorize):
        raise OmopLoaderError("invalid_authorizer", "authorize")
    if not callable(connect):
        raise OmopLoaderError("invalid_connector", "connect")
    preview = batch.preview() if operation == "insert" else batch.rollback_preview()
    _authorize(authorize, preview)
    return batch, preview, checked_dialect
