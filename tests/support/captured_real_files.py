"""Independent small readers of real evaluator result files (issue 14).

Shared by ``tests/captured/test_importers_real_files.py`` and
``tests/captured/test_importers_heldout.py`` (no test module imports another).
Each reader is written from the tool's documented layout and never calls the
importer: it returns the records and errored records a file holds, which the
import through ``sealeval import --adapter auto`` must reproduce.
``import_with_auto`` runs that import the way a user would, naming a source
and run id only where the file states none.
"""

from __future__ import annotations

import csv
import json
import struct
import zipfile
from collections.abc import Sequence
from pathlib import Path

import zstandard
from click.testing import CliRunner

from sealeval.cli.imports import import_command
from support.digests import ARTIFACT

_ZSTD_METHOD = 93  # ZIP compression method of Zstandard members

Counts = tuple[int, int]  # records, errored records


def lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def has_samples(path: Path) -> bool:
    """Whether an Inspect JSON log holds samples (a header-only log holds none)."""
    return bool(json.loads(path.read_text(encoding="utf-8")).get("samples"))


def has_attempts(path: Path) -> bool:
    """Whether a garak report holds attempts (a digest-only report holds none)."""
    return any(row.get("entry_type") == "attempt" for row in lines(path))


def lm_eval_lines(path: Path) -> Counts:
    """lm-eval >= 0.4.3: one line per document and filter; no per-sample errors."""
    return len(lines(path)), 0


def garak_attempts(path: Path) -> Counts:
    """garak: one record per attempt and generation (flat detector results).

    An attempt is its uuid; in an aggregated report whose attempts carry the
    run's own id (the ``init`` entry's ``run``) as uuid, its probe and ``seq``.
    """
    attempts: dict[object, dict[str, object]] = {}
    run = None
    for row in lines(path):
        if row.get("entry_type") == "init":
            run = row.get("run")
        if row.get("entry_type") == "attempt":
            key = row["uuid"] if row["uuid"] != run else (row["probe_classname"], row["seq"])
            attempts[key] = row  # status 2 replaces status 1
    records = 0
    errored = 0
    for row in attempts.values():
        outputs = row.get("outputs") or []
        assert isinstance(outputs, list)
        generations = max(len(outputs), 1)
        records += generations
        if row.get("status") != 2:
            errored += generations
        else:
            errored += sum(1 for output in outputs if output is None)
    return records, errored


def promptfoo_document(path: Path) -> Counts:
    """promptfoo results.json: ``results.results[]``; provider errors have failureReason 2."""
    rows = json.loads(path.read_text(encoding="utf-8"))["results"]["results"]
    return len(rows), sum(1 for row in rows if row.get("failureReason") == 2)


def mlflow_split_table(path: Path) -> Counts:
    """MLflow 2.x eval_results_table.json: one record per row of ``data``."""
    return len(json.loads(path.read_text(encoding="utf-8"))["data"]), 0


def inspect_json(path: Path) -> Counts:
    """Inspect JSON log: one record per sample object; errored samples carry ``error``."""
    samples = json.loads(path.read_text(encoding="utf-8"))["samples"]
    return len(samples), sum(1 for sample in samples if sample.get("error"))


def inspect_eval(path: Path) -> Counts:
    """Inspect .eval archive: one record per ``samples/*.json`` member; errored ones have ``error``.

    Members written with Zstandard (ZIP method 93, newer Inspect), which
    ``zipfile`` cannot open, are cut out after their local header and
    decompressed with ``zstandard``.
    """
    with zipfile.ZipFile(path) as archive:
        members = [info for info in archive.infolist() if info.filename.startswith("samples/")]
        samples = [json.loads(_member_bytes(path, archive, info)) for info in members]
    return len(samples), sum(1 for sample in samples if sample.get("error"))


def _member_bytes(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    if info.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return archive.read(info)
    assert info.compress_type == _ZSTD_METHOD
    with path.open("rb") as handle:
        handle.seek(info.header_offset)
        name_length, extra_length = struct.unpack_from("<HH", handle.read(30), 26)
        handle.seek(info.header_offset + 30 + name_length + extra_length)
        raw = handle.read(info.compress_size)
    data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    assert len(data) == info.file_size
    return data


def openai_evals_log(path: Path) -> Counts:
    """OpenAI Evals record log: one record per distinct ``sample_id``; ``error`` events err it."""
    events = [row for row in lines(path) if "sample_id" in row]
    samples = {str(row["sample_id"]) for row in events}
    errored = {str(row["sample_id"]) for row in events if row.get("type") == "error"}
    return len(samples), len(errored)


def lighteval_rows(path: Path) -> Counts:
    """LightEval details as JSON lines: one record per row."""
    return len(lines(path)), 0


def deepeval_test_run(path: Path) -> Counts:
    """DeepEval test run: ``testCases[]``.

    A metric that raised only loses its score (DeepEval has no case-level
    error), so no record is errored.
    """
    document = json.loads(path.read_text(encoding="utf-8"))
    cases = document.get("testCases", document.get("testRunData", {}).get("testCases", []))
    return len(cases), 0


def ragas_csv_rows(path: Path) -> Counts:
    """ragas ``to_pandas().to_csv()``: one record per data row after the header; no errors.

    Read with Python's ``csv`` module (quoted cells may span lines; a UTF-8
    byte order mark may lead the header).
    """
    with path.open(encoding="utf-8-sig", newline="") as handle:
        rows = [row for row in csv.reader(handle) if row]
    return len(rows) - 1, 0


def is_ragas_table(path: Path) -> bool:
    """Whether a ragas CSV holds per-sample rows (a ``user_input`` column), not a summary."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return "user_input" in next(csv.reader(handle))


def import_with_auto(
    path: Path, tmp_path: Path, extra: Sequence[str] = ()
) -> tuple[int, dict[str, object] | str]:
    """Import with the identities the file states; name a source and run id where it states none.

    ``extra`` are further options (``--allow-partial``). Returns ``(0,
    summary)`` on success (the run is ``tmp_path / "run.json"``), else the
    exit code and stderr.
    """
    base = [str(path), "--artifact-digest", ARTIFACT, "--json", "-o", str(tmp_path / "run.json")]
    base += extra
    result = CliRunner().invoke(import_command, base)
    for missing, extra in (
        ("source: identities_required", ["--source", "tool@1"]),
        ("--run-id: identities_required", ["--run-id", "real-1"]),
    ):
        if result.exit_code == 2 and missing in result.stderr:
            base += extra
            result = CliRunner().invoke(import_command, base)
    if result.exit_code == 0:
        return 0, json.loads(result.stdout)
    return result.exit_code, result.stderr
