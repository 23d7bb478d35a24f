"""Interoperability with the reference openmed 3.1.0, both directions.

1. sealeval writes sealed manifests and gate reports (and the evidence behind
   them); the reference, in its own virtualenv, must accept every one of them
   (re-checking seals, re-deriving the identical report bytes).
2. The reference writes its own manifests and reports; sealeval must accept
   every one of them (strict parsing, seal re-check, report digest re-check).

Usage: python scripts/interop/openmed_interop.py --reference-python PATH
Exit status 0 when every check passes in both directions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sealeval.canonical import decode, encode_openmed
from sealeval.gates.candidate import AgentCandidatePacket, CandidateBundle
from sealeval.gates.evaluation import AgentReleaseReport, evaluate_agent_release_gates
from sealeval.gates.fixtures import FIXTURES, load_fixture
from sealeval.gates.runner import AgentReleaseOptions, run_agent_release
from sealeval.manifest.sealed import (
    COMPONENTS,
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)

HERE = Path(__file__).resolve().parent
SIGNING_KEY = bytes(range(48))
_GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "interop",
    "GIT_AUTHOR_EMAIL": "interop@example.invalid",
    "GIT_COMMITTER_NAME": "interop",
    "GIT_COMMITTER_EMAIL": "interop@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def _candidate_workspace(root: Path) -> dict[str, str]:
    """Create a real git repository, artifacts, evidence and a key; return the arguments."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    env = {**os.environ, **_GIT_ENV}
    (repo / "README.md").write_text("interop candidate\n", encoding="utf-8")
    for command in (
        ["init", "-q", "-b", "main"],
        ["add", "README.md"],
        ["commit", "-q", "-m", "c"],
    ):
        subprocess.run(["git", *command], cwd=repo, env=env, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    artifacts = root / "artifacts"
    artifacts.mkdir()
    for name in ("wheel", "sdist", "tool_catalog", "policy"):
        (artifacts / name).write_bytes(f"{name} bytes".encode())
    evidence = {
        "schema_version": "openmed.eval.agent_release_source.v1",
        "source_sha": sha,
        "metrics": [item.to_dict() for item in load_fixture("baseline_pass")],
    }
    (artifacts / "evidence.json").write_text(json.dumps(evidence), encoding="utf-8")
    (artifacts / "signing.key").write_bytes(SIGNING_KEY)
    return {
        "repo_root": str(repo),
        "source_sha": sha,
        "wheel": str(artifacts / "wheel"),
        "sdist": str(artifacts / "sdist"),
        "tool_catalog": str(artifacts / "tool_catalog"),
        "policy": str(artifacts / "policy"),
        "evidence": str(artifacts / "evidence.json"),
        "signing_key_file": str(artifacts / "signing.key"),
    }


def _write_ours(root: Path, candidate: dict[str, str]) -> None:
    (root / "manifests").mkdir(parents=True)
    for index in range(3):
        components = {
            name: "sha256:" + format((index * 7 + offset) % 16, "x") * 64
            for offset, name in enumerate(COMPONENTS)
        }
        sealed = seal_workflow_manifest(components)
        (root / "manifests" / f"sealeval-{index}.json").write_text(sealed.to_json(), "ascii")
    (root / "gates").mkdir()
    for name in FIXTURES:
        evidence = load_fixture(name)
        candidate_digest = "sha256:" + "ab" * 32
        report = evaluate_agent_release_gates(evidence, candidate_digest=candidate_digest)
        bundle = {"candidate_digest": candidate_digest, "evidence": [e.to_dict() for e in evidence]}
        (root / "gates" / f"{name}.evidence.json").write_text(json.dumps(bundle), "utf-8")
        (root / "gates" / f"{name}.report.json").write_text(report.to_json(), "ascii")
    (root / "candidate").mkdir()
    run_agent_release(
        AgentReleaseOptions(
            source_sha=candidate["source_sha"],
            wheel=candidate["wheel"],
            sdist=candidate["sdist"],
            tool_catalog=candidate["tool_catalog"],
            policy=candidate["policy"],
            signing_key_file=candidate["signing_key_file"],
            output=root / "candidate" / "bundle.json",
            evidence=(candidate["evidence"],),
            repo_root=candidate["repo_root"],
        )
    )
    (root / "candidate" / "arguments.json").write_text(json.dumps(candidate), "utf-8")


def _check_theirs(root: Path, ours: Path) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    for path in sorted((root / "manifests").glob("*.json")):
        raw = path.read_bytes()
        manifest = SealedWorkflowManifest.from_json(raw)
        result = verify_at_evaluation_start(manifest, manifest.component_digests)
        checks[f"manifest:{path.stem}"] = (
            manifest.to_json().encode("ascii") == raw and result.eligible_for_sealed_results
        )
    for path in sorted((root / "gates").glob("*.report.json")):
        raw = path.read_bytes()
        report = AgentReleaseReport.from_dict(decode(raw))
        ours_raw = (ours / "gates" / path.name).read_bytes()
        checks[f"report:{path.stem}"] = report.to_json().encode("ascii") == raw == ours_raw
    reference_bundle = decode((root / "candidate" / "bundle.json").read_bytes())
    bundle = CandidateBundle.from_dict(reference_bundle)
    packet = AgentCandidatePacket.from_dict(reference_bundle["packet"])
    ours_text = (ours / "candidate" / "bundle.json").read_text(encoding="utf-8")
    checks["candidate:reference-bundle"] = (
        packet.verify(SIGNING_KEY)
        and not packet.verify(bytes(reversed(SIGNING_KEY)))
        and bundle.packet == packet
        and encode_openmed(reference_bundle) + "\n" == ours_text
    )
    return checks


def main() -> int:
    """Run both directions and print every check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", required=True, type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sealeval-interop-") as tmp:
        work = Path(tmp)
        candidate = _candidate_workspace(work / "workspace")
        _write_ours(work / "sealeval", candidate)
        completed = subprocess.run(
            [str(args.reference_python), str(HERE / "openmed_reference_side.py"), str(work)],
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode not in (0, 1) or not completed.stdout.strip():
            print("reference side failed to run:", completed.stderr[-2000:], file=sys.stderr)
            return 1
        reference_checks = json.loads(completed.stdout)["checks"]
        our_checks = _check_theirs(work / "reference", work / "sealeval")
    failed = 0
    for direction, checks in (
        ("sealeval -> openmed", reference_checks),
        ("openmed -> sealeval", our_checks),
    ):
        for name, ok in sorted(checks.items()):
            print(f"{direction:22} {name:40} {'ok' if ok else 'FAILED'}")
            failed += not ok
        if not checks:
            print(f"{direction:22} no checks ran")
            failed += 1
    total = len(reference_checks) + len(our_checks)
    print(f"interop: {total - failed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
