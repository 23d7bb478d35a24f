"""The examined evidence pack: :class:`EvidencePack` (typed, validated content).

Part of :mod:`sealeval.captured.pack_reader`: what
:func:`~sealeval.captured.pack_reader.read_evidence_pack` returns, with the
re-opening of a run file and the re-scan that prove the pack unchanged since
it was examined.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sealeval._fs import FileSystemError, open_directory
from sealeval.captured.pack_layout import (
    REFERENCE_PACK_LIMITS,
    ROLE_PATHS,
    EvidencePackError,
    ManifestFacts,
    PackLimits,
    PackManifest,
    identified,
)
from sealeval.captured.pack_reader.scan import PackSnapshot, Scanner, open_root, rescan
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.request import NormalizedRequest
from sealeval.captured.run import Run
from sealeval.captured.run_facts import RunFacts
from sealeval.captured.signing import SignatureEnvelope, VerifyKey

__all__ = ["EvidencePack"]


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class EvidencePack(ManifestFacts):
    """A pack that passed the examination of ``32-verify.md`` §3 (typed, validated).

    Attributes:
        path: the pack directory as given.
        manifest: the manifest (its digest is ``pack_manifest_digest``).
        signature: the signature envelope, or ``None`` when unsigned.
        signer: the verified signer's public key, or ``None`` when unsigned.
        request: the normalized request (``request.json``).
        policy: the policy (``inputs/policy.json``).
        baseline: the baseline run (``records/baseline.json``): a run, or its
            facts (:class:`~sealeval.captured.run_facts.RunFacts`) when read
            with ``runs="outline"`` and streamed.
        subject: the subject run (``records/subject.json``), likewise.
        report: the comparison report document (read-only).
        snapshot: the identities of every entry when examined.
        limits: the envelope the pack was read within.
    """

    path: Path
    manifest: PackManifest
    signature: SignatureEnvelope | None
    signer: VerifyKey | None
    request: NormalizedRequest
    policy: ComparisonPolicy
    baseline: Run | RunFacts
    subject: Run | RunFacts
    report: Mapping[str, Any]
    snapshot: PackSnapshot
    limits: PackLimits = REFERENCE_PACK_LIMITS

    def __repr__(self) -> str:
        """Show the manifest digest and the authentication mode only."""
        return (
            f"EvidencePack(manifest_digest={self.manifest_digest!r}, "
            f"authentication={self.authentication!r})"
        )

    @property
    def decision(self) -> str:
        """The report's overall decision."""
        return str(self.report["decision"])

    def held_runs(self) -> tuple[Run, Run]:
        """Return both runs as held :class:`~sealeval.captured.run.Run` objects.

        Raises:
            EvidencePackError: ``invalid_field`` (field ``runs``) when a run
                was read as facts (``runs="outline"``).
        """
        baseline, subject = self.baseline, self.subject
        if not isinstance(baseline, Run) or not isinstance(subject, Run):
            raise EvidencePackError("invalid_field", "runs")
        return baseline, subject

    def open_run(self, role: str) -> IO[bytes]:
        """Open the run file of ``role`` read-only, refusing any change since it was examined.

        Raises:
            EvidencePackError: ``file_changed`` (status 6) when the file or
                its directory is not the one examined.
        """
        name = ROLE_PATHS[role]
        directory = name.rpartition("/")[0]
        with identified(self.manifest_digest):
            root_fd = open_root(self.path)
            try:
                dir_fd = open_directory(directory, dir_fd=root_fd)
            except FileSystemError:
                raise EvidencePackError("file_changed", "pack") from None
            finally:
                os.close(root_fd)
            scanner = Scanner(dir_fd, self.signed, self.limits)
            scanner.dir_fds[directory] = dir_fd
            try:
                fd = scanner.open_file(name, self.snapshot)
            finally:
                scanner.close()
            return os.fdopen(fd, "rb")

    def check_unchanged(self) -> None:
        """Re-scan the directory; refuse (``file_changed``, status 6) any change since reading."""
        with identified(self.manifest_digest):
            rescan(self.path, self.signed, self.snapshot, self.limits)
