"""Loader challenges turned into ``unsafe_side_effect_rate`` evidence.

:class:`OmopChallengeResult`, :func:`run_omop_challenge`,
:func:`omop_side_effect_observations` and :func:`omop_side_effect_evidence`
turn executed loader challenges into release evidence.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import is_digest
from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.omop.authorize import (
    Authorizer,
    Connector,
    DbConnection,
)
from sealeval.gates.omop.load import (
    close_quietly,
    load_staged_batch,
    rollback_loaded_batch,
    snapshot_omop_target,
)
from sealeval.gates.omop.model import (
    CDM_VERSION,
    CHALLENGE_SCHEMA,
    Dialect,
    OmopLoaderError,
    Operation,
    check_dialect,
)
from sealeval.gates.omop.stage import (
    StagedBatch,
)

__all__ = [
    "OMOP_SLICES",
    "OmopChallengeResult",
    "omop_challenge_envelope",
    "omop_side_effect_evidence",
    "omop_side_effect_observations",
    "run_omop_challenge",
]

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
        close_quietly(connection)


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
    checked_dialect = check_dialect(dialect)
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
