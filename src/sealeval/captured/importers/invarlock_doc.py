"""``invarlock``: a file that already is an evaluation run (spec 11 §1).

The document must be a valid ``invarlock/evaluation-run-v1`` run; it is
returned unchanged (the file need not be canonical; its ``source_digest`` is
whatever the file says, and identities cannot be overridden at import:
``identity_override``). Reading and validation are the core's
(:func:`~sealeval.captured.run.read_run`): the file is read once, at most
``Limits.max_file_bytes`` (128 MiB), and decoded and validated once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.jsonl import sniff
from sealeval.captured.run import RUN_FORMAT, UNLIMITED, Limits, Run, read_run

__all__ = ["InvarlockImporter"]

_FORMAT: Final = RUN_FORMAT


class InvarlockImporter:
    """The ``invarlock`` adapter: canonical (or merely valid) run documents."""

    name = "invarlock"

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a top-level object whose ``format`` is the evaluation run's."""
        del path
        found = sniff(head)
        return found.kind == "object" and found.text("format") == _FORMAT

    def load(self, path: Path, limits: Limits = UNLIMITED) -> Run:
        """Read and validate the run (returned unchanged)."""
        return read_run(path, limits=limits)

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the run's records (the Importer protocol)."""
        del options
        yield from self.load(path).records

    def __repr__(self) -> str:
        """Show the adapter name."""
        return "InvarlockImporter()"
