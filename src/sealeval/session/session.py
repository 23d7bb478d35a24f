"""The fail-closed evaluation session: one ordered, durable, replayable pipeline.

An :class:`EvaluationSession` composes the sealed manifest, the holdout
commitment, overlap forensics, blinded adjudication and the feedback budget
(openmed 3.1.0, spec ``30-session.md``). The steps run in a fixed order::

    verify -> run_cases -> run_forensics -> build_adjudication -> release_feedback

and each completed step is persisted, with compare-and-swap, as a
content-free five-tuple ``[phase, digest, count, tick, band]`` in a
:class:`~sealeval.session.record.SessionRecord` held by a durable
:class:`~sealeval.session.store.SessionStore`. Providers (runner, scorer,
reviewer, component snapshot, clock) are injected callables; the state
machine itself is pure over them and over the store.

A new session object for an existing session key replays the completed
steps privately (providers are called again and must be deterministic) and
refuses to continue (``checkpoint_mismatch``) when any recomputed digest or
count differs from the stored one. Feedback is released at most once per
session: the store claims the release and locks the budget key *before* the
ledger is charged, so a crash in between loses that feedback instead of
ever delivering it twice.

Only :meth:`EvaluationSession.release_feedback` (and :meth:`EvaluationSession.run`)
returns scores, as a :class:`SessionFeedback` governed by the ledger's
decision. Packets, private mappings, outputs and scores are never persisted.
Every error is an :class:`EvaluationSessionError` whose message is the bare
code, raised fresh (no ``__cause__``, no ``__context__``) so that nothing a
provider raised can leak through a traceback.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn, Protocol, TypeVar, runtime_checkable

from sealeval._progress import Progress, notify
from sealeval.canonical import OpenmedItems, digest_openmed, digest_openmed_items, is_digest
from sealeval.manifest.sealed import SealedWorkflowManifest, verify_at_evaluation_start
from sealeval.session.adjudication import (
    MIN_KEY_BYTES,
    BlindedPacket,
    RandomizationKey,
    audit_mapping,
    render_blinded_packets,
)
from sealeval.session.budget import (
    FeedbackBudgetDecision,
    FeedbackBudgetPolicy,
    FeedbackBudgetSnapshot,
)
from sealeval.session.cases import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    evaluation_case_digest,
    is_text,
)
from sealeval.session.forensics import scan_overlap_forensics
from sealeval.session.holdout import (
    HoldoutCommitment,
    commit_holdout,
    verify_holdout_commitment,
)
from sealeval.session.record import (
    ERROR_CODES,
    MAX_VALUE,
    EvaluationSessionError,
    SessionRecord,
    SessionStep,
)
from sealeval.session.store import SessionStore

__all__ = [
    "ERROR_CODES",
    "PROVIDER_NAMES",
    "BudgetLedger",
    "EvaluationSession",
    "EvaluationSessionError",
    "SessionFeedback",
    "binding_digest",
    "budget_key",
    "budget_watermark",
]

#: The provider names whose digests a session binds.
PROVIDER_NAMES: Final = frozenset({"runner", "scorer", "review"})

#: ``runner(source evidence) -> output text``.
Runner = Callable[[tuple[SourceEvidence, ...]], object]
#: ``scorer(case, output) -> number in [0, 1]``.
Scorer = Callable[[ComparisonCase, str], object]
#: ``review(packets) -> None`` (local clinician review).
Reviewer = Callable[[tuple[BlindedPacket, ...]], object]

_T = TypeVar("_T")
_FAILED: Final = object()


@runtime_checkable
class BudgetLedger(Protocol):
    """The feedback-budget ledger a session charges (``FeedbackBudgetLedger`` fits)."""

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        """Return the policy of an epoch (the holdout commitment digest)."""
        ...

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        """Return the usage snapshot of a (epoch, submission) pair."""
        ...

    def record_official_attempt(
        self,
        epoch_digest: object,
        submission_digest: object,
        *,
        score: object = None,
        infrastructure_failure_digest: object = None,
    ) -> FeedbackBudgetDecision:
        """Record one official attempt and return its decision."""
        ...


# ---------------------------------------------------------------------------
# Errors


def _fail(code: str) -> NoReturn:
    raise EvaluationSessionError(code)


def _guarded(fallback: str, action: Callable[[], _T]) -> _T:
    """Run ``action``; re-raise its session error fresh, or ``fallback`` for anything else."""
    code: str
    try:
        return action()
    except EvaluationSessionError as error:
        code = error.code
    except Exception:  # noqa: BLE001 - provider and library exceptions may quote inputs
        code = fallback
    # Raised outside the except blocks: neither __cause__ nor __context__ is set.
    raise EvaluationSessionError(code) from None


def _call(fallback: str, provider: Callable[..., _T], *args: object) -> _T:
    """Call an injected provider; *any* exception it raises becomes ``fallback``.

    Even an :class:`EvaluationSessionError` raised by a provider is replaced:
    a provider must not be able to choose the session's error code.
    """
    try:
        result: _T | object = provider(*args)
    except Exception:  # noqa: BLE001 - the provider's exception is dropped unseen
        result = _FAILED
    if result is _FAILED:
        # Raised outside the except block: neither __cause__ nor __context__ is set.
        raise EvaluationSessionError(fallback) from None
    return result  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# Public digests


def budget_key(holdout_commitment_digest: str, manifest_digest: str) -> str:
    """Return the budget key: sha256 of canonical ``[commitment digest, manifest digest]``."""
    if not is_digest(holdout_commitment_digest) or not is_digest(manifest_digest):
        _fail("invalid_digest")
    return digest_openmed([holdout_commitment_digest, manifest_digest])


def budget_watermark(policy: FeedbackBudgetPolicy, snapshot: FeedbackBudgetSnapshot) -> str:
    """Return the watermark: sha256 of canonical ``{"policy": ..., "usage": <snapshot>}``."""
    if not isinstance(policy, FeedbackBudgetPolicy) or not isinstance(
        snapshot, FeedbackBudgetSnapshot
    ):
        _fail("invalid_configuration")
    return digest_openmed({"policy": policy.to_dict(), "usage": snapshot.to_dict()})


def _is_items(value: object) -> bool:
    return isinstance(value, list | tuple)


def _strings(value: object) -> tuple[str, ...]:
    if not _is_items(value) or not all(type(item) is str for item in value):  # type: ignore[attr-defined]
        _fail("invalid_configuration")
    return tuple(value)  # type: ignore[arg-type]


def _typed_items(value: object, kind: type[_T]) -> tuple[_T, ...]:
    if not _is_items(value) or not all(type(item) is kind for item in value):  # type: ignore[attr-defined]
        _fail("invalid_configuration")
    return tuple(value)  # type: ignore[arg-type]


def _string_map(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        _fail("invalid_configuration")
    copied = dict(value.items())
    if len(copied) != len(value) or not all(type(key) is str for key in copied):
        _fail("invalid_configuration")
    return copied


def _raw_key(value: object) -> bytes:
    """Return the raw randomization key bytes; sealeval requires at least 32."""
    if type(value) is not bytes or len(value) < MIN_KEY_BYTES:
        _fail("invalid_configuration")
    return value


@dataclass(frozen=True, slots=True, repr=False)
class _Binding:
    """The validated inputs of the binding digest (private: holds text and a key digest)."""

    manifest: SealedWorkflowManifest
    holdout: HoldoutCommitment
    holdout_manifests: dict[str, tuple[str, ...]]
    cases: tuple[ComparisonCase, ...]
    case_digests: tuple[str, ...]
    candidate_identity: str
    candidate_manifests: dict[str, str]
    provider_digests: dict[str, str]
    policy: FeedbackBudgetPolicy
    rubric: tuple[RubricCriterion, ...]
    conflict_of_interest: ConflictOfInterestMetadata
    key_digest: str
    public_items: tuple[str, ...]
    shadow_items: tuple[str, ...]
    canaries: tuple[str, ...]

    def digest(self) -> str:
        return digest_openmed(
            {
                "manifest": self.manifest.to_dict(),
                "holdout": self.holdout.to_dict(),
                "holdout_manifests": {
                    kind: list(items) for kind, items in self.holdout_manifests.items()
                },
                "cases": list(self.case_digests),
                "candidate_identity": self.candidate_identity,
                "candidate_manifests": dict(self.candidate_manifests),
                "providers": dict(self.provider_digests),
                "feedback_policy": self.policy.to_dict(),
                "rubric": [criterion.to_dict() for criterion in self.rubric],
                "conflict": self.conflict_of_interest.to_dict(),
                "key_digest": self.key_digest,
                "public": list(self.public_items),
                "shadow": list(self.shadow_items),
                "canaries": list(self.canaries),
            }
        )


def _checked_provider_digests(provider_digests: object) -> dict[str, str]:
    digests = _string_map(provider_digests)
    if set(digests) != PROVIDER_NAMES:
        _fail("invalid_configuration")
    return digests


def _checked_candidate_manifests(candidate_manifests: object) -> dict[str, str]:
    manifests = _string_map(candidate_manifests)
    if not manifests:
        _fail("invalid_configuration")
    return manifests


def _checked_manifest(manifest: object) -> SealedWorkflowManifest:
    if not isinstance(manifest, SealedWorkflowManifest):
        _fail("invalid_configuration")
    # A private copy: later tampering with the caller's object changes nothing.
    return SealedWorkflowManifest.from_dict(manifest.to_dict())


def _checked_holdout(holdout: object) -> HoldoutCommitment:
    if not isinstance(holdout, HoldoutCommitment):
        _fail("invalid_configuration")
    return HoldoutCommitment.from_dict(holdout.to_dict())


def _checked_cases(cases: object, identity: object) -> tuple[ComparisonCase, ...]:
    items = _typed_items(cases, ComparisonCase)
    if not items or type(identity) is not str:
        _fail("invalid_configuration")
    if any(identity not in case.candidate_outputs for case in items):
        _fail("invalid_configuration")
    if len({case.case_ref for case in items}) != len(items):
        _fail("invalid_configuration")
    return items


def _checked_binding(
    *,
    manifest: object,
    holdout: object,
    holdout_manifests: object,
    cases: object,
    candidate_identity: object,
    candidate_manifests: object,
    provider_digests: object,
    policy_for: Callable[[str], object],
    rubric: object,
    conflict_of_interest: object,
    randomization_key: object,
    public_items: object,
    shadow_items: object,
    canaries: object,
) -> tuple[_Binding, RandomizationKey]:
    """Apply construction steps 2-5 (and the remaining type checks) in the specified order."""
    providers = _checked_provider_digests(provider_digests)
    manifests = _checked_candidate_manifests(candidate_manifests)
    if not all(map(is_digest, providers.values())) or not all(map(is_digest, manifests.values())):
        _fail("invalid_digest")
    checked_manifest = _checked_manifest(manifest)
    checked_cases = _checked_cases(cases, candidate_identity)
    if manifests.get(candidate_identity) != checked_manifest.manifest_digest:  # type: ignore[call-overload]
        _fail("invalid_configuration")
    checked_holdout = _checked_holdout(holdout)
    policy = _call("invalid_configuration", policy_for, checked_holdout.commitment_digest)
    if not isinstance(policy, FeedbackBudgetPolicy):
        _fail("invalid_configuration")
    supplied = _string_map(holdout_manifests)
    raw_key = _raw_key(randomization_key)
    conflict = conflict_of_interest
    if type(conflict) is not ConflictOfInterestMetadata:
        _fail("invalid_configuration")
    binding = _Binding(
        manifest=checked_manifest,
        holdout=checked_holdout,
        holdout_manifests={kind: _strings(items) for kind, items in supplied.items()},
        cases=checked_cases,
        case_digests=tuple(evaluation_case_digest(case) for case in checked_cases),
        candidate_identity=candidate_identity,  # type: ignore[arg-type]
        candidate_manifests=manifests,
        provider_digests=providers,
        policy=FeedbackBudgetPolicy.from_dict(policy.to_dict()),
        rubric=_typed_items(rubric, RubricCriterion),
        conflict_of_interest=conflict,
        key_digest="sha256:" + hashlib.sha256(raw_key).hexdigest(),
        public_items=_strings(public_items),
        shadow_items=_strings(shadow_items),
        canaries=_strings(canaries),
    )
    return binding, RandomizationKey(raw_key)


def binding_digest(
    *,
    manifest: SealedWorkflowManifest,
    holdout: HoldoutCommitment,
    holdout_manifests: Mapping[str, Sequence[str]],
    cases: Sequence[ComparisonCase],
    candidate_identity: str,
    candidate_manifests: Mapping[str, str],
    provider_digests: Mapping[str, str],
    feedback_policy: FeedbackBudgetPolicy,
    rubric: Sequence[RubricCriterion],
    conflict_of_interest: ConflictOfInterestMetadata,
    randomization_key: bytes,
    public_items: Sequence[str],
    shadow_items: Sequence[str],
    canaries: Sequence[str],
) -> str:
    """Return the binding digest a session with these inputs is bound to.

    sha256 of the canonical JSON of ``{"manifest", "holdout",
    "holdout_manifests", "cases" (evaluation case digests), "candidate_identity",
    "candidate_manifests", "providers", "feedback_policy", "rubric", "conflict",
    "key_digest" (plain SHA-256 of the raw key bytes), "public", "shadow",
    "canaries"}``. The session key is not part of it. ``feedback_policy``
    must be the policy of the holdout commitment's epoch.

    Raises:
        EvaluationSessionError: as :class:`EvaluationSession` construction
            (``invalid_digest`` / ``invalid_configuration``).
    """

    def policy_for(epoch: str) -> object:
        if not isinstance(feedback_policy, FeedbackBudgetPolicy) or (
            feedback_policy.epoch_digest != epoch
        ):
            _fail("invalid_configuration")
        return feedback_policy

    def action() -> str:
        binding, _key = _checked_binding(
            manifest=manifest,
            holdout=holdout,
            holdout_manifests=holdout_manifests,
            cases=cases,
            candidate_identity=candidate_identity,
            candidate_manifests=candidate_manifests,
            provider_digests=provider_digests,
            policy_for=policy_for,
            rubric=rubric,
            conflict_of_interest=conflict_of_interest,
            randomization_key=randomization_key,
            public_items=public_items,
            shadow_items=shadow_items,
            canaries=canaries,
        )
        return binding.digest()

    return _guarded("invalid_configuration", action)


# ---------------------------------------------------------------------------
# Feedback


@dataclass(frozen=True, slots=True, repr=False)
class SessionFeedback:
    """What a released session returns: the only place scores leave a session.

    Attributes:
        session_digest: the ``session_digest`` of the final (terminal) record.
        decision: the feedback budget decision (``detailed_score`` or
            ``coarse_band`` as the budget allows).
        per_case_scores: every case's score as a float, in case order, only
            when the decision's feedback level is ``detailed``; else ``None``.
    """

    session_digest: str
    decision: FeedbackBudgetDecision
    per_case_scores: tuple[float, ...] | None

    def __repr__(self) -> str:
        """Show the feedback level only (no scores)."""
        return f"SessionFeedback(feedback_level={self.decision.feedback_level!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document ``{decision, per_case_scores, session_digest}``."""
        scores = self.per_case_scores
        return {
            "decision": self.decision.to_dict(),
            "per_case_scores": None if scores is None else list(scores),
            "session_digest": self.session_digest,
        }


# ---------------------------------------------------------------------------
# The session


def _checked_output(output: object) -> str:
    if not is_text(output):
        _fail("invalid_output")
    return output  # type: ignore[return-value]


def _checked_score(score: object) -> float:
    """Return the score as a float; refuse bools, non-numbers, non-finite or out of [0, 1]."""
    if not isinstance(score, int | float) or isinstance(score, bool):
        _fail("invalid_score")
    try:
        number = float(int.__int__(score)) if isinstance(score, int) else float.__float__(score)
    except OverflowError:
        number = math.nan
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        _fail("invalid_score")
    return number


class EvaluationSession:
    """A fail-closed, durable, replayable evaluation session.

    Construction (errors in this order): ``invalid_digest`` (session key);
    ``invalid_configuration`` (provider digest key set is not exactly
    ``runner``, ``scorer``, ``review``); ``invalid_digest`` (a provider or
    candidate-manifest digest); ``invalid_configuration`` (no cases, the
    candidate identity's manifest digest differs from the manifest's, the
    identity is missing from a case, repeated case refs, no ledger policy for
    the holdout commitment, or any other bad input: wrong types, a
    randomization key shorter than 32 bytes, a provider that is not
    callable); then the binding digest is computed and the stored record is
    loaded: a new session key gets an empty record (saved now), a record with
    another binding is ``checkpoint_mismatch``, one with at least five steps
    is ``feedback_already_claimed``. Store errors keep their codes.

    All arguments are keyword-only; see ``docs/sessions.md`` for each one.
    Public methods are serialized: a call made while another is running on
    the same object (another thread, or a provider calling back) is refused
    with ``invalid_order``.
    """

    __slots__ = (
        "_binding",
        "_binding_digest",
        "_budget_key",
        "_clock",
        "_component_snapshot",
        "_cursor",
        "_key",
        "_ledger",
        "_lock",
        "_outputs",
        "_progress",
        "_record",
        "_review",
        "_runner",
        "_scorer",
        "_scores",
        "_session_key",
        "_store",
    )

    _binding: _Binding
    _key: RandomizationKey
    _record: SessionRecord
    _outputs: tuple[str, ...] | None
    _scores: tuple[float, ...] | None

    def __init__(
        self,
        *,
        session_key: str,
        manifest: SealedWorkflowManifest,
        component_snapshot: Callable[[], object],
        holdout: HoldoutCommitment,
        holdout_manifests: Mapping[str, Sequence[str]],
        cases: Sequence[ComparisonCase],
        candidate_identity: str,
        candidate_manifests: Mapping[str, str],
        runner: Runner,
        scorer: Scorer,
        review: Reviewer,
        provider_digests: Mapping[str, str],
        rubric: Sequence[RubricCriterion],
        conflict_of_interest: ConflictOfInterestMetadata,
        randomization_key: bytes,
        public_items: Sequence[str],
        shadow_items: Sequence[str],
        canaries: Sequence[str],
        ledger: BudgetLedger,
        store: SessionStore,
        clock: Callable[[], object],
    ) -> None:
        """Validate every input, bind them, and load or create the stored record."""
        self._lock = threading.Lock()
        self._cursor = 0
        self._outputs = None
        self._scores = None
        self._progress: Progress | None = None

        def construct() -> None:
            if not is_digest(session_key):
                _fail("invalid_digest")
            self._session_key = session_key
            self._binding, self._key = _checked_binding(
                manifest=manifest,
                holdout=holdout,
                holdout_manifests=holdout_manifests,
                cases=cases,
                candidate_identity=candidate_identity,
                candidate_manifests=candidate_manifests,
                provider_digests=provider_digests,
                # Looked up lazily: a ledger without it fails at step 5, not before.
                policy_for=lambda epoch: ledger.policy_for(epoch),  # noqa: PLW0108
                rubric=rubric,
                conflict_of_interest=conflict_of_interest,
                randomization_key=randomization_key,
                public_items=public_items,
                shadow_items=shadow_items,
                canaries=canaries,
            )
            providers = (component_snapshot, runner, scorer, review, clock)
            if not all(map(callable, providers)) or not isinstance(ledger, BudgetLedger):
                _fail("invalid_configuration")
            if not isinstance(store, SessionStore):
                _fail("invalid_configuration")
            self._component_snapshot = component_snapshot
            self._runner = runner
            self._scorer = scorer
            self._review = review
            self._clock = clock
            self._ledger = ledger
            self._store = store
            self._binding_digest = self._binding.digest()
            self._budget_key = budget_key(
                self._binding.holdout.commitment_digest, self._binding.manifest.manifest_digest
            )
            self._record = self._load_or_create()

        _guarded("invalid_configuration", construct)

    def _load_or_create(self) -> SessionRecord:
        stored = self._store_call(self._store.load, self._session_key)
        if stored is None:
            created = SessionRecord(
                session_key=self._session_key, binding_digest=self._binding_digest
            )
            self._store_call(self._store.save, created, None)
            return created
        if type(stored) is not SessionRecord or stored.session_key != self._session_key:
            _fail("store_failed")
        if stored.binding_digest != self._binding_digest:
            _fail("checkpoint_mismatch")
        if len(stored.steps) >= 5:
            _fail("feedback_already_claimed")
        return stored

    # -- introspection (content-free) ----------------------------------------

    def __repr__(self) -> str:
        """Show progress only."""
        return f"EvaluationSession(steps={len(self._record.steps)}, cursor={self._cursor})"

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: a session holds the randomization key and clinical text."""
        raise TypeError("EvaluationSession cannot be pickled")

    @property
    def session_key(self) -> str:
        """The session key (a digest issued by the evaluator)."""
        return self._session_key

    @property
    def binding_digest(self) -> str:
        """The binding digest of this session's configuration."""
        return self._binding_digest

    @property
    def budget_key(self) -> str:
        """The budget key: sha256 of canonical ``[commitment digest, manifest digest]``."""
        return self._budget_key

    @property
    def record(self) -> SessionRecord:
        """The current record (as last read from or written to the store)."""
        return self._record

    @property
    def cursor(self) -> int:
        """The number of steps this object has confirmed (run or replayed)."""
        return self._cursor

    # -- plumbing --------------------------------------------------------------

    def _boundary(self, fallback: str, action: Callable[[], _T]) -> _T:
        """Serialize a public call and convert every failure into a fresh error."""
        if not self._lock.acquire(blocking=False):
            _fail("invalid_order")
        try:
            return _guarded(fallback, action)
        finally:
            self._lock.release()

    @staticmethod
    def _store_call(operation: Callable[..., _T], *args: object) -> _T:
        """Call the store; its own errors keep their codes, anything else is ``store_failed``."""
        return _guarded("store_failed", lambda: operation(*args))

    def _tick(self) -> int:
        try:
            tick = self._clock()
        except Exception:  # noqa: BLE001 - a failing clock is an invalid clock
            tick = None
        if type(tick) is not int or not 0 <= tick <= MAX_VALUE:
            _fail("invalid_clock")
        return tick

    def _replaying(self) -> bool:
        return self._cursor < len(self._record.steps)

    def _check_replay(self, phase: str, digest: str, count: int) -> None:
        stored = self._record.steps[self._cursor]
        if (stored.phase, stored.digest, stored.count) != (phase, digest, count):
            _fail("checkpoint_mismatch")

    def _write_step(self, phase: str, digest: str, count: int) -> None:
        """Replay (compare with the stored step) or append a step with compare-and-swap."""
        if self._replaying():
            self._check_replay(phase, digest, count)
        else:
            step = SessionStep(phase, digest, count, self._tick(), None)
            advanced = self._record.with_step(step)
            self._store_call(self._store.save, advanced, self._record)
            self._record = advanced
        self._cursor += 1

    def _verify_inputs(self, fallback: str) -> None:
        """Sealed-manifest verification against a fresh snapshot, then the holdout checks."""
        binding = self._binding
        snapshot = _call(fallback, self._component_snapshot)
        verification = verify_at_evaluation_start(binding.manifest, snapshot)
        if not verification.eligible_for_sealed_results:
            _fail(verification.reason_codes[0])
        if not verify_holdout_commitment(binding.holdout).valid:
            _fail("holdout_commitment_mismatch")
        if binding.holdout_manifests.get("case") != binding.case_digests:
            _fail("holdout_commitment_mismatch")
        try:
            recommitted = commit_holdout(binding.holdout.holdout_version, binding.holdout_manifests)
        except Exception:  # noqa: BLE001 - any refusal means the manifests do not match
            recommitted = None
        expected = binding.holdout.commitment_digest
        if recommitted is None or recommitted.commitment_digest != expected:
            _fail("holdout_commitment_mismatch")

    # -- the steps -------------------------------------------------------------

    def verify(self) -> None:
        """Step 1: verify the manifest against a fresh snapshot and the holdout manifests.

        Raises:
            EvaluationSessionError: ``invalid_order`` (not the first step), the
                first manifest-verification reason (``incomplete_manifest``,
                ``invalid_manifest``, ``mutable_manifest``,
                ``incomplete_evaluation_snapshot``,
                ``invalid_evaluation_snapshot``, ``component_digest_mismatch``),
                ``holdout_commitment_mismatch``, ``checkpoint_mismatch``,
                ``invalid_clock``, store codes, else ``verification_failed``.
        """
        self._boundary("verification_failed", self._verify)

    def _verify(self) -> None:
        if self._cursor != 0:
            _fail("invalid_order")
        self._verify_inputs("verification_failed")
        self._write_step("verified", self._binding_digest, len(self._binding.cases))

    def run_cases(self) -> None:
        """Step 2: verify again, then run and score every case in order.

        The runner sees only the case's source evidence; outputs must be text
        with non-whitespace content and scores finite numbers in [0, 1].

        Raises:
            EvaluationSessionError: ``verification_required``, the
                verification codes, ``invalid_output``, ``invalid_score``,
                ``checkpoint_mismatch``, ``invalid_clock``, store codes, else
                ``execution_failed`` (e.g. a runner that raises).
        """
        self._boundary("execution_failed", self._run_cases)

    def _run_cases(self) -> None:
        if self._cursor != 1:
            _fail("verification_required")
        self._verify_inputs("execution_failed")
        outputs: list[str] = []
        scores: list[float] = []
        for case in self._binding.cases:
            notify(self._progress, "cases", len(outputs), len(self._binding.cases))
            output = _checked_output(_call("execution_failed", self._runner, case.source_evidence))
            scores.append(_checked_score(_call("execution_failed", self._scorer, case, output)))
            outputs.append(output)
        # The outputs' canonical text is hashed item by item, never built whole.
        digest = digest_openmed_items([OpenmedItems(outputs), scores])
        self._write_step("cases", digest, len(outputs))
        self._outputs = tuple(outputs)
        self._scores = tuple(scores)

    def run_forensics(self) -> None:
        """Step 3: overlap forensics of the outputs (signals are recorded, not blocking).

        Raises:
            EvaluationSessionError: ``execution_required``,
                ``checkpoint_mismatch``, ``invalid_clock``, store codes, else
                ``forensics_failed`` (e.g. an output empty after normalization).
        """
        self._boundary("forensics_failed", self._run_forensics)

    def _run_forensics(self) -> None:
        if self._cursor != 2 or self._outputs is None:
            _fail("execution_required")
        binding = self._binding
        report = scan_overlap_forensics(
            self._outputs,
            public_items=binding.public_items,
            shadow_items=binding.shadow_items,
            canaries=binding.canaries,
            submission_manifest=binding.manifest,
            holdout_commitment=binding.holdout,
            progress=self._progress,
        )
        self._write_step("forensics", digest_openmed(report.to_dict()), len(report.signals))

    def build_adjudication(self) -> None:
        """Step 4: render blinded packets, audit them, and hand them to the reviewer.

        Each case's candidate-identity output is replaced by the runner's
        output; ``packet_set_ref`` is the session key. When replaying, the
        stored step is compared *before* the reviewer is called. Packets and
        the private mapping are never persisted or kept.

        Raises:
            EvaluationSessionError: ``forensics_required``,
                ``checkpoint_mismatch``, ``invalid_clock``, store codes, else
                ``adjudication_failed`` (a recused reviewer, a failed audit, a
                reviewer that raises).
        """
        self._boundary("adjudication_failed", self._build_adjudication)

    def _build_adjudication(self) -> None:
        if self._cursor != 3 or self._outputs is None:
            _fail("forensics_required")
        binding = self._binding
        identity = binding.candidate_identity
        notify(self._progress, "adjudication", 0, 2)
        adjudicated = tuple(
            ComparisonCase(
                case_ref=case.case_ref,
                source_evidence=case.source_evidence,
                candidate_outputs={**case.candidate_outputs, identity: output},
            )
            for case, output in zip(binding.cases, self._outputs, strict=True)
        )
        rendered = render_blinded_packets(
            packet_set_ref=self._session_key,
            cases=adjudicated,
            rubric=binding.rubric,
            conflict_of_interest=binding.conflict_of_interest,
            holdout_commitment_digest=binding.holdout.commitment_digest,
            submission_manifest_digests=binding.candidate_manifests,
            randomization_key=self._key,
        )
        packets = rendered.packets
        if not audit_mapping(packets, rendered.mapping, self._key).valid:
            _fail("adjudication_failed")
        # Each packet's document is built, hashed and dropped in turn (one at a time).
        digest = digest_openmed_items(
            {
                "mapping_digest": rendered.mapping.mapping_commitment,
                "packets": OpenmedItems(packet.to_dict() for packet in packets),
            }
        )
        del rendered
        if self._replaying():
            self._check_replay("adjudication", digest, len(packets))
        notify(self._progress, "adjudication", 1, 2)
        _call("adjudication_failed", self._review, packets)
        self._write_step("adjudication", digest, len(packets))
        notify(self._progress, "adjudication", 2, 2)
        self._outputs = None

    def release_feedback(self) -> SessionFeedback:
        """Step 5: claim the release, charge the budget, finish, and return the feedback.

        1. budget key = sha256 of ``[commitment digest, manifest digest]``;
        2. watermark of the ledger's current snapshot;
        3. the ``release_claimed`` step (clock read first) is stored and the
           budget key locked (:meth:`SessionStore.claim_release`);
        4. the ledger records one official attempt with the mean score;
        5. the terminal step (``released`` / ``budget_denied``) is stored with
           the new watermark and the claim released.

        A failure after step 3 leaves the claim locked and returns nothing.

        Raises:
            EvaluationSessionError: ``feedback_already_claimed``,
                ``forensics_required``, ``adjudication_required``,
                ``budget_state_unverified``, ``record_conflict``,
                ``invalid_clock``, ``rerun_budget_exhausted`` (a denied
                attempt, recorded as ``budget_denied``), store codes, else
                ``feedback_failed`` (e.g. a ledger that raises).
        """
        return self._boundary("feedback_failed", self._release_feedback)

    def _snapshot(self, commitment: str, manifest: str) -> tuple[FeedbackBudgetSnapshot, str]:
        policy = _call("feedback_failed", self._ledger.policy_for, commitment)
        snapshot = _call("feedback_failed", self._ledger.snapshot, commitment, manifest)
        if type(policy) is not FeedbackBudgetPolicy or type(snapshot) is not FeedbackBudgetSnapshot:
            _fail("feedback_failed")
        return snapshot, budget_watermark(policy, snapshot)

    def _release_feedback(self) -> SessionFeedback:
        if len(self._record.steps) >= 5:
            _fail("feedback_already_claimed")
        if self._cursor < 3:
            _fail("forensics_required")
        if self._cursor != 4 or self._scores is None:
            _fail("adjudication_required")
        scores = self._scores
        commitment = self._binding.holdout.commitment_digest
        manifest = self._binding.manifest.manifest_digest
        snapshot, watermark = self._snapshot(commitment, manifest)
        claim = SessionStep(
            "release_claimed", digest_openmed(snapshot.to_dict()), 1, self._tick(), None
        )
        claimed = self._record.with_step(claim)
        self._store_call(
            self._store.claim_release, self._record, claimed, self._budget_key, watermark
        )
        self._record = claimed
        self._cursor = 5
        # From here on a failure leaves the budget claimed: lost feedback, never twice.
        mean = math.fsum(scores) / len(scores)
        decision = _call(
            "feedback_failed",
            lambda: self._ledger.record_official_attempt(commitment, manifest, score=mean),
        )
        if type(decision) is not FeedbackBudgetDecision:
            _fail("feedback_failed")
        terminal = SessionStep(
            "released" if decision.accepted else "budget_denied",
            digest_openmed(decision.to_dict()),
            decision.official_attempts,
            self._tick(),
            decision.coarse_band,
        )
        finished = claimed.with_step(terminal)
        _after, new_watermark = self._snapshot(commitment, manifest)
        self._store_call(
            self._store.finish_release, claimed, finished, self._budget_key, new_watermark
        )
        self._record = finished
        self._cursor = 6
        self._scores = None
        if not decision.accepted:
            _fail(decision.reason_code)
        return SessionFeedback(
            session_digest=finished.session_digest,
            decision=decision,
            per_case_scores=scores if decision.feedback_level == "detailed" else None,
        )

    def run(self, *, progress: Progress | None = None) -> SessionFeedback:
        """Run (or replay) every step in order and return the feedback.

        ``progress`` (optional, :data:`sealeval._progress.Progress`) hears the
        ``cases``, ``forensics`` and ``adjudication`` phases: counts only.

        Raises:
            EvaluationSessionError: the first failing step's error.
        """
        self._progress = progress
        try:
            self.verify()
            self.run_cases()
            self.run_forensics()
            self.build_adjudication()
            return self.release_feedback()
        finally:
            self._progress = None
