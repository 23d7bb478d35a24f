"""The edges of the candidate runner: git checks, no-follow file reads, exclusive output.

:func:`run_agent_release` follows the processing order of
``22-candidate-runner.md`` section 2 and delegates every rule to the pure
core in :mod:`sealeval.gates.candidate`:

1. the key file is opened with ``O_NOFOLLOW`` and must be a regular file
   (checked on the opened descriptor, so there is no check-then-use race);
2. the key must be at least 32 bytes, kept verbatim;
3. ``--source-sha`` must be a full lowercase commit SHA;
4. repository snapshot (git, with an environment scrubbed of variables that
   could redirect what is checked);
5. the four artifacts and 6. the evidence files are read the same no-follow
   way and hashed from the opened descriptor;
9. a second snapshot, compared field by field with the first;
10-13. manifest, gates and signed packet (pure core);
14. the bundle is published exclusively by ``sealeval._fs`` (temporary
    file, fsync, hard link into place): an existing file or symlink, even
    dangling, or a symlinked folder component is refused with
    ``output_unavailable``.

No path, file name, key byte or timestamp reaches a document or an error.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from sealeval._fs import FileSystemError, open_regular, publish_exclusive
from sealeval._keys import read_key_file
from sealeval.gates.candidate import (
    ARTIFACT_NAMES,
    CandidateDecision,
    CandidateRunnerError,
    Ed25519SigningKey,
    EvidenceFileEntry,
    GitObservation,
    HmacKey,
    RepositorySnapshot,
    assess_evidence_file,
    decide_candidate,
    is_source_sha,
    load_ed25519_public_key,
)

__all__ = [
    "GIT_TIMEOUT_SECONDS",
    "MAX_EVIDENCE_BYTES",
    "MAX_KEY_BYTES",
    "AgentReleaseOptions",
    "AgentReleaseOutcome",
    "SnapshotFunction",
    "git_environment",
    "observe_repository",
    "read_ed25519_key",
    "read_ed25519_public_key",
    "read_hmac_key",
    "read_input_file",
    "read_regular_file",
    "repository_snapshot",
    "run_agent_release",
    "write_exclusive",
]

GIT_TIMEOUT_SECONDS: Final = 30
_CHUNK: Final = 1 << 20
#: Largest key file read (a longer file is refused as ``signing_key_invalid``).
MAX_KEY_BYTES: Final = 1 << 16
#: Largest evidence file parsed (a longer one is hashed and marked ``evidence_invalid``).
MAX_EVIDENCE_BYTES: Final = 1 << 26

#: Git variables that are kept: they only restrict discovery or select the
#: user's own configuration files. Every other ``GIT_*`` variable is removed
#: because it can redirect the repository, index, object store, work tree,
#: configuration or helper programs that a check would use.
_KEPT_GIT_VARIABLES: Final = frozenset(
    {
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_TERMINAL_PROMPT",
    }
)


def git_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment for git: the caller's, scrubbed of redirecting variables.

    Removes every ``GIT_*`` variable except the discovery limits and the
    choice of user/system configuration files (``GIT_DIR``, ``GIT_WORK_TREE``,
    ``GIT_INDEX_FILE``, ``GIT_OBJECT_DIRECTORY``,
    ``GIT_ALTERNATE_OBJECT_DIRECTORIES``, ``GIT_COMMON_DIR``,
    ``GIT_NAMESPACE``, ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT`` /
    ``GIT_CONFIG_KEY_*`` / ``GIT_CONFIG_VALUE_*``, ``GIT_EXEC_PATH``,
    ``GIT_REPLACE_REF_BASE``, ... all go), and sets ``GIT_OPTIONAL_LOCKS=0``
    so that ``git status`` never writes to the checked repository. For a
    normal environment the output of every check is unchanged.
    """
    source = os.environ if environ is None else environ
    scrubbed = {
        name: value
        for name, value in source.items()
        if not name.startswith("GIT_") or name in _KEPT_GIT_VARIABLES
    }
    scrubbed["GIT_OPTIONAL_LOCKS"] = "0"
    return scrubbed


def _git(root: str | os.PathLike[str] | None, *args: str) -> str | None:
    """Run one git command; return its stripped stdout, or ``None`` on any failure."""
    try:
        completed = subprocess.run(  # noqa: S603 - fixed git argv, no shell
            ["git", "-c", "core.fsmonitor=false", *args],  # noqa: S607 - git from PATH, as the reference
            cwd=root,
            env=git_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.decode("utf-8", "replace").strip()


def observe_repository(root: str | os.PathLike[str] | None, tag: str | None) -> GitObservation:
    """Run the git invocations of one snapshot (``None`` root: the working directory)."""
    head = _git(root, "rev-parse", "--verify", "HEAD^{commit}")
    status = (
        _git(root, "status", "--porcelain", "--untracked-files=all")
        if is_source_sha(head)
        else None
    )
    tag_commit: str | None = None
    if tag is not None and _git(root, "check-ref-format", f"refs/tags/{tag}") is not None:
        tag_commit = _git(
            root, "rev-parse", "--verify", "--end-of-options", f"refs/tags/{tag}^{{commit}}"
        )
    return GitObservation(head=head, status=status, tag=tag, tag_commit=tag_commit)


def repository_snapshot(
    root: str | os.PathLike[str] | None, expected_sha: str, tag: str | None
) -> RepositorySnapshot:
    """Take one repository snapshot (HEAD, tracked and untracked status, optional tag)."""
    return RepositorySnapshot.from_observation(expected_sha, observe_repository(root, tag))


#: Signature of the snapshot step (injectable for tests of ``repository_changed``).
SnapshotFunction = Callable[[str | os.PathLike[str] | None, str, str | None], RepositorySnapshot]


# ---------------------------------------------------------------------------
# Files


def _open_regular(path: str | os.PathLike[str]) -> int | None:
    """Open ``path`` read-only without following a final symlink; ``None`` unless regular."""
    try:
        return open_regular(path)
    except FileSystemError:
        return None


def read_regular_file(
    path: str | os.PathLike[str], *, limit: int
) -> tuple[str, bytes | None] | None:
    """Read a regular, non-symlink file through one descriptor.

    Returns:
        ``None`` when the file is missing, a symlink, not a regular file or
        unreadable; otherwise ``(sha256 digest, bytes)`` where the bytes are
        ``None`` if the file is longer than ``limit`` (it is still hashed).
    """
    fd = _open_regular(path)
    if fd is None:
        return None
    hasher = hashlib.sha256()
    kept: list[bytes] = []
    size = 0
    try:
        with os.fdopen(fd, "rb", buffering=0) as handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
                size += len(chunk)
                if size <= limit:
                    kept.append(chunk)
                else:
                    kept.clear()
    except OSError:
        return None
    return "sha256:" + hasher.hexdigest(), (b"".join(kept) if size <= limit else None)


def _artifact_digest(path: str | os.PathLike[str]) -> str | None:
    read = read_regular_file(path, limit=0)
    return None if read is None else read[0]


def _read_evidence(path: str | os.PathLike[str], expected_sha: str) -> EvidenceFileEntry:
    read = read_regular_file(path, limit=MAX_EVIDENCE_BYTES)
    if read is None:
        return assess_evidence_file(None, expected_sha=expected_sha)
    digest, data = read
    if data is None:
        return assess_evidence_file(None, expected_sha=expected_sha, file_digest=digest)
    return assess_evidence_file(data, expected_sha=expected_sha)


def _read_key(path: str | os.PathLike[str], unavailable: str, invalid: str) -> bytes:
    """Read a key file through :func:`sealeval._keys.read_key_file` with the runner's codes.

    Over :data:`MAX_KEY_BYTES` is ``invalid``; missing, a symlink, not a
    regular file, unreadable or changed while read is ``unavailable``.
    """
    return read_key_file(
        path,
        limit=MAX_KEY_BYTES,
        error=CandidateRunnerError,
        field=None,
        renames={"too_large": invalid},
        default=unavailable,
    )


def read_hmac_key(path: str | os.PathLike[str]) -> HmacKey:
    """Read an HMAC key file verbatim (a trailing newline is part of the key).

    Raises:
        CandidateRunnerError: ``signing_key_unavailable`` (missing, symlink, not
            a regular file, unreadable) or ``signing_key_invalid`` (shorter
            than 32 bytes, or longer than 64 KiB).
    """
    key = HmacKey(_read_key(path, "signing_key_unavailable", "signing_key_invalid"))
    if not key.usable:
        raise CandidateRunnerError("signing_key_invalid")
    return key


def read_ed25519_key(path: str | os.PathLike[str]) -> Ed25519SigningKey:
    """Read an unencrypted PKCS#8 PEM Ed25519 private key file.

    Raises:
        CandidateRunnerError: ``ed25519_key_unavailable`` or ``ed25519_key_invalid``.
    """
    return Ed25519SigningKey.from_pem(
        _read_key(path, "ed25519_key_unavailable", "ed25519_key_invalid")
    )


def read_ed25519_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Read a PEM Ed25519 public key file (``verify-packet``, ``attest release``).

    Raises:
        CandidateRunnerError: ``public_key_unavailable`` (missing, symlink, not
            a regular file, unreadable, or longer than 64 KiB) or
            ``public_key_invalid``.
    """
    data = _read_key(path, "public_key_unavailable", "public_key_unavailable")
    return load_ed25519_public_key(data)


def write_exclusive(path: str | os.PathLike[str], data: bytes) -> None:
    """Create ``path`` exclusively and write ``data``.

    Fails if anything exists at ``path`` (a file, a directory, a symlink, even
    a dangling one), if the directory is missing or if any component of its
    folder is a symlink (``sealeval._fs.publish_exclusive``: temporary file,
    fsync, link into place; nothing partial is ever visible).

    Raises:
        CandidateRunnerError: ``output_unavailable``.
    """
    try:
        publish_exclusive(path, data, mode=0o644)
    except FileSystemError:
        raise CandidateRunnerError("output_unavailable") from None


# ---------------------------------------------------------------------------
# The run


@dataclass(frozen=True, slots=True)
class AgentReleaseOptions:
    """The flags of ``gates agent-release`` (paths are never copied into any output)."""

    source_sha: str
    wheel: str | os.PathLike[str]
    sdist: str | os.PathLike[str]
    tool_catalog: str | os.PathLike[str]
    policy: str | os.PathLike[str]
    signing_key_file: str | os.PathLike[str]
    output: str | os.PathLike[str]
    evidence: tuple[str | os.PathLike[str], ...] = ()
    repo_root: str | os.PathLike[str] | None = None
    tag: str | None = None
    ed25519_key_file: str | os.PathLike[str] | None = None


@dataclass(frozen=True, slots=True)
class AgentReleaseOutcome:
    """A completed run whose bundle was written."""

    decision: CandidateDecision
    #: Whether the HMAC key file ends with a newline (the CLI may warn).
    key_ends_with_newline: bool

    @property
    def ready(self) -> bool:
        """Whether the packet decision is ``READY``."""
        return self.decision.ready


def run_agent_release(
    options: AgentReleaseOptions,
    *,
    snapshot: SnapshotFunction = repository_snapshot,
) -> AgentReleaseOutcome:
    """Run the exact-source candidate check and write the signed bundle.

    Args:
        options: the command-line flags.
        snapshot: the repository snapshot step (replaceable in tests).

    Returns:
        The decision (``READY`` or a signed ``NOT_READY``) after the bundle
        was written.

    Raises:
        CandidateRunnerError: ``signing_key_unavailable``,
            ``signing_key_invalid``, ``ed25519_key_unavailable``,
            ``ed25519_key_invalid``, ``source_sha_invalid`` or
            ``output_unavailable``; nothing is written then.
    """
    key = read_hmac_key(options.signing_key_file)
    ed25519_key = (
        read_ed25519_key(options.ed25519_key_file) if options.ed25519_key_file is not None else None
    )
    if not is_source_sha(options.source_sha):
        raise CandidateRunnerError("source_sha_invalid")
    expected = options.source_sha
    before = snapshot(options.repo_root, expected, options.tag)
    paths = {
        "wheel": options.wheel,
        "sdist": options.sdist,
        "tool_catalog": options.tool_catalog,
        "policy": options.policy,
    }
    artifacts = {name: _artifact_digest(paths[name]) for name in ARTIFACT_NAMES}
    evidence = [_read_evidence(path, expected) for path in options.evidence]
    after = snapshot(options.repo_root, expected, options.tag)
    decision = decide_candidate(
        expected_sha=expected,
        before=before,
        after=after,
        artifacts=artifacts,
        evidence=evidence,
        key=key,
        ed25519_key=ed25519_key,
    )
    write_exclusive(options.output, (decision.bundle_json() + "\n").encode("utf-8"))
    return AgentReleaseOutcome(decision=decision, key_ends_with_newline=key.ends_with_newline)


def read_input_file(
    path: str | os.PathLike[str], *, limit: int = MAX_EVIDENCE_BYTES
) -> bytes | None:
    """Read a regular, non-symlink input file of at most ``limit`` bytes (else ``None``)."""
    read = read_regular_file(path, limit=limit)
    return None if read is None else read[1]
