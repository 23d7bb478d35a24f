"""``evaluate`` on runs it never holds: the streamed path equals the in-memory one.

Large canonical runs read without a record cap reach ``evaluate`` as
:class:`~sealeval.captured.request.RunFacts` (one streamed pass; the open
file kept), are compared by ``compare_run_files`` and copied into the pack
chunk by chunk. ``STREAM_MIN_BYTES`` is lowered to 0 so the small vector
packs take that path: every pack byte, result document, preflight document
and refusal must be what the in-memory path produces.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

import sealeval.captured.evaluate as evaluate_module
import sealeval.captured.request.files as files_module
from sealeval.captured.evaluate import compare_sides, evaluate_request, preflight_request
from sealeval.captured.importers import import_run_streaming
from sealeval.captured.pack import EvidencePackBuildError, build_evidence_pack
from sealeval.captured.request import (
    CapturedRequestError,
    RunFacts,
    SourceSpec,
    load_captured_request,
    read_run_facts,
)
from sealeval.captured.run import INVARLOCK_LIMITS, UNLIMITED, Limits, Run
from sealeval.errors import SealevalError
from support.vectors import cases, pack_folder, tree_files, vectors_dir, writable_copy

V = vectors_dir() / "invarlock"
_OPTIONS: dict[str, Any] = {"max_bootstrap_draws": 10**9, "decision_order": "reference"}
SIGNER = V / "keys" / "evidence-signer" / "private.pem"


@pytest.fixture
def inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stream every uncapped run (native sides imported); record held comparisons."""
    monkeypatch.setattr(files_module, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(evaluate_module, "STREAM_MIN_BYTES", 0)
    held: list[str] = []
    original = evaluate_module.compare_runs

    def spied(**kwargs: Any) -> Any:
        held.append("compare_runs")
        return original(**kwargs)

    monkeypatch.setattr(evaluate_module, "compare_runs", spied)
    return held


def _overrides(command: list[str]) -> dict[str, str | None]:
    return {
        name: command[command.index(option) + 1]
        for option, name in (("--output", "output"), ("--request-root", "request_root"))
        if option in command
    }


@pytest.mark.parametrize("case", cases("invarlock/packs.json"))
def test_streamed_evaluate_rebuilds_every_vector_pack(
    case: dict[str, Any], inside: Path, streamed: list[str]
) -> None:
    expected = case["expected"]
    pack = V / Path(case["input"]["request_dir"]).parent  # the case names its request
    workspace = writable_copy(pack, inside / case["name"])
    request = workspace / "request" / "request.yaml"
    os.chdir(request.parent)
    command = case["input"]["command"]
    unsigned = "--unsigned" in command
    key = None if unsigned else SIGNER
    overrides = _overrides(command)
    checked = preflight_request(
        request, signing_key=key, unsigned=unsigned, overrides=overrides, uncapped=True
    )
    reference = expected["evaluate_preflight"]["stdout_json"]
    document = dict(checked.document)
    document.pop("output")
    assert document == {name: value for name, value in reference.items() if name != "output"}
    sides = (checked.checked.request.baseline, checked.checked.request.subject)
    evaluation = evaluate_request(
        request, signing_key=key, unsigned=unsigned, overrides=overrides, uncapped=True
    )
    result = dict(evaluation.document)
    evidence = result.pop("evidence")
    reference = expected["evaluate"]["stdout_json"]
    assert result == {name: value for name, value in reference.items() if name != "evidence"}
    assert tree_files(request.parent / evidence) == tree_files(V / expected["evidence_dir"])
    # Whenever a side was streamed, no held comparison ran (preflight and evaluate alike).
    if any(isinstance(side, RunFacts) for side in sides):
        assert streamed == []
    # The adapter-invarlock canonical runs are streamed, never held.
    adapters = {
        checked.checked.request.authored.side(name).adapter for name in ("baseline", "subject")
    }
    files = [
        request.parent / checked.checked.request.authored.side(name).path
        for name in ("baseline", "subject")
    ]
    if adapters == {"invarlock"} and all(_canonical(path) for path in files):
        assert all(isinstance(side, RunFacts) for side in sides)
    # Sides read by a native adapter are imported to private files and streamed too.
    for name, side in zip(("baseline", "subject"), sides, strict=True):
        if checked.checked.request.authored.side(name).adapter != "invarlock":
            assert isinstance(side, RunFacts)


def _canonical(path: Path) -> bool:
    from sealeval.captured.run import read_run  # noqa: PLC0415

    return read_run(path).to_canonical() == path.read_bytes()


def test_a_text_vector_is_streamed_on_both_sides(inside: Path, streamed: list[str]) -> None:
    """A vector pack takes the streamed path end to end (the test above is not vacuous)."""
    workspace = writable_copy(pack_folder("text-20-exact-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    loaded = load_captured_request(request, limits=UNLIMITED)
    assert isinstance(loaded.baseline, RunFacts)
    assert isinstance(loaded.subject, RunFacts)
    evaluate_request(request, signing_key=SIGNER, uncapped=True)
    assert streamed == []


def _pin(workspace: Path, digest: str) -> None:
    policy = workspace / "request" / "policy.json"
    document = json.loads(policy.read_bytes())
    document["expected_case_set_digest"] = digest
    policy.write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.parametrize("pinned", ["sha256:" + "0" * 64, "not-a-digest"])
def test_a_wrong_case_set_pin_is_refused_alike(
    pinned: str, inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = writable_copy(pack_folder("case-set-pinned-signed"), inside / "pack")
    _pin(workspace, pinned)
    request = workspace / "request" / "request.yaml"
    outcomes: list[tuple[str, str | None, type[Exception]]] = []
    for threshold in (files_module.STREAM_MIN_BYTES, 0):
        monkeypatch.setattr(files_module, "STREAM_MIN_BYTES", threshold)
        with pytest.raises(SealevalError) as caught:
            evaluate_request(request, signing_key=SIGNER, uncapped=True)
        outcomes.append((caught.value.code, caught.value.field, type(caught.value)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] in ("case_set_mismatch", "invalid_digest")
    assert not (request.parent / "evidence").exists()


def test_the_pinned_case_set_is_checked_on_streamed_runs(
    inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = writable_copy(pack_folder("case-set-pinned-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    monkeypatch.setattr(files_module, "STREAM_MIN_BYTES", 0)
    loaded = load_captured_request(request, limits=UNLIMITED)
    assert isinstance(loaded.baseline, RunFacts)
    pinned = loaded.policy.expected_case_set_digest
    assert pinned is not None
    assert loaded.baseline.case_set_for(loaded.policy) == pinned


def test_mixed_sides_compare_streamed_with_the_same_report(
    inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One held run and one streamed run give the in-memory report's bytes."""
    workspace = writable_copy(pack_folder("text-200-multi-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    held = load_captured_request(request, limits=UNLIMITED)
    monkeypatch.setattr(files_module, "STREAM_MIN_BYTES", 0)
    facts = load_captured_request(request, limits=UNLIMITED)
    assert isinstance(facts.subject, RunFacts)
    expected = compare_sides(held.baseline, held.subject, held.policy, **_OPTIONS)
    mixed = compare_sides(held.baseline, facts.subject, held.policy, **_OPTIONS)
    both = compare_sides(facts.baseline, facts.subject, held.policy, **_OPTIONS)
    assert mixed.canonical_bytes == expected.canonical_bytes == both.canonical_bytes


def test_a_run_changed_after_its_pass_is_refused_and_nothing_published(
    inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = writable_copy(pack_folder("text-20-exact-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    monkeypatch.setattr(files_module, "STREAM_MIN_BYTES", 0)
    loaded = load_captured_request(request, limits=UNLIMITED)
    assert isinstance(loaded.subject, RunFacts)
    report = compare_sides(loaded.baseline, loaded.subject, loaded.policy, **_OPTIONS)
    path = request.parent / loaded.authored.subject.path
    data = bytearray(path.read_bytes())
    data[-2] = ord(" ") if data[-2] != ord(" ") else ord("\t")  # same inode, same size
    with path.open("r+b") as handle:
        handle.write(bytes(data))
    with pytest.raises(EvidencePackBuildError) as caught:
        build_evidence_pack(
            loaded, comparison_report=report.canonical_bytes, unsigned=True, limits=_uncapped()
        )
    assert caught.value.code == "self_check_failed"
    assert not (request.parent / loaded.authored.output).exists()
    # A comparison that reads the changed bytes binds their digest: the pack refuses the report.
    with pytest.raises(SealevalError):
        compare_sides(loaded.baseline, loaded.subject, loaded.policy, **_OPTIONS)
    shrunk = bytes(data[: len(data) // 2])
    with path.open("r+b") as handle:
        handle.write(shrunk)
        handle.truncate()
    with pytest.raises(EvidencePackBuildError) as short:
        build_evidence_pack(
            loaded, comparison_report=report.canonical_bytes, unsigned=True, limits=_uncapped()
        )
    assert short.value.code == "self_check_failed"


def _uncapped() -> Any:
    from sealeval.captured.pack_reader import UNCAPPED_PACK_LIMITS  # noqa: PLC0415

    return UNCAPPED_PACK_LIMITS


def test_native_sides_are_held_below_the_threshold_or_within_a_record_cap(
    inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = writable_copy(pack_folder("native-jsonl-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    loader = evaluate_module.run_loader()
    small = load_captured_request(request, limits=UNLIMITED, run_loader=loader)
    assert isinstance(small.baseline, Run)
    monkeypatch.setattr(evaluate_module, "STREAM_MIN_BYTES", 0)
    capped = load_captured_request(request, limits=INVARLOCK_LIMITS, run_loader=loader)
    assert isinstance(capped.baseline, Run)
    streamed = load_captured_request(request, limits=UNLIMITED, run_loader=loader)
    assert isinstance(streamed.baseline, RunFacts)
    assert isinstance(streamed.subject, RunFacts)
    assert streamed.baseline.digest == small.baseline.digest
    assert streamed.baseline.record_count == len(small.baseline.records)
    assert streamed.normalized.digest == small.normalized.digest


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder the private import folders are created in (to see them removed)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_private_import_folder_is_0700_and_removed(
    inside: Path, streamed: list[str], private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes: list[int] = []
    original = evaluate_module.import_run_streaming

    def spied(path: Any, destination: Any, **kwargs: Any) -> Any:
        modes.append(os.stat(Path(destination).parent).st_mode & 0o777)
        return original(path, destination, **kwargs)

    monkeypatch.setattr(evaluate_module, "import_run_streaming", spied)
    workspace = writable_copy(pack_folder("native-hosted-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    phases: list[str] = []
    evaluate_request(
        request,
        signing_key=SIGNER,
        uncapped=True,
        progress=lambda phase, _done, _total: phases.append(phase),
    )
    assert modes == [0o700, 0o700]
    assert list(private_tmp.iterdir()) == []
    assert "importing" in phases
    assert streamed == []


def _refusal(request: Path) -> tuple[str, str | None, str]:
    with pytest.raises(SealevalError) as caught:
        evaluate_request(request, signing_key=SIGNER, uncapped=True)
    return caught.value.code, caught.value.field, str(caught.value)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text, mark: text + "{not json " + mark + "\n", id="malformed_line"),
        pytest.param(
            lambda text, _mark: text + text.splitlines(keepends=True)[0], id="duplicate_id"
        ),
        pytest.param(lambda _text, mark: '{"id": "' + mark + '"}\n', id="missing_members"),
        pytest.param(lambda _text, _mark: "", id="empty"),
    ],
)
def test_native_refusals_are_those_of_the_held_path(
    damage: Any, inside: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch, canary: str
) -> None:
    workspace = writable_copy(pack_folder("native-jsonl-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    native = request.parent / "inputs" / "native-subject.jsonl"
    native.write_text(damage(native.read_text(encoding="utf-8"), canary), encoding="utf-8")
    held = _refusal(request)
    monkeypatch.setattr(evaluate_module, "STREAM_MIN_BYTES", 0)
    streamed = _refusal(request)
    assert streamed == held
    assert canary not in streamed[2]
    assert str(inside) not in streamed[2]
    assert list(private_tmp.iterdir()) == []
    assert not (request.parent / "evidence").exists()


def test_a_streamed_native_run_must_bind_the_declared_projection(inside: Path) -> None:
    """Every record of an imported run is checked against the declared projection."""
    workspace = writable_copy(pack_folder("native-projected-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"

    def unprojected(path: Path, side: SourceSpec, *, limits: Limits) -> RunFacts:
        target = inside / f"{side.side}.json"
        import_run_streaming(
            path,
            target,
            adapter=side.adapter,
            source=side.source,
            run_id=side.run_id,
            artifact_digest=side.artifact_digest,
            limits=limits,
        )
        return read_run_facts(os.open(target, os.O_RDONLY), limits=limits)

    with pytest.raises(CapturedRequestError) as caught:
        load_captured_request(request, limits=UNLIMITED, run_loader=unprojected)
    assert (caught.value.code, caught.value.field) == (
        "projection_mismatch",
        "comparison.baseline.input_projection",
    )
    loaded = load_captured_request(
        request, limits=UNLIMITED, run_loader=evaluate_module.import_run_facts
    )
    assert isinstance(loaded.baseline, RunFacts)


def test_no_private_temporary_folder_is_refused_without_a_path(
    inside: Path, streamed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = writable_copy(pack_folder("native-jsonl-signed"), inside / "pack")
    request = workspace / "request" / "request.yaml"
    missing = inside / "no-such-tmp"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    with pytest.raises(CapturedRequestError) as caught:
        evaluate_request(request, signing_key=SIGNER, uncapped=True)
    assert (caught.value.code, caught.value.field) == ("unreadable", "comparison.baseline.path")
    assert str(missing) not in str(caught.value)
    assert not (request.parent / "evidence").exists()
