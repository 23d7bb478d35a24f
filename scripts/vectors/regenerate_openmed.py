"""Regenerate openmed vector files with other digests, in an alternate tree (openmed venv).

Second step of ``make vectors-alt`` (the first, ``regenerate.py``, copies the shared tree and
regenerates the invarlock files). For every openmed file named in ``REGENERATORS`` it

1. replays every case of the shared file with the reference and refuses to go on unless the
   reference reproduces the case's ``expected`` exactly (so the call below is the one the
   reference's generator made);
2. varies the case's input -- by default renames every well-formed digest (component
   digests, candidate and evidence digests) and re-seals a manifest whose seal was valid; a
   file's ``Regenerator.vary`` does more (other randomization keys, item orders, canary
   numbers, band scores, re-committed holdouts, aligned verify documents) -- and asks
   openmed 3.1.0 for the new ``expected``;
3. refuses a case whose outcome changed (``Regenerator.facts``: by default everything but
   the digests): varying must not change what a case tests.

It never imports sealeval and uses only openmed's public functions (the sealed manifest,
release gates, candidate runner and its CLI, session record, evaluation session, holdout
commitment, feedback budget, overlap forensics, blinded adjudication, recovery and the
JSON-source and recovery adapter APIs). ``--only FILE`` regenerates one file.

Usage: python regenerate_openmed.py --vectors ../shared/vectors --output DIR [--seed N]
(``DIR`` is the tree ``regenerate.py`` wrote; the files are rewritten in place.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openmed_adapters as adapters
import openmed_adjudication as adjudication
import openmed_candidate as candidate
import openmed_governance as governance
import openmed_holdout as holdout
import openmed_recovery as recovery
import openmed_session as session
from openmed.eval.suites.agent_release import MetricEvidence, evaluate_agent_release_gates
from openmed.eval.workflows.sealed_manifest import (
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)
from openmed.eval.workflows.session import SessionRecord
from openmed_governance import document
from renaming import DIGEST, DigestRenamer

Case = dict[str, Any]


def decode(value: Any) -> Any:
    """Apply the generators' input conventions (``$float``, ``$bytes_hex``)."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        if set(value) == {"$bytes_hex"}:
            return bytes.fromhex(value["$bytes_hex"])
        return {key: decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode(item) for item in value]
    return value


def outcome(action: Callable[[], Any]) -> dict[str, Any]:
    """Return the action's document, or ``{"error_code": text}`` for a refusal."""
    try:
        return action()
    except Exception as error:  # noqa: BLE001 - any refusal is the expected output
        return {"error_code": str(error)}


def manifest_seal(data: Any) -> dict[str, Any]:
    """Run one ``manifest_seal.json`` case."""
    if data["op"] == "seal":
        return outcome(lambda: document(seal_workflow_manifest(data["component_digests"])))
    return outcome(
        lambda: document(
            SealedWorkflowManifest(
                component_digests=data["component_digests"],
                manifest_digest=data["manifest_digest"],
                schema_version=data["schema_version"],
            )
        )
    )


def manifest_verify(data: Any) -> dict[str, Any]:
    """Run one ``manifest_verify.json`` case."""

    def act() -> dict[str, Any]:
        manifest = data["manifest"]
        if data.get("manifest_is_instance"):
            manifest = SealedWorkflowManifest(**manifest)
        return document(verify_at_evaluation_start(manifest, data["snapshot"]))

    return outcome(act)


def gates_report(data: Any) -> dict[str, Any]:
    """Run one ``gates_reports.json`` case."""

    def act() -> dict[str, Any]:
        evidence = [
            MetricEvidence.from_dict(item) if isinstance(item, dict) else item
            for item in data["evidence"]
        ]
        return document(
            evaluate_agent_release_gates(evidence, candidate_digest=data["candidate_digest"])
        )

    return outcome(act)


def gates_error(data: Any) -> dict[str, Any]:
    """Run one ``gates_errors.json`` case (evidence parsing or the gate evaluator)."""
    if data["op"] == "metric_from_dict":
        return outcome(lambda: {"ok": document(MetricEvidence.from_dict(data["value"]))})
    raw = data["evidence"]

    def act() -> dict[str, Any]:
        evidence = raw
        if isinstance(raw, list):
            evidence = [MetricEvidence.from_dict(i) if isinstance(i, dict) else i for i in raw]
        return document(
            evaluate_agent_release_gates(evidence, candidate_digest=data["candidate_digest"])
        )

    return outcome(act)


def tuples(value: Any) -> Any:
    """Return ``value`` with every list a tuple (how the record's steps are given)."""
    if isinstance(value, list):
        return tuple(tuples(item) for item in value)
    return value


def session_record(data: Any) -> dict[str, Any]:
    """Run one ``session_record.json`` case."""
    if data["op"] == "from_json":
        return outcome(lambda: document(SessionRecord.from_json(data["json"])))
    return outcome(
        lambda: document(
            SessionRecord(
                session_key=tuples(data["session_key"]),
                binding_digest=tuples(data["binding_digest"]),
                steps=tuples(data["steps"]),
            )
        )
    )


def rename_record_text(case: Case, renamer: DigestRenamer) -> Case:
    """Return a ``from_json`` case's input with the digests in its text renamed and resealed.

    A record whose text was valid gets the session digest the reference computes for the
    renamed record (the text's layout is kept); an invalid one keeps its renamed digest.
    """
    given = dict(case["input"])
    text = DIGEST.sub(lambda match: renamer.digest(match.group(0)), given["json"])
    if "canonical" in case["expected"]:
        fields = json.loads(text)
        record = SessionRecord(
            session_key=fields["session_key"],
            binding_digest=fields["binding_digest"],
            steps=tuples(fields["steps"]),
        )
        text = text.replace(fields["session_digest"], record.to_dict()["session_digest"])
    given["json"] = text
    return given


def reseal(original: Any, renamed: Any) -> Any:
    """Give every manifest whose seal was valid in ``original`` a valid seal in ``renamed``.

    Renaming the component digests breaks the manifest digest; a case that held a valid
    manifest must still hold one (the reference computes the new seal), and a case that held
    a broken seal keeps its (renamed, still broken) digest.
    """
    if isinstance(original, dict) and isinstance(renamed, dict):
        fixed = {
            key: reseal(original[key], item) if key in original else item  # a renamed key
            for key, item in renamed.items()
        }
        if {"component_digests", "manifest_digest"} <= set(original):
            try:
                valid = (
                    seal_workflow_manifest(decode(original["component_digests"])).manifest_digest
                    == original["manifest_digest"]
                )
                resealed = seal_workflow_manifest(decode(renamed["component_digests"]))
            except Exception:  # noqa: BLE001 - an unsealable manifest keeps its digest
                valid = False
            if valid:
                fixed["manifest_digest"] = resealed.manifest_digest
        return fixed
    if isinstance(original, list) and isinstance(renamed, list):
        return [reseal(old, new) for old, new in zip(original, renamed, strict=True)]
    return renamed


@dataclass(frozen=True)
class Regenerator:
    """How one file is regenerated.

    ``run`` is the reference call of a case; ``vary`` returns a case's varied input (default:
    rename every digest, reseal a valid manifest); ``facts`` is what the variation must keep
    of the expected output (default: everything but digests).
    """

    run: Callable[[Any], dict[str, Any] | None]
    vary: Callable[[Case, int, list[Case]], Any] | None = None
    facts: Callable[[Any], Any] | None = None


#: file -> how its cases are regenerated.
REGENERATORS: dict[str, Regenerator] = {
    "manifest_seal.json": Regenerator(manifest_seal),
    "manifest_verify.json": Regenerator(manifest_verify),
    "gates_reports.json": Regenerator(gates_report),
    "gates_errors.json": Regenerator(gates_error),
    "holdout.json": Regenerator(holdout.run_holdout, holdout.vary_holdout),
    "session_record.json": Regenerator(session_record),
    "candidate_runner.json": Regenerator(
        candidate.run_candidate, candidate.vary_candidate, candidate.candidate_facts
    ),
    "adapters_recovery.json": Regenerator(
        recovery.run_recovery, recovery.vary_recovery, recovery.recovery_facts
    ),
    "session.json": Regenerator(session.run_session, session.vary_session, session.session_facts),
    "feedback_budget.json": Regenerator(governance.run_budget, governance.vary_budget),
    "adapters_json_source.json": Regenerator(adapters.run_json_source, adapters.vary_json_source),
    "adjudication.json": Regenerator(adjudication.run, adjudication.vary, adjudication.facts),
    "forensics.json": Regenerator(
        governance.run_forensics, governance.vary_forensics, governance.forensics_facts
    ),
}


def skeleton(value: Any) -> Any:
    """Return ``value`` with every digest (also inside text) replaced by one placeholder.

    Two outcomes with the same skeleton differ only in digests: the same decision, reasons,
    counts, refusal code and document shape. Renaming digests must not change anything else.
    """
    if isinstance(value, dict):
        return {key: skeleton(item) for key, item in value.items()}
    if isinstance(value, list):
        return [skeleton(item) for item in value]
    if isinstance(value, str):
        return DIGEST.sub("sha256:<digest>", value)
    return value


def regenerate_file(source: Path, output: Path, name: str, seed: int) -> int:
    """Regenerate ``openmed/<name>`` into ``output``; return the number of renamed cases."""
    regenerator = REGENERATORS[name]
    run = regenerator.run
    facts = regenerator.facts or skeleton
    original = json.loads((source / "openmed" / name).read_text("utf-8"))
    renamer = DigestRenamer(seed)
    cases = []
    renamed = 0
    for case in original["cases"]:
        replayed = run(decode(case["input"]))
        if replayed is None:  # not replayable with the public API: copied unchanged
            cases.append(case)
            continue
        if replayed != case["expected"]:
            raise SystemExit(f"openmed/{name} {case['name']}: the reference does not reproduce")
        if regenerator.vary is not None:
            given = reseal(case["input"], regenerator.vary(case, seed, original["cases"]))
        elif case["input"].get("op") == "from_json" and isinstance(case["input"].get("json"), str):
            given = rename_record_text(case, renamer)
        else:
            given = reseal(case["input"], renamer.rename(case["input"]))
        expected = run(decode(given))
        if expected is None or facts(expected) != facts(case["expected"]):
            raise SystemExit(f"openmed/{name} {case['name']}: renaming changed the outcome")
        cases.append({"name": case["name"], "input": given, "expected": expected})
        renamed += given != case["input"]  # a case without digests has nothing to rename
    regenerated = {**original, "generator": {"tool": "scripts/vectors/regenerate_openmed.py"}}
    regenerated["generator"]["seed"] = seed
    regenerated["cases"] = cases
    (output / "openmed" / name).write_text(json.dumps(regenerated, indent=1) + "\n", "utf-8")
    return renamed


def main() -> int:
    """Rewrite the openmed files of an alternate tree with other digests."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=Path, required=True, help="the shared vector tree")
    parser.add_argument("--output", type=Path, required=True, help="the tree regenerate.py wrote")
    parser.add_argument("--seed", type=int, default=7, help="seed of the renaming")
    parser.add_argument(
        "--only", action="append", choices=sorted(REGENERATORS), help="regenerate only this file"
    )
    arguments = parser.parse_args()
    if not (arguments.output / "openmed").is_dir():
        parser.error("--output must be the tree regenerate.py wrote")
    for name in arguments.only or REGENERATORS:
        count = regenerate_file(arguments.vectors, arguments.output, name, arguments.seed)
        print(f"openmed/{name}: {count} cases regenerated (seed {arguments.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
