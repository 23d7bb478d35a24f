"""Live objects become runs: an Inspect EvalLog (inspect_ai's own reader) and lm-eval's dictionary.

The run from a live object must equal, digest for digest, the run from the
files the same tool wrote (``../shared/samples/evaluators``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from inspect_ai.log import EvalLog, read_eval_log, read_eval_log_samples

from sealeval.captured import run_digest
from sealeval.captured.importers import load_run
from sealeval.captured.importers.base import ImportOptions, ImportRefusalError
from sealeval.captured.importers.live import run_from_inspect_log, run_from_lm_eval_results
from support.digests import ARTIFACT
from support.vectors import samples_dir

SAMPLES = samples_dir()
CANARY = "CANARY-live-7d1f"


def _sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _eval_log() -> Path:
    return next((SAMPLES / "inspect_ai" / "logs").glob("*.eval"))


def _lm_eval_dir() -> Path:
    return next(path.parent for path in (SAMPLES / "lm_eval" / "out").rglob("results_*.json"))


def _lm_eval_results() -> tuple[dict[str, Any], Path]:
    """The dictionary simple_evaluate returned, rebuilt from the files it wrote."""
    folder = _lm_eval_dir()
    results_path = next(folder.glob("results_*.json"))
    results = json.loads(results_path.read_text(encoding="utf-8"))
    results["samples"] = {}
    for path in sorted(folder.glob("samples_*.jsonl")):
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        results["samples"][task] = rows
    return results, results_path


def _unwritten(row: dict[str, Any]) -> dict[str, Any]:
    """A row as it is in memory before lm-eval's writer: argument tuples, raw values."""

    def raw(text: Any) -> Any:
        if isinstance(text, list):
            return tuple(raw(item) for item in text)
        if text in ("True", "False"):
            return text == "True"
        try:
            return float(text)
        except ValueError:
            return text

    live = dict(row)
    live["arguments"] = [tuple(args.values()) for args in row["arguments"].values()]
    live["filtered_resps"] = [raw(item) for item in row["filtered_resps"]]
    live["resps"] = [raw(item) for item in row["resps"]]
    if row["target"].isdigit():
        live["target"] = int(row["target"])
    return live


def _tasks(results: dict[str, Any]) -> list[str]:
    return sorted(results["samples"])


# ---------------------------------------------------------------------------
# Inspect AI


def _file_run_id(path: Path) -> str:
    """The run id the log states: a file import refuses a contradicting one."""
    run_id = read_eval_log(path, header_only=True).eval.run_id
    assert isinstance(run_id, str)
    assert run_id
    return run_id


def test_inspect_log_streamed_in_archive_order_equals_the_eval_file_import() -> None:
    path = _eval_log()
    from_file = load_run(
        path,
        "inspect-eval",
        source={"name": "inspect_ai", "version": read_eval_log(path).eval.packages["inspect_ai"]},
        run_id=_file_run_id(path),
        artifact_digest=ARTIFACT,
    )
    live = run_from_inspect_log(
        read_eval_log(path, header_only=True),
        samples=read_eval_log_samples(path),
        run_id=_file_run_id(path),
        artifact_digest=ARTIFACT,
        source_digest=_sha(path),
    )
    assert run_digest(live) == run_digest(from_file)
    assert live.to_canonical() == from_file.to_canonical()


def test_inspect_log_in_memory_has_the_same_records_in_the_logs_order() -> None:
    path = _eval_log()
    log = read_eval_log(path)
    from_file = load_run(
        path,
        "inspect-eval",
        source={"name": "inspect_ai", "version": log.eval.packages["inspect_ai"]},
        run_id=log.eval.run_id,
        artifact_digest=ARTIFACT,
    )
    live = run_from_inspect_log(
        log, run_id=log.eval.run_id, artifact_digest=ARTIFACT, source_digest=None
    )
    assert [record.id for record in live.records] == [str(sample.id) for sample in log.samples]
    assert live.source_digest is None
    by_id = {record.id: record for record in from_file.records}
    assert len(by_id) == len(live.records)
    for record in live.records:
        assert record == by_id[record.id]
    errored = [record for record in live.records if record.error is not None]
    assert len(errored) == sum(1 for sample in log.samples if sample.error is not None) >= 1


def test_inspect_refusals_have_codes_and_never_echo() -> None:
    log = read_eval_log(_eval_log())
    cases: list[tuple[Any, dict[str, Any], str, str]] = [
        ({"samples": []}, {}, "invalid_document", "log"),
        (log.model_copy(update={"status": "error"}), {}, "incomplete_run", "log.status"),
        (log.model_copy(update={"version": 99}), {}, "unsupported_version", "log.version"),
        (log.model_copy(update={"samples": None}), {}, "no_records", "samples"),
        (log, {"samples": [CANARY]}, "invalid_document", "samples[0]"),
        (log, {"samples": []}, "no_records", "samples"),
        (log, {"samples": [log.samples[0], log.samples[0]]}, "duplicate_id", "samples[1].id"),
        (log, {"artifact_digest": None}, "identities_required", "artifact_digest"),
    ]
    for value, extra, code, field in cases:
        arguments: dict[str, Any] = {"run_id": "r", "artifact_digest": ARTIFACT, **extra}
        with pytest.raises(ImportRefusalError) as caught:
            run_from_inspect_log(value, **arguments)
        assert (caught.value.code, caught.value.field) == (code, field)
        assert CANARY not in str(caught.value)


def test_inspect_source_defaults_to_the_version_the_log_records() -> None:
    log = read_eval_log(_eval_log())
    run = run_from_inspect_log(log, run_id="r", artifact_digest=ARTIFACT)
    assert run.source.name == "inspect_ai"
    assert run.source.version == log.eval.packages["inspect_ai"]
    unversioned = log.model_copy(update={"eval": log.eval.model_copy(update={"packages": {}})})
    with pytest.raises(ImportRefusalError) as caught:
        run_from_inspect_log(unversioned, run_id="r", artifact_digest=ARTIFACT)
    assert (caught.value.code, caught.value.field) == ("identities_required", "source")


def test_inspect_scores_nan_is_missing_like_the_file_reader() -> None:
    log = read_eval_log(_eval_log())
    scored = next(sample for sample in log.samples if sample.scores)
    name = next(iter(scored.scores))
    broken = scored.model_copy(
        update={"scores": {name: scored.scores[name].model_copy(update={"value": float("nan")})}}
    )
    run = run_from_inspect_log(log, samples=[broken], run_id="r", artifact_digest=ARTIFACT)
    assert name not in run.records[0].scores
    infinite = scored.model_copy(
        update={"scores": {name: scored.scores[name].model_copy(update={"value": float("inf")})}}
    )
    with pytest.raises(ImportRefusalError) as caught:
        run_from_inspect_log(log, samples=[infinite], run_id="r", artifact_digest=ARTIFACT)
    assert caught.value.code == "non_finite_number"


# ---------------------------------------------------------------------------
# lm-evaluation-harness


@pytest.mark.parametrize("unwritten", [False, True], ids=["as-written", "in-memory-shapes"])
def test_lm_eval_results_equal_the_sample_file_import(unwritten: bool) -> None:
    results, results_path = _lm_eval_results()
    assert len(_tasks(results)) >= 2
    if unwritten:
        results["samples"] = {
            task: [_unwritten(row) for row in rows] for task, rows in results["samples"].items()
        }
    source = {"name": "lm-evaluation-harness", "version": results["lm_eval_version"]}
    for task in _tasks(results):
        samples_path = next(_lm_eval_dir().glob(f"samples_{task}_*.jsonl"))
        from_file = load_run(
            samples_path, "lm-eval-log-samples", source=source, run_id="s", artifact_digest=ARTIFACT
        )
        live = run_from_lm_eval_results(
            results,
            task=task,
            run_id="s",
            artifact_digest=ARTIFACT,
            source_digest=_sha(samples_path),
            results_digest=_sha(results_path),
        )
        assert run_digest(live) == run_digest(from_file), task
        assert live.records[0].context["lm_eval"]["task"] == task
        unbound = run_from_lm_eval_results(results, task=task, run_id="s", artifact_digest=ARTIFACT)
        assert unbound.source_digest is None
        assert "results_digest" not in unbound.records[0].context["lm_eval"]
        assert [record.id for record in unbound.records] == [r.id for r in from_file.records]
        assert [record.scores for record in unbound.records] == [
            record.scores for record in from_file.records
        ]


def test_lm_eval_refusals_have_codes_and_never_echo() -> None:
    results, _ = _lm_eval_results()
    first = _tasks(results)[0]
    rows = results["samples"][first]
    cases: list[tuple[Any, dict[str, Any], str, str]] = [
        ([CANARY], {"task": first}, "invalid_document", "results"),
        ({"results": {}}, {"task": first}, "missing_field", "results.samples"),
        (results, {}, "adapter_option_invalid", "task"),
        (results, {"task": CANARY}, "adapter_option_invalid", "task"),
        ({**results, "samples": {first: []}}, {}, "no_records", "samples"),
        ({**results, "samples": {first: [CANARY]}}, {}, "invalid_document", "rows[0]"),
        ({**results, "samples": {first: [rows[0], rows[0]]}}, {}, "duplicate_id", "rows[1].doc_id"),
        (
            {**results, "samples": {first: [{**rows[0], "acc": float("inf")}]}},
            {},
            "non_finite_number",
            "rows[0]",
        ),
        (
            {key: value for key, value in results.items() if key != "lm_eval_version"},
            {"task": first},
            "identities_required",
            "source",
        ),
    ]
    for value, extra, code, field in cases:
        with pytest.raises(ImportRefusalError) as caught:
            run_from_lm_eval_results(value, run_id="s", artifact_digest=ARTIFACT, **extra)
        assert (caught.value.code, caught.value.field) == (code, field)
        assert CANARY not in str(caught.value)


def test_eval_log_type_is_inspects_own() -> None:
    assert isinstance(read_eval_log(_eval_log(), header_only=True), EvalLog)


def test_live_bounds_and_shapes_are_refused() -> None:
    log = read_eval_log(_eval_log())
    small = ImportOptions(max_line_bytes=64)
    with pytest.raises(ImportRefusalError) as caught:
        run_from_inspect_log(log, run_id="r", artifact_digest=ARTIFACT, options=small)
    assert caught.value.code == "too_large"
    with pytest.raises(ImportRefusalError) as caught:
        run_from_inspect_log(log, run_id=None, artifact_digest=ARTIFACT)  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.field) == ("identities_required", "run_id")
    spec = log.eval.model_copy(update={"config": log.eval.config.model_copy(update={"epochs": 0})})
    with pytest.raises(ImportRefusalError) as caught:
        run_from_inspect_log(
            log.model_copy(update={"eval": spec}), run_id="r", artifact_digest=ARTIFACT
        )
    assert (caught.value.code, caught.value.field) == ("invalid_field", "log.eval.config.epochs")
    results, _ = _lm_eval_results()
    task = _tasks(results)[0]
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({**results, "samples": {task: "rows"}}, "invalid_field", "results.samples"),
        (
            {**results, "samples": {task: [{**results["samples"][task][0], "x": object()}]}},
            "invalid_document",
            "rows[0]",
        ),
        ({**results, "config": {"model": object()}}, "invalid_document", "results"),
    ]
    loop: dict[str, Any] = {}
    loop["self"] = loop  # no circular check: the recursion limit refuses it
    cases.append(({**results, "config": loop}, "invalid_document", "results"))
    for value, code, field in cases:
        with pytest.raises(ImportRefusalError) as caught:
            run_from_lm_eval_results(value, task=task, run_id="s", artifact_digest=ARTIFACT)
        assert (caught.value.code, caught.value.field) == (code, field)
    run = run_from_lm_eval_results(
        {**results, "samples": {task: results["samples"][task]}},
        run_id="s",
        artifact_digest=ARTIFACT,
        source_version="0.0.1",
    )
    assert (run.source.name, run.source.version) == ("lm-evaluation-harness", "0.0.1")
