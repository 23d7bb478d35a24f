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
from sealeval.manifest.snapshot import KINDS, digest_component, snapshot_components
from sealeval.manifest.tool_inventory import (
    TOOL_INVENTORY_SCHEMA,
    ToolEntry,
    ToolInventory,
    build_tool_inventory,
    tool_inventory_digest,
)

__all__ = [
    "COMPONENTS",
    "KINDS",
    "MANIFEST_SCHEMA",
    "REASON_CODES",
    "TOOL_INVENTORY_SCHEMA",
    "VERIFICATION_SCHEMA",
    "ManifestVerification",
    "SealedWorkflowManifest",
    "ToolEntry",
    "ToolInventory",
    "build_tool_inventory",
    "digest_component",
    "seal_workflow_manifest",
    "snapshot_components",
    "tool_inventory_digest",
    "verify_at_evaluation_start",
]
