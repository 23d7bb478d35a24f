"""JSON Schema loading shared by the contract and CLI tests.

Moved out of ``test_contracts.py`` so that no test module imports another."""

from __future__ import annotations

import json
from typing import Any

from support.vectors import PROJECT_ROOT

CONTRACTS = PROJECT_ROOT / "contracts"


def schema(name: str) -> dict[str, Any]:
    document = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document
