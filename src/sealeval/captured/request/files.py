"""The request's files: resolving references beneath the request root, loading, preflight.

:func:`load_captured_request` opens every component beneath the request root
without following symlinks, reads the runs (adapter ``invarlock`` here, any
other through a caller-supplied :class:`RunLoader`) and the policy, checks the
output destination and normalizes. :func:`preflight` is ``evaluate
--preflight`` without the comparison-engine checks (plugged in as
``paired_check``).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from sealeval._fs import descend, open_directory, open_regular, read_fd_bounded, translated
from sealeval._validate import EMPTY, decode_object
from sealeval.canonical import DecodeLimits, digest_bytes
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import (
    ComparisonPolicy,
    ComparisonPolicyError,
    check_runtime,
    is_yaml_policy_name,
    load_policy_yaml,
    parse_comparison_policy,
)
from sealeval.captured.request.authored import AuthoredRequest, SourceSpec, load_authored_request
from sealeval.captured.request.normalized import NormalizedRequest, normalize_captured_request
from sealeval.captured.request.schema import (
    MAX_INPUT_BYTES,
    MAX_REQUEST_BYTES,
    PREFLIGHT_CHECKS,
    CapturedRequestError,
    check_reference,
)
from sealeval.captured.run import (
    INVARLOCK_LIMITS,
    STREAM_MIN_BYTES,
    Limits,
    Run,
    parse_run,
)
from sealeval.captured.run_facts import RunFacts, read_run_facts
from sealeval.captured.signing import SigningKey, load_signing_key
from sealeval.errors import CanonicalError

# ---------------------------------------------------------------------------
# Files beneath the request root (every open through sealeval._fs)

#: ``sealeval._fs`` codes as the request reports them (a symlinked or non-directory folder).
_FOLDER_CODES: Final = {"not_directory": "unsafe_path"}
#: A JSON policy: every decoder refusal is ``invalid_json`` (the request's size bound).
_POLICY_LIMITS: Final = DecodeLimits(max_bytes=MAX_INPUT_BYTES)


def _open_root(root: str | os.PathLike[str], where: str) -> int:
    """Open the request root (a real directory: the caller resolved it)."""
    with translated(CapturedRequestError, where, _FOLDER_CODES):
        return open_directory(root, follow_symlinks=True)


def _open_beneath(root: Path, reference: str, where: str) -> int:
    """Open a regular file at ``reference`` below ``root`` without following any symlink."""
    parts = reference.split("/")
    fd = _open_root(root, where)
    with translated(CapturedRequestError, where, _FOLDER_CODES):
        fd = descend(fd, parts[:-1])
        try:
            return open_regular(parts[-1], dir_fd=fd)
        finally:
            os.close(fd)


def _read_fd(fd: int, limit: int, where: str, *, keep: bool = False) -> bytes:
    """Read a whole file descriptor, refusing more than ``limit`` bytes.

    The descriptor is closed, unless ``keep`` and the read succeeded.
    """
    try:
        with translated(CapturedRequestError, where):
            data = read_fd_bounded(fd, limit)
    except BaseException:
        os.close(fd)
        raise
    if not keep:
        os.close(fd)
    return data


def check_output_destination(root: str | os.PathLike[str], reference: str) -> Path:
    """Check ``output.evidence`` below ``root``; return the destination path.

    Every existing ancestor must be a real directory (no symlink); missing
    ancestors are allowed (publication creates them with mode 0700); the
    final name must not exist.

    Raises:
        CapturedRequestError: ``invalid_reference``, ``not_found`` (root),
            ``unsafe_path``, ``unreadable``, ``output_exists`` (field
            ``output.evidence``).
    """
    where = "output.evidence"
    check_reference(reference, where)
    parts = reference.split("/")
    fd = _open_root(root, where)
    try:
        for part in parts[:-1]:
            try:
                with translated(CapturedRequestError, where, _FOLDER_CODES):
                    child = open_directory(part, dir_fd=fd)
            except CapturedRequestError as error:
                if error.code == "not_found":  # publication creates missing folders
                    return Path(root) / reference
                raise
            os.close(fd)
            fd = child
        try:
            os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return Path(root) / reference
        except OSError:
            raise CapturedRequestError("unreadable", where) from None  # pragma: no cover - EACCES
        raise CapturedRequestError("output_exists", where)
    finally:
        os.close(fd)


def _override(root: Path, value: str | os.PathLike[str], cwd: Path, where: str) -> str:
    """Turn a caller-relative path that must lie inside the request root into a reference."""
    path = Path(value)
    if not path.is_absolute():
        path = cwd / path
    if path.name in ("", ".", ".."):
        raise CapturedRequestError("invalid_reference", where)
    resolved = Path(os.path.realpath(path.parent)) / path.name
    try:
        relative = resolved.relative_to(root)
    except ValueError:
        raise CapturedRequestError("outside_root", where) from None
    return check_reference(relative.as_posix(), where)


class RunLoader(Protocol):
    """Loads one side's run from a native file (the ``load_run`` adapters).

    Called with the file path (below the request root, every component
    checked not to be a symlink) and the side as authored (``adapter``,
    declared ``source``, ``run_id``, ``artifact_digest``,
    ``service_identity``, ``score_provenance``, ``input_projection``). It
    must return the run the adapter builds, with ``source_digest`` = SHA-256
    of the raw file bytes, within ``limits``.
    """

    def __call__(self, path: Path, side: SourceSpec, *, limits: Limits) -> Run | RunFacts:
        """Return the loaded run (raise a :class:`~sealeval.errors.SealevalError` to refuse).

        A loader may return the :class:`RunFacts` of a canonical run it
        imported to a private file instead of a held run (a large side read
        without a record cap); the facts then own that file's descriptor.
        """
        ...


#: The comparison engine's preflight (ID-set equality, per-pair equality,
#: scopes, work budget, missing-ID capacity): returns facts to report.
#: A side is a held :class:`~sealeval.captured.run.Run` or, for a large
#: canonical run read without a record cap, its :class:`RunFacts`.
PairedCheck = Callable[[Run | RunFacts, Run | RunFacts, ComparisonPolicy], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True, repr=False)
class CapturedRequest:
    """A loaded, normalized captured request: what ``evaluate`` compares and packs.

    Attributes:
        authored: the authored request (after overrides).
        root: the request root (a real directory).
        baseline: the baseline run (a held run, or the facts of a large
            canonical run streamed without a record cap).
        subject: the subject run (likewise).
        policy: the policy (portable validation passed).
        normalized: the normalized request (its digest is the request digest).
        destination: the evidence destination (``root / authored.output``).
        copies: by side, the open run file of a held run whose bytes were
            checked to be exactly its canonical bytes (they hash to its
            digest): the pack copies that file instead of re-encoding the run.
    """

    authored: AuthoredRequest
    root: Path
    baseline: Run | RunFacts
    subject: Run | RunFacts
    policy: ComparisonPolicy
    normalized: NormalizedRequest
    destination: Path
    copies: Mapping[str, RunFacts] = field(default_factory=lambda: types.MappingProxyType({}))

    def __repr__(self) -> str:
        """Show the request digest only."""
        return f"CapturedRequest(request_digest={self.normalized.digest!r})"

    def close(self) -> None:
        """Close the run files kept for :attr:`copies` (idempotent; the pack then re-encodes)."""
        for copy in self.copies.values():
            copy.close()

    @property
    def request_digest(self) -> str:
        """The captured request digest."""
        return self.normalized.digest

    @property
    def comparison_id(self) -> str:
        """The comparison id."""
        return self.normalized.comparison_id


def _streamed_side(fd: int, limits: Limits) -> RunFacts | None:
    """Stream a large canonical run once for its facts; ``None``: read it whole instead.

    Only without a record cap (the reference's envelope reads at most 128 MiB
    anyway) and from :data:`~sealeval.captured.run.STREAM_MIN_BYTES` on. Any
    refusal of the streamed read falls back to the whole-file path, which then
    accepts non-canonical JSON or names the refusal exactly as for a small file.
    On success the returned facts own ``fd``.
    """
    if limits.max_records is not None or os.fstat(fd).st_size < STREAM_MIN_BYTES:
        return None
    try:
        return read_run_facts(fd, limits=limits)
    except (CapturedRunError, OSError):
        return None


def _load_side(
    root: Path,
    spec: SourceSpec,
    run_loader: RunLoader | None,
    limits: Limits,
) -> tuple[Run | RunFacts, RunFacts | None]:
    """Load one side; return it and, for a held canonical run file, its copy source."""
    where = f"comparison.{spec.side}.path"
    fd = _open_beneath(root, spec.path, where)
    if spec.adapter != "invarlock":
        os.close(fd)
        if run_loader is None:
            raise CapturedRequestError("adapter_unavailable", f"comparison.{spec.side}.adapter")
        run = run_loader(root / spec.path, spec, limits=limits)
        if not isinstance(run, Run | RunFacts):
            raise CapturedRequestError("invalid_type", where)
        return run, None
    try:
        streamed = _streamed_side(fd, limits)
    except BaseException:
        os.close(fd)
        raise
    if streamed is not None:
        return streamed, None
    data = _read_fd(fd, limits.max_file_bytes, where, keep=True)
    copy: RunFacts | None = None
    try:
        try:
            held = parse_run(data, limits=limits)
        except CanonicalError:
            raise CapturedRequestError("invalid_json", where) from None
        except CapturedRunError as error:
            inner = error.field or "run"
            raise CapturedRunError(error.code, f"comparison.{spec.side}.{inner}"[:128]) from None
        if len(data) == held.canonical_size and digest_bytes(data) == held.digest:
            copy = RunFacts.of_canonical_file(held, fd)  # the file is the run's bytes: kept
    finally:
        if copy is None:
            os.close(fd)
    return held, copy


def read_authored_request(request_path: str | os.PathLike[str]) -> AuthoredRequest:
    """Read and validate an authored request file (regular file, not a symlink, ≤1 MiB).

    Raises:
        CapturedRequestError: ``not_found``, ``not_regular_file``,
            ``unreadable``, ``too_large`` (field ``request``), or any code of
            :func:`load_authored_request`.
    """
    path = Path(request_path)
    fd = _open_beneath(Path(os.path.realpath(path.parent)), path.name, "request")
    return load_authored_request(_read_fd(fd, MAX_REQUEST_BYTES, "request"))


def load_captured_request(
    request_path: str | os.PathLike[str],
    *,
    request_root: str | os.PathLike[str] | None = None,
    baseline_run: str | os.PathLike[str] | None = None,
    subject_run: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    run_loader: RunLoader | None = None,
    limits: Limits = INVARLOCK_LIMITS,
    check_output: bool = True,
) -> CapturedRequest:
    """Read a request file, apply overrides, load runs and policy, and normalize.

    Args:
        request_path: the authored request (YAML or JSON).
        request_root: root for resolving references (default: the request
            file's real parent directory).
        baseline_run: ``--baseline-run`` (relative to ``cwd``; must lie inside
            the root; replaces ``comparison.baseline.path``).
        subject_run: ``--subject-run`` (likewise).
        output: ``--output`` (likewise, replaces ``output.evidence``).
        cwd: the caller's working directory (default: the process's).
        run_loader: loads sides whose adapter is not ``invarlock``.
        limits: run limits (default: the reference's 50,000 records / 128 MiB).
        check_output: whether the destination must not exist yet.

    Order: request file, overrides, output destination, baseline run, subject
    run, policy, normalization.

    Raises:
        CapturedRequestError: any request, file or normalization refusal.
        CapturedRunError: a run file is not a valid run (field rebased under
            ``comparison.<side>``).
        ComparisonPolicyError: the policy fails portable validation.
    """
    authored = read_authored_request(request_path)
    root = Path(
        os.path.realpath(Path(request_path).parent if request_root is None else request_root)
    )
    base = Path.cwd() if cwd is None else Path(os.path.realpath(cwd))
    authored = authored.with_references(
        baseline_path=None
        if baseline_run is None
        else _override(root, baseline_run, base, "comparison.baseline.path"),
        subject_path=None
        if subject_run is None
        else _override(root, subject_run, base, "comparison.subject.path"),
        output=None if output is None else _override(root, output, base, "output.evidence"),
    )
    if check_output:
        destination = check_output_destination(root, authored.output)
    else:
        destination = root / authored.output
    baseline, baseline_copy = _load_side(root, authored.baseline, run_loader, limits)
    subject, subject_copy = _load_side(root, authored.subject, run_loader, limits)
    copies = {
        side: copy
        for side, copy in (("baseline", baseline_copy), ("subject", subject_copy))
        if copy is not None
    }
    policy_fd = _open_beneath(root, authored.policy, "comparison.policy")
    data = _read_fd(policy_fd, MAX_INPUT_BYTES, "comparison.policy")
    if is_yaml_policy_name(authored.policy):  # sealeval: strict YAML policies too
        try:
            document = load_policy_yaml(data)
        except ComparisonPolicyError:
            raise CapturedRequestError("invalid_yaml", "comparison.policy") from None
        if not isinstance(document, dict):
            raise CapturedRequestError("not_mapping", "comparison.policy")
    else:
        document = decode_object(
            data,
            "comparison.policy",
            error=CapturedRequestError,
            limit=_POLICY_LIMITS,
            codes=EMPTY,
            object_code="not_mapping",
        )
    del data
    policy = parse_comparison_policy(document)
    normalized = normalize_captured_request(authored, baseline, subject, policy)
    return CapturedRequest(
        authored=authored,
        root=root,
        baseline=baseline,
        subject=subject,
        policy=policy,
        normalized=normalized,
        destination=destination,
        copies=types.MappingProxyType(copies),
    )


# ---------------------------------------------------------------------------
# Preflight


@dataclass(frozen=True, slots=True, repr=False)
class PreflightResult:
    """What ``evaluate --preflight`` established (nothing scored or written).

    Attributes:
        request: the loaded, normalized request.
        requested_authentication: ``"signed"`` or ``"unsigned_local"``.
        signing_key: the loaded signing key (signed mode), else ``None``.
        checks: :data:`PREFLIGHT_CHECKS`.
        paired: what the comparison engine's ``paired_check`` reported
            (e.g. ``required_bootstrap_draws``, ``missing_id_bytes``), or ``None``.
    """

    request: CapturedRequest
    requested_authentication: str
    signing_key: SigningKey | None
    checks: tuple[str, ...] = PREFLIGHT_CHECKS
    paired: Mapping[str, Any] | None = None

    def __repr__(self) -> str:
        """Show the request digest and the signing mode only."""
        return (
            f"PreflightResult(request_digest={self.request.request_digest!r}, "
            f"requested_authentication={self.requested_authentication!r})"
        )

    @property
    def record_count(self) -> int:
        """Records of the baseline run."""
        baseline = self.request.baseline
        return baseline.record_count if isinstance(baseline, RunFacts) else len(baseline.records)

    @property
    def scope_count(self) -> int:
        """``overall`` plus one per policy slice."""
        return len(self.request.policy.scope_names)

    @property
    def signing_key_fingerprint(self) -> str | None:
        """The signer's fingerprint (signed mode), else ``None``."""
        return None if self.signing_key is None else self.signing_key.fingerprint


def preflight(
    request_path: str | os.PathLike[str],
    *,
    signing_key: SigningKey | str | os.PathLike[str] | None = None,
    unsigned: bool = False,
    request_root: str | os.PathLike[str] | None = None,
    baseline_run: str | os.PathLike[str] | None = None,
    subject_run: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    run_loader: RunLoader | None = None,
    paired_check: PairedCheck | None = None,
    limits: Limits = INVARLOCK_LIMITS,
) -> PreflightResult:
    """Check everything ``evaluate`` needs without scoring or writing (30-request.md §6).

    Order: signing mode (exactly one of ``signing_key`` and ``unsigned``),
    request and output destination, both runs, policy, normalization, the
    policy's runtime check (:func:`~sealeval.captured.policy.check_runtime`),
    ``paired_check`` (the comparison engine's pairing, budget and capacity
    checks, when given), and finally loading the signing key (signed mode).

    Raises:
        CapturedRequestError: ``signing_key_required``,
            ``signing_mode_conflict``, or any refusal of
            :func:`load_captured_request`.
        ComparisonPolicyError: portable or runtime policy refusal.
        SigningKeyError: the signing key cannot be loaded.
    """
    if signing_key is not None and unsigned:
        raise CapturedRequestError("signing_mode_conflict", "signing_key")
    if signing_key is None and not unsigned:
        raise CapturedRequestError("signing_key_required", "signing_key")
    request = load_captured_request(
        request_path,
        request_root=request_root,
        baseline_run=baseline_run,
        subject_run=subject_run,
        output=output,
        cwd=cwd,
        run_loader=run_loader,
        limits=limits,
    )
    check_runtime(request.policy)
    paired = None
    if paired_check is not None:
        reported = paired_check(request.baseline, request.subject, request.policy)
        paired = None if reported is None else types.MappingProxyType(dict(reported))
    key: SigningKey | None = None
    if signing_key is not None:
        key = signing_key if isinstance(signing_key, SigningKey) else load_signing_key(signing_key)
    return PreflightResult(
        request=request,
        requested_authentication="unsigned_local" if unsigned else "signed",
        signing_key=key,
        paired=paired,
    )
