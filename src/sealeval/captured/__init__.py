"""Captured evaluation runs: records, runs, case sets, hosted identity, exports.

The wire formats are invarlock 0.17's ``invarlock/evaluation-run-v1``,
``invarlock/evaluation-case-set-v1`` and ``invarlock/evaluator-export-v1``
(canonical bytes: :func:`sealeval.canonical.encode_invarlock`). Every object
is validated once, on construction, and immutable afterwards; refusals are
:class:`CapturedRunError` with a closed code. See ``docs/captured-runs.md``.

The evidence-pack pipeline (policy, comparison, request, pack, verification,
receipt, report) is exported here too and imported on first use:
``from sealeval.captured import compare_runs, verify_evidence_pack``.

Importer authors typically call :func:`capture_evaluator_run` (or
:class:`RunWriter` for large imports) with records built from native rows,
:func:`run_from_evaluator_export` behind an ``EvaluatorProfile``, and
:func:`read_run` / :func:`run_from_document` for canonical runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sealeval._validate import JsonValue
from sealeval.captured.case_set import (
    CASE_SET_FORMAT,
    Case,
    CaseSet,
    case_set_digest,
    case_set_from_document,
    case_set_of_run,
    freeze_case_set,
    parse_case_set,
    validate_run_case_set,
    write_case_set,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.export import (
    BATCH_PROFILES,
    DELEGATING_PROFILES,
    EVALUATOR_NAMES,
    EXPORT_FORMAT,
    MAX_EXPORT_DEPTH,
    SCALAR_PROFILES,
    Capability,
    EvaluatorExport,
    EvaluatorProfile,
    InputCapabilities,
    capture_evaluator_run,
    evaluator_export_from_document,
    evaluator_input_capabilities,
    export_evaluator_result,
    parse_evaluator_export,
    read_evaluator_export,
    run_from_evaluator_export,
)
from sealeval.captured.likelihood import (
    BASIS,
    LikelihoodFacts,
    Source,
    check_likelihood_binding,
)
from sealeval.captured.run import (
    COMPAT_MAX_BYTES,
    COMPAT_MAX_RECORDS,
    INVARLOCK_LIMITS,
    PROJECTION_KIND,
    PROVENANCE_KINDS,
    RECORD_MEMBERS,
    RUN_FORMAT,
    UNLIMITED,
    InputProjection,
    Limits,
    ProjectionBinding,
    Record,
    Run,
    RunEncoder,
    RunHeader,
    RunReader,
    RunSummary,
    RunWriter,
    ScoreProvenance,
    make_run,
    parse_run,
    project_record,
    read_canonical_run,
    read_run,
    run_digest,
    run_from_decoded,
    run_from_document,
    write_run,
)
from sealeval.captured.service_identity import (
    MAX_IDENTITY_BYTES,
    SERVICE_KIND,
    Harness,
    ObservationWindow,
    ServiceIdentity,
    evaluated_subject_digest,
    validate_service_identity,
)

if TYPE_CHECKING:  # pragma: no cover - the lazy exports below, for type checkers
    from sealeval.captured.comparison import (
        ComparisonError,
        ComparisonReport,
        MetricSummary,
        compare_runs,
    )
    from sealeval.captured.importers import (
        import_run_streaming,
        load_run,
    )
    from sealeval.captured.importers.base import (
        ImportRefusalError,
    )
    from sealeval.captured.pack import (
        EvidencePackBuildError,
        PublishedPack,
        build_evidence_pack,
    )
    from sealeval.captured.pack_reader import (
        EvidencePack,
        EvidencePackError,
        read_evidence_pack,
    )
    from sealeval.captured.policy import (
        ComparisonPolicy,
        ComparisonPolicyError,
        load_comparison_policy,
        parse_comparison_policy,
    )
    from sealeval.captured.receipt import (
        ReceiptError,
        issue_receipt,
        publish_receipt,
        verify_receipt,
    )
    from sealeval.captured.report import (
        render_html,
        render_junit,
        render_markdown,
    )
    from sealeval.captured.request import (
        CapturedRequestError,
        load_captured_request,
        preflight,
    )
    from sealeval.captured.signing import (
        SigningKey,
        SigningKeyError,
        generate_key_directory,
        load_signing_key,
    )
    from sealeval.captured.trust import (
        TrustInputError,
        TrustInputs,
        check_verification_inputs,
        read_trust_profile,
    )
    from sealeval.captured.verify import (
        VerificationError,
        VerificationOutcome,
        verify_evidence_pack,
    )

__all__ = [
    "BASIS",
    "BATCH_PROFILES",
    "CASE_SET_FORMAT",
    "COMPAT_MAX_BYTES",
    "COMPAT_MAX_RECORDS",
    "DELEGATING_PROFILES",
    "EVALUATOR_NAMES",
    "EXPORT_FORMAT",
    "INVARLOCK_LIMITS",
    "MAX_EXPORT_DEPTH",
    "MAX_IDENTITY_BYTES",
    "PROJECTION_KIND",
    "PROVENANCE_KINDS",
    "RECORD_MEMBERS",
    "RUN_FORMAT",
    "SCALAR_PROFILES",
    "SERVICE_KIND",
    "UNLIMITED",
    "Capability",
    "CapturedRequestError",
    "CapturedRunError",
    "Case",
    "CaseSet",
    "ComparisonError",
    "ComparisonPolicy",
    "ComparisonPolicyError",
    "ComparisonReport",
    "EvaluatorExport",
    "EvaluatorProfile",
    "EvidencePack",
    "EvidencePackBuildError",
    "EvidencePackError",
    "Harness",
    "ImportRefusalError",
    "InputCapabilities",
    "InputProjection",
    "JsonValue",
    "LikelihoodFacts",
    "Limits",
    "MetricSummary",
    "ObservationWindow",
    "ProjectionBinding",
    "PublishedPack",
    "ReceiptError",
    "Record",
    "Run",
    "RunEncoder",
    "RunHeader",
    "RunReader",
    "RunSummary",
    "RunWriter",
    "ScoreProvenance",
    "ServiceIdentity",
    "SigningKey",
    "SigningKeyError",
    "Source",
    "TrustInputError",
    "TrustInputs",
    "VerificationError",
    "VerificationOutcome",
    "build_evidence_pack",
    "capture_evaluator_run",
    "case_set_digest",
    "case_set_from_document",
    "case_set_of_run",
    "check_likelihood_binding",
    "check_verification_inputs",
    "compare_runs",
    "evaluated_subject_digest",
    "evaluator_export_from_document",
    "evaluator_input_capabilities",
    "export_evaluator_result",
    "freeze_case_set",
    "generate_key_directory",
    "import_run_streaming",
    "issue_receipt",
    "load_captured_request",
    "load_comparison_policy",
    "load_run",
    "load_signing_key",
    "make_run",
    "parse_case_set",
    "parse_comparison_policy",
    "parse_evaluator_export",
    "parse_run",
    "preflight",
    "project_record",
    "publish_receipt",
    "read_canonical_run",
    "read_evaluator_export",
    "read_evidence_pack",
    "read_run",
    "read_trust_profile",
    "render_html",
    "render_junit",
    "render_markdown",
    "run_digest",
    "run_from_decoded",
    "run_from_document",
    "run_from_evaluator_export",
    "validate_run_case_set",
    "validate_service_identity",
    "verify_evidence_pack",
    "verify_receipt",
    "write_case_set",
    "write_run",
]

#: Names of the evidence-pack pipeline, imported on first use (the face stays light).
_LAZY: dict[str, str] = {
    "ComparisonPolicy": "sealeval.captured.policy",
    "ComparisonPolicyError": "sealeval.captured.policy",
    "load_comparison_policy": "sealeval.captured.policy",
    "parse_comparison_policy": "sealeval.captured.policy",
    "ComparisonError": "sealeval.captured.comparison",
    "ComparisonReport": "sealeval.captured.comparison",
    "MetricSummary": "sealeval.captured.comparison",
    "compare_runs": "sealeval.captured.comparison",
    "import_run_streaming": "sealeval.captured.importers",
    "load_run": "sealeval.captured.importers",
    "ImportRefusalError": "sealeval.captured.importers.base",
    "CapturedRequestError": "sealeval.captured.request",
    "load_captured_request": "sealeval.captured.request",
    "preflight": "sealeval.captured.request",
    "EvidencePackBuildError": "sealeval.captured.pack",
    "PublishedPack": "sealeval.captured.pack",
    "build_evidence_pack": "sealeval.captured.pack",
    "EvidencePack": "sealeval.captured.pack_reader",
    "EvidencePackError": "sealeval.captured.pack_reader",
    "read_evidence_pack": "sealeval.captured.pack_reader",
    "SigningKey": "sealeval.captured.signing",
    "SigningKeyError": "sealeval.captured.signing",
    "generate_key_directory": "sealeval.captured.signing",
    "load_signing_key": "sealeval.captured.signing",
    "TrustInputError": "sealeval.captured.trust",
    "TrustInputs": "sealeval.captured.trust",
    "check_verification_inputs": "sealeval.captured.trust",
    "read_trust_profile": "sealeval.captured.trust",
    "VerificationError": "sealeval.captured.verify",
    "VerificationOutcome": "sealeval.captured.verify",
    "verify_evidence_pack": "sealeval.captured.verify",
    "ReceiptError": "sealeval.captured.receipt",
    "issue_receipt": "sealeval.captured.receipt",
    "publish_receipt": "sealeval.captured.receipt",
    "verify_receipt": "sealeval.captured.receipt",
    "render_html": "sealeval.captured.report",
    "render_junit": "sealeval.captured.report",
    "render_markdown": "sealeval.captured.report",
}


def __getattr__(name: str) -> Any:
    """Import a pipeline name from its home module on first use."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(name)
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
