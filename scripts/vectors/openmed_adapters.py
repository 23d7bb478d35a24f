"""Regenerators of openmed's gate-adapter vector files (openmed venv; public functions only).

``adapters_json_source.json`` (``json_release_evidence``), used by ``regenerate_openmed.py``:
``run_*`` replays one case with the reference, ``vary_*`` returns its input with other
digests (seeded, consistent across the case).
"""

from __future__ import annotations

import json
from typing import Any

from openmed.eval.suites.agent_release_adapters import json_release_evidence
from openmed_governance import refusal
from renaming import DIGEST, DigestRenamer


def canonical(value: Any) -> str:
    """Return openmed's canonical JSON text (sorted keys, compact, ASCII escapes)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def run_json_source(data: Any) -> dict[str, Any]:
    """Run one ``adapters_json_source.json`` case."""
    digests = data["expected_case_digests"]
    if isinstance(digests, list):
        digests = tuple(digests)

    def act() -> dict[str, Any]:
        evidence = json_release_evidence(
            data["serialized"], expected_kind=data["expected_kind"], expected_case_digests=digests
        )
        source = None if data["serialized"] is None else canonical(json.loads(data["serialized"]))
        return {
            "evidence": [item.to_dict() for item in evidence],
            "evidence_canonical": [canonical(item.to_dict()) for item in evidence],
            "source_canonical": source,
            "evidence_digest": evidence[0].evidence_digest if evidence else None,
        }

    return refusal(act)


def vary_json_source(case: dict[str, Any], seed: int, _cases: list[Any]) -> Any:
    """Return a JSON-source case's input with every well-formed digest renamed.

    The digests inside the serialized report text are renamed in place (its layout, key order
    and any malformed token are kept), consistently with the expected case digests.
    """
    renamer = DigestRenamer(seed)
    given = renamer.rename(case["input"])
    if isinstance(given.get("serialized"), str):
        text = DIGEST.sub(lambda match: renamer.digest(match.group(0)), given["serialized"])
        given = {**given, "serialized": text}
    return given
