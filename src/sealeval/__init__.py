"""sealeval: trustworthy evaluation results.

Seal what is evaluated, run fail-closed evaluation sessions, gate releases on
pre-registered evidence, and publish signed evidence packs that verify offline.

This module is the public face. Every function accepts paths or objects,
returns a typed result and raises the family errors of :mod:`sealeval.errors`
(``CapturedError``, ``ManifestError``, ``SessionError``, ``GateError``, all
:class:`~sealeval.errors.SealevalError` with a closed ``code``). Importing
``sealeval`` is cheap: each function imports its family when called.

From result files to a signed, verified pack in five calls (the request and
the policy name the result files: ``sealeval init request`` and ``sealeval
init policy`` write working starters)::

    import sealeval

    sealeval.generate_keys("keys")
    packed = sealeval.evaluate("request.yaml", signing_key="keys/private.pem")
    sealeval.write_trust_profile("trust.json", packed)
    verified = sealeval.verify(packed.evidence, "trust.json", receipt="receipt.json")
    sealeval.report(packed.evidence, html="report.html")

``verified.status`` is 0 for a verified ``pass`` (the ``sealeval verify`` exit code).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from sealeval.captured.comparison import ComparisonReport
    from sealeval.captured.importers import ImportSummary
    from sealeval.captured.pack_reader import EvidencePack
    from sealeval.captured.policy import ComparisonPolicy
    from sealeval.captured.run import Run
    from sealeval.captured.signing import GeneratedKey, SigningKey
    from sealeval.captured.trust import TrustInputs
    from sealeval.captured.verify import VerificationOutcome
    from sealeval.gates.evaluation import AgentReleaseReport
    from sealeval.gates.evidence import MetricEvidence
    from sealeval.manifest.sealed import ManifestVerification, SealedWorkflowManifest
    from sealeval.session.budget import FeedbackBudgetDecision

__version__ = "0.1.0"

__all__ = [
    "EvaluationResult",
    "RenderedReport",
    "SessionOutcome",
    "__version__",
    "compare",
    "evaluate",
    "evaluate_gates",
    "generate_keys",
    "import_run",
    "load_policy",
    "load_run",
    "report",
    "run_session",
    "seal_manifest",
    "verify",
    "verify_manifest",
    "write_trust_profile",
]

PathLike = str | os.PathLike[str]


# ---------------------------------------------------------------------------
# Captured runs: import, load, compare


def _source(source: str | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``"NAME@VERSION"`` (split at the last ``@``) or a mapping → ``{name, version}``."""
    if not isinstance(source, str):
        return source
    from sealeval.captured.importers.base import ImportRefusalError  # noqa: PLC0415

    name, separator, version = source.rpartition("@")
    if not separator or not name or not version:
        raise ImportRefusalError("adapter_option_invalid", "source")
    return {"name": name, "version": version}


def import_run(
    path: PathLike,
    output: PathLike,
    *,
    adapter: str = "auto",
    source: str | Mapping[str, Any] | None = None,
    run_id: str | None = None,
    artifact_digest: str | None = None,
    service_identity: Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, Any] | None = None,
    input_projection: Mapping[str, Any] | None = None,
    compat_invarlock: bool = False,
) -> ImportSummary:
    """Import a recorded result file into a canonical run file (``sealeval import``).

    Args:
        path: the evaluator's result file (never re-run; read once, streamed).
        output: the run file to create (must not exist; written atomically).
        adapter: an adapter name (see ``docs/importers.md``) or ``"auto"``.
        source: the evaluator as ``"NAME@VERSION"`` or ``{name, version}``.
        run_id: the run's id.
        artifact_digest: ``sha256:`` of the evaluated artifact (or give
            ``service_identity`` for a hosted run).
        service_identity: the hosted service descriptor.
        score_provenance: ``{score name: provenance}`` for recorded scores.
        input_projection: ``{kind: "json-pointer", pointer}`` for every record.
        compat_invarlock: keep within invarlock's envelope (50,000 records, 128 MiB).

    Returns:
        The :class:`~sealeval.captured.importers.ImportSummary`: adapter,
        ``run_digest``, ``record_count``.

    Raises:
        ImportRefusalError: the file, format or identities are refused.
        OutputError: ``output_exists`` and other destination refusals.
        CapturedRunError: the records break a run rule.
    """
    from sealeval.captured.importers import import_run_streaming  # noqa: PLC0415
    from sealeval.captured.run import INVARLOCK_LIMITS, UNLIMITED  # noqa: PLC0415

    return import_run_streaming(
        path,
        output,
        adapter=adapter,
        source=_source(source),
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=INVARLOCK_LIMITS if compat_invarlock else UNLIMITED,
    )


def load_run(
    path: PathLike,
    adapter: str = "invarlock",
    *,
    source: str | Mapping[str, Any] | None = None,
    run_id: str | None = None,
    artifact_digest: str | None = None,
    service_identity: Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, Any] | None = None,
    input_projection: Mapping[str, Any] | None = None,
) -> Run:
    """Load a run into memory: a canonical run file, or any result file with its adapter.

    Args:
        path: a run file (adapter ``"invarlock"``, the default) or a result file.
        adapter: an adapter name or ``"auto"``.
        source: the evaluator as ``"NAME@VERSION"`` or ``{name, version}``
            (required but for ``"invarlock"``).
        run_id: the run's id (required but for ``"invarlock"``).
        artifact_digest: ``sha256:`` of the evaluated artifact.
        service_identity: the hosted service descriptor.
        score_provenance: ``{score name: provenance}``.
        input_projection: ``{kind: "json-pointer", pointer}``.

    Returns:
        The validated, immutable :class:`~sealeval.captured.run.Run`.

    Raises:
        ImportRefusalError: the file, the format or the identities are refused.
        CapturedRunError: the records or the run break a run rule.
    """
    from sealeval.captured.importers import load_run as load  # noqa: PLC0415

    return load(
        path,
        adapter,
        source=_source(source),
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        input_projection=input_projection,
    )


def load_policy(
    policy: ComparisonPolicy | PathLike | Mapping[str, Any] | bytes,
) -> ComparisonPolicy:
    """Return a validated comparison policy from a file, text, bytes or a parsed document.

    A file or text may be strict JSON or strict YAML; the digest is that of
    the canonical form either way.

    Raises:
        ComparisonPolicyError: ``not_found``, ``invalid_yaml`` or a policy rule.
        CanonicalError: JSON text that is not strict JSON.
    """
    from sealeval.captured.policy import (  # noqa: PLC0415
        ComparisonPolicy,
        load_comparison_policy,
        parse_comparison_policy,
    )

    if isinstance(policy, ComparisonPolicy):
        return policy
    if isinstance(policy, Mapping):
        return parse_comparison_policy(dict(policy))
    return load_comparison_policy(policy)


def _run(run: Run | PathLike, field: str, *, uncapped: bool = False) -> Run:
    from sealeval.captured.run import Run  # noqa: PLC0415
    from sealeval.captured.run.reader import read_run_file  # noqa: PLC0415
    from sealeval.errors import SealevalError  # noqa: PLC0415

    if isinstance(run, Run):
        return run
    try:
        return read_run_file(run, uncapped=uncapped)
    except SealevalError as error:
        raise type(error)(error.code, field) from None


def compare(
    baseline: Run | PathLike,
    subject: Run | PathLike,
    policy: ComparisonPolicy | PathLike | Mapping[str, Any],
    *,
    max_bootstrap_draws: int | None = 10_000_000_000,
    decision_order: str = "reference",
    uncapped: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ComparisonReport:
    """Compare a subject run with a baseline run under a policy (``sealeval compare``).

    Args:
        baseline: a :class:`~sealeval.captured.run.Run` or a run file.
        subject: a run or a run file.
        policy: a policy, a policy file (JSON or YAML) or a parsed document.
        max_bootstrap_draws: the work budget (``None``: unlimited); the
            default is ``DEFAULT_WORK_BUDGET`` of
            :mod:`sealeval.captured.planning` (a 1,000,000-record comparison).
        decision_order: ``"reference"`` or the opt-in ``"width_first"``.
        uncapped: read run files beyond invarlock's 128 MiB envelope.
        progress: optional ``progress(phase, completed, total)`` callback
            (:mod:`sealeval._progress`: planned draws, then counts per phase).

    Returns:
        The :class:`~sealeval.captured.comparison.ComparisonReport`:
        ``decision``, per-metric summaries, ``canonical_bytes``.

    Raises:
        CapturedRunError: a run file is refused (field ``baseline``/``subject``).
        ComparisonPolicyError: the policy is refused.
        ComparisonError: the runs cannot be compared under the policy.
    """
    from sealeval.captured.comparison import compare_runs  # noqa: PLC0415

    return compare_runs(
        baseline=_run(baseline, "baseline", uncapped=uncapped),
        subject=_run(subject, "subject", uncapped=uncapped),
        policy=load_policy(policy),
        max_bootstrap_draws=max_bootstrap_draws,
        decision_order=decision_order,
        progress=progress,
    )


# ---------------------------------------------------------------------------
# Evidence packs: keys, evaluate, verify, report


def generate_keys(directory: PathLike) -> GeneratedKey:
    """Create ``directory`` with a new Ed25519 ``private.pem`` and ``public.pem`` (mode 0600).

    Raises:
        SigningKeyError: the directory exists or cannot be created.
    """
    from sealeval.captured.signing import generate_key_directory  # noqa: PLC0415

    return generate_key_directory(directory)


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """What :func:`evaluate` published; everything ``verify`` needs.

    Attributes:
        evidence: the pack directory.
        decision: the policy decision recorded in the pack.
        authentication: ``"signed"`` or ``"unsigned_local"``.
        pack_manifest_digest: ``sha256:`` of the pack's ``manifest.json``.
        baseline_run_digest: the baseline run's digest (a trust anchor).
        subject_run_digest: the subject run's digest (a trust anchor).
        policy_digest: the policy's digest.
        request_digest: the normalized request's digest (a trust anchor).
        comparison_id: the comparison id.
        signing_key_fingerprint: the signer (a trust anchor), or ``None``.
        report: the comparison report.
    """

    evidence: Path
    decision: str
    authentication: str
    pack_manifest_digest: str
    baseline_run_digest: str
    subject_run_digest: str
    policy_digest: str
    request_digest: str
    comparison_id: str
    signing_key_fingerprint: str | None
    report: ComparisonReport


def evaluate(
    request: PathLike,
    *,
    signing_key: SigningKey | PathLike | None = None,
    unsigned: bool = False,
    baseline_run: PathLike | None = None,
    subject_run: PathLike | None = None,
    output: PathLike | None = None,
    max_bootstrap_draws: int = 100_000_000,
    uncapped: bool = False,
    decision_order: str = "reference",
) -> EvaluationResult:
    """Compare the request's runs and publish an evidence pack (``sealeval evaluate``).

    Args:
        request: the request file (strict YAML or JSON; ``sealeval init request``).
        signing_key: the Ed25519 private key (or its PEM file) that signs the pack.
        unsigned: publish an explicitly ``unsigned_local`` pack instead (never verifiable).
        baseline_run: replaces the request's baseline path.
        subject_run: replaces the request's subject path.
        output: replaces the request's evidence destination (must not exist).
        max_bootstrap_draws: the work budget.
        uncapped: allow runs beyond invarlock's envelope (verify with ``uncapped`` too).
        decision_order: ``"reference"`` or the opt-in ``"width_first"``.

    Returns:
        The :class:`EvaluationResult` with the digests :func:`verify` checks.

    Raises:
        CapturedRequestError: the request, a run, the policy file or the
            destination is refused (``signing_key_required`` without a key
            or ``unsigned``).
        ComparisonPolicyError: the policy is refused.
        SigningKeyError: the signing key cannot be loaded.
        EvidencePackBuildError: the pack cannot be published.
    """
    from sealeval.captured.evaluate import evaluate_request  # noqa: PLC0415

    overrides = {
        "baseline_run": None if baseline_run is None else os.fspath(baseline_run),
        "subject_run": None if subject_run is None else os.fspath(subject_run),
        "output": None if output is None else os.fspath(output),
    }
    evaluation = evaluate_request(
        os.fspath(request),
        signing_key=signing_key
        if signing_key is None or not isinstance(signing_key, os.PathLike)
        else os.fspath(signing_key),
        unsigned=unsigned,
        overrides=overrides,
        max_bootstrap_draws=max_bootstrap_draws,
        decision_order=decision_order,
        uncapped=uncapped,
    )
    published = evaluation.published
    report = evaluation.report
    assert published is not None  # not a preflight
    assert report is not None
    return EvaluationResult(
        evidence=published.path,
        decision=published.decision,
        authentication=published.authentication,
        pack_manifest_digest=published.pack_manifest_digest,
        baseline_run_digest=published.baseline_run_digest,
        subject_run_digest=published.subject_run_digest,
        policy_digest=published.policy_digest,
        request_digest=published.request_digest,
        comparison_id=published.comparison_id,
        signing_key_fingerprint=published.signing_key_fingerprint,
        report=report,
    )


def verify(
    evidence: PathLike,
    trust: TrustInputs | PathLike,
    *,
    receipt: PathLike | None = None,
    max_bootstrap_draws: int | None = 100_000_000,
    uncapped: bool = False,
    decision_order: str = "reference",
) -> VerificationOutcome:
    """Verify a pack offline against the recipient's own inputs (``sealeval verify``).

    Args:
        evidence: the pack directory.
        trust: the recipient's :class:`~sealeval.captured.trust.TrustInputs`
            or a trust profile file (``sealeval init trust``).
        receipt: where to write the verifier-signed receipt (must not exist,
            outside the pack); ``None`` writes nothing.
        max_bootstrap_draws: the replay work budget (``None``: unlimited).
        uncapped: read packs built with ``uncapped``.
        decision_order: the recipient's decision order.

    Returns:
        The :class:`~sealeval.captured.verify.VerificationOutcome`; ``status``
        is the ``sealeval verify`` exit code (0 verified pass, 7 verified
        other decision, 4 signature or integrity, 6 replay mismatch).

    Raises:
        TrustInputError: the trust profile or its inputs are refused.
        VerificationError: an incomplete verification (budget, environment).
        ReceiptError: the receipt cannot be published.
    """
    from sealeval.captured.pack_reader import (  # noqa: PLC0415
        REFERENCE_PACK_LIMITS,
        UNCAPPED_PACK_LIMITS,
    )
    from sealeval.captured.trust import (  # noqa: PLC0415
        TrustInputs,
        check_verification_inputs,
        read_trust_profile,
    )
    from sealeval.captured.verification import verify_with_receipt  # noqa: PLC0415
    from sealeval.captured.verify import verify_evidence_pack  # noqa: PLC0415

    inputs = trust if isinstance(trust, TrustInputs) else read_trust_profile(trust)
    if receipt is not None:
        done = verify_with_receipt(
            evidence,
            inputs,
            receipt=receipt,
            max_bootstrap_draws=max_bootstrap_draws,
            uncapped=uncapped,
            decision_order=decision_order,
        )
        if done.error is not None:
            raise done.error
        assert done.outcome is not None  # complete verifications carry their outcome
        return done.outcome
    recipient = check_verification_inputs(
        inputs,
        evidence=evidence,
        receipt=None,
        max_bootstrap_draws=max_bootstrap_draws,
        require_receipt=False,
    )
    return verify_evidence_pack(
        evidence,
        recipient,
        limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
        decision_order=decision_order,
    )


def write_trust_profile(
    path: PathLike,
    anchors: EvaluationResult,
    *,
    policy: str = "policy.yaml",
    verifier_key: str = "keys/private.pem",
    verifier_identity: str = "example.org/verifier",
) -> Path:
    """Write a recipient's trust profile (``sealeval init trust``) from the four anchors.

    The anchors are the run, request and signer digests the publisher gives
    the recipient out of band (here taken from an :class:`EvaluationResult`;
    a recipient builds it from what the publisher told them).

    Args:
        path: the profile to create (must not exist).
        anchors: the expected digests.
        policy: the recipient's copy of the policy, relative to the profile.
        verifier_key: the key that signs receipts, relative to the profile.
        verifier_identity: the verifier identity recorded in receipts.

    Returns:
        The profile's path.

    Raises:
        TrustInputError: an anchor is missing (unsigned pack) or malformed.
        FileSystemError: the destination exists or is unsafe.
    """
    from sealeval._fs import publish_exclusive  # noqa: PLC0415
    from sealeval.canonical import encode_invarlock  # noqa: PLC0415
    from sealeval.captured.trust import (  # noqa: PLC0415
        TRUST_PROFILE_FORMAT,
        TRUST_PROFILE_KIND,
        TrustInputError,
        parse_trust_profile,
    )

    if anchors.signing_key_fingerprint is None:
        raise TrustInputError("invalid_digest", "evidence_signer_fingerprint")
    document = {
        "format": TRUST_PROFILE_FORMAT,
        "kind": TRUST_PROFILE_KIND,
        "policy": {"path": policy},
        "anchors": {
            "baseline_run_digest": anchors.baseline_run_digest,
            "subject_run_digest": anchors.subject_run_digest,
            "request_digest": anchors.request_digest,
            "evidence_signer_fingerprint": anchors.signing_key_fingerprint,
        },
        "verifier": {"identity": verifier_identity, "signing_key_path": verifier_key},
    }
    parse_trust_profile(document)
    publish_exclusive(path, encode_invarlock(document) + b"\n")
    return Path(path)


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """The renderings of a pack (:func:`report`); never a verification.

    Attributes:
        markdown: the Markdown report.
        html: the self-contained HTML report.
        junit: the JUnit XML bytes.
        decision: the pack's recorded decision.
    """

    markdown: str
    html: str
    junit: bytes
    decision: str


def report(
    evidence: EvidencePack | PathLike,
    *,
    html: PathLike | None = None,
    markdown: PathLike | None = None,
    junit: PathLike | None = None,
    uncapped: bool = False,
    decision_order: str = "reference",
) -> RenderedReport:
    """Render a pack as Markdown, HTML and JUnit, writing the files asked for (``sealeval report``).

    Args:
        evidence: a pack directory or a read :class:`~sealeval.captured.pack_reader.EvidencePack`.
        html: write the HTML report here (must not exist).
        markdown: write the Markdown report here (must not exist).
        junit: write the JUnit XML here (must not exist).
        uncapped: read packs built with ``uncapped``.
        decision_order: the decision order the pack was built with.

    Returns:
        The :class:`RenderedReport`.

    Raises:
        EvidencePackError: the pack is refused.
        FileSystemError: a destination exists or is unsafe.
    """
    from sealeval._fs import publish_exclusive  # noqa: PLC0415
    from sealeval.captured.pack_reader import (  # noqa: PLC0415
        REFERENCE_PACK_LIMITS,
        UNCAPPED_PACK_LIMITS,
        EvidencePack,
        read_evidence_pack,
    )
    from sealeval.captured.report import (  # noqa: PLC0415
        render_html,
        render_junit,
        render_markdown,
    )

    pack = (
        evidence
        if isinstance(evidence, EvidencePack)
        else read_evidence_pack(
            evidence,
            limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
            decision_order=decision_order,
        )
    )
    rendered = RenderedReport(
        markdown=render_markdown(pack),
        html=render_html(pack),
        junit=render_junit(pack),
        decision=str(pack.report["decision"]),
    )
    for destination, data in (
        (html, rendered.html.encode("utf-8")),
        (markdown, rendered.markdown.encode("utf-8")),
        (junit, rendered.junit),
    ):
        if destination is not None:
            publish_exclusive(destination, data)
    return rendered


# ---------------------------------------------------------------------------
# Manifests, sessions, gates


def seal_manifest(
    components: Mapping[str, PathLike] | None = None,
    *,
    digests: Mapping[str, str] | None = None,
) -> SealedWorkflowManifest:
    """Seal the eight governed components of a workflow (``sealeval manifest seal``).

    Args:
        components: ``{component: path}``, digested now (see ``docs/manifest.md``).
        digests: ``{component: "sha256:..."}`` for components digested elsewhere.

    Returns:
        The :class:`~sealeval.manifest.SealedWorkflowManifest`
        (``manifest_digest``, ``to_dict()``).

    Raises:
        ManifestError: unknown, doubly given, missing or malformed components.
    """
    from sealeval.manifest.sealed import seal_workflow_manifest  # noqa: PLC0415
    from sealeval.manifest.snapshot import snapshot_components  # noqa: PLC0415

    return seal_workflow_manifest(snapshot_components(components or {}, digests))


def verify_manifest(
    manifest: SealedWorkflowManifest | Mapping[str, Any] | PathLike,
    components: Mapping[str, PathLike] | None = None,
    *,
    digests: Mapping[str, str] | None = None,
) -> ManifestVerification:
    """Check a sealed manifest against the components as they are now (never raises on drift).

    Args:
        manifest: the sealed manifest, its parsed document, or its JSON file.
        components: ``{component: path}``, digested now.
        digests: ``{component: "sha256:..."}``.

    Returns:
        The :class:`~sealeval.manifest.ManifestVerification`;
        ``eligible_for_sealed_results`` only when nothing drifted.

    Raises:
        ManifestError: the snapshot arguments are malformed.
        FileSystemError: the manifest file cannot be read.
        CanonicalError: the manifest file is not strict JSON.
    """
    from sealeval.manifest.sealed import (  # noqa: PLC0415
        SealedWorkflowManifest,
        verify_at_evaluation_start,
    )
    from sealeval.manifest.snapshot import snapshot_components  # noqa: PLC0415

    document: object = manifest
    if not isinstance(manifest, SealedWorkflowManifest | Mapping):
        from sealeval._fs import read_regular  # noqa: PLC0415
        from sealeval.canonical import decode  # noqa: PLC0415

        document = decode(read_regular(manifest, limit=1_048_576))
    return verify_at_evaluation_start(document, snapshot_components(components or {}, digests))


@dataclass(frozen=True, slots=True, repr=False)
class SessionOutcome:
    """One official attempt of :func:`run_session`.

    Attributes:
        session_key: the session's key.
        session_digest: the content-free session record's digest.
        decision: the feedback budget decision (``accepted``, ``feedback_level``, ...).
        per_case_scores: per-case scores of a detailed decision, else ``None``.
    """

    session_key: str
    session_digest: str
    decision: FeedbackBudgetDecision
    per_case_scores: tuple[float, ...] | None

    def __repr__(self) -> str:
        """Show the digest and whether feedback was released, never scores."""
        return (
            f"SessionOutcome(session_digest={self.session_digest!r}, "
            f"accepted={self.decision.accepted!r})"
        )


def run_session(
    config: PathLike,
    *,
    clock: Callable[[], int] | None = None,
    store: str | None = None,
) -> SessionOutcome:
    """Run one official attempt of an evaluation session (``sealeval session run``).

    Args:
        config: the session configuration (``sealeval init session``).
        clock: returns the current time in integer seconds (default: the
            ``SEALEVAL_CLOCK`` environment variable, else the system clock).
        store: replaces the configuration's store (a SQLite path or a PostgreSQL DSN).

    Returns:
        The :class:`SessionOutcome`; a budget denial is an outcome, not an error.

    Raises:
        SessionConfigError: the configuration, a named file or the ledger is refused.
        EvaluationSessionError: any other session refusal.
    """
    from sealeval.session.config import open_session, session_clock  # noqa: PLC0415
    from sealeval.session.record import EvaluationSessionError  # noqa: PLC0415

    chosen = clock if clock is not None else session_clock(os.environ)
    with open_session(config, clock=chosen, store_override=store) as opened:
        try:
            feedback = opened.session.run()
        except EvaluationSessionError as error:
            denial = opened.ledger.last_decision
            if error.code != "rerun_budget_exhausted" or denial is None or denial.accepted:
                raise
            return SessionOutcome(
                opened.session.session_key, opened.session.record.session_digest, denial, None
            )
        return SessionOutcome(
            opened.session.session_key,
            feedback.session_digest,
            feedback.decision,
            feedback.per_case_scores,
        )


def evaluate_gates(
    evidence: Sequence[MetricEvidence] | PathLike,
    *,
    candidate_digest: str,
) -> AgentReleaseReport:
    """Evaluate the nine release gates for one candidate (``sealeval gates evaluate``).

    Args:
        evidence: ``MetricEvidence`` items, or an evidence file (a JSON array
            or a candidate evidence envelope, as ``sealeval gates run-suite`` writes).
        candidate_digest: ``sha256:`` of the candidate.

    Returns:
        The :class:`~sealeval.gates.AgentReleaseReport` (``ready``, ``to_json()``).

    Raises:
        GateError: malformed, duplicate or unexpected evidence, or a bad digest.
        EvidenceEnvelopeError: the evidence file is refused.
    """
    from sealeval.gates.evaluation import evaluate_agent_release_gates  # noqa: PLC0415

    if isinstance(evidence, str | os.PathLike):
        from sealeval.gates.candidate import (  # noqa: PLC0415
            EvidenceEnvelopeError,
            decode_evidence_bytes,
            parse_evidence_document,
        )
        from sealeval.gates.runner import MAX_EVIDENCE_BYTES, read_regular_file  # noqa: PLC0415

        read = read_regular_file(Path(evidence), limit=MAX_EVIDENCE_BYTES)
        if read is None:
            raise EvidenceEnvelopeError("unavailable", "evidence")
        if read[1] is None:
            raise EvidenceEnvelopeError("too_large", "evidence")
        evidence = parse_evidence_document(decode_evidence_bytes(read[1]))
    return evaluate_agent_release_gates(list(evidence), candidate_digest=candidate_digest)
