"""Reference side of the openmed interoperability check (runs in the openmed 3.1.0 venv).

Reads the documents sealeval wrote, checks each with the reference
implementation, writes the reference's own documents for sealeval to check,
and prints one JSON result object. Uses only the reference's public API.

Usage: python openmed_reference_side.py WORKDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from openmed.eval.agent_release_candidate import AgentCandidatePacket, run_agent_release_candidate
from openmed.eval.suites.agent_release import MetricEvidence, evaluate_agent_release_gates
from openmed.eval.workflows.sealed_manifest import (
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)


def _load(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    """Check sealeval's documents with the reference and write the reference's own."""
    work = Path(sys.argv[1])
    ours = work / "sealeval"
    theirs = work / "reference"
    theirs.mkdir(exist_ok=True)
    checks: dict[str, bool] = {}

    # Sealed manifests written by sealeval.
    for path in sorted((ours / "manifests").glob("*.json")):
        document = _load(path)
        manifest = SealedWorkflowManifest(**document)  # re-checks the seal
        snapshot = dict(document["component_digests"])
        verification = verify_at_evaluation_start(document, snapshot)
        checks[f"manifest:{path.stem}"] = (
            manifest.to_json() == path.read_text(encoding="ascii")
            and verification.eligible_for_sealed_results
        )
    # Gate reports written by sealeval: the reference re-evaluates the same
    # evidence and must produce the identical report bytes.
    for path in sorted((ours / "gates").glob("*.evidence.json")):
        stem = path.name.removesuffix(".evidence.json")
        bundle = _load(path)
        evidence = [MetricEvidence.from_dict(item) for item in bundle["evidence"]]
        report = evaluate_agent_release_gates(evidence, candidate_digest=bundle["candidate_digest"])
        expected = (ours / "gates" / f"{stem}.report.json").read_text(encoding="ascii")
        checks[f"report:{stem}"] = report.to_json() == expected

    # Documents written by the reference for sealeval to check.
    (theirs / "manifests").mkdir(exist_ok=True)
    for index in range(3):
        components = {
            name: "sha256:" + format((index * 11 + offset) % 16, "x") * 64
            for offset, name in enumerate(
                [
                    "container",
                    "model",
                    "policy",
                    "post_processing",
                    "prompt",
                    "threshold",
                    "tokenizer",
                    "tool_inventory",
                ]
            )
        }
        sealed = seal_workflow_manifest(components)
        (theirs / "manifests" / f"reference-{index}.json").write_text(sealed.to_json(), "ascii")
    (theirs / "gates").mkdir(exist_ok=True)
    for path in sorted((ours / "gates").glob("*.evidence.json")):
        stem = path.name.removesuffix(".evidence.json")
        bundle = _load(path)
        evidence = [MetricEvidence.from_dict(item) for item in bundle["evidence"]]
        report = evaluate_agent_release_gates(
            list(reversed(evidence)), candidate_digest=bundle["candidate_digest"]
        )
        (theirs / "gates" / f"{stem}.report.json").write_text(report.to_json(), "ascii")

    # Candidate bundle written by sealeval: the packet verifies with the shared
    # key, and the reference derives the identical bundle from the same inputs.
    arguments = _load(ours / "candidate" / "arguments.json")
    assert isinstance(arguments, dict)
    key = Path(arguments["signing_key_file"]).read_bytes()
    bundle_text = (ours / "candidate" / "bundle.json").read_text(encoding="utf-8")
    bundle = json.loads(bundle_text)
    packet = AgentCandidatePacket.from_dict(bundle["packet"])
    candidate = run_agent_release_candidate(
        repo_root=arguments["repo_root"],
        source_sha=arguments["source_sha"],
        wheel=arguments["wheel"],
        sdist=arguments["sdist"],
        tool_catalog=arguments["tool_catalog"],
        policy=arguments["policy"],
        evidence_files=[arguments["evidence"]],
        signing_key=key,
    )
    reference_bundle = candidate.to_dict()
    checks["candidate:sealeval-bundle"] = (
        packet.verify(key)
        and not packet.verify(key[::-1])
        and json.dumps(reference_bundle, sort_keys=True, separators=(",", ":")) + "\n"
        == bundle_text
    )
    (theirs / "candidate").mkdir(exist_ok=True)
    (theirs / "candidate" / "bundle.json").write_text(json.dumps(reference_bundle), "utf-8")

    print(json.dumps({"checks": checks}, sort_keys=True))
    return 0 if checks and all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
