"""Held-out real result files import with ``--adapter auto`` (issue 14).

``tests/fixtures/heldout`` holds real files that users of the evaluation
tools committed to public repositories, set aside (committed with their
provenance in ``tests/fixtures/README.md``) before the importer was ever run
on them. Each file is judged by what it holds, read by the independent small
readers of :mod:`support.captured_real_files`, never by the importer:

* a file holding per-sample results imports with ``auto``, with as many
  records and errored records as the independent reader counts;
* a file holding none (a results summary, a header-only log, a link to a
  hosted run, metric columns only) is refused with a closed code saying so,
  writing nothing;
* an Inspect log of a run that did not finish (``cancelled``) is refused
  ``incomplete_run`` unless ``--allow-partial``, which imports every sample
  it holds and records the status in each record's context.

Files are classed by their tool folder and their content, not by name, so a
file added to the folder is checked without editing this module.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sealeval.captured.importers import ImportRefusalError
from support.captured_real_files import (
    Counts,
    deepeval_test_run,
    garak_attempts,
    has_attempts,
    has_samples,
    import_with_auto,
    inspect_eval,
    inspect_json,
    is_ragas_table,
    lm_eval_lines,
    promptfoo_document,
    ragas_csv_rows,
)

HELDOUT = Path(__file__).resolve().parents[1] / "fixtures" / "heldout"
HELD_FILES = sorted(path for path in HELDOUT.rglob("*") if path.is_file())

#: closed codes meaning "this file holds no per-sample results"
NO_RESULTS = frozenset({"not_results", "unknown_format"})

Reader = Callable[[Path], Counts]


def _document(path: Path) -> object:
    return json.loads(path.read_text(encoding="utf-8"))


def _inspect_status(path: Path) -> object:
    document = _document(path)
    return document.get("status") if isinstance(document, dict) else None


def _deepeval_cases(path: Path) -> bool:
    document = _document(path)
    assert isinstance(document, dict)
    run = document.get("testRunData", document)
    return bool(run.get("testCases"))


def _promptfoo_rows(path: Path) -> bool:
    document = _document(path)
    results = document.get("results") if isinstance(document, dict) else None
    return isinstance(results, dict) and bool(results.get("results"))


def classify(path: Path) -> tuple[str, Reader | None]:
    """``("imports", reader)``, ``("partial", reader)`` or ``("no_results", None)``."""
    tool, name = path.relative_to(HELDOUT).parts[0], path.name
    if tool == "inspect_ai" and name.endswith(".eval"):
        return "imports", inspect_eval
    if tool == "inspect_ai" and name.endswith(".json"):
        if not has_samples(path):
            return "no_results", None
        return ("imports" if _inspect_status(path) == "success" else "partial"), inspect_json
    if tool == "garak":
        return ("imports", garak_attempts) if has_attempts(path) else ("no_results", None)
    if tool == "lm_eval" and name.startswith("samples_"):
        return "imports", lm_eval_lines
    if tool == "lm_eval" and name.startswith("results_"):
        return "no_results", None
    if tool == "deepeval":
        return ("imports", deepeval_test_run) if _deepeval_cases(path) else ("no_results", None)
    if tool == "ragas":
        return ("imports", ragas_csv_rows) if is_ragas_table(path) else ("no_results", None)
    if tool == "promptfoo":
        return ("imports", promptfoo_document) if _promptfoo_rows(path) else ("no_results", None)
    raise AssertionError(f"no independent reader for held-out tool folder {tool!r}")


CLASSED = [(path, *classify(path)) for path in HELD_FILES]
IMPORTS = [(path, reader) for path, kind, reader in CLASSED if kind == "imports"]
PARTIAL = [(path, reader) for path, kind, reader in CLASSED if kind == "partial"]
NO_SAMPLES = [path for path, kind, _ in CLASSED if kind == "no_results"]


def _id(path: Path) -> str:
    return str(path.relative_to(HELDOUT))[:70]


def _refusal(outcome: dict[str, object] | str) -> tuple[str, str]:
    assert isinstance(outcome, str)
    assert outcome.startswith("sealeval: error: ")
    field, code = outcome.rstrip("\n").removeprefix("sealeval: error: ").rsplit(": ", 1)
    return field, code


@pytest.mark.parametrize(("path", "reader"), IMPORTS, ids=[_id(path) for path, _ in IMPORTS])
def test_heldout_file_imports_with_the_independent_counts(
    path: Path, reader: Reader, tmp_path: Path
) -> None:
    records, errored = reader(path)
    assert records > 0
    code, summary = import_with_auto(path, tmp_path)
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert (summary["records"], summary["errored_records"]) == (records, errored)
    run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert len(run["records"]) == records
    assert len({record["id"] for record in run["records"]}) == records


@pytest.mark.parametrize("path", NO_SAMPLES, ids=[_id(path) for path in NO_SAMPLES])
def test_heldout_file_without_samples_is_refused_as_such(path: Path, tmp_path: Path) -> None:
    code, outcome = import_with_auto(path, tmp_path)
    assert code == 2, outcome
    field, refusal = _refusal(outcome)
    assert refusal in NO_RESULTS
    assert refusal in ImportRefusalError.codes
    assert field
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize(("path", "reader"), PARTIAL, ids=[_id(path) for path, _ in PARTIAL])
def test_heldout_unfinished_inspect_run_imports_only_when_partial_is_allowed(
    path: Path, reader: Reader, tmp_path: Path
) -> None:
    code, outcome = import_with_auto(path, tmp_path)
    assert code == 2
    assert _refusal(outcome) == ("status", "incomplete_run")
    assert not (tmp_path / "run.json").exists()
    records, errored = reader(path)
    code, summary = import_with_auto(path, tmp_path, ["--allow-partial"])
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert (summary["records"], summary["errored_records"]) == (records, errored)
    run = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    status = _inspect_status(path)
    assert {record["context"]["inspect"]["status"] for record in run["records"]} == {status}


def test_the_heldout_set_spans_the_issue_minimum() -> None:
    """At least 17 held-out files (15 of this session's) across at least 6 tools, most importing."""
    assert len(HELD_FILES) >= 17
    assert len({path.relative_to(HELDOUT).parts[0] for path in HELD_FILES}) >= 6
    assert len(IMPORTS) + len(PARTIAL) > len(NO_SAMPLES) > 0


# Bugs the held-out files found, pinned on variants of the files that found them.

HEADER_ONLY = (
    HELDOUT / "inspect_ai/2024-08-29T15-11-17+00-00_popularity_5EAmX6wjMFqea6WY7XHzZp.json"
)
CANCELLED = HELDOUT / "inspect_ai/2025-05-12T20-28-13-04-00_popularity.json"


@pytest.mark.parametrize(
    ("source", "run_id"),
    [(False, False), (True, False), (True, True)],
    ids=["no-identities", "source", "source-and-run-id"],
)
def test_header_only_inspect_log_is_not_results_whatever_identities(
    source: bool, run_id: bool, tmp_path: Path
) -> None:
    """``auto`` gave the strict adapter's ``samples: invalid_field`` for a log without samples."""
    stated_run = json.loads(HEADER_ONLY.read_text(encoding="utf-8"))["eval"]["run_id"]
    extra = ["--source", "inspect_ai@0.3.17"] if source else []
    extra += ["--run-id", stated_run] if run_id else []
    code, outcome = import_with_auto(HEADER_ONLY, tmp_path, extra)
    assert code == 2
    assert _refusal(outcome) == ("samples", "not_results")
    assert not (tmp_path / "run.json").exists()


def test_header_only_inspect_log_named_adapter_keeps_its_contract_refusal(tmp_path: Path) -> None:
    """The specified ``inspect-json`` adapter stays as strict as the reference when named."""
    code, outcome = import_with_auto(HEADER_ONLY, tmp_path, ["--adapter", "inspect-json"])
    assert code == 2
    assert _refusal(outcome) == ("samples", "invalid_field")


def _with_status(tmp_path: Path, status: str) -> Path:
    log = json.loads(CANCELLED.read_text(encoding="utf-8"))
    log["status"] = status
    path = tmp_path / f"{status}.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    return path


@pytest.mark.parametrize("status", ["cancelled", "error"])
def test_unfinished_inspect_log_imports_with_allow_partial(status: str, tmp_path: Path) -> None:
    """A cancelled or failed run's samples are read only when the user allows a partial import."""
    path = _with_status(tmp_path, status)
    out = tmp_path / "out"
    out.mkdir()
    code, outcome = import_with_auto(path, out)
    assert (code, _refusal(outcome)) == (2, ("status", "incomplete_run"))
    code, summary = import_with_auto(path, out, ["--allow-partial"])
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert summary["records"] == inspect_json(path)[0]
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert {record["context"]["inspect"]["status"] for record in run["records"]} == {status}


@pytest.mark.parametrize("status", ["started", "paused"])
def test_running_or_unknown_inspect_status_stays_refused_with_allow_partial(
    status: str, tmp_path: Path
) -> None:
    code, outcome = import_with_auto(_with_status(tmp_path, status), tmp_path, ["--allow-partial"])
    assert code == 2
    assert _refusal(outcome)[1] in {"incomplete_run", "unknown_status"}
    assert not (tmp_path / "run.json").exists()


def test_finished_inspect_log_records_no_status(tmp_path: Path) -> None:
    """Only an unfinished run carries ``context.inspect.status``: a finished one is unchanged."""
    path = _with_status(tmp_path, "success")
    out = tmp_path / "out"
    out.mkdir()
    code, _ = import_with_auto(path, out)
    assert code == 0
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert all("status" not in record["context"].get("inspect", {}) for record in run["records"])


def test_cancelled_eval_archive_imports_with_allow_partial(tmp_path: Path) -> None:
    """The ``.eval`` reader shares the rule: its ``header.json`` status decides."""
    original = HELDOUT / "inspect_ai/mmlu-summary-choices.eval"
    path = tmp_path / "cancelled.eval"
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(path, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "header.json":
                header = json.loads(data)
                header["status"] = "cancelled"
                data = json.dumps(header).encode("utf-8")
            target.writestr(info, data)
    out = tmp_path / "out"
    out.mkdir()
    code, outcome = import_with_auto(path, out)
    assert (code, _refusal(outcome)) == (2, ("header.status", "incomplete_run"))
    code, summary = import_with_auto(path, out, ["--allow-partial"])
    assert code == 0, summary
    assert isinstance(summary, dict)
    assert summary["records"] == inspect_eval(path)[0]
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert {record["context"]["inspect"]["status"] for record in run["records"]} == {"cancelled"}
