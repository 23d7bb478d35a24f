"""Sealed workflow manifests, component digests and the PHI-safe tool inventory."""

from sealeval.manifest.sealed import (
    COMPONENTS,
    MANIFEST_SCHEMA,
    REASON_CODES,
    VERIFICATION_SCHEMA,
    ManifestVerification,
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)

__all__ = [
    "COMPONENTS",
    "MANIFEST_SCHEMA",
    "REASON_CODES",
    "VERIFICATION_SCHEMA",
    "ManifestVerification",
    "SealedWorkflowManifest",
    "seal_workflow_manifest",
    "verify_at_evaluation_start",
]
