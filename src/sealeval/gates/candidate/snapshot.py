"""The repository snapshot document, built from the outputs of the git invocations.

:class:`GitObservation` carries what one git call reported;
:class:`RepositorySnapshot` is the repository document of the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sealeval.canonical import digest_bytes
from sealeval.gates.candidate.vocabulary import (
    is_source_sha,
)

__all__ = ["GitObservation", "RepositorySnapshot"]

# ---------------------------------------------------------------------------
# Repository snapshot


@dataclass(frozen=True, slots=True)
class GitObservation:
    """Outputs of the git invocations of one snapshot (stripped text, ``None`` = failed).

    Attributes:
        head: ``git rev-parse --verify HEAD^{commit}``.
        status: ``git status --porcelain --untracked-files=all``; ``None`` also
            when it was not run because ``head`` failed.
        tag: the tag name given on the command line, or ``None`` when no tag
            option was given (an empty name counts as given).
        tag_commit: ``git rev-parse --verify --end-of-options
            refs/tags/<tag>^{commit}``; ``None`` when it failed, when
            ``git check-ref-format`` refused the name, or without a tag.
    """

    head: str | None
    status: str | None
    tag: str | None = None
    tag_commit: str | None = None


@dataclass(frozen=True, slots=True)
class RepositorySnapshot:
    """The repository document of the manifest (``repository`` / ``repository_after``)."""

    expected_sha: str
    git_sha: str | None
    reason_codes: tuple[str, ...]
    tag_digest: str | None
    tag_sha: str | None
    tree_status: str

    @classmethod
    def from_observation(cls, expected_sha: str, observation: GitObservation) -> RepositorySnapshot:
        """Apply the snapshot rules to the outputs of the git invocations."""
        reasons: set[str] = set()
        git_sha: str | None = None
        tree_status = "unknown"
        head, status = observation.head, observation.status
        if is_source_sha(head) and status is not None:
            tree_status = "dirty" if status else "clean"
            if status:
                reasons.add("dirty_tree")
            git_sha = head
            if head != expected_sha:
                reasons.add("sha_mismatch")
        else:
            reasons.add("repository_unavailable")
        tag_digest: str | None = None
        tag_sha: str | None = None
        if observation.tag is not None:
            tag_digest = digest_bytes(observation.tag.encode("utf-8", "surrogateescape"))
            if is_source_sha(observation.tag_commit):
                tag_sha = observation.tag_commit
                if tag_sha != expected_sha:
                    reasons.add("tag_mismatch")
            else:
                reasons.add("tag_unavailable")
        return cls(
            expected_sha=expected_sha,
            git_sha=git_sha,
            reason_codes=tuple(sorted(reasons)),
            tag_digest=tag_digest,
            tag_sha=tag_sha,
            tree_status=tree_status,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the snapshot document."""
        return {
            "expected_sha": self.expected_sha,
            "git_sha": self.git_sha,
            "reason_codes": list(self.reason_codes),
            "tag_digest": self.tag_digest,
            "tag_sha": self.tag_sha,
            "tree_status": self.tree_status,
        }
