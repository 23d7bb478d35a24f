"""Session configuration bundles shared by the config and CLI tests.

Moved out of ``test_session_config.py`` so that no test module imports another."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from sealeval.canonical import decode
from sealeval.manifest.components import load_config_document
from sealeval.session.cases import ComparisonCase, SourceEvidence, evaluation_case_digest
from sealeval.session.holdout import commit_holdout
from support.refusals import CANARY

OTHER_DIGEST = "sha256:" + "ab" * 32


def copy_bundle(destination: Path) -> Path:
    """Copy the bundled demo session folder to ``destination`` and return it."""
    source = resources.files("sealeval") / "_data" / "demo" / "session"
    with resources.as_file(source) as path:
        shutil.copytree(path, destination)
    return destination


def base_document() -> dict[str, Any]:
    """Return the decoded attempt-1 configuration of the bundle."""
    source = resources.files("sealeval") / "_data" / "demo" / "session" / "attempt-1.yaml"
    with resources.as_file(source) as path:
        document = load_config_document(path)
    assert isinstance(document, dict)
    return document


def write_config(folder: Path, document: dict[str, Any], name: str = "session.json") -> Path:
    """Write ``document`` as a JSON configuration into ``folder``."""
    path = folder / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def canary_bundle(destination: Path) -> Path:
    """Copy the bundle and put the canary in every text, output, identity and the key.

    Returns the configuration file (``session.json``). Scores: 0.5 for both cases.
    """
    folder = copy_bundle(destination)
    cases = [
        {
            "case_ref": f"{CANARY}-case-{index}",
            "source_evidence": [
                {
                    "evidence_ref": f"{CANARY}-note-{index}",
                    "content": f"{CANARY} note {index} mentions finding-alpha only.",
                }
            ],
            "candidate_outputs": {
                CANARY: f"{CANARY} placeholder",
                "reference": f"{CANARY} reference {index}: finding-alpha finding-beta",
            },
        }
        for index in (1, 2)
    ]
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    built = [
        ComparisonCase(
            case_ref=case["case_ref"],
            source_evidence=tuple(SourceEvidence.from_dict(e) for e in case["source_evidence"]),
            candidate_outputs=case["candidate_outputs"],
        )
        for case in cases
    ]
    manifests = {
        kind: decode((folder / "holdout" / f"{kind}.json").read_bytes())
        for kind in ("label", "template", "randomization")
    }
    manifests["case"] = [evaluation_case_digest(case) for case in built]
    (folder / "holdout" / "case.json").write_text(json.dumps(manifests["case"]), encoding="utf-8")
    holdout = commit_holdout("synthetic-demo-1", manifests)
    (folder / "holdout" / "commitment.json").write_text(holdout.to_json(), encoding="utf-8")
    policy = decode((folder / "feedback-policy.json").read_bytes())
    policy["epoch_digest"] = holdout.commitment_digest
    (folder / "feedback-policy.json").write_text(json.dumps(policy), encoding="utf-8")
    (folder / "randomization.key").write_bytes((CANARY * 2).encode("ascii"))
    (folder / "corpora" / "canaries.json").write_text(json.dumps([CANARY]), encoding="utf-8")
    (folder / "corpora" / "public.json").write_text(
        json.dumps([f"{CANARY} public item"]), encoding="utf-8"
    )
    document = base_document()
    manifest_digest = document["candidate"]["manifests"]["evaluated"]
    document["cases"] = "cases.json"
    document["candidate"] = {
        "identity": CANARY,
        "manifests": {CANARY: manifest_digest, "reference": OTHER_DIGEST},
    }
    document["conflict_of_interest"]["reviewer_ref"] = CANARY
    document["corpora"]["canaries"] = "corpora/canaries.json"
    document["corpora"]["public"] = "corpora/public.json"
    return write_config(folder, document)
