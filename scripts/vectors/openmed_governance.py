"""Regenerators of openmed's governance vector files (openmed venv; public functions only).

``feedback_budget.json`` (``FeedbackBudgetPolicy``, ``FeedbackBudgetLedger``) and
``forensics.json`` (``scan_overlap_forensics``), used by ``regenerate_openmed.py``. Each
``run_*`` function replays one case's input with the reference and returns its expected
output (or ``None`` for a case the public API cannot replay, which is copied unchanged);
each ``vary_*`` function returns the case's input with other digests, ids and orders,
derived from the seeded renamers of ``renaming.py``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

from openmed.eval.governance.feedback_budget import FeedbackBudgetLedger, FeedbackBudgetPolicy
from openmed.eval.governance.holdout_commitment import (
    HOLDOUT_MANIFEST_KINDS,
    commit_holdout_manifests,
    verify_holdout_commitment,
)
from openmed.eval.governance.overlap_forensics import scan_overlap_forensics
from renaming import DigestRenamer

Outcome = Callable[[Callable[[], Any]], dict[str, Any]]

#: A planted canary token of the forensics generator, in any case (its number is renamed).
CANARY = re.compile(r"(canary[^a-z0-9]+[a-z]+[^a-z0-9]+)([0-9]+)", re.IGNORECASE)


def document(result: Any) -> dict[str, Any]:
    """Return the ``{canonical, parsed}`` form of a reference object.

    An object without ``to_json`` is encoded in openmed's canonical form (sorted keys, no
    whitespace, ASCII escapes); the replay of the shared file checks that this is its form.
    """
    parsed = result.to_dict()
    if hasattr(result, "to_json"):
        return {"canonical": result.to_json(), "parsed": parsed}
    text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return {"canonical": text, "parsed": parsed}


def refusal(action: Callable[[], Any]) -> dict[str, Any]:
    """Return the action's output, or ``{"error_code": text}`` for a refusal."""
    try:
        return action()
    except Exception as error:  # noqa: BLE001 - any refusal is the expected output
        return {"error_code": str(error)}


# -- feedback_budget.json ------------------------------------------------------------------


def budget_policy(fields: Any) -> FeedbackBudgetPolicy:
    """Build a policy from a case's fields (the boundaries as a tuple, as the API types them)."""
    given = dict(fields)
    if isinstance(given.get("coarse_score_boundaries"), list):
        given["coarse_score_boundaries"] = tuple(given["coarse_score_boundaries"])
    return FeedbackBudgetPolicy(**given)


def budget_call(ledger: FeedbackBudgetLedger, call: dict[str, Any]) -> dict[str, Any]:
    """Run one ledger call of a ``ledger`` case and return its document."""
    if call["op"] == "record":
        options: dict[str, Any] = {}
        if "score" in call:
            options["score"] = call["score"]
        if "failure" in call:
            options["infrastructure_failure_digest"] = call["failure"]
        decision = ledger.record_official_attempt(call["epoch"], call["submission"], **options)
        return decision.to_dict()
    if call["op"] == "approve":
        approval = ledger.approve_infrastructure_failure(
            call["epoch"], call["submission"], call["failure"], call["approval"]
        )
        return approval.to_dict()
    if call["op"] == "snapshot":
        return ledger.snapshot(call["epoch"], call["submission"]).to_dict()
    if call["op"] == "policy":
        return ledger.policy(call["epoch"]).to_dict()
    raise SystemExit(f"feedback_budget: unknown ledger call {call['op']!r}")


def run_budget(data: Any) -> dict[str, Any] | None:
    """Run one ``feedback_budget.json`` case (a ``band`` case: see ``vary_budget``)."""
    if data["op"] == "policy":
        return refusal(lambda: document(budget_policy(data["fields"])))
    if data["op"] == "band":
        return band(data["boundaries"], data["score"])

    def act() -> dict[str, Any]:
        ledger = FeedbackBudgetLedger([budget_policy(policy) for policy in data["policies"]])
        calls = data["calls"]
        return {"results": [refusal(lambda c=call: budget_call(ledger, c)) for call in calls]}

    return refusal(act)


def band(boundaries: Any, score: Any) -> dict[str, Any]:
    """Return the coarse band of ``score``, asked of a fresh ledger with no detailed feedback."""
    epoch = "sha256:" + "0" * 64
    policy = FeedbackBudgetPolicy(epoch, 0, 0, tuple(boundaries))
    decision = FeedbackBudgetLedger([policy]).record_official_attempt(epoch, epoch, score=score)
    return {"coarse_band": decision.coarse_band}


def vary_budget(case: dict[str, Any], seed: int) -> Any:
    """Return a budget case's input with other digests; a ``band`` case gets another score.

    A band case's score is drawn (seeded) inside the same band of the same boundaries, or at
    a boundary when the case's score was one, so the case still tests what its name says.
    """
    given = case["input"]
    if given["op"] != "band":
        return DigestRenamer(seed).rename(given)
    score = given["score"]
    edges = [0.0, *given["boundaries"], 1.0]
    if not isinstance(score, float) or score in edges:
        return given
    draw = random.Random(f"band-{seed}-{case['name']}")
    index = sum(1 for edge in given["boundaries"] if score >= edge)
    low, high = edges[index], edges[index + 1]
    new = round(low + (high - low) * draw.uniform(0.05, 0.95), 4)
    return {**given, "score": new if low <= new < high else score}


# -- forensics.json ------------------------------------------------------------------------


def run_forensics(data: Any) -> dict[str, Any] | None:
    """Run one ``forensics.json`` scan.

    The normalize, similarity and constants cases name helpers openmed does not export:
    ``None`` (copied unchanged).
    """
    if data["op"] != "scan":
        return None
    options = {
        key: data[key]
        for key in ("fuzzy_threshold_basis_points", "shadow_margin_basis_points")
        if key in data
    }
    return refusal(
        lambda: document(
            scan_overlap_forensics(
                data["submission_items"],
                public_items=data["public_items"],
                shadow_items=data["shadow_items"],
                canaries=data["canaries"],
                submission_manifest=data["submission_manifest"],
                holdout_commitment=data["holdout_commitment"],
                **options,
            )
        )
    )


def recommit(commitment: Any, seed: int, renamer: DigestRenamer) -> Any:
    """Return a new valid holdout commitment for a valid one (same kinds and item counts).

    The commitment digest covers the roots, so renamed roots need a new commitment: the
    reference commits seeded item digests of the same counts under a renamed version. An
    invalid commitment is returned unchanged (a refusal stays the refusal it was).
    """
    if not isinstance(commitment, dict) or not verify_holdout_commitment(commitment).valid:
        return commitment
    counts = commitment["manifest_item_counts"]
    manifests = {
        kind: [renamer.digest(f"{kind}-{index}-{seed}") for index in range(counts[kind])]
        for kind in HOLDOUT_MANIFEST_KINDS
    }
    version = f"{commitment['holdout_version']}-s{seed}"
    return commit_holdout_manifests(version, manifests).to_dict()


def vary_forensics(case: dict[str, Any], seed: int) -> Any:
    """Return a scan's input with other digests, canary numbers and item orders.

    Every list of items is permuted (seeded), so the signals' ``submission:N`` and
    ``public:N`` references move; canary tokens get other numbers (consistently in every
    item); the manifest's component digests are renamed (``regenerate_openmed`` reseals a
    manifest whose seal was valid) and a valid holdout commitment is re-committed.
    """
    given = case["input"]
    if given["op"] != "scan":
        return given
    renamer = DigestRenamer(seed)
    draw = random.Random(f"forensics-{seed}-{case['name']}")
    numbers: dict[str, str] = {}

    def canary(match: re.Match[str]) -> str:
        number = match.group(2)
        numbers.setdefault(number, f"{draw.randrange(10 ** len(number)):0{len(number)}d}")
        return match.group(1) + numbers[number]

    def texts(items: Any) -> Any:
        if not isinstance(items, list):
            return items
        renamed = [CANARY.sub(canary, item) if isinstance(item, str) else item for item in items]
        draw.shuffle(renamed)
        return renamed

    new = dict(given)
    for key in ("submission_items", "public_items", "shadow_items", "canaries"):
        new[key] = texts(given[key])
    new["submission_manifest"] = renamer.rename(given["submission_manifest"])
    new["holdout_commitment"] = recommit(given["holdout_commitment"], seed, renamer)
    return new


def forensics_facts(expected: dict[str, Any]) -> Any:
    """Return what a forensics scan's renaming must keep: the refusal, or the counts."""
    if "error_code" in expected:
        return expected
    report = expected["parsed"]
    return {
        "coverage": report["coverage"],
        "signal_counts": report["signal_counts"],
        "interpretation": report["interpretation"],
        "checks": sorted(json.dumps(signal["check"]) for signal in report["signals"]),
    }
