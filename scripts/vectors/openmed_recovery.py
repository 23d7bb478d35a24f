"""Regenerator of openmed's ``adapters_recovery.json`` (openmed venv; public functions only).

Checkpoints, decisions and idempotency keys form a hash chain: an effect's idempotency key
is derived from its run, action, tool, kind and operation digest; a checkpoint's digest
covers its effects (keys included), its previous checkpoint's digest and the recovery
evidence it records; a decision's evidence digest covers its source checkpoint's digest and
the keys it retries. Every case is replayed with openmed's public recovery API
(``derive_idempotency_key``, ``RecoveryCheckpoint.create``/``from_dict``,
``RecoveryDecision.create``, ``recover_workflow``) and recovery adapter
(``recovery_release_evidence``; its source envelope is rebuilt as spec 21 section 3.3 step
9 documents it, and checked against the digest the reference puts in the evidence).

``vary_recovery`` renames run ids and action ids (seeded, in their ``run_``/``act_`` + 32
hex form) and every digest, then **rebuilds the chain**: every key is derived again from
the renamed fields, every checkpoint and decision of the file whose digest was valid is
created again (previous checkpoints and source checkpoints first), and every reference to
one of them gets the new digest. A document whose digest or key was not the derivation of
its fields (a tamper) gets a fresh value instead, so it stays wrong the same way.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from typing import Any

from openmed.agent.workflows.recovery import (
    ActionId,
    EffectKind,
    EffectObservation,
    EffectRecord,
    ObservationState,
    RecoveryCheckpoint,
    RecoveryDecision,
    RecoveryDisposition,
    RecoveryPhase,
    RecoveryReason,
    RunId,
    ToolId,
    WorkflowId,
    derive_idempotency_key,
    recover_workflow,
)
from openmed.eval.suites.agent_release_adapters import (
    RecoveryEvidenceCase,
    recovery_release_evidence,
)
from renaming import DIGEST, DigestRenamer

Case = dict[str, Any]

#: A run id or an action id as the fixtures write them.
OPAQUE = re.compile(r"(run|act)_[0-9a-f]{32}")
#: An idempotency key.
KEY = re.compile(r"idem_[0-9a-f]{64}")
CHECKPOINT_FIELDS = (
    "workflow_id",
    "run_id",
    "sequence",
    "phase",
    "plan_digest",
    "effects",
    "approval_action_digest",
    "approval_receipt_digest",
    "approval_expires_at",
    "previous_checkpoint_digest",
    "recovery_evidence_digest",
)


def canonical(value: Any) -> str:
    """Return openmed's canonical JSON text (sorted keys, compact, ASCII escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def document(result: Any) -> dict[str, Any]:
    """Return the ``{canonical, parsed}`` form of a reference object."""
    return {"canonical": result.to_json(), "parsed": result.to_dict()}


def key_of(effect: dict[str, Any], run_id: str) -> str:
    """Return the idempotency key the reference derives for an effect of run ``run_id``."""
    return derive_idempotency_key(
        run_id=RunId.parse(run_id),
        action_id=ActionId.parse(effect["action_id"]),
        tool_id=ToolId.parse(effect["tool_id"]),
        kind=EffectKind(effect["kind"]),
        operation_digest=effect["operation_digest"],
    )


def create_checkpoint(fields: dict[str, Any]) -> RecoveryCheckpoint:
    """Create a checkpoint (its digest computed by the reference) from its fields."""
    return RecoveryCheckpoint.create(
        workflow_id=WorkflowId.parse(fields["workflow_id"]),
        run_id=RunId.parse(fields["run_id"]),
        sequence=fields["sequence"],
        phase=RecoveryPhase(fields["phase"]),
        plan_digest=fields["plan_digest"],
        effects=[EffectRecord.from_dict(effect) for effect in fields["effects"]],
        approval_action_digest=fields["approval_action_digest"],
        approval_receipt_digest=fields["approval_receipt_digest"],
        approval_expires_at=fields["approval_expires_at"],
        previous_checkpoint_digest=fields["previous_checkpoint_digest"],
        recovery_evidence_digest=fields["recovery_evidence_digest"],
    )


def decision_options(fields: dict[str, Any]) -> dict[str, Any]:
    """Return a decision's constructor arguments (without its evidence digest)."""
    return {
        "disposition": RecoveryDisposition(fields["disposition"]),
        "reason": RecoveryReason(fields["reason"]),
        "source_checkpoint_digest": fields["source_checkpoint_digest"],
        "retry_effect_ids": tuple(fields["retry_effect_ids"]),
        "retry_idempotency_keys": tuple(fields["retry_idempotency_keys"]),
        "committed_effects": tuple(
            (item["action_id"], item["commit_evidence_digest"])
            for item in fields["committed_effects"]
        ),
        "compensation_effect_ids": tuple(fields["compensation_effect_ids"]),
    }


def create_decision(fields: dict[str, Any]) -> RecoveryDecision:
    """Create a decision (its evidence digest computed by the reference) from its fields."""
    return RecoveryDecision.create(**decision_options(fields))


def restore_decision(value: Any) -> Any:
    """Build a decision from its document (a non-object is passed through raw)."""
    if not isinstance(value, dict):
        return value
    return RecoveryDecision(
        **decision_options(value),
        evidence_digest=value["evidence_digest"],
        schema_version=value["schema_version"],
    )


def observation(value: dict[str, Any]) -> EffectObservation:
    """Build an effect observation from its document."""
    return EffectObservation(
        action_id=ActionId.parse(value["action_id"]),
        operation_digest=value["operation_digest"],
        idempotency_key=value["idempotency_key"],
        state=ObservationState(value["state"]),
        commit_evidence_digest=value["commit_evidence_digest"],
    )


def evidence_case(value: Any) -> Any:
    """Build an evidence case from its document (a non-object is passed through raw)."""
    if not isinstance(value, dict):
        return value
    checkpoint = value["checkpoint"]
    if isinstance(checkpoint, dict):
        checkpoint = RecoveryCheckpoint.from_dict(checkpoint)
    return RecoveryEvidenceCase(
        case_digest=value["case_digest"],
        checkpoint=checkpoint,
        decision=restore_decision(value["decision"]),
        expected_decision=restore_decision(value["expected_decision"]),
    )


def run_evidence(data: dict[str, Any]) -> dict[str, Any]:
    """Run the recovery adapter on one ``evidence`` case and rebuild its source envelope."""
    cases = data["cases"]
    built = None if cases is None else tuple(evidence_case(item) for item in cases)
    evidence = recovery_release_evidence(
        built,
        expected_case_digests=data["expected_case_digests"],
        completed=data["completed"],
        synthetic=data["synthetic"],
    )
    source = None
    if built is not None and evidence:
        envelope = {
            "schema_version": "openmed.eval.agent_release_source.v1",
            "kind": "recovery",
            "completed": True,
            "synthetic": data["synthetic"],
            "expected_case_digests": sorted(data["expected_case_digests"]),
            "cases": [item.to_dict() for item in sorted(built, key=lambda c: c.case_digest)],
        }
        source = canonical(envelope)
        digest = "sha256:" + hashlib.sha256(source.encode("ascii")).hexdigest()
        if digest != evidence[0].evidence_digest:
            raise SystemExit("adapters_recovery.json: the source envelope differs from spec 21")
    return {
        "evidence": [item.to_dict() for item in evidence],
        "evidence_canonical": [canonical(item.to_dict()) for item in evidence],
        "source_canonical": source,
        "evidence_digest": evidence[0].evidence_digest if evidence else None,
    }


def run_recovery(data: Any) -> dict[str, Any]:
    """Run one ``adapters_recovery.json`` case."""
    op = data["op"]
    try:
        if op == "idempotency_key":
            return {"idempotency_key": key_of(data, data["run_id"])}
        if op == "checkpoint":
            return document(create_checkpoint(data["fields"]))
        if op == "decision":
            return document(create_decision(data["fields"]))
        if op == "recover":
            decision = recover_workflow(
                [RecoveryCheckpoint.from_dict(item) for item in data["lineage"]],
                [observation(item) for item in data["observations"]],
                now=data["now"],
            )
            return document(decision)
        if op == "evidence":
            return run_evidence(data)
    except Exception as error:  # noqa: BLE001 - any refusal is the expected output
        code = getattr(error, "code", None)
        if op == "recover" and code is not None:
            return {"error_code": str(error), "code": code}
        return {"error_code": str(error)}
    raise SystemExit(f"adapters_recovery.json: unknown op {op!r}")


def is_checkpoint(value: Any) -> bool:
    """Return whether ``value`` is a checkpoint document (or a checkpoint case's fields)."""
    return isinstance(value, dict) and {"effects", "phase", "plan_digest"} <= set(value)


def is_decision(value: Any) -> bool:
    """Return whether ``value`` is a decision document (or a decision case's fields)."""
    return isinstance(value, dict) and {"disposition", "source_checkpoint_digest"} <= set(value)


def documents(value: Any) -> list[dict[str, Any]]:
    """Return every checkpoint and decision document in ``value``."""
    found = []
    if isinstance(value, dict):
        if is_checkpoint(value) or is_decision(value):
            found.append(value)
        for item in value.values():
            found += documents(item)
    elif isinstance(value, list):
        for item in value:
            found += documents(item)
    return found


class Chain:
    """The renaming of one file: ids and digests renamed, keys and digests re-derived."""

    def __init__(self, seed: int, cases: list[Case]) -> None:
        """Index every valid checkpoint and decision document of the file by its digest."""
        self.digests = DigestRenamer(seed)
        self.random = random.Random(f"recovery-{seed}")
        self.ids: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.decisions: dict[str, dict[str, Any]] = {}
        self.rebuilt: dict[str, str] = {}
        found = [
            item
            for case in cases
            for item in documents([case["input"], case["expected"].get("parsed")])
        ]
        for item in found:
            self.index(item)
            if is_checkpoint(item):
                for effect in item["effects"]:
                    self.derive(effect, item["run_id"])

    def derive(self, effect: dict[str, Any], run_id: str) -> None:
        """Remember the new key of an effect whose key is the derivation of its fields."""
        try:
            if key_of(effect, run_id) != effect["idempotency_key"]:
                return
            renamed = {
                **effect,
                "action_id": self.opaque(effect["action_id"]),
                "operation_digest": self.digests.digest(effect["operation_digest"]),
            }
            self.keys[effect["idempotency_key"]] = key_of(renamed, self.opaque(run_id))
        except Exception:  # noqa: BLE001 - an underivable key stays foreign
            pass

    def index(self, item: dict[str, Any]) -> None:
        """Remember a document whose digest is the reference's derivation of its fields."""
        try:
            if is_checkpoint(item) and "checkpoint_digest" in item:
                if create_checkpoint(item).checkpoint_digest == item["checkpoint_digest"]:
                    self.checkpoints.setdefault(item["checkpoint_digest"], item)
            elif (
                is_decision(item)
                and "evidence_digest" in item
                and create_decision(item).evidence_digest == item["evidence_digest"]
            ):
                self.decisions.setdefault(item["evidence_digest"], item)
        except Exception:  # noqa: BLE001 - an invalid document is not a chain link
            pass

    def opaque(self, old: str) -> str:
        """Return the new run or action id of ``old`` (same prefix, 32 seeded hex digits)."""
        if old not in self.ids:
            prefix = old.split("_", 1)[0]
            self.ids[old] = f"{prefix}_{self.random.randbytes(16).hex()}"
        return self.ids[old]

    def digest(self, old: str) -> str:
        """Return the new digest: a chain link's rebuilt digest, or a renamed one."""
        if old in self.checkpoints or old in self.decisions:
            if old not in self.rebuilt:
                source = self.checkpoints.get(old) or self.decisions[old]
                fields = self.fields(source)
                if old in self.checkpoints:
                    self.rebuilt[old] = create_checkpoint(fields).checkpoint_digest
                else:
                    self.rebuilt[old] = create_decision(fields).evidence_digest
            return self.rebuilt[old]
        return self.digests.digest(old)

    def key(self, old: str) -> str:
        """Return the re-derived key of a derived key, or a fresh key for a foreign one."""
        if old not in self.keys:
            self.keys[old] = "idem_" + self.digests.digest("sha256:" + old[5:])[7:]
        return self.keys[old]

    def value(self, value: Any) -> Any:
        """Return ``value`` renamed: ids, keys and digests (documents rebuilt)."""
        if is_checkpoint(value) or is_decision(value):
            return self.document(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, str):
            if OPAQUE.fullmatch(value):
                return self.opaque(value)
            if KEY.fullmatch(value):
                return self.key(value)
            if DIGEST.fullmatch(value):
                return self.digest(value)
        return value

    def fields(self, item: dict[str, Any]) -> dict[str, Any]:
        """Return a document's fields renamed (keys: the re-derived ones), without its digest."""
        return {
            key: self.value(value)
            for key, value in item.items()
            if key not in ("checkpoint_digest", "evidence_digest")
        }

    def document(self, item: dict[str, Any]) -> dict[str, Any]:
        """Return a checkpoint or decision document renamed, its own digest re-derived."""
        new = self.fields(item)
        for own in ("checkpoint_digest", "evidence_digest"):
            if own in item:
                new[own] = self.digest(item[own])
        return {key: new[key] for key in item}  # the document's own key order


CHAINS: dict[int, Chain] = {}


def vary_recovery(case: Case, seed: int, cases: list[Case]) -> Any:
    """Return a case's input with other ids and digests and its chain rebuilt."""
    if seed not in CHAINS:
        CHAINS[seed] = Chain(seed, cases)
    chain = CHAINS[seed]
    given = case["input"]
    if given["op"] == "idempotency_key":
        renamed = chain.value(given)
        return {**renamed, "op": given["op"]}
    return chain.value(given)


def recovery_facts(expected: dict[str, Any]) -> Any:
    """Return what a case's variation must keep (everything but ids, keys and digests)."""

    def skeleton(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: skeleton(item) for key, item in value.items()}
        if isinstance(value, list):
            return [skeleton(item) for item in value]
        if isinstance(value, str):
            value = DIGEST.sub("sha256:<digest>", value)
            value = KEY.sub("idem_<key>", value)
            return OPAQUE.sub(r"\1_<id>", value)
        return value

    if "canonical" in expected:
        return skeleton(expected["parsed"])
    if "source_canonical" in expected:
        return skeleton({key: expected[key] for key in ("evidence",)})
    return skeleton(expected)
