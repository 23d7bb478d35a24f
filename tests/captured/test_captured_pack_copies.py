"""Held runs read from canonical files are copied into the pack, not re-encoded.

``load_captured_request`` keeps the open file of a held ``invarlock`` side
whose bytes hash to the run's digest (``CapturedRequest.copies``); the pack
writer copies that file and checks the written digest as for every file.
Facts are derived from the request's own files, never copied from a vector.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sealeval.canonical import digest_bytes
from sealeval.captured.evaluate import evaluate_request, preflight_request
from sealeval.captured.pack import EvidencePackBuildError, build_evidence_pack, prepare_pack
from sealeval.captured.request import CapturedRequest, load_captured_request
from sealeval.captured.run import Run
from sealeval.captured.run_facts import RunFacts
from sealeval.captured.signing import load_signing_key
from support.captured_request import oracle_loader
from support.vectors import cases, pack_case, tree_files, vectors_dir, writable_copy

V = vectors_dir() / "invarlock"
SIGNER = V / "keys" / "evidence-signer" / "private.pem"
MAIN = "text-20-exact-signed"
SIDES = ("baseline", "subject")


def _copy_request(case: dict[str, Any], tmp_path: Path) -> Path:
    root = tmp_path / "request"
    writable_copy(V / case["input"]["request_dir"], root)
    return root


def _load(case: dict[str, Any], root: Path) -> CapturedRequest:
    command = case["input"]["command"]
    output = command[command.index("--output") + 1] if "--output" in command else None
    return load_captured_request(
        root / "request.yaml",
        output=output,
        cwd=root,
        run_loader=oracle_loader(V / case["expected"]["evidence_dir"]),
    )


def _report(case: dict[str, Any]) -> bytes:
    return (V / case["expected"]["evidence_dir"] / "reports/evaluation.report.json").read_bytes()


def _build(case: dict[str, Any], request: CapturedRequest, **where: Any) -> Path:
    unsigned = "--unsigned" in case["input"]["command"]
    published = build_evidence_pack(
        request,
        comparison_report=_report(case),
        signing_key=None if unsigned else load_signing_key(SIGNER),
        unsigned=unsigned,
        **where,
    )
    return published.path


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the digest of every held run whose canonical bytes are re-encoded."""
    calls: list[str] = []
    real = Run.iter_canonical

    def spy(run: Run) -> Iterator[bytes]:
        calls.append(run.digest)
        return real(run)

    monkeypatch.setattr(Run, "iter_canonical", spy)
    return calls


@pytest.mark.parametrize("case", cases("invarlock/packs.json"))
def test_canonical_sides_are_copied_and_the_pack_keeps_its_bytes(
    case: dict[str, Any], tmp_path: Path, encoded: list[str]
) -> None:
    root = _copy_request(case, tmp_path)
    request = _load(case, root)
    copied = set()
    for side in SIDES:
        spec = getattr(request.authored, side)
        run = getattr(request, side)
        data = (root / spec.path).read_bytes()
        if spec.adapter == "invarlock" and digest_bytes(data) == run.digest:
            copied.add(side)
    assert set(request.copies) == copied
    for side, copy in request.copies.items():
        assert copy.digest == getattr(request, side).digest
        assert copy.rereadable
    encoded.clear()
    published = _build(case, request)
    assert tree_files(published) == tree_files(V / case["expected"]["evidence_dir"])
    held = {getattr(request, side).digest for side in SIDES if side not in copied}
    assert set(encoded) <= held  # a copied run is never re-encoded
    # Closed copies (after evaluate): the runs are encoded again, same bytes.
    request.close()
    assert all(not copy.rereadable for copy in request.copies.values())
    again = _build(case, request, destination=tmp_path / "again")
    assert tree_files(again) == tree_files(published)
    assert {getattr(request, side).digest for side in copied} <= set(encoded)


def test_a_run_file_rewritten_after_loading_is_refused(tmp_path: Path) -> None:
    case = pack_case(MAIN)
    root = _copy_request(case, tmp_path)
    request = _load(case, root)
    assert set(request.copies) == set(SIDES)
    path = root / request.authored.subject.path
    data = bytearray(path.read_bytes())
    position = data.index(b'"output":"') + len(b'"output":"')
    data[position] = ord("Z") if data[position] != ord("Z") else ord("Y")
    with path.open("r+b") as handle:  # in place: the descriptor kept sees the new bytes
        handle.write(bytes(data))
    with pytest.raises(EvidencePackBuildError) as refused:
        _build(case, request)
    assert (refused.value.code, refused.value.field) == ("self_check_failed", "subject")
    assert not request.destination.exists()


def test_a_non_canonical_run_file_is_encoded(tmp_path: Path, encoded: list[str]) -> None:
    case = pack_case(MAIN)
    root = _copy_request(case, tmp_path)
    path = root / "inputs" / "baseline.json"
    path.write_text(json.dumps(json.loads(path.read_bytes()), indent=1), encoding="utf-8")
    request = _load(case, root)
    assert set(request.copies) == {"subject"}
    encoded.clear()
    published = _build(case, request)
    assert tree_files(published) == tree_files(V / case["expected"]["evidence_dir"])
    assert encoded == [request.baseline.digest]


def test_evaluate_and_preflight_close_the_kept_files(tmp_path: Path) -> None:
    case = pack_case(MAIN)
    root = _copy_request(case, tmp_path)
    checked = preflight_request(root / "request.yaml", signing_key=SIGNER).checked
    assert set(checked.request.copies) == set(SIDES)
    assert all(not copy.rereadable for copy in checked.request.copies.values())
    done = evaluate_request(root / "request.yaml", signing_key=SIGNER)
    assert done.published is not None
    assert tree_files(done.published.path) == tree_files(V / case["expected"]["evidence_dir"])
    assert all(not copy.rereadable for copy in done.checked.request.copies.values())


def test_copy_sources_must_be_the_runs_files(tmp_path: Path) -> None:
    case = pack_case(MAIN)
    request = _load(case, _copy_request(case, tmp_path))
    arguments: dict[str, Any] = {
        "request": request.normalized,
        "baseline": request.baseline,
        "subject": request.subject,
        "policy": request.policy,
        "comparison_report": _report(case),
        "unsigned": True,
    }
    subject_copy = request.copies["subject"]
    assert isinstance(subject_copy, RunFacts)
    for copies in (
        {"baseline": subject_copy},  # another run's file
        {"report": subject_copy},  # not a run
        {"subject": "file"},
        ["subject"],
    ):
        with pytest.raises(EvidencePackBuildError) as refused:
            prepare_pack(**arguments, copies=copies)
        assert (refused.value.code, refused.value.field) == ("invalid_type", "copies")
    staged = prepare_pack(**arguments, copies={"subject": subject_copy})
    assert set(staged.copies) == {"subject"}
