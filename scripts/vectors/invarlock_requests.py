"""Regenerate ``invarlock/requests.json`` with other record ids, run ids and sizes (invarlock venv).

Every case that normalizes an authored request over two run files gets renamed runs (other
record ids and run ids, fewer records unless the run carries a native identity), and the
authored request and policy follow the renaming where they pinned the old runs: a declared
``run_id`` equal to the run's becomes the new run id, an ``expected_run_digest`` equal to the
run's digest becomes the new digest, and a policy case-set pin that matched the old baseline
becomes the new baseline's case-set digest. A pin that did not match stays as it was, so a
refusal case stays the refusal it was. The expected output is invarlock's own
``normalize_captured_request`` / ``captured_request_digest`` / ``digest`` result.

Cases that only hash a given normalized document carry no run and are copied unchanged.
Only the public facade ``invarlock.engine`` is used.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from invarlock.engine import (
    captured_request_digest,
    case_set_digest,
    comparison_policy_digest,
    digest,
    freeze_case_set,
    normalize_captured_request,
    run_digest,
)
from renaming import Rewriter, canonical_text

#: Record members a planned case set declares (the rest is the evaluator's output).
CASE_MEMBERS = ("id", "input", "expected", "metadata")
#: Runs carrying identities or planted positions keep their size.
KEEP_SIZE = ("native", "hosted", "projected")
SIDES = ("baseline", "subject")


def planned_case_set_digest(run: dict[str, Any]) -> str:
    """Return the case-set digest of the cases ``run`` answers (the reference computes it)."""
    cases = [
        {key: record[key] for key in CASE_MEMBERS if key in record} for record in run["records"]
    ]
    return case_set_digest(freeze_case_set(cases))


def normalize(given: dict[str, Any], runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Return the expected output of one normalization case (the reference's result)."""
    try:
        normalized = normalize_captured_request(
            given["authored"],
            baseline=runs["baseline"],
            subject=runs["subject"],
            policy=given["policy"],
        )
    except Exception as error:  # noqa: BLE001 - any refusal of the reference is the expected output
        return {"error": {"class": type(error).__name__, "exit_code": None, "message": str(error)}}
    request_digest = captured_request_digest(normalized)
    policy_digest = comparison_policy_digest(given["policy"])
    baseline, subject = (run_digest(runs[side]) for side in SIDES)
    identity = {
        "kind": "captured",
        "request_digest": request_digest,
        "baseline_run_digest": baseline,
        "subject_run_digest": subject,
        "policy_digest": policy_digest,
    }
    return {
        "normalized_canonical": canonical_text(normalized),
        "normalized": normalized,
        "captured_request_digest": request_digest,
        "policy_digest": policy_digest,
        "baseline_run_digest": baseline,
        "subject_run_digest": subject,
        "comparison_id": digest(identity),
    }


def follow(
    given: dict[str, Any], old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Return ``given`` with the authored request and policy pins following the renamed runs."""
    result = copy.deepcopy(given)
    comparison = result["authored"].get("comparison")
    for side in SIDES:
        declared = comparison.get(side) if isinstance(comparison, dict) else None
        if not isinstance(declared, dict):
            continue
        if declared.get("run_id") == old[side]["run_id"]:
            declared["run_id"] = new[side]["run_id"]
        if declared.get("expected_run_digest") == run_digest(old[side]):
            declared["expected_run_digest"] = run_digest(new[side])
    policy = result["policy"]
    pin = policy.get("expected_case_set_digest") if isinstance(policy, dict) else None
    if pin is not None and pin == planned_case_set_digest(old["baseline"]):
        policy["expected_case_set_digest"] = planned_case_set_digest(new["baseline"])
    return result


def same_outcome(old: dict[str, Any], new: dict[str, Any], rewriter: Rewriter) -> bool:
    """Return whether two outcomes agree up to the renaming (same keys, same refusal)."""
    if "error" not in old or "error" not in new:
        return set(old) == set(new)
    message = new["error"]["message"]
    for table in (rewriter.ids, rewriter.runs):
        for before, after in table.items():
            message = message.replace(after, before)
    return message == old["error"]["message"]


def regenerate_requests(source: Path, output: Path, seed: int) -> int:
    """Regenerate ``invarlock/requests.json``; return the number of renamed cases."""
    folder = output / "invarlock"
    document = json.loads((source / "invarlock" / "requests.json").read_text("utf-8"))
    rewriter = Rewriter(seed)
    sizes: dict[int, int] = {}
    written: dict[str, str] = {}
    cases = []
    for case in document["cases"]:
        given = case["input"]
        if set(given) != {"authored", "baseline", "subject", "policy"}:
            cases.append(case)  # a normalized document only: no run to rename
            continue
        old = {
            side: json.loads((source / "invarlock" / given[side]).read_text("utf-8"))
            for side in SIDES
        }
        if normalize(given, old) != case["expected"]:
            raise SystemExit(f"invarlock/requests.json {case['name']}: the reference differs")
        new = {}
        renamed = copy.deepcopy(given)
        for side in SIDES:
            count = len(old[side]["records"])
            keep = any(marker in given[side] for marker in KEEP_SIZE)
            size = count if keep else sizes.setdefault(count, rewriter.size(count))
            new[side] = rewriter.run(old[side], size)
            target = f"runs/alt-{seed}-request-{size}-{Path(given[side]).name}"
            text = canonical_text(new[side])
            if written.setdefault(target, text) != text:
                raise SystemExit(f"two different runs for {target}")
            renamed[side] = target
        renamed = follow(renamed, old, new)
        expected = normalize(renamed, new)
        if not same_outcome(case["expected"], expected, rewriter):
            raise SystemExit(f"invarlock/requests.json {case['name']}: renaming changed it")
        cases.append({"name": case["name"], "input": renamed, "expected": expected})
    for target, text in written.items():
        (folder / target).write_text(text, "utf-8")
    generator = {**(document.get("generator") or {}), "tool": "scripts/vectors/regenerate.py"}
    generator["seed"] = seed
    regenerated = {**document, "generator": generator, "cases": cases}
    (folder / "requests.json").write_text(json.dumps(regenerated, indent=1) + "\n", "utf-8")
    return sum(case not in document["cases"] for case in cases)
