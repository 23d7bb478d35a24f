"""Fail-closed evaluation sessions and their governance pieces.

Modules: ``cases`` (comparison cases and the evaluation case digest),
``holdout`` (Merkle holdout commitments), ``forensics`` (overlap forensics),
``adjudication`` (a package: blinded adjudication packets, the sealed
mapping, audits), ``budget`` (a package: feedback budget policy, the pure core
with the one ``record_official_attempt``, the in-memory ledger), ``record``
(the content-free session record), ``store`` / ``postgres_store`` (the
durable session store interface, SQLite and PostgreSQL stores),
``transaction`` (the one home of store transactions), ``durable_ledger``
(the feedback ledger in the store's database), ``store_factory`` (a store
from one location string), ``config`` (the session configuration document)
and ``session`` (the fail-closed ``EvaluationSession`` state machine).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - the lazy exports below, for type checkers
    from sealeval.session.budget import (
        FeedbackBudgetDecision,
        FeedbackBudgetError,
        FeedbackBudgetPolicy,
    )
    from sealeval.session.config import (
        SessionConfig,
        SessionConfigError,
        open_session,
        read_session_config,
        session_clock,
    )
    from sealeval.session.record import (
        EvaluationSessionError,
        SessionRecord,
    )
    from sealeval.session.session import (
        EvaluationSession,
        SessionFeedback,
    )

__all__ = [
    "EvaluationSession",
    "EvaluationSessionError",
    "FeedbackBudgetDecision",
    "FeedbackBudgetError",
    "FeedbackBudgetPolicy",
    "SessionConfig",
    "SessionConfigError",
    "SessionFeedback",
    "SessionRecord",
    "open_session",
    "read_session_config",
    "session_clock",
]

#: The face's names, imported from their home modules on first use.
_LAZY: dict[str, str] = {
    "EvaluationSession": "sealeval.session.session",
    "SessionFeedback": "sealeval.session.session",
    "EvaluationSessionError": "sealeval.session.record",
    "SessionRecord": "sealeval.session.record",
    "SessionConfig": "sealeval.session.config",
    "SessionConfigError": "sealeval.session.config",
    "open_session": "sealeval.session.config",
    "read_session_config": "sealeval.session.config",
    "session_clock": "sealeval.session.config",
    "FeedbackBudgetDecision": "sealeval.session.budget",
    "FeedbackBudgetError": "sealeval.session.budget",
    "FeedbackBudgetPolicy": "sealeval.session.budget",
}


def __getattr__(name: str) -> Any:
    """Import a face name from its home module on first use."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(name)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
