"""Rename a pack request whose runs come from other evaluators (invarlock venv; no sealeval).

``invarlock_packs.py`` renames the runs of a request whose sides use the ``invarlock``
adapter by rewriting the run documents. A request whose sides read another evaluator's
files (native JSONL, lm-eval ``--log_samples`` JSONL, a native evaluator JSON export such as
ragas) states its identities in two places instead, and this module renames both:

- the **record ids**, in each input file, wherever that format states them
  (``renaming.NATIVE_FORMATS``: JSONL's ``id``, lm-eval's integer ``doc_id`` -- from which the
  reference derives the record id -- and a native JSON export's ``id``), one renaming for
  the whole pack, the file's layout kept; a file is cut to its first records unless the pack
  plants a defect, never below the largest ``minimum_count`` of the pack's policy (a smaller
  run would only test the count check);
- the **run ids**, which these formats do not state: ``request.yaml`` declares them per side
  (``run_id``), and a side's ``expected_run_digest`` that pinned the old run follows the
  renamed run (the reference's ``load_run`` + ``run_digest`` with the side's own options);
  a policy case-set pin that matched the old baseline run follows it too.

``request.yaml`` is edited as text (its layout kept) and read back with PyYAML: anything but
exactly the intended change raises ``renaming.UnknownLayoutError`` (a ``ValueError``), and so
does a file layout this module does not know; the caller then copies the case unchanged.
Only the public facade ``invarlock.engine`` is used.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import yaml
from invarlock.engine import load_run, run_digest
from invarlock_adapters import OPTIONS  # the load_run options a request side may give
from invarlock_requests import planned_case_set_digest
from renaming import (
    NATIVE_FORMATS,
    IntegerIds,
    Rewriter,
    UnknownLayoutError,
    bounded_size,
    canonical_text,
    native_record_count,
    rename_native,
)

SIDES = ("baseline", "subject")


def authored(request: Path) -> dict[str, Any]:
    """Return the parsed ``request.yaml`` of request directory ``request``."""
    document = yaml.safe_load((request / "request.yaml").read_text("utf-8"))
    if not isinstance(document, dict):
        raise UnknownLayoutError("request.yaml is not a mapping")
    return document


def uses_native_runs(request: Path) -> bool:
    """Return whether both sides of ``request`` read evaluator files this module renames."""
    comparison = authored(request).get("comparison") or {}
    adapters = [(comparison.get(side) or {}).get("adapter") for side in SIDES]
    return all(adapter in NATIVE_FORMATS for adapter in adapters)


def loaded_run(request: Path, side: dict[str, Any]) -> dict[str, Any]:
    """Return the run the reference loads for one side of ``request``."""
    options = {key: side[key] for key in OPTIONS if key in side}
    run: dict[str, Any] = load_run(request / side["path"], adapter=side["adapter"], **options)
    return run


def input_files(request: Path, sides: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Return every input file of ``request`` -> the adapter that reads it.

    A file both sides name is renamed once; a file beside them that no side names (a
    leftover of the generator) is renamed like the named files with its suffix, so no old
    id stays in the request directory.
    """
    files: dict[str, str] = {}
    for side in sides.values():
        if files.setdefault(side["path"], side["adapter"]) != side["adapter"]:
            raise UnknownLayoutError("one file read by two adapters")
    by_suffix: dict[str, set[str]] = {}
    for relative, adapter in files.items():
        by_suffix.setdefault(Path(relative).suffix, set()).add(adapter)
    folders = {(request / relative).parent for relative in files}
    for folder in sorted(folders):
        for path in sorted(folder.iterdir()):
            relative = path.relative_to(request).as_posix()
            adapters = by_suffix.get(path.suffix, set())
            if path.is_file() and relative not in files and len(adapters) == 1:
                files[relative] = next(iter(adapters))
    return files


def replace_scalar(text: str, key: str, old: str, new: str) -> str:
    """Return YAML ``text`` with every ``key: "old"`` line's value replaced by ``"new"``."""
    pattern = re.compile(rf"^(\s*{re.escape(key)}:\s*){re.escape(json.dumps(old))}(\s*)$", re.M)
    return pattern.sub(lambda match: match.group(1) + json.dumps(new) + match.group(2), text)


def rename_native_request(
    work: Path, rewriter: Rewriter, ids: IntegerIds, sizes: dict[int, int], keep_size: bool
) -> None:
    """Rename the evaluator files, run ids and pins of request directory ``work`` in place.

    ``sizes`` holds one new size per original size (both sides of a pair keep their pairing);
    ``keep_size`` keeps every record (a pack with a planted defect).
    """
    document = authored(work)
    sides = {side: document["comparison"][side] for side in SIDES}
    old_runs = {side: loaded_run(work, sides[side]) for side in SIDES}
    policy_path = work / document["comparison"]["policy"]
    policy = json.loads(policy_path.read_text("utf-8"))
    floor = max((metric.get("minimum_count", 0) for metric in policy["metrics"]), default=0)
    for relative, adapter in input_files(work, sides).items():
        path = work / relative
        data = path.read_bytes()
        count = native_record_count(adapter, data)
        size = count if keep_size else sizes.setdefault(count, bounded_size(rewriter, count, floor))
        rename = ids.integer_id if NATIVE_FORMATS[adapter][2] is int else rewriter.record_id
        path.write_bytes(rename_native(adapter, data, rename, size))
    text = (work / "request.yaml").read_text("utf-8")
    intended = copy.deepcopy(document)
    for side in SIDES:
        old_id = sides[side]["run_id"]
        intended["comparison"][side]["run_id"] = rewriter.run_id(old_id)
        text = replace_scalar(text, "run_id", old_id, rewriter.run_id(old_id))
    for side in SIDES:
        pin = sides[side].get("expected_run_digest")
        if pin is not None and pin == run_digest(old_runs[side]):
            new_pin = run_digest(loaded_run(work, intended["comparison"][side]))
            intended["comparison"][side]["expected_run_digest"] = new_pin
            text = replace_scalar(text, "expected_run_digest", pin, new_pin)
    if yaml.safe_load(text) != intended:
        raise UnknownLayoutError("request.yaml did not take the renaming as intended")
    (work / "request.yaml").write_text(text, "utf-8")
    pin = policy.get("expected_case_set_digest")
    if pin is not None and pin == planned_case_set_digest(old_runs["baseline"]):
        new_run = loaded_run(work, intended["comparison"]["baseline"])
        policy["expected_case_set_digest"] = planned_case_set_digest(new_run)
        policy_path.write_text(canonical_text(policy), "utf-8")
