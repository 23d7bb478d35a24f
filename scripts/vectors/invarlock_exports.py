"""Regenerate ``invarlock/evaluator_exports.json`` with other case ids and run ids (invarlock venv).

Each case exports one evaluator's native result with ``export_evaluator_result`` and reads it
back with ``load_run(adapter="evaluator-json")``. The regenerated case renames the planned
case ids (in ``expected_ids`` and wherever the native result states them verbatim; one
renaming for the whole file, so cases sharing a result keep sharing it) and the run id (also
where the result states it); the expected file bytes, run and digests are invarlock's own
output. A case whose outcome would change beyond the renaming (an evaluator deriving its ids
from other fields) is copied unchanged; the script prints how many (none in 0.17.1).

Only the public facade ``invarlock.engine`` is used.
"""

from __future__ import annotations

import copy
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from invarlock.engine import export_evaluator_result, load_run, run_digest
from renaming import Rewriter, canonical_text

#: Keyword arguments of ``export_evaluator_result`` a case may give.
OPTIONS = ("artifact_digest", "service_identity", "input_projection", "score_provenance")


def export(given: dict[str, Any], with_written: bool) -> dict[str, Any]:
    """Return the expected output of one export case (the reference's result)."""
    with tempfile.TemporaryDirectory() as folder:
        destination = Path(folder) / "export.json"
        try:
            export_evaluator_result(
                given["evaluator"],
                given["result"],
                destination,
                expected_ids=given["expected_ids"],
                source_version=given["source_version"],
                run_id=given["run_id"],
                **{key: given[key] for key in OPTIONS if key in given},
            )
        except Exception as error:  # noqa: BLE001 - any refusal of the reference is the expected output
            refused: dict[str, Any] = {
                "error": {"class": type(error).__name__, "exit_code": None, "message": str(error)}
            }
            if with_written:
                refused["file_written"] = destination.exists()
            return refused
        data = destination.read_bytes()
        run = load_run(
            destination,
            adapter="evaluator-json",
            source={"name": given["evaluator"], "version": given["source_version"]},
            run_id=given["run_id"],
            **{key: given[key] for key in OPTIONS if key in given},
        )
    return {
        "export_text": data.decode("utf-8"),
        "export_sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
        "run_canonical": canonical_text(run),
        "run": run,
        "run_digest": run_digest(run),
        "source_digest": run["source_digest"],
        "record_count": len(run["records"]),
    }


def rename_ids(value: Any, names: dict[str, str]) -> Any:
    """Return ``value`` with every string equal to a planned id replaced by its new name."""
    if isinstance(value, dict):
        return {key: rename_ids(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [rename_ids(item, names) for item in value]
    if isinstance(value, str):
        return names.get(value, value)
    return value


def regenerate_exports(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``evaluator_exports.json``; return (renamed, copied unchanged) case counts."""
    name = "evaluator_exports.json"
    document = json.loads((source / "invarlock" / name).read_text("utf-8"))
    rewriter = Rewriter(seed)
    # One renaming for the whole file: cases sharing a native result keep sharing it.
    names = {
        old: rewriter.record_id(old)
        for case in document["cases"]
        for old in case["input"]["expected_ids"]
        if old.strip()
    }
    cases = []
    kept = 0
    for case in document["cases"]:
        given = case["input"]
        with_written = "file_written" in case["expected"]
        if export(given, with_written) != case["expected"]:
            raise SystemExit(f"invarlock/{name} {case['name']}: the reference differs")
        renamed = copy.deepcopy(given)
        renamed["run_id"] = rewriter.run_id(given["run_id"])
        # A result that states the run id (langfuse's run_name) states the new one.
        stated = {**names, given["run_id"]: renamed["run_id"]}
        renamed["result"] = rename_ids(given["result"], stated)
        renamed["expected_ids"] = [names.get(old, old) for old in given["expected_ids"]]
        expected = export(renamed, with_written)
        if set(expected) != set(case["expected"]) or (
            "error" in expected and expected["error"] != case["expected"]["error"]
        ):
            cases.append(case)  # the evaluator derives its ids: renaming makes another case
            kept += 1
            continue
        cases.append({"name": case["name"], "input": renamed, "expected": expected})
    generator = {**(document.get("generator") or {}), "tool": "scripts/vectors/regenerate.py"}
    generator["seed"] = seed
    regenerated = {**document, "generator": generator, "cases": cases}
    (output / "invarlock" / name).write_text(json.dumps(regenerated, indent=1) + "\n", "utf-8")
    return len(cases) - kept, kept
