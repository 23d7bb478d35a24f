"""Regenerators of openmed's governance vector files (openmed venv; public functions only).

``feedback_budget.json`` (``FeedbackBudgetPolicy``, ``FeedbackBudgetLedger``),
``forensics.json`` (``scan_overlap_forensics``) and ``adjudication.json``
(``render_blinded_adjudication_packets``), used by ``regenerate_openmed.py``. Each
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

from openmed.eval.governance.blinded_adjudication import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    render_blinded_adjudication_packets,
    validate_packet_balance,
    verify_sealed_identity_mapping,
)
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


def vary_budget(case: dict[str, Any], seed: int, _cases: list[Any]) -> Any:
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


def vary_forensics(case: dict[str, Any], seed: int, _cases: list[Any]) -> Any:
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


# -- adjudication.json ---------------------------------------------------------------------


def adjudication_case(value: Any) -> Any:
    """Build a ``ComparisonCase`` from a case document (a non-object is passed through raw)."""
    if not isinstance(value, dict):
        return value
    evidence = value.get("source_evidence")
    if isinstance(evidence, list):
        evidence = [SourceEvidence(**item) if isinstance(item, dict) else item for item in evidence]
    return ComparisonCase(
        case_ref=value.get("case_ref"),
        source_evidence=evidence,
        candidate_outputs=value.get("candidate_outputs"),
    )


def run_adjudication(data: Any) -> dict[str, Any] | None:
    """Run one ``adjudication.json`` render case.

    The case-digest and keyed-order cases name helpers openmed does not export: ``None``
    (copied unchanged). The audit and balance cases: ``openmed_adjudication``.
    """
    if data["op"] != "render":
        return None

    def act() -> dict[str, Any]:
        rubric = data["rubric"]
        if isinstance(rubric, list):
            rubric = [
                RubricCriterion(**item) if isinstance(item, dict) else item for item in rubric
            ]
        conflict = data["conflict_of_interest"]
        if isinstance(conflict, dict):
            conflict = ConflictOfInterestMetadata(**conflict)
        cases = data["cases"]
        if isinstance(cases, list):
            cases = [adjudication_case(item) for item in cases]
        key = data["randomization_key"]
        packets, mapping = render_blinded_adjudication_packets(
            packet_set_ref=data["packet_set_ref"],
            cases=cases,
            rubric=rubric,
            conflict_of_interest=conflict,
            holdout_commitment_digest=data["holdout_commitment_digest"],
            submission_manifest_digests=data["submission_manifest_digests"],
            randomization_key=key,
        )
        return {
            "packets": [packet.to_dict() for packet in packets],
            "packets_canonical": [packet.to_json() for packet in packets],
            "mapping": mapping.to_private_dict(),
            "mapping_canonical": mapping.to_private_json(),
            "balance": validate_packet_balance(mapping).to_dict(),
            "audit": verify_sealed_identity_mapping(packets, mapping, key).to_dict(),
        }

    return refusal(act)


def vary_adjudication(case: dict[str, Any], seed: int, _cases: list[Any]) -> Any:
    """Return a render case's input with other digests and another randomization key.

    The new key is drawn (seeded) from the old one with the same length, so two cases that
    shared a key still share one, a case whose key differed still differs, and a key that was
    too short stays too short; the packets' order and aliases follow the new key.
    """
    given = case["input"]
    if given["op"] != "render":
        return given
    new = DigestRenamer(seed).rename(given)
    key = given.get("randomization_key")
    if isinstance(key, dict) and set(key) == {"$bytes_hex"}:
        new["randomization_key"] = {"$bytes_hex": new_key(key["$bytes_hex"], seed)}
    return new


def new_key(key_hex: str, seed: int) -> str:
    """Return the new randomization key (hex) of ``key_hex``: seeded, of the same length.

    The audit cases of ``openmed_adjudication`` rename their keys with it, so a render's key
    and the audit key that was the same key stay the same key.
    """
    draw = random.Random(f"adjudication-key-{seed}-{key_hex}")
    return draw.randbytes(len(key_hex) // 2).hex()


def adjudication_facts(expected: dict[str, Any]) -> Any:
    """Return what a render's variation must keep: the refusal, or counts and verdicts."""
    if "error_code" in expected:
        return expected
    return {
        "case_refs": sorted(packet["case_ref"] for packet in expected["packets"]),
        "aliases": [len(packet["candidates"]) for packet in expected["packets"]],
        "balanced": expected["balance"]["balanced"],
        "audit": expected["audit"],
    }
