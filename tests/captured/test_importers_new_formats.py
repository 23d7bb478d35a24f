"""Formats added for issue 14: garak nested detector results, MLflow 2.x eval tables, ZIP64 ends."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from sealeval.captured.importers import ImportRefusalError, load_run
from sealeval.captured.importers.native.inspect_eval import MAX_ARCHIVE_ENTRIES, check_directory
from support.digests import ARTIFACT
from support.vectors import samples_dir

SAMPLES = samples_dir()
IDENTITY: dict[str, Any] = {
    "source": {"name": "tool", "version": "1"},
    "run_id": "new-1",
    "artifact_digest": ARTIFACT,
}


def _garak_nested(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    source = next((SAMPLES / "garak").glob("*.report.jsonl"))
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line]
    for row in rows:
        if row.get("entry_type") == "attempt" and isinstance(row.get("detector_results"), dict):
            row["detector_results"] = {
                name: [values] for name, values in row["detector_results"].items()
            }
    path = tmp_path / "nested.report.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path, rows


def test_garak_nested_detector_results_one_record_per_attempt(tmp_path: Path) -> None:
    path, rows = _garak_nested(tmp_path)
    finished = {
        row["uuid"]: row
        for row in rows
        if row.get("entry_type") == "attempt" and row.get("status") == 2
    }
    run = load_run(path, "auto", **IDENTITY)
    assert sorted(record.id for record in run) == sorted(finished)
    for record in run:
        row = finished[record.id]
        for detector, nested in row["detector_results"].items():
            values = [value for group in nested for value in group if value is not None]
            if values:
                assert record.scores[detector] == max(values)
            kept = record.context["generation_results"][detector]
            assert list(kept) == [value for group in nested for value in group]


def _table(columns: list[str], data: list[list[Any]]) -> bytes:
    return json.dumps({"columns": columns, "data": data}).replace("/", "\\/").encode()


def test_mlflow_eval_table(tmp_path: Path) -> None:
    columns = [
        "inputs",
        "ground_truth",
        "outputs",
        "latency",
        "exact_match/v1",
        "toxicity/v1/score",
    ]
    data = [["q1", "a", "a", 1.5, True, 0.1], ["q2", "b", "c", 2.0, False, None]]
    path = tmp_path / "eval_results_table.json"
    path.write_bytes(_table(columns, data))
    run = load_run(path, "auto", **IDENTITY)
    assert [record.id for record in run] == ["0", "1"]
    assert [record.expected for record in run] == ["a", "b"]
    assert [record.output for record in run] == ["a", "c"]
    assert dict(run.records[0].scores) == {"exact_match/v1": 1.0, "toxicity/v1/score": 0.1}
    assert dict(run.records[1].scores) == {"exact_match/v1": 0.0}  # a null judge: no score
    assert "latency" not in run.records[0].scores


@pytest.mark.parametrize(
    ("name", "columns", "data", "code"),
    [
        ("no_metric", ["inputs", "outputs"], [["q", "a"]], "not_results"),
        ("short_row", ["inputs", "exact_match/v1"], [["q"]], "invalid_field"),
        ("no_rows", ["inputs", "exact_match/v1"], [], "no_records"),
        ("duplicate_column", ["x/v1", "x/v1"], [[1, 2]], "invalid_field"),
    ],
)
def test_mlflow_eval_table_refusals(
    name: str, columns: list[str], data: list[list[Any]], code: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(_table(columns, data))
    with pytest.raises(ImportRefusalError) as refused:
        load_run(path, "mlflow-eval-table", **IDENTITY)
    assert refused.value.code == code


def test_zip64_end_record_stating_too_many_entries_is_refused() -> None:
    """A ZIP64 end record (reached through its locator) is checked like the classic one."""
    zip64_end = b"PK\x06\x06" + struct.pack(
        "<QHHIIQQQQ", 44, 45, 45, 0, 0, MAX_ARCHIVE_ENTRIES + 1, MAX_ARCHIVE_ENTRIES + 1, 46, 0
    )
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, 0, 1)
    end = b"PK\x05\x06" + struct.pack("<4H2IH", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with pytest.raises(ImportRefusalError) as refused:
        check_directory(io.BytesIO(zip64_end + locator + end))
    assert (refused.value.code, refused.value.field) == ("too_large", "file")
    # a plain archive within the caps passes
    check_directory(io.BytesIO(b"PK\x05\x06" + bytes(18)))
