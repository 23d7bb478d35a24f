"""The captured evaluation pipeline: preflight, compare, pack, result.

:func:`evaluate_request` is ``sealeval evaluate`` as a library function: it
loads and normalizes a captured request (:func:`~sealeval.captured.request.preflight`,
reading native runs through :func:`native_run_loader`), compares the two runs
(:func:`compare_sides`: in memory, or streamed from the files when a run is
too large to hold), publishes the evidence
pack atomically and no-clobber
(:func:`~sealeval.captured.pack.build_evidence_pack`) and returns the
``invarlock/evaluation-result-v2`` document. :func:`preflight_request` runs
every check of that pipeline, including a dry comparison in memory, and writes
nothing (``invarlock/evaluation-preflight-v3``).

Example::

    from sealeval.captured.evaluate import evaluate_request

    outcome = evaluate_request("request.yaml", signing_key="keys/private.pem")
    print(outcome.document["decision"], outcome.document["evidence"])

Both raise a :class:`~sealeval.errors.SealevalError` subclass (closed code,
field name, never a value or a path) on any request, input, budget,
destination or signing problem; :func:`failure_document` is the JSON result
the CLI prints for such a refusal. The CLI (:mod:`sealeval.cli.evaluate`),
``bench/`` and ``scripts/interop`` all call these functions.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._fs import open_regular, translated
from sealeval._progress import Progress, notify
from sealeval.captured.comparison import (
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    ComparisonReport,
    compare_run_files,
    compare_runs,
)
from sealeval.captured.importers import import_run_streaming, load_run
from sealeval.captured.pack import PublishedPack, build_evidence_pack
from sealeval.captured.pack_reader import REFERENCE_PACK_LIMITS, UNCAPPED_PACK_LIMITS
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.request import (
    CapturedRequestError,
    PairedCheck,
    PreflightResult,
    RunFacts,
    RunLoader,
    SourceSpec,
    preflight,
    read_run_facts,
    run_source,
)
from sealeval.captured.run import INVARLOCK_LIMITS, STREAM_MIN_BYTES, UNLIMITED, Limits, Run
from sealeval.captured.signing import SigningKey

__all__ = [
    "PREFLIGHT_FORMAT",
    "RESULT_FORMAT",
    "Evaluation",
    "compare_sides",
    "evaluate_request",
    "failure_document",
    "import_run_facts",
    "native_run_loader",
    "paired_check",
    "preflight_request",
    "run_loader",
]

#: ``format_version`` of the evaluation result.
RESULT_FORMAT: Final = "invarlock/evaluation-result-v2"
#: ``format_version`` of the preflight result.
PREFLIGHT_FORMAT: Final = "invarlock/evaluation-preflight-v3"


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What one pipeline call established.

    Attributes:
        document: the result document (``invarlock/evaluation-result-v2``, or
            ``invarlock/evaluation-preflight-v3`` for a preflight); plain JSON
            values, paths request-relative as the request names them.
        report: the comparison report (``None`` for a preflight).
        published: the published pack (``None`` for a preflight).
        checked: the preflight result the pipeline started from.
    """

    document: Mapping[str, Any]
    report: ComparisonReport | None
    published: PublishedPack | None
    checked: PreflightResult


def _declared(side: SourceSpec) -> dict[str, Any]:
    """Return the side's declared identities and projection, as the importers take them."""
    return {
        "source": side.source,
        "run_id": side.run_id,
        "artifact_digest": side.artifact_digest,
        "service_identity": side.service_identity,
        "score_provenance": side.score_provenance,
        "input_projection": side.input_projection,
    }


def native_run_loader(path: Path, side: SourceSpec, *, limits: Limits) -> Run:
    """Load a non-``invarlock`` side with :func:`sealeval.captured.importers.load_run`.

    The side's declared ``source``, ``run_id``, ``artifact_digest``,
    ``service_identity``, ``score_provenance`` and ``input_projection`` are
    passed through; normalization then checks them against the run.
    """
    return load_run(path, side.adapter, limits=limits, **_declared(side))


def import_run_facts(
    path: Path, side: SourceSpec, *, limits: Limits, progress: Progress | None = None
) -> RunFacts:
    """Import a native side to a private canonical run file; return its facts (never held).

    The file is imported by
    :func:`~sealeval.captured.importers.import_run_streaming` (records stream
    from the source into the run while it is hashed) into a fresh private
    temporary folder (mode 0700), opened without following links, read once
    for its facts (:func:`~sealeval.captured.request.read_run_facts`), and
    the folder is removed before this returns: the facts keep the open
    descriptor of the (now unlinked) file, so the comparison and the pack
    read exactly the bytes that were checked. Refusals are the importer's
    (the same codes and fields as :func:`native_run_loader`); no path is
    ever part of one.
    """

    def imported(done: int, total: int) -> None:
        notify(progress, "importing", done, total)

    where = f"comparison.{side.side}.path"
    try:
        scratch = tempfile.TemporaryDirectory(prefix="sealeval-evaluate-")
    except OSError:  # no private temporary folder (TMPDIR): named by code only
        raise CapturedRequestError("unreadable", where) from None
    with scratch as folder:
        target = Path(folder) / "run.json"
        import_run_streaming(
            path,
            target,
            adapter=side.adapter,
            limits=limits,
            progress=None if progress is None else imported,
            **_declared(side),
        )
        with translated(CapturedRequestError, where):
            fd = open_regular(target)
        try:
            return read_run_facts(fd, limits=limits)
        except BaseException:
            os.close(fd)
            raise


def run_loader(progress: Progress | None = None) -> RunLoader:
    """Return ``evaluate``'s loader of non-``invarlock`` sides.

    Within a record cap (the reference's envelope) or below
    :data:`~sealeval.captured.run.STREAM_MIN_BYTES`, a side is loaded whole
    (:func:`native_run_loader`). A larger side read without a record cap
    (``--uncapped``) is imported to a private canonical run file and reaches
    the comparison as :class:`~sealeval.captured.request.RunFacts`
    (:func:`import_run_facts`), so the comparison and the pack hold fixed-size
    data per record, not the records. Both give the same pack bytes.
    """

    def load(path: Path, side: SourceSpec, *, limits: Limits) -> Run | RunFacts:
        if limits.max_records is None and _size(path) >= STREAM_MIN_BYTES:
            return import_run_facts(path, side, limits=limits, progress=progress)
        return native_run_loader(path, side, limits=limits)

    return load


def _size(path: Path) -> int:
    """Return the file's size (-1 if unseen: the whole-run loader then refuses it)."""
    try:
        return os.lstat(path).st_size
    except OSError:  # pragma: no cover - a race: the file was opened beneath the root just before
        return -1


def compare_sides(
    baseline: Run | RunFacts,
    subject: Run | RunFacts,
    policy: ComparisonPolicy,
    *,
    max_bootstrap_draws: int,
    decision_order: str,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Compare a request's two sides: in memory when both are held, else streamed.

    When either side is a :class:`~sealeval.captured.request.RunFacts` (a
    large canonical run never held), both are compared by
    :func:`~sealeval.captured.comparison.compare_run_files` over their bytes
    (same report bytes and refusals as :func:`compare_runs`), so the memory
    is bounded by the records, not their content.
    """
    if isinstance(baseline, Run) and isinstance(subject, Run):
        return compare_runs(
            baseline=baseline,
            subject=subject,
            policy=policy,
            max_bootstrap_draws=max_bootstrap_draws,
            decision_order=decision_order,
            progress=progress,
        )
    with run_source(baseline) as left, run_source(subject) as right:
        return compare_run_files(
            baseline=left,
            subject=right,
            policy=policy,
            max_bootstrap_draws=max_bootstrap_draws,
            decision_order=decision_order,
            progress=progress,
        )


def paired_check(budget: int, decision_order: str, progress: Progress | None = None) -> PairedCheck:
    """Return the comparison engine's preflight: a dry comparison in memory (nothing written)."""

    def check(
        baseline: Run | RunFacts, subject: Run | RunFacts, policy: ComparisonPolicy
    ) -> Mapping[str, Any]:
        report = compare_sides(
            baseline,
            subject,
            policy,
            max_bootstrap_draws=budget,
            decision_order=decision_order,
            progress=progress,
        )
        return {
            "required_bootstrap_draws": report.required_bootstrap_draws,
            "missing_id_bytes": report.missing_id_bytes,
        }

    return check


def _checked(
    request: str | Path,
    *,
    signing_key: str | Path | SigningKey | None,
    unsigned: bool,
    overrides: Mapping[str, str | None],
    paired: PairedCheck | None,
    uncapped: bool,
    progress: Progress | None,
) -> PreflightResult:
    return preflight(
        request,
        signing_key=signing_key,
        unsigned=unsigned,
        request_root=overrides.get("request_root"),
        baseline_run=overrides.get("baseline_run"),
        subject_run=overrides.get("subject_run"),
        output=overrides.get("output"),
        run_loader=run_loader(progress),
        paired_check=paired,
        limits=UNLIMITED if uncapped else INVARLOCK_LIMITS,
    )


def preflight_document(checked: PreflightResult, budget: int) -> dict[str, Any]:
    """Return the ``invarlock/evaluation-preflight-v3`` document of a passed preflight."""
    request = checked.request
    paired = checked.paired or {}
    return {
        "format_version": PREFLIGHT_FORMAT,
        "kind": "captured",
        "ok": True,
        "execution_mode": "captured",
        "requested_authentication": checked.requested_authentication,
        "baseline_run_digest": request.baseline.digest,
        "subject_run_digest": request.subject.digest,
        "policy_digest": request.policy.digest,
        "request_digest": request.request_digest,
        "record_count": checked.record_count,
        "scope_count": checked.scope_count,
        "required_bootstrap_draws": paired.get("required_bootstrap_draws"),
        "missing_id_bytes": paired.get("missing_id_bytes"),
        "max_bootstrap_draws": budget,
        "checks": list(checked.checks),
        "output": request.authored.output,
    }


def result_document(evidence: str, published: PublishedPack) -> dict[str, Any]:
    """Return the ``invarlock/evaluation-result-v2`` document of a published pack."""
    return {
        "format_version": RESULT_FORMAT,
        "kind": "captured",
        "ok": True,
        "evidence": evidence,
        "comparison_id": published.comparison_id,
        "baseline_run_digest": published.baseline_run_digest,
        "subject_run_digest": published.subject_run_digest,
        "policy_digest": published.policy_digest,
        "authentication": published.authentication,
        "policy_verdict": published.decision,
        "decision": published.decision,
        "pack_manifest_digest": published.pack_manifest_digest,
        "request_digest": published.request_digest,
    }


def failure_document(
    *, preflight: bool, requested_authentication: str, error: str
) -> dict[str, Any]:
    """Return the result document of a refused evaluation or preflight.

    Args:
        preflight: whether the refused call was a preflight.
        requested_authentication: ``"signed"`` or ``"unsigned_local"`` (preflight only).
        error: the refusal's message (``<field>: <code>``).
    """
    document: dict[str, Any] = {
        "format_version": PREFLIGHT_FORMAT if preflight else RESULT_FORMAT,
        "kind": "captured",
        "ok": False,
        "errors": [error],
    }
    if preflight:
        document["execution_mode"] = "captured"
        document["requested_authentication"] = requested_authentication
    return document


def preflight_request(
    request: str | Path,
    *,
    signing_key: str | Path | SigningKey | None = None,
    unsigned: bool = False,
    overrides: Mapping[str, str | None] | None = None,
    max_bootstrap_draws: int = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
    uncapped: bool = False,
    progress: Progress | None = None,
) -> Evaluation:
    """Run every check of :func:`evaluate_request` and write nothing.

    Arguments are those of :func:`evaluate_request`. The comparison runs in
    memory (its bootstrap-draw requirement and missing-id size are reported);
    no pack is built.
    """
    notify(progress, "loading", 0, 1)
    checked = _checked(
        request,
        signing_key=signing_key,
        unsigned=unsigned,
        overrides=overrides or {},
        paired=paired_check(max_bootstrap_draws, decision_order, progress),
        uncapped=uncapped,
        progress=progress,
    )
    checked.request.close()  # nothing is packed
    return Evaluation(preflight_document(checked, max_bootstrap_draws), None, None, checked)


def evaluate_request(
    request: str | Path,
    *,
    signing_key: str | Path | SigningKey | None = None,
    unsigned: bool = False,
    overrides: Mapping[str, str | None] | None = None,
    max_bootstrap_draws: int = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
    uncapped: bool = False,
    progress: Progress | None = None,
) -> Evaluation:
    """Compare the runs a captured request names and publish its evidence pack.

    Args:
        request: the request file (strict YAML).
        signing_key: the Ed25519 private key (PEM path or loaded key) that
            signs the pack; exactly one of it and ``unsigned``.
        unsigned: publish ``unsigned_local`` evidence (never verifiable).
        overrides: optional ``request_root``, ``baseline_run``,
            ``subject_run`` and ``output`` replacing the request's references
            (each resolved inside the request root).
        max_bootstrap_draws: the local work budget in bootstrap draws.
        decision_order: ``"reference"`` or sealeval's opt-in ``"width_first"``.
        uncapped: lift the reference's record and run-size caps (the pack then
            verifies in sealeval only, with the uncapped limits).
        progress: optional :data:`sealeval._progress.Progress` callback
            (``loading``, the comparison's phases and planned draws,
            ``publishing``); counts only.

    Returns:
        The :class:`Evaluation` with the ``invarlock/evaluation-result-v2``
        document, the comparison report and the published pack.

    Raises:
        SealevalError: any request, input, budget, destination or signing
            refusal (nothing is published).
    """
    notify(progress, "loading", 0, 1)
    checked = _checked(
        request,
        signing_key=signing_key,
        unsigned=unsigned,
        overrides=overrides or {},
        paired=None,
        uncapped=uncapped,
        progress=progress,
    )
    loaded = checked.request
    try:
        report = compare_sides(
            loaded.baseline,
            loaded.subject,
            loaded.policy,
            max_bootstrap_draws=max_bootstrap_draws,
            decision_order=decision_order,
            progress=progress,
        )
        notify(progress, "publishing", 0, 1)
        # A held run read from a canonical file is copied from that file, not re-encoded.
        published = build_evidence_pack(
            loaded,
            comparison_report=report.canonical_bytes,
            signing_key=checked.signing_key,
            unsigned=checked.signing_key is None,
            limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
            decision_order=decision_order,
        )
    finally:
        loaded.close()
    document = result_document(loaded.authored.output, published)
    return Evaluation(document, report, published, checked)
