"""Faces of the session and gates packages: one home per name, old import paths kept.

Each package split along its seams keeps a face (its ``__init__``, and the
module names callers used before the split) that re-exports the public names.
A face defines nothing itself: every exported class and function lives in a
home module of the same package, and the historical paths re-export exactly
the objects of the new homes (the same objects, not copies).
"""

from __future__ import annotations

import importlib
import inspect

import pytest

#: face -> the package its names must come from.
FACES = {
    "sealeval.gates.adversarial": "sealeval.gates.adversarial.",
    "sealeval.gates.adversarial.boundary": "sealeval.gates.adversarial.",
    "sealeval.gates.adapters.adversarial": "sealeval.gates.adversarial.",
    "sealeval.gates.recovery": "sealeval.gates.recovery.",
    "sealeval.gates.recovery_suite": "sealeval.gates.recovery.",
    "sealeval.gates.adapters.recovery": "sealeval.gates.recovery.",
    "sealeval.gates.omop": "sealeval.gates.omop.",
    "sealeval.gates.candidate": "sealeval.gates.candidate.",
    "sealeval.session.adjudication": "sealeval.session.adjudication.",
    "sealeval.session.budget": "sealeval.session.budget.",
}

#: Names callers and tests import from the historical paths (a sample per face).
HISTORICAL = {
    "sealeval.gates.adversarial.boundary": ("DefaultToolBoundary", "ToolCall", "freeze_json"),
    "sealeval.gates.adversarial.suite": ("run_adversarial_suite", "AdversarialSuiteReport"),
    "sealeval.gates.adapters.adversarial": (
        "adversarial_release_evidence",
        "AdversarialEvidenceCase",
    ),
    "sealeval.gates.recovery": ("plan_recovery", "RecoveryCheckpoint", "verify_lineage"),
    "sealeval.gates.recovery_suite": ("run_recovery_suite", "recovery_suite_evidence"),
    "sealeval.gates.adapters.recovery": ("recovery_release_evidence", "RecoveryEvidenceCase"),
    "sealeval.gates.omop": ("stage_omop_batch", "load_staged_batch", "OmopLoaderError"),
    "sealeval.gates.candidate": ("decide_candidate", "AgentCandidatePacket", "HmacKey"),
    "sealeval.session.adjudication": ("render_blinded_packets", "PrivateMapping"),
    "sealeval.session.budget": ("FeedbackBudgetLedger", "decide_official_attempt"),
}


@pytest.mark.parametrize("face", sorted(FACES))
def test_every_exported_name_resolves_to_a_home(face: str) -> None:
    module = importlib.import_module(face)
    exported = module.__all__
    assert exported, face
    assert len(set(exported)) == len(exported)
    homes = set()
    for name in exported:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith(FACES[face]), (face, name)
            homes.add(value.__module__)
    assert face not in homes or face.rsplit(".", 1)[-1] == "boundary"


@pytest.mark.parametrize(("path", "names"), sorted(HISTORICAL.items()))
def test_historical_paths_export_the_home_objects(path: str, names: tuple[str, ...]) -> None:
    module = importlib.import_module(path)
    for name in names:
        value = getattr(module, name)
        assert name in module.__all__
        if inspect.isclass(value) or inspect.isfunction(value):
            home = importlib.import_module(value.__module__)
            assert getattr(home, name) is value


def test_the_adversarial_face_no_longer_hides_corpus_or_evidence() -> None:
    """Before the cycle went, these had to be imported from their modules directly."""
    face = importlib.import_module("sealeval.gates.adversarial")
    corpus = importlib.import_module("sealeval.gates.adversarial.corpus")
    evidence = importlib.import_module("sealeval.gates.adversarial.evidence")
    assert face.DEFAULT_FIXTURES is corpus.DEFAULT_FIXTURES
    assert face.DEFAULT_EVIDENCE_CASES is corpus.DEFAULT_EVIDENCE_CASES
    assert face.adversarial_release_evidence is evidence.adversarial_release_evidence
