"""The native lm-eval reader's fast path gives the bytes of the record-by-record path.

``import_run_streaming`` hands a native reader's records to the run writer
with their decoded rows (``decoded_records``), so the rows' members are not
walked again; ``load_run`` builds every record as a ``Record``. Both must
give the same canonical run, whatever the lines hold: rows read the fast
way, rows with ``NaN`` (decoded the tolerant way), rows with escapes the
fast scanner leaves to the other decoder, and deep rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.importers import (
    ImportOptions,
    ImportRefusalError,
    import_run_streaming,
    load_run,
)
from sealeval.captured.importers.native._common import iter_jsonl, iter_jsonl_rows
from support.digests import ARTIFACT
from support.vectors import samples_dir

SAMPLES = samples_dir()
IDENTITY: dict[str, Any] = {
    "source": {"name": "lm-evaluation-harness", "version": "0.4.13"},
    "run_id": "fast-1",
    "artifact_digest": ARTIFACT,
}


def _variants(row: dict[str, Any]) -> list[str]:
    """Lines of one document under several filters, each shaped differently."""
    nan_line = json.dumps({**row, "filter": "nan", "exact_match": float("nan")})
    escaped = json.dumps({**row, "filter": "escape", "doc": {**row["doc"], "q": "\ud83d\ude00 é"}})
    many = [[] for _ in range(150)]  # more brackets than the fast scanner takes, shallow
    return [
        json.dumps({**row, "filter": "plain"}),
        nan_line,
        escaped,
        json.dumps({**row, "filter": "brackets", "doc": {**row["doc"], "nest": many}}),
        "   " + json.dumps({**row, "filter": "indented"}),
    ]


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    source = next(SAMPLES.glob("lm_eval/out/*/samples_toy_mc_*.jsonl"))
    rows = [json.loads(line) for line in source.read_text("utf-8").splitlines() if line]
    path = tmp_path / "samples.jsonl"
    lines = [variant for row in rows for variant in _variants(row)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_streamed_native_run_equals_load_run(samples: Path, tmp_path: Path) -> None:
    run = load_run(samples, "lm-eval-log-samples", **IDENTITY)
    destination = tmp_path / "run.json"
    summary = import_run_streaming(samples, destination, adapter="lm-eval-log-samples", **IDENTITY)
    assert destination.read_bytes() == run.to_canonical()
    assert summary.run_digest == run.digest
    lines = [line for line in samples.read_text("utf-8").splitlines() if line.strip()]
    assert summary.record_count == len(lines)


def test_rows_read_fast_equal_the_tolerant_decoder(samples: Path) -> None:
    options = ImportOptions()
    with samples.open("rb") as first, samples.open("rb") as second:
        fast = list(iter_jsonl_rows(first, options))
        plain = list(iter_jsonl(second, options))
    assert [(where, row, nan) for where, row, nan, _ in fast] == plain
    heights = [height for *_, height in fast]
    assert any(height is not None for height in heights)  # the fast path was taken
    assert any(height is None for height in heights)  # and the other one


def test_a_duplicate_key_is_refused_on_both_paths(tmp_path: Path) -> None:
    source = next(SAMPLES.glob("lm_eval/out/*/samples_toy_mc_*.jsonl"))
    first = source.read_text("utf-8").splitlines()[0]
    path = tmp_path / "dup.jsonl"
    path.write_text(first[:-1] + ', "doc_id": 9}\n', encoding="utf-8")
    with pytest.raises(ImportRefusalError) as streamed:
        import_run_streaming(path, tmp_path / "a.json", adapter="lm-eval-log-samples", **IDENTITY)
    with pytest.raises(ImportRefusalError) as loaded:
        load_run(path, "lm-eval-log-samples", **IDENTITY)
    assert (streamed.value.code, streamed.value.field) == ("duplicate_key", "line[1]")
    assert (loaded.value.code, loaded.value.field) == ("duplicate_key", "line[1]")
    assert not (tmp_path / "a.json").exists()


@pytest.fixture
def forced_worker(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Fork the worker for any file; it encodes every batch and the parent waits for each.

    Returns the ``parallel`` flags ``write_lines`` was called with for a native mapper.
    """
    from sealeval.captured.importers import parallel  # noqa: PLC0415

    calls: list[bool] = []
    original = parallel.write_lines

    def spy(*args: Any, parallel: bool, mapper: Any = None) -> Any:
        if mapper is not None:
            calls.append(parallel)
        return original(*args, parallel=parallel, mapper=mapper)

    monkeypatch.setattr(parallel, "write_lines", spy)
    monkeypatch.setattr(parallel, "can_fork", lambda _size: True)
    monkeypatch.setattr(parallel, "_BATCH_LINES", 3)
    monkeypatch.setattr(parallel, "_LEAD", 0)
    monkeypatch.setattr(parallel._Board, "position", lambda _self: -1)
    monkeypatch.setattr(parallel._Worker, "_encoding", lambda _self, _index: True)
    return calls


def test_worker_process_gives_the_one_process_run(
    samples: Path, tmp_path: Path, forced_worker: list[bool]
) -> None:
    """The native reader's lines through the two-process writer: the bytes of ``load_run``."""
    run = load_run(samples, "auto", **IDENTITY)
    destination = tmp_path / "run.json"
    summary = import_run_streaming(samples, destination, adapter="auto", **IDENTITY)
    assert forced_worker == [True]  # the native reader's lines went to the worker
    assert summary.adapter == "lm-eval-log-samples"
    assert destination.read_bytes() == run.to_canonical()
    assert summary.error_count == sum(record.error is not None for record in run)


@pytest.mark.parametrize("worker", [False, True], ids=["one-process", "worker"])
def test_a_repeated_document_and_filter_is_refused_at_its_line(
    tmp_path: Path, worker: bool, request: pytest.FixtureRequest
) -> None:
    """``duplicate_id`` at ``line[N].doc_id``, whichever process encoded the line."""
    if worker:
        request.getfixturevalue("forced_worker")
    source = next(SAMPLES.glob("lm_eval/out/*/samples_toy_gen_*.jsonl"))
    lines = [line for line in source.read_text("utf-8").splitlines() if line]
    assert len({json.loads(line)["filter"] for line in lines}) > 1  # ids are doc_id/filter
    repeated = len(lines) + 1
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")
    with pytest.raises(ImportRefusalError) as refused:
        import_run_streaming(path, tmp_path / "a.json", adapter="lm-eval-log-samples", **IDENTITY)
    assert (refused.value.code, refused.value.field) == ("duplicate_id", f"line[{repeated}].doc_id")
    assert not (tmp_path / "a.json").exists()


@pytest.mark.parametrize(
    ("member", "options", "code"),
    [
        ('"": 1', ImportOptions(), "invalid_field"),  # a score needs a name
        ('"extra_score": NaN', ImportOptions(nan_as_missing_score=False), "non_finite_number"),
    ],
    ids=["unnamed-score", "nan-score-refused"],
)
def test_score_members_are_refused_alike_on_both_paths(
    tmp_path: Path, member: str, options: ImportOptions, code: str
) -> None:
    source = next(SAMPLES.glob("lm_eval/out/*/samples_toy_mc_*.jsonl"))
    first = source.read_text("utf-8").splitlines()[0]
    path = tmp_path / "scores.jsonl"
    path.write_text(first[:-1] + f", {member}}}\n", encoding="utf-8")
    kwargs: dict[str, Any] = {**IDENTITY, "options": options}
    with pytest.raises(ImportRefusalError) as streamed:
        import_run_streaming(path, tmp_path / "a.json", adapter="lm-eval-log-samples", **kwargs)
    with pytest.raises(ImportRefusalError) as loaded:
        load_run(path, "lm-eval-log-samples", **kwargs)
    assert (streamed.value.code, streamed.value.field) == (code, "line[1].scores")
    assert (loaded.value.code, loaded.value.field) == (code, "line[1].scores")
    assert not (tmp_path / "a.json").exists()


def test_auto_fallback_hashes_the_file_once(
    samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The specified adapter's attempt hashes the file; the native reader reuses that digest."""
    from sealeval.captured.importers import pipeline  # noqa: PLC0415
    from sealeval.captured.importers.registry import detect_adapter  # noqa: PLC0415

    assert detect_adapter(samples) == "lm-eval-samples"  # which refuses several filters
    calls: list[Path] = []
    original = pipeline.hash_file

    def counted(path: Path, *args: Any) -> Any:
        calls.append(path)
        return original(path, *args)

    named = tmp_path / "named.json"
    import_run_streaming(samples, named, adapter="lm-eval-log-samples", **IDENTITY)
    monkeypatch.setattr(pipeline, "hash_file", counted)
    destination = tmp_path / "auto.json"
    summary = import_run_streaming(samples, destination, adapter="auto", **IDENTITY)
    assert summary.adapter == "lm-eval-log-samples"
    assert calls == [samples]
    assert destination.read_bytes() == named.read_bytes()
