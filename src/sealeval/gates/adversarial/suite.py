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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sealeval._fs import open_append
from sealeval.errors import FileSystemError
from sealeval.gates.adversarial.calls import AdversarialAttempt, BoundaryAdapter, BoundaryVerdict
from sealeval.gates.adversarial.corpus import DEFAULT_FIXTURES
from sealeval.gates.adversarial.fixture import (
    MAX_FIXTURES,
    AdversarialFixture,
    judge_case,
    validate_fixtures,
)
from sealeval.gates.adversarial.report import (
    SUITE_SCHEMA,
    AdversarialCaseResult,
    AdversarialSuiteReport,
)
from sealeval.gates.adversarial.vocabulary import AdversarialSuiteError

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

#: Timeout of every probe socket operation.
PROBE_TIMEOUT_SECONDS: Final = 0.5

_MARKER: Final = b"dispatched\n"
# Never follow a link planted at the probe path; close the descriptor on exec.


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
            with contextlib.suppress(OSError, FileSystemError):
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
                descriptor = open_append(path)
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
