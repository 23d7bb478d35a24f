"""The feedback-budget vocabulary: wire schemas, feedback levels, limits, the error, value checks.

:class:`FeedbackBudgetError` (message ``<field>: <code>``), the value checks
every budget document uses, and :func:`coarse_band`.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from sealeval import _validate
from sealeval._validate import check_closed
from sealeval.canonical import decode
from sealeval.errors import CanonicalError, SessionError

__all__ = [
    "APPROVAL_REASON",
    "APPROVAL_SCHEMA",
    "DECISION_SCHEMA",
    "FEEDBACK_LEVELS",
    "LEDGER_USAGE_SCHEMA",
    "MAX_COUNT",
    "MAX_LIMIT",
    "POLICY_SCHEMA",
    "REASON_CODES",
    "SNAPSHOT_SCHEMA",
    "USAGE_SCHEMA",
    "FeedbackBudgetError",
    "coarse_band",
]

POLICY_SCHEMA: Final = "openmed.eval.feedback_budget_policy.v1"
DECISION_SCHEMA: Final = "openmed.eval.feedback_budget_decision.v1"
SNAPSHOT_SCHEMA: Final = "openmed.eval.feedback_budget_snapshot.v1"
APPROVAL_SCHEMA: Final = "openmed.eval.failure_approval.v1"
USAGE_SCHEMA: Final = "sealeval.feedback_budget_usage.v1"
LEDGER_USAGE_SCHEMA: Final = "sealeval.feedback_budget_ledger_usage.v1"
#: Feedback levels of a decision, most to least informative.
FEEDBACK_LEVELS: Final = ("detailed", "coarse", "none")
#: Reason codes of a decision: accepted, denied.
REASON_CODES: Final = ("attempt_recorded", "rerun_budget_exhausted")
APPROVAL_REASON: Final = "failure_approved"
#: Largest accepted ``detailed_feedback_limit`` / ``rerun_limit`` (sealeval bound).
MAX_LIMIT: Final = 2**31 - 1
#: Largest count accepted in any document (exactly representable in binary64).
MAX_COUNT: Final = 2**53 - 1

POLICY_KEYS: Final = frozenset(
    {
        "coarse_score_boundaries",
        "detailed_feedback_limit",
        "epoch_digest",
        "rerun_limit",
        "schema_version",
    }
)
USAGE_KEYS: Final = frozenset(
    {
        "approved_failures",
        "detailed_feedback_used",
        "infrastructure_failure_digests",
        "official_attempts",
        "schema_version",
        "scored_attempts",
    }
)
LEDGER_USAGE_KEYS: Final = frozenset({"entries", "schema_version"})
ENTRY_KEYS: Final = frozenset({"epoch_digest", "submission_digest", "usage"})


class FeedbackBudgetError(SessionError):
    """Refusal of the feedback budget policy, ledger or usage documents."""

    module = "sealeval.session.budget"
    field_in_message = True
    codes = frozenset(
        {
            # openmed wire codes
            "unsupported_version",
            "invalid_digest",
            "invalid",
            "invalid_sequence",
            "empty",
            "invalid_boundary",
            "not_strictly_increasing",
            "invalid_policy",
            "duplicate_epoch",
            "unknown",
            "require_exactly_one",
            "already_recorded",
            "not_recorded",
            "already_approved",
            "already_used",
            # sealeval additions (documents, persistence, consistency)
            "invalid_document",
            "unknown_field",
            "missing_field",
            "invalid_mapping",
            "duplicate_entry",
            "inconsistent",
            "policy_mismatch",
            "unknown_epoch",
        }
    )


# ---------------------------------------------------------------------------
# Value checks


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def materialize(value: object, field_name: str) -> tuple[Any, ...]:
    """Copy a sequence into a tuple; hostile sequences become ``invalid_sequence``."""
    if not _is_sequence(value):
        raise FeedbackBudgetError("invalid_sequence", field_name)
    try:
        return tuple(value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a raising __iter__ must not leak its message
        raise FeedbackBudgetError("invalid_sequence", field_name) from None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_float(value: int | float) -> float | None:
    """Return the exact float of a finite int/float, or ``None`` when impossible."""
    if isinstance(value, int):
        try:
            return float(int.__int__(value))
        except OverflowError:
            return None
    number = float.__float__(value)
    return number if math.isfinite(number) else None


def check_score(value: object) -> float:
    """Return the score as a float; refuse anything but a finite number in [0, 1]."""
    if not _is_number(value):
        raise FeedbackBudgetError("invalid", "score")
    number = _as_float(value)  # type: ignore[arg-type]
    if number is None or not 0.0 <= number <= 1.0:
        raise FeedbackBudgetError("invalid", "score")
    return number


def check_boundaries(value: object) -> tuple[float, ...]:
    """Return the coarse score boundaries: non-empty, each in ``(0, 1)``, strictly increasing."""
    items = materialize(value, "coarse_score_boundaries")
    if not items:
        raise FeedbackBudgetError("empty", "coarse_score_boundaries")
    floats: list[float] = []
    for item in items:
        number = _as_float(item) if _is_number(item) else None
        if number is None or not 0.0 < number < 1.0:
            raise FeedbackBudgetError("invalid_boundary", "coarse_score_boundaries")
        floats.append(number)
    if any(low >= high for low, high in itertools.pairwise(floats)):
        raise FeedbackBudgetError("not_strictly_increasing", "coarse_score_boundaries")
    return tuple(floats)


def check_limit(value: object, field_name: str) -> int:
    """Return an exact ``int`` limit in ``0..MAX_LIMIT``, or refuse ``invalid``."""
    if type(value) is not int or not 0 <= value <= MAX_LIMIT:
        raise FeedbackBudgetError("invalid", field_name)
    return value


def check_count(value: object, field_name: str) -> int:
    """Return an exact ``int`` count in ``0..MAX_COUNT``, or refuse ``invalid``."""
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise FeedbackBudgetError("invalid", field_name)
    return value


def check_schema(value: object, expected: str, field_name: str) -> None:
    """Refuse ``unsupported_version`` unless ``value`` is exactly ``expected``."""
    if type(value) is not str or value != expected:
        raise FeedbackBudgetError("unsupported_version", field_name)


def check_digest(value: object, field_name: str) -> str:
    """Return a ``sha256:`` digest, or refuse ``invalid_digest`` at ``field_name``."""
    return _validate.check_digest(value, field_name, error=FeedbackBudgetError)  # type: ignore[return-value]


def check_keys(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Refuse a non-mapping, unknown keys, then missing keys (alphabetical, named each)."""
    return check_closed(
        document,
        name,
        sorted(keys),
        error=FeedbackBudgetError,
        type_code="invalid_document",
        missing_prefix=f"{name}.",
    )


_T = TypeVar("_T")


def parse_json(data: bytes | str, name: str, build: Callable[[object], _T]) -> _T:
    """Strictly decode ``data`` (``invalid_document`` at ``name``) and build from it."""
    try:
        document = decode(data)
    except CanonicalError:
        raise FeedbackBudgetError("invalid_document", name) from None
    return build(document)


def coarse_band(boundaries: object, score: object) -> int:
    """Return the coarse band of ``score``: the number of boundaries ``<=`` it.

    A score equal to a boundary falls in the upper band (right bisection):
    with boundaries ``(0.5, 0.8)``, ``0.5 -> 1`` and ``0.8 -> 2``.

    Raises:
        FeedbackBudgetError: ``coarse_score_boundaries: <code>`` as for a
            policy, or ``score: invalid``.
    """
    return bisect.bisect_right(check_boundaries(boundaries), check_score(score))
