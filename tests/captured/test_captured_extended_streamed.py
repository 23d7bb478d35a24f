"""The extended statistics streamed: same bytes as the held path, memory bounded by records.

``extend_comparison_files`` (the library), ``extended_for_pack`` (``report
--extension``, ``sealeval extended``) and ``compare --uncapped --extension``
work from the per-record columns (``compare_run_files``, then
``scope_values_files``), never from held runs. Each is checked against the
held computation (``compare_runs`` + ``extend_comparison`` on ``Run``
objects) on the reference's pack vectors and on seeded random pairs;
facts are derived from the runs, never copied from a vector.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import sealeval.captured.pack_reader as reader_module
from sealeval.canonical import encode_invarlock
from sealeval.captured import write_run
from sealeval.captured.comparison import compare_runs, scope_values
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.extended import (
    EXTENSION_FORMAT,
    ExtensionError,
    PolicyExtension,
    extend_comparison,
    extend_comparison_files,
    extend_report,
    parse_policy_extension,
)
from sealeval.captured.pack_reader import (
    UNCAPPED_PACK_LIMITS,
    EvidencePack,
    EvidencePackError,
    read_evidence_pack,
)
from sealeval.captured.policy import ComparisonPolicy, parse_comparison_policy
from sealeval.captured.report import ReportError, extended_for_pack
from sealeval.captured.run_facts import RunFacts
from sealeval.cli import cli
from support.captured_extended import _policy, _runs
from support.captured_streaming import spy_held_runs
from support.vectors import pack_folder, vectors_dir, writable_copy

NAMES = ["text-200-multi-signed", "text-20-exact-signed", "missing-insufficient-signed"]
SIGNER = vectors_dir() / "invarlock" / "keys" / "evidence-signer" / "private.pem"
#: Extensions tried (the fewest permutation resamples keep the sign-flip tests fast).
SETTINGS: list[dict[str, Any]] = [
    {"permutation_resamples": 99},
    {
        "multiplicity": "holm",
        "binary_interval": "newcombe_1998_method10",
        "flip_ids": 5,
        "permutation_resamples": 99,
    },
    {"multiplicity": "benjamini_hochberg", "permutation_resamples": 99, "flip_ids": 0},
]
CANARY = "STREAMED-EXTENSION-CANARY-3301"


def _extension(policy: ComparisonPolicy, members: dict[str, Any]) -> PolicyExtension:
    return parse_policy_extension(
        {"format": EXTENSION_FORMAT, "policy_digest": policy.digest, **members}
    )


def _held(pack: EvidencePack, extension: PolicyExtension) -> dict[str, Any]:
    """The held computation: both runs in memory, ``compare_runs`` + ``extend_comparison``."""
    baseline, subject = pack.held_runs()
    order = "width_first" if "decision_rule" in pack.report else "reference"
    report = compare_runs(
        baseline=baseline, subject=subject, policy=pack.policy, decision_order=order
    )
    return extend_comparison(
        baseline=baseline, subject=subject, policy=pack.policy, extension=extension, report=report
    )


@pytest.mark.parametrize("name", NAMES)
def test_pack_extension_streamed_equals_the_held_computation(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    evidence = pack_folder(name) / "evidence"
    held_pack = read_evidence_pack(evidence)
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    facts_pack = read_evidence_pack(evidence, limits=UNCAPPED_PACK_LIMITS, runs="outline")
    assert isinstance(facts_pack.baseline, RunFacts)
    assert isinstance(facts_pack.subject, RunFacts)
    paths = [evidence / "records" / f"{side}.json" for side in ("baseline", "subject")]
    small = (
        held_pack.baseline.record_count < 100
        if isinstance(held_pack.baseline, RunFacts)
        else (len(held_pack.baseline.records) < 100)
    )
    for members in SETTINGS if small else SETTINGS[1:2]:  # a large pack: the richest only
        extension = _extension(held_pack.policy, members)
        expected = encode_invarlock(_held(held_pack, extension))
        if small:
            assert encode_invarlock(extended_for_pack(held_pack, extension)) == expected
        assert encode_invarlock(extended_for_pack(facts_pack, extension)) == expected
        if small:  # the library call on the files (the large pack: via the pack above)
            _, document = extend_comparison_files(
                baseline=paths[0], subject=paths[1], policy=held_pack.policy, extension=extension
            )
            assert encode_invarlock(document) == expected


@pytest.mark.parametrize("seed", [3, 11])
def test_seeded_random_pairs_give_the_held_bytes(seed: int, tmp_path: Path) -> None:
    baseline, subject = _runs(pairs=150, seed=seed)
    paths = [tmp_path / "baseline.json", tmp_path / "subject.json"]
    write_run(baseline, paths[0])
    write_run(subject, paths[1])
    policy = parse_comparison_policy(_policy(maximum_regression=0.01, width=0.5))
    for members in SETTINGS:
        extension = _extension(policy, members)
        held = extend_comparison(
            baseline=baseline, subject=subject, policy=policy, extension=extension
        )
        report, streamed = extend_comparison_files(
            baseline=paths[0], subject=paths[1], policy=policy, extension=extension
        )
        assert encode_invarlock(streamed) == encode_invarlock(held)
        assert (
            report.canonical_bytes
            == compare_runs(baseline=baseline, subject=subject, policy=policy).canonical_bytes
        )
        handles = {
            side: path.open("rb") for side, path in zip(("baseline", "subject"), paths, strict=True)
        }
        try:
            _, from_handles = extend_comparison_files(
                baseline=handles["baseline"],
                subject=handles["subject"],
                policy=policy,
                extension=extension,
                opener=lambda side: paths[side == "subject"].open("rb"),
            )
        finally:
            for handle in handles.values():
                handle.close()
        assert from_handles == held


def test_streamed_refusals_come_in_the_held_order(tmp_path: Path) -> None:
    baseline, subject = _runs(pairs=40, seed=5)
    good = tmp_path / "baseline.json"
    other = tmp_path / "subject.json"
    write_run(baseline, good)
    write_run(subject, other)
    policy = parse_comparison_policy(_policy())
    foreign = parse_comparison_policy(_policy(maximum_regression=0.02))
    mismatched = _extension(foreign, {})
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": CANARY}), encoding="utf-8")
    # a run file is refused before the extension is looked at
    with pytest.raises(CapturedRunError) as refused:
        extend_comparison_files(baseline=good, subject=broken, policy=policy, extension=mismatched)
    assert refused.value.field is not None
    assert refused.value.field.startswith("subject")
    assert CANARY not in str(refused.value)
    with pytest.raises(ExtensionError) as refused_extension:
        extend_comparison_files(baseline=good, subject=other, policy=policy, extension=mismatched)
    assert (refused_extension.value.code, refused_extension.value.field) == (
        "policy_mismatch",
        "policy_digest",
    )
    with pytest.raises(ExtensionError) as not_an_extension:
        extend_comparison_files(
            baseline=good,
            subject=other,
            policy=policy,
            extension=policy,  # type: ignore[arg-type]
        )
    assert not_an_extension.value.code == "invalid_document"


def test_extend_report_refuses_values_or_a_report_of_something_else() -> None:
    baseline, subject = _runs(pairs=40, seed=6)
    policy = parse_comparison_policy(_policy())
    extension = _extension(policy, {})
    report = compare_runs(baseline=baseline, subject=subject, policy=policy)
    values = scope_values(baseline=baseline, subject=subject, policy=policy)
    expected = extend_comparison(
        baseline=baseline, subject=subject, policy=policy, extension=extension, report=report
    )
    assert extend_report(report=report, per_pair=values, policy=policy, extension=extension) == (
        expected
    )
    with pytest.raises(ExtensionError) as short:
        extend_report(report=report, per_pair=values[:-1], policy=policy, extension=extension)
    assert (short.value.code, short.value.field) == ("report_mismatch", "report")
    other_policy = parse_comparison_policy(_policy(width=0.4))
    other = compare_runs(baseline=baseline, subject=subject, policy=other_policy)
    with pytest.raises(ExtensionError) as foreign:
        extend_report(report=other, per_pair=values, policy=policy, extension=extension)
    assert (foreign.value.code, foreign.value.field) == ("report_mismatch", "report")


def test_a_pack_run_replaced_after_reading_is_refused(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    writable_copy(pack_folder("text-20-exact-signed") / "evidence", evidence)
    pack = read_evidence_pack(evidence)
    run = evidence / "records" / "subject.json"
    data = run.read_bytes()
    run.unlink()
    run.write_bytes(data)  # same bytes, another file
    with pytest.raises(EvidencePackError) as refused:
        extended_for_pack(pack, _extension(pack.policy, {}))
    assert (refused.value.code, refused.value.status) == ("file_changed", 6)


# ---------------------------------------------------------------------------
# The commands


def _invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(
        cli, [str(arg) for arg in args], catch_exceptions=False, env={"COLUMNS": "100"}
    )


@pytest.fixture
def no_held_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count whole-run reads and in-memory comparisons made by ``compare``."""
    return spy_held_runs(monkeypatch)


@pytest.mark.parametrize("name", NAMES[1:])
def test_compare_uncapped_extension_streams_to_the_held_output(
    name: str, tmp_path: Path, no_held_runs: list[str]
) -> None:
    evidence = pack_folder(name) / "evidence"
    runs = (evidence / "records" / "baseline.json", evidence / "records" / "subject.json")
    policy_path = evidence / "inputs" / "policy.json"
    policy = read_evidence_pack(evidence).policy
    extension = tmp_path / "extension.json"
    extension.write_bytes(encode_invarlock(_extension(policy, SETTINGS[1]).to_dict()))
    for extra in ((), ("--json",)):
        arguments = (*runs, "--policy", policy_path, "--extension", extension, *extra)
        held = _invoke("compare", *arguments)
        assert no_held_runs
        no_held_runs.clear()
        streamed = _invoke("compare", *arguments, "--uncapped")
        assert no_held_runs == []
        assert (streamed.exit_code, streamed.stdout) == (held.exit_code, held.stdout)
        assert streamed.exit_code in (0, 7)


def test_compare_uncapped_extension_refusals_match_the_held_path(tmp_path: Path) -> None:
    evidence = pack_folder("text-20-exact-signed") / "evidence"
    good = evidence / "records" / "baseline.json"
    other = evidence / "records" / "subject.json"
    policy_path = evidence / "inputs" / "policy.json"
    policy = read_evidence_pack(evidence).policy
    extension = tmp_path / "extension.json"
    extension.write_bytes(encode_invarlock(_extension(policy, {}).to_dict()))
    foreign = tmp_path / "foreign.json"
    foreign.write_text(
        json.dumps({"format": EXTENSION_FORMAT, "policy_digest": "sha256:" + "0" * 64}),
        encoding="utf-8",
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{" + CANARY, encoding="utf-8")
    for arguments in (
        (good, other, "--policy", policy_path, "--extension", foreign),
        (good, other, "--policy", policy_path, "--extension", broken),
        (good, broken, "--policy", policy_path, "--extension", foreign),  # the run first
        (good, broken, "--policy", policy_path, "--extension", broken),
    ):
        held = _invoke("compare", *arguments)
        streamed = _invoke("compare", *arguments, "--uncapped")
        assert (streamed.exit_code, streamed.stdout, streamed.stderr) == (
            held.exit_code,
            held.stdout,
            held.stderr,
        )
        assert streamed.exit_code == 2
        assert CANARY not in streamed.output


def test_report_and_extended_commands_on_streamed_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evidence = pack_folder("missing-insufficient-signed") / "evidence"
    policy = read_evidence_pack(evidence).policy
    extension = tmp_path / "extension.json"
    extension.write_bytes(encode_invarlock(_extension(policy, SETTINGS[1]).to_dict()))
    held_report = _invoke("report", evidence, "--extension", extension)
    held_seal = tmp_path / "held.seal.json"
    made = _invoke(
        "extended", evidence, "--extension", extension, "--signing-key", SIGNER,
        "--output", held_seal,
    )  # fmt: skip
    assert (held_report.exit_code, made.exit_code) == (0, 0), made.output
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)  # stream even these small runs
    streamed_report = _invoke("report", evidence, "--uncapped", "--extension", extension)
    assert (streamed_report.exit_code, streamed_report.stdout) == (0, held_report.stdout)
    streamed_seal = tmp_path / "streamed.seal.json"
    made = _invoke(
        "extended", evidence, "--uncapped", "--extension", extension, "--signing-key", SIGNER,
        "--output", streamed_seal,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert streamed_seal.read_bytes() == held_seal.read_bytes()
    checked = _invoke("extended", evidence, "--uncapped", "--check", held_seal)
    assert checked.exit_code == 0, checked.output
    assert "Seal holds" in checked.stdout


def test_a_stored_comparison_that_does_not_recompute_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    evidence = pack_folder("text-20-exact-signed") / "evidence"
    monkeypatch.setattr(reader_module, "STREAM_MIN_BYTES", 0)
    pack = read_evidence_pack(evidence, limits=UNCAPPED_PACK_LIMITS, runs="outline")
    with pytest.raises(EvidencePackError) as not_held:
        pack.held_runs()
    assert (not_held.value.code, not_held.value.field) == ("invalid_field", "runs")
    stored = dict(pack.report)
    stored["limitations"] = [*stored["limitations"], "not the stored comparison"]
    other = dataclasses.replace(pack, report=stored)
    with pytest.raises(ReportError) as refused:
        extended_for_pack(other, _extension(pack.policy, {}))
    assert (refused.value.code, refused.value.field) == (
        "extended_mismatch",
        "extended.comparison_digest",
    )


# ---------------------------------------------------------------------------
# A file rewritten in place between the two passes


def _rewriting(monkeypatch: pytest.MonkeyPatch, module: Any, path: Path, data: bytes) -> list[int]:
    """Make ``module.scope_values_files`` (the second pass) rewrite ``path`` in place first."""
    real = module.scope_values_files
    calls: list[int] = []

    def rewrite_then_read(**arguments: Any) -> Any:
        calls.append(path.stat().st_ino)
        with path.open("r+b") as handle:  # same file, other bytes: a valid run of its own
            handle.write(data)
            handle.truncate()
        assert path.stat().st_ino == calls[0]
        return real(**arguments)

    monkeypatch.setattr(module, "scope_values_files", rewrite_then_read)
    return calls


@pytest.mark.parametrize("side", ["baseline", "subject"])
@pytest.mark.parametrize("hook", ["default_paths", "opener"])
def test_a_run_rewritten_between_the_passes_is_refused(
    side: str, hook: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sealeval.captured.extended as extended_module  # noqa: PLC0415

    baseline, subject = _runs(pairs=40, seed=8)
    paths = {"baseline": tmp_path / "baseline.json", "subject": tmp_path / "subject.json"}
    write_run(baseline, paths["baseline"])
    write_run(subject, paths["subject"])
    other = paths["subject" if side == "baseline" else "baseline"].read_bytes()
    policy = parse_comparison_policy(_policy())
    extension = _extension(policy, {})
    opener = None
    if hook == "default_paths":
        calls = _rewriting(monkeypatch, extended_module, paths[side], other)
    else:
        calls = []

        def opener(name: str) -> Path:
            if name == side:
                calls.append(paths[side].stat().st_ino)
                paths[side].write_bytes(other)  # truncated and rewritten: the same inode
            return paths[name]

    with pytest.raises(CapturedRunError) as refused:
        extend_comparison_files(
            baseline=paths["baseline"],
            subject=paths["subject"],
            policy=policy,
            extension=extension,
            opener=opener,
        )
    assert calls
    assert (refused.value.code, refused.value.field) == ("unreadable", side)
    assert paths[side].stat().st_ino == calls[0]


def test_compare_uncapped_extension_refuses_a_run_rewritten_between_the_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sealeval.cli.compare as compare_module  # noqa: PLC0415

    evidence = pack_folder("text-20-exact-signed") / "evidence"
    runs = [tmp_path / "baseline.json", tmp_path / "subject.json"]
    for run in runs:
        run.write_bytes((evidence / "records" / run.name).read_bytes())
    policy = read_evidence_pack(evidence).policy
    extension = tmp_path / "extension.json"
    extension.write_bytes(encode_invarlock(_extension(policy, {}).to_dict()))
    arguments = (*runs, "--policy", evidence / "inputs" / "policy.json", "--extension", extension)
    unchanged = _invoke("compare", *arguments, "--uncapped")
    assert unchanged.exit_code in (0, 7)
    calls = _rewriting(monkeypatch, compare_module, runs[0], runs[1].read_bytes())
    refused = _invoke("compare", *arguments, "--uncapped")
    assert calls
    assert refused.exit_code == 2
    assert "BASELINE: unreadable" in refused.output  # the argument the user typed


def test_a_pack_run_rewritten_between_the_passes_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sealeval.captured.report.extended as report_extended  # noqa: PLC0415

    evidence = tmp_path / "evidence"
    writable_copy(pack_folder("text-20-exact-signed") / "evidence", evidence)
    pack = read_evidence_pack(evidence)
    run = evidence / "records" / "subject.json"
    calls = _rewriting(
        monkeypatch, report_extended, run, (evidence / "records" / "baseline.json").read_bytes()
    )
    with pytest.raises(EvidencePackError) as refused:
        extended_for_pack(pack, _extension(pack.policy, {}))
    assert calls
    assert (refused.value.code, refused.value.field, refused.value.status) == (
        "file_changed",
        "subject",
        6,
    )
    assert refused.value.manifest_digest == pack.manifest_digest  # receipt-worthy
