"""Request helpers shared by the captured request and pack tests.

Moved out of ``test_captured_request.py`` so that no test module imports another."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sealeval.captured.request import (
    SourceSpec,
)
from sealeval.captured.run import Limits, Run, read_run


def oracle_loader(evidence_dir: Path) -> Any:
    """The reference's load_run output for native files (the adapters are another module's).

    Returns the canonical run the reference produced (the pack's record file) after
    checking that it was imported from exactly these bytes (source_digest).
    """

    def load_run(path: Path, side: SourceSpec, *, limits: Limits) -> Run:
        raw = path.read_bytes()
        run = read_run(evidence_dir / "records" / f"{side.side}.json", limits=limits)
        assert run.source_digest == "sha256:" + hashlib.sha256(raw).hexdigest()
        assert side.adapter != "invarlock"
        return run

    return load_run
