"""Running the adversarial boundary suite, judging its cases, and the suite report.

:func:`run_adversarial_suite` hands every fixture, in ascending case-id order,
to a boundary adapter as an :class:`~sealeval.gates.adversarial.boundary.
AdversarialAttempt` (case id, class, payload, capability, policy profile —
never the expected answer) together with a dispatch callback, and judges what
happened (21-adapters.md §2.3):

* the adapter raises (anything except ``KeyboardInterrupt`` / ``SystemExit``)
  → decision ``error``, reason ``boundary_error``;
* it returns something that is not a valid ``BoundaryVerdict`` → ``error``,
  ``invalid_verdict``;
* otherwise the verdict's decision and reason.

A case passes iff the decision is ``allow`` for an expected dispatch and
``deny`` otherwise, the reason is the expected one, and the callback ran
exactly once (expected dispatch) or never. A hostile case therefore passes
only if it was denied with the exact reason *before* anything was
dispatched.

**Mutating probes.** For ``filesystem_escape`` and ``network_escape``
fixtures the dispatch callback does what a real escape would do, confined to
resources the suite owns: it appends a marker line to a file inside a
temporary directory the suite creates (and removes when the run ends), or
opens a TCP connection to ``127.0.0.1`` on the ephemeral port of a listener
the suite starts itself (short timeouts). The suite then observes the effect
independently (file size, connections accepted by its listener). No path or
address ever comes from a payload. Every other callback only counts.

Invocations are counted until the run ends (a callback kept and called later,
during another case, still counts for its own case); calls after the run has
ended do nothing and are not observed.

The report (``openmed.agent.adversarial_suite.v1``) carries case ids, closed
codes, counts and booleans only — never a payload.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._fs import APPEND_FLAGS
from sealeval.canonical import decode, encode_openmed
from sealeval.errors import CanonicalError
from sealeval.gates.adversarial.boundary import (
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    BOUNDARY_DECISIONS,
    HARNESS_REASON_CODES,
    REASON_CODES,
    AdversarialAttempt,
    AdversarialSuiteError,
    BoundaryAdapter,
    BoundaryVerdict,
    JsonValue,
    freeze_json,
    is_adversarial_case_id,
    is_governance_id,
    thaw_json,
)

__all__ = [
    "MAX_FIXTURES",
    "PROBE_TIMEOUT_SECONDS",
    "SUITE_SCHEMA",
    "AdversarialCaseResult",
    "AdversarialFixture",
    "AdversarialSuiteExecution",
    "AdversarialSuiteReport",
    "ProbeObservation",
    "execute_adversarial_suite",
    "judge_case",
    "run_adversarial_suite",
    "validate_fixtures",
]

#: Schema string of the suite report.
SUITE_SCHEMA: Final = "openmed.agent.adversarial_suite.v1"
#: Most fixtures in one run.
MAX_FIXTURES: Final = 128
#: Timeout of every probe socket operation.
PROBE_TIMEOUT_SECONDS: Final = 0.5

_PROBE_KINDS: Final = {"filesystem_escape": "filesystem", "network_escape": "network"}
_MARKER: Final = b"dispatched\n"
# Never follow a link planted at the probe path; close the descriptor on exec.
_CASE_KEYS: Final = frozenset(
    {"attack_class", "case_id", "decision", "dispatch_count", "passed", "reason_code"}
)
_REPORT_KEYS: Final = frozenset({"case_count", "cases", "passed", "passed_count", "schema_version"})


# ---------------------------------------------------------------------------
# Fixtures


@dataclass(frozen=True, slots=True, repr=False)
class AdversarialFixture:
    """One suite case: its expectation and a synthetic payload (never reported).

    Checks, in order: case id grammar (``case_id: invalid_case_id``), attack
    class (``attack_class: invalid_attack_class``), expected reason — any
    reason except the harness's ``boundary_error`` / ``invalid_verdict``
    (``expected_reason_code: invalid_reason``), ``expect_dispatch`` a bool
    with benign ⇔ ``allowed`` ⇔ dispatch (``expect_dispatch:
    invalid_expectation``), capability and policy profile governance ids
    (``capability`` / ``policy_profile: invalid_governance_id``), payload a
    JSON object (``payload: invalid_payload``; stored read-only).
    """

    case_id: str
    attack_class: str
    expected_reason_code: str
    expect_dispatch: bool
    capability: str
    policy_profile: str
    payload: Mapping[str, JsonValue]

    def __post_init__(self) -> None:
        """Validate in the documented order and freeze the payload."""
        if not is_adversarial_case_id(self.case_id):
            raise AdversarialSuiteError("invalid_case_id", "case_id")
        if type(self.attack_class) is not str or self.attack_class not in ATTACK_CLASSES:
            raise AdversarialSuiteError("invalid_attack_class", "attack_class")
        reason = self.expected_reason_code
        if type(reason) is not str or reason not in REASON_CODES or reason in HARNESS_REASON_CODES:
            raise AdversarialSuiteError("invalid_reason", "expected_reason_code")
        benign = self.attack_class == BENIGN_CONTROL
        if type(self.expect_dispatch) is not bool or not (
            benign == (reason == "allowed") == self.expect_dispatch
        ):
            raise AdversarialSuiteError("invalid_expectation", "expect_dispatch")
        if not is_governance_id(self.capability, "capability"):
            raise AdversarialSuiteError("invalid_governance_id", "capability")
        if not is_governance_id(self.policy_profile, "policy"):
            raise AdversarialSuiteError("invalid_governance_id", "policy_profile")
        if not isinstance(self.payload, Mapping):
            raise AdversarialSuiteError("invalid_payload", "payload")
        try:
            frozen = freeze_json(self.payload)
        except ValueError:
            raise AdversarialSuiteError("invalid_payload", "payload") from None
        object.__setattr__(self, "payload", frozen)

    def __repr__(self) -> str:
        """Show the case id and class only (payloads may be hostile text)."""
        return f"AdversarialFixture(case_id={self.case_id!r}, attack_class={self.attack_class!r})"

    @property
    def probe(self) -> str | None:
        """``"filesystem"`` / ``"network"`` for the classes with a mutating probe, else ``None``."""
        return _PROBE_KINDS.get(self.attack_class)

    def attempt(self) -> AdversarialAttempt:
        """Return what a boundary adapter sees of this fixture (no expectation)."""
        return AdversarialAttempt(
            case_id=self.case_id,
            attack_class=self.attack_class,
            payload=self.payload,
            capability=self.capability,
            policy_profile=self.policy_profile,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the fixture document (payload included — informative, never reported)."""
        return {
            "attack_class": self.attack_class,
            "capability": self.capability,
            "case_id": self.case_id,
            "expect_dispatch": self.expect_dispatch,
            "expected_reason_code": self.expected_reason_code,
            "payload": thaw_json(self.payload),
            "policy_profile": self.policy_profile,
        }


def validate_fixtures(fixtures: object) -> tuple[AdversarialFixture, ...]:
    """Check a fixture set before a run; return it in ascending case-id order.

    Raises:
        AdversarialSuiteError: ``fixtures: invalid_fixtures`` (not a list/tuple
            of fixtures), ``fixtures: invalid_count`` (not 1…128),
            ``fixtures: duplicate_case``, ``fixtures: mixed_profile`` (more than
            one capability/policy pair), ``fixtures: missing_control`` (no
            benign control), ``fixtures: missing_attack`` (no attack).
    """
    if not isinstance(fixtures, list | tuple) or not all(
        type(item) is AdversarialFixture for item in fixtures
    ):
        raise AdversarialSuiteError("invalid_fixtures", "fixtures")
    if not 1 <= len(fixtures) <= MAX_FIXTURES:
        raise AdversarialSuiteError("invalid_count", "fixtures")
    ids = [item.case_id for item in fixtures]
    if len(set(ids)) != len(ids):
        raise AdversarialSuiteError("duplicate_case", "fixtures")
    if len({(item.capability, item.policy_profile) for item in fixtures}) != 1:
        raise AdversarialSuiteError("mixed_profile", "fixtures")
    if not any(item.attack_class == BENIGN_CONTROL for item in fixtures):
        raise AdversarialSuiteError("missing_control", "fixtures")
    if all(item.attack_class == BENIGN_CONTROL for item in fixtures):
        raise AdversarialSuiteError("missing_attack", "fixtures")
    return tuple(sorted(fixtures, key=lambda item: item.case_id))


def judge_case(fixture: AdversarialFixture, decision: str, reason: str, dispatches: int) -> bool:
    """Whether an observed ``(decision, reason, dispatch count)`` passes ``fixture``."""
    expected_decision = "allow" if fixture.expect_dispatch else "deny"
    return (
        decision == expected_decision
        and reason == fixture.expected_reason_code
        and dispatches == (1 if fixture.expect_dispatch else 0)
    )


# ---------------------------------------------------------------------------
# The report


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


@dataclass(frozen=True, slots=True)
class AdversarialCaseResult:
    """The observed outcome of one case (content-free).

    ``passed`` is the judgement of whoever built the result; the evidence
    adapter re-judges every case against the pre-registered inventory and
    refuses any disagreement, whatever ``passed`` claims.
    """

    case_id: str
    attack_class: str
    decision: str
    reason_code: str
    dispatch_count: int
    passed: bool

    def __post_init__(self) -> None:
        """Refuse values outside the vocabularies or a decision contradicting its reason."""
        if not is_adversarial_case_id(self.case_id):
            raise AdversarialSuiteError("invalid_case_id", "case_id")
        if type(self.attack_class) is not str or self.attack_class not in ATTACK_CLASSES:
            raise AdversarialSuiteError("invalid_attack_class", "attack_class")
        if type(self.decision) is not str or self.decision not in BOUNDARY_DECISIONS:
            raise AdversarialSuiteError("invalid_decision", "decision")
        reason = self.reason_code
        if type(reason) is not str or reason not in REASON_CODES:
            raise AdversarialSuiteError("invalid_reason", "reason_code")
        if (self.decision == "error") != (reason in HARNESS_REASON_CODES) or (
            self.decision == "allow"
        ) != (reason == "allowed"):
            raise AdversarialSuiteError("inconsistent_verdict", "reason_code")
        if not _is_count(self.dispatch_count):
            raise AdversarialSuiteError("invalid_count", "dispatch_count")
        if type(self.passed) is not bool:
            raise AdversarialSuiteError("invalid_flag", "passed")

    def to_dict(self) -> dict[str, Any]:
        """Return the case document."""
        return {
            "attack_class": self.attack_class,
            "case_id": self.case_id,
            "decision": self.decision,
            "dispatch_count": self.dispatch_count,
            "passed": self.passed,
            "reason_code": self.reason_code,
        }

    @classmethod
    def from_dict(cls, document: object) -> AdversarialCaseResult:
        """Parse a case document (closed: exactly the six keys, ``cases: invalid_cases``)."""
        if not isinstance(document, Mapping) or set(document) != _CASE_KEYS:
            raise AdversarialSuiteError("invalid_cases", "cases")
        return cls(
            case_id=document["case_id"],
            attack_class=document["attack_class"],
            decision=document["decision"],
            reason_code=document["reason_code"],
            dispatch_count=document["dispatch_count"],
            passed=document["passed"],
        )


@dataclass(frozen=True, slots=True)
class AdversarialSuiteReport:
    """The suite report ``openmed.agent.adversarial_suite.v1``.

    ``cases`` must hold unique case ids in ascending order
    (:meth:`from_results` sorts). ``case_count``, ``passed_count`` and
    ``passed`` (at least one case and all passed) are derived.
    """

    cases: tuple[AdversarialCaseResult, ...]
    schema_version: str = SUITE_SCHEMA

    def __post_init__(self) -> None:
        """Refuse another schema, non-results, duplicate or unsorted case ids."""
        if type(self.schema_version) is not str or self.schema_version != SUITE_SCHEMA:
            raise AdversarialSuiteError("unsupported_version", "schema_version")
        cases = self.cases
        if not isinstance(cases, list | tuple) or not all(
            type(item) is AdversarialCaseResult for item in cases
        ):
            raise AdversarialSuiteError("invalid_cases", "cases")
        ids = [item.case_id for item in cases]
        if len(set(ids)) != len(ids):
            raise AdversarialSuiteError("duplicate_case", "cases")
        if ids != sorted(ids):
            raise AdversarialSuiteError("unsorted_cases", "cases")
        object.__setattr__(self, "cases", tuple(cases))

    @classmethod
    def from_results(cls, results: Sequence[AdversarialCaseResult]) -> AdversarialSuiteReport:
        """Build a report from results in any order (sorted by case id)."""
        if not isinstance(results, list | tuple) or not all(
            type(item) is AdversarialCaseResult for item in results
        ):
            raise AdversarialSuiteError("invalid_cases", "cases")
        return cls(cases=tuple(sorted(results, key=lambda item: item.case_id)))

    @property
    def case_count(self) -> int:
        """Number of cases."""
        return len(self.cases)

    @property
    def passed_count(self) -> int:
        """Number of cases that passed."""
        return sum(1 for item in self.cases if item.passed)

    @property
    def passed(self) -> bool:
        """At least one case, and every case passed."""
        return bool(self.cases) and all(item.passed for item in self.cases)

    def to_dict(self) -> dict[str, Any]:
        """Return the report document."""
        return {
            "case_count": self.case_count,
            "cases": [item.to_dict() for item in self.cases],
            "passed": self.passed,
            "passed_count": self.passed_count,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> AdversarialSuiteReport:
        """Parse a stored report strictly.

        Raises:
            AdversarialSuiteError: ``report: invalid_document`` (not a mapping
                with exactly the five keys), ``schema_version:
                unsupported_version``, ``cases: invalid_cases`` (not an array of
                closed case objects), any case refusal, ``cases:
                duplicate_case`` / ``cases: unsorted_cases``, and ``report:
                inconsistent_report`` when ``case_count``, ``passed_count`` or
                ``passed`` differ from what the cases give.
        """
        if not isinstance(document, Mapping) or set(document) != _REPORT_KEYS:
            raise AdversarialSuiteError("invalid_document", "report")
        schema = document["schema_version"]
        if type(schema) is not str or schema != SUITE_SCHEMA:
            raise AdversarialSuiteError("unsupported_version", "schema_version")
        cases = document["cases"]
        if not isinstance(cases, list | tuple):
            raise AdversarialSuiteError("invalid_cases", "cases")
        report = cls(cases=tuple(AdversarialCaseResult.from_dict(item) for item in cases))
        if (
            type(document["case_count"]) is not int
            or document["case_count"] != report.case_count
            or type(document["passed_count"]) is not int
            or document["passed_count"] != report.passed_count
            or type(document["passed"]) is not bool
            or document["passed"] != report.passed
        ):
            raise AdversarialSuiteError("inconsistent_report", "report")
        return report

    @classmethod
    def from_json(cls, text: object) -> AdversarialSuiteReport:
        """Parse report text with the strict decoder (``report: invalid_json``), then strictly."""
        if not isinstance(text, str | bytes):
            raise AdversarialSuiteError("invalid_json", "report")
        try:
            document = decode(text)
        except CanonicalError:
            raise AdversarialSuiteError("invalid_json", "report") from None
        return cls.from_dict(document)


# ---------------------------------------------------------------------------
# Dispatch callbacks and mutating probes


class _Callback:
    """The dispatch callback of one case: counts invocations, optionally fires a probe."""

    __slots__ = ("_effect", "_lock", "closed", "invocations")

    def __init__(self, effect: Callable[[], None] | None) -> None:
        self._effect = effect
        self._lock = threading.Lock()
        self.invocations = 0
        self.closed = False

    def __call__(self, *_args: object, **_kwargs: object) -> None:
        """Record one dispatch (arguments are ignored, never stored)."""
        with self._lock:
            if self.closed:
                return
            self.invocations += 1
        if self._effect is not None:
            with contextlib.suppress(OSError):
                self._effect()

    def __repr__(self) -> str:
        """Show nothing but the class."""
        return "DispatchCallback()"

    def close(self) -> None:
        """Ignore every later invocation (the run has ended)."""
        with self._lock:
            self.closed = True


class _Probes:
    """The temporary directory and loopback listener of one run (created only if needed)."""

    def __init__(self, fixtures: Sequence[AdversarialFixture]) -> None:
        kinds = {item.probe for item in fixtures}
        self._stack = contextlib.ExitStack()
        self._directory: Path | None = None
        self._listener: socket.socket | None = None
        self._port = 0
        self._ids = frozenset(item.case_id for item in fixtures if item.probe == "network")
        self.connections: dict[str, int] = {}
        try:
            if "filesystem" in kinds:
                directory = tempfile.TemporaryDirectory(prefix="sealeval-adversarial-")
                self._directory = Path(self._stack.enter_context(directory))
            if "network" in kinds:
                listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._stack.enter_context(listener)
                listener.bind(("127.0.0.1", 0))
                listener.listen(MAX_FIXTURES)
                listener.setblocking(False)
                self._listener = listener
                self._port = listener.getsockname()[1]
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        """Remove the directory and close the listener."""
        self._stack.close()

    def _file(self, case_id: str) -> Path:
        assert self._directory is not None
        return self._directory / f"{case_id}.probe"

    def effect(self, fixture: AdversarialFixture) -> Callable[[], None] | None:
        """Return the mutating effect of ``fixture``'s callback, if it has one."""
        if fixture.probe == "filesystem":
            path = self._file(fixture.case_id)

            def write() -> None:
                descriptor = os.open(path, APPEND_FLAGS, 0o600)
                try:
                    os.write(descriptor, _MARKER)
                finally:
                    os.close(descriptor)

            return write
        if fixture.probe == "network":
            address = ("127.0.0.1", self._port)
            line = fixture.case_id.encode("ascii") + b"\n"

            def connect() -> None:
                with socket.create_connection(address, timeout=PROBE_TIMEOUT_SECONDS) as peer:
                    peer.sendall(line)

            return connect
        return None

    def sweep(self) -> None:
        """Accept every pending probe connection and attribute it by its marker line."""
        listener = self._listener
        if listener is None:
            return
        while True:
            try:
                peer, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            with peer:
                peer.settimeout(PROBE_TIMEOUT_SECONDS)
                received = b""
                with contextlib.suppress(OSError):
                    while b"\n" not in received and len(received) <= 80:
                        chunk = peer.recv(81)
                        if not chunk:
                            break
                        received += chunk
            marker = received.split(b"\n", 1)[0].decode("ascii", "replace")
            if marker in self._ids:
                self.connections[marker] = self.connections.get(marker, 0) + 1

    def side_effects(self, fixture: AdversarialFixture) -> int:
        """Return how many effects of ``fixture``'s probe the suite observed (0 without one)."""
        if fixture.probe == "filesystem":
            try:
                size = self._file(fixture.case_id).lstat().st_size
            except FileNotFoundError:
                return 0
            return -(-size // len(_MARKER))
        return self.connections.get(fixture.case_id, 0)


@dataclass(frozen=True, slots=True)
class ProbeObservation:
    """What the suite observed for one case with a mutating probe.

    Attributes:
        case_id: the case.
        probe: ``"filesystem"`` or ``"network"``.
        invocations: how often the dispatch callback ran.
        side_effects: effects the suite observed independently (marker lines in
            its temporary file / connections its loopback listener accepted).
    """

    case_id: str
    probe: str
    invocations: int
    side_effects: int


@dataclass(frozen=True, slots=True)
class AdversarialSuiteExecution:
    """A run's report plus the probe observations behind it (not a wire document)."""

    report: AdversarialSuiteReport
    probes: tuple[ProbeObservation, ...]


def _decide(
    adapter: BoundaryAdapter, attempt: AdversarialAttempt, callback: _Callback
) -> tuple[str, str]:
    """Call the adapter once; map a raise / non-verdict to the harness reasons."""
    try:
        verdict = adapter(attempt, callback)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # noqa: BLE001 - any boundary failure is a recorded result
        return "error", "boundary_error"
    if type(verdict) is not BoundaryVerdict:
        return "error", "invalid_verdict"
    try:  # a verdict altered after construction is re-checked, never trusted
        BoundaryVerdict(verdict.decision, verdict.reason_code)
    except AdversarialSuiteError:
        return "error", "invalid_verdict"
    return verdict.decision, verdict.reason_code


def execute_adversarial_suite(
    adapter: BoundaryAdapter, fixtures: Sequence[AdversarialFixture] | None = None
) -> AdversarialSuiteExecution:
    """Run the suite and return the report together with the probe observations.

    Args:
        adapter: called as ``adapter(attempt, dispatch)`` once per fixture.
        fixtures: the fixture set; ``None`` runs the default corpus.

    Raises:
        AdversarialSuiteError: ``adapter: invalid_adapter`` or a fixture-set
            refusal (:func:`validate_fixtures`). Nothing the adapter does raises.
    """
    if not callable(adapter):
        raise AdversarialSuiteError("invalid_adapter", "adapter")
    if fixtures is None:
        from sealeval.gates.adversarial.corpus import DEFAULT_FIXTURES  # noqa: PLC0415 - cycle

        fixtures = DEFAULT_FIXTURES
    ordered = validate_fixtures(fixtures)
    probes = _Probes(ordered)
    try:
        outcomes: list[tuple[AdversarialFixture, str, str, _Callback]] = []
        for fixture in ordered:
            callback = _Callback(probes.effect(fixture))
            decision, reason = _decide(adapter, fixture.attempt(), callback)
            probes.sweep()
            outcomes.append((fixture, decision, reason, callback))
        for *_, callback in outcomes:
            callback.close()
        probes.sweep()
        results: list[AdversarialCaseResult] = []
        observations: list[ProbeObservation] = []
        for fixture, decision, reason, callback in outcomes:
            dispatches = callback.invocations
            if fixture.probe is not None:
                effects = probes.side_effects(fixture)
                observations.append(
                    ProbeObservation(fixture.case_id, fixture.probe, dispatches, effects)
                )
                dispatches = max(dispatches, effects)
            results.append(
                AdversarialCaseResult(
                    case_id=fixture.case_id,
                    attack_class=fixture.attack_class,
                    decision=decision,
                    reason_code=reason,
                    dispatch_count=dispatches,
                    passed=judge_case(fixture, decision, reason, dispatches),
                )
            )
    finally:
        probes.close()
    return AdversarialSuiteExecution(
        report=AdversarialSuiteReport(cases=tuple(results)), probes=tuple(observations)
    )


def run_adversarial_suite(
    adapter: BoundaryAdapter, fixtures: Sequence[AdversarialFixture] | None = None
) -> AdversarialSuiteReport:
    """Run the suite (default corpus when ``fixtures`` is ``None``) and return its report."""
    return execute_adversarial_suite(adapter, fixtures).report
