"""Hostile captured inputs (issue #13): authenticate before decoding, no stale staging.

* ``verify`` checks the pack's authentication (signed, by the expected signer)
  right after the signature envelope and *before any payload is read or
  decoded*: an unsigned or wrongly signed pack whose payload would cost
  gigabytes to decode is refused reading none of it, in bounded memory.
* An ``evaluate`` killed while staging leaves a ``.captured-evidence-*``
  folder; the next publication beside it removes it — only our own staging
  folders, only when no live process holds their lock, never through a link.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import sealeval.captured.pack_reader as reader_module
import sealeval.captured.pack_reader.scan as scan_module
from sealeval.captured import staging
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.pack_reader import ROLE_PATHS
from sealeval.captured.trust import RecipientInputs, check_verification_inputs, read_trust_profile
from sealeval.captured.verify import VerificationError, verify_evidence_pack
from sealeval.errors import OutputError
from support.vectors import pack_folder, vectors_dir

V = vectors_dir() / "invarlock"
#: A payload that decodes into millions of containers (issue #13: 127 MiB cost 6.4 GB).
AMPLIFIER_BYTES = 24 * 1_048_576
#: Far below what reading, let alone decoding, the payload would take.
MEMORY_CEILING = 6 * 1_048_576


def _workspace(pack: str, tmp_path: Path) -> Path:
    target = tmp_path / pack
    shutil.copytree(pack_folder(pack), target, symlinks=True)
    for path in [target, *target.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def _amplify(evidence: Path, role: str) -> None:
    """Replace a payload by a valid JSON document of millions of empty arrays."""
    item = b"[],"
    count = (AMPLIFIER_BYTES - 16) // len(item)
    (evidence / ROLE_PATHS[role]).write_bytes(b'{"samples":[' + item * count + b"[]]}")


def _recipient(cwd: Path, trust: str, tmp_path: Path) -> RecipientInputs:
    return check_verification_inputs(
        read_trust_profile(cwd / trust / "trust-inputs.json"),
        evidence=cwd / "evidence",
        receipt=tmp_path / "out" / "receipt.json",
        max_bootstrap_draws=DEFAULT_MAX_BOOTSTRAP_DRAWS,
    )


@pytest.mark.parametrize(
    ("pack", "trust", "role", "code", "field"),
    [
        pytest.param(
            "text-20-exact-unsigned",
            "trust",
            "baseline",
            "unsigned_evidence",
            "manifest.authentication",
            id="unsigned",
        ),
        pytest.param(
            "text-20-exact-signed",
            "trust-wrong-signer",
            "subject",
            "signer_mismatch",
            "anchors.signer_fingerprint",
            id="wrong-signer",
        ),
    ],
)
def test_verify_authenticates_before_reading_any_payload(
    pack: str,
    trust: str,
    role: str,
    code: str,
    field: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cwd = _workspace(pack, tmp_path)
    _amplify(cwd / "evidence", role)
    recipient = _recipient(cwd, trust, tmp_path)
    read: list[str] = []
    decoded: list[str] = []
    original_read = scan_module.Scanner.read
    original_decode = reader_module.decode_object

    def spy_read(self: Any, name: str, snapshot: Any) -> bytes:
        read.append(name)
        data: bytes = original_read(self, name, snapshot)
        return data

    def spy_decode(data: bytes, where: str, **options: Any) -> dict[str, Any]:
        decoded.append(where)
        return original_decode(data, where, **options)

    monkeypatch.setattr(scan_module.Scanner, "read", spy_read)
    monkeypatch.setattr(reader_module, "decode_object", spy_decode)
    tracemalloc.start()
    try:
        outcome = verify_evidence_pack(cwd / "evidence", recipient)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.status == 6
    assert outcome.replay_status == "not_started"
    assert outcome.identified  # a rejection receipt can still be written
    assert isinstance(outcome.error, VerificationError)
    assert (outcome.error.code, outcome.error.field) == (code, field)
    payloads = set(ROLE_PATHS.values())
    assert not payloads & set(read), "a payload was read before authentication"
    assert not set(ROLE_PATHS) & set(decoded), "a payload was decoded before authentication"
    assert peak < MEMORY_CEILING


def test_verify_still_reads_an_authenticated_pack(tmp_path: Path) -> None:
    """The check runs before payloads, not instead of them: a good pack still replays."""
    cwd = _workspace("text-20-exact-signed", tmp_path)
    outcome = verify_evidence_pack(cwd / "evidence", _recipient(cwd, "trust", tmp_path))
    assert outcome.status in (0, 7)
    assert outcome.replay_status == "completed"


# ---------------------------------------------------------------------------
# Stale staging folders


def _stale(parent: Path, token: str = "ab" * 16) -> tuple[Path, Path]:
    """A staging folder with its lock file, as a killed process leaves them."""
    folder = parent / (staging.STAGING_PREFIX + token)
    (folder / "records").mkdir(parents=True)
    (folder / "records" / "baseline.json").write_bytes(b"{}")
    lock = parent / (staging.STAGING_PREFIX + token + staging.LOCK_SUFFIX)
    lock.write_bytes(b"")
    return folder, lock


def _names(parent: Path) -> set[str]:
    return {path.name for path in parent.iterdir()}


def test_stale_staging_is_removed_and_live_or_foreign_entries_are_kept(tmp_path: Path) -> None:
    parent = tmp_path / "out"
    parent.mkdir()
    folder, lock = _stale(parent)
    # not ours: other names, no lock file, a symlink named like a staging folder
    (parent / ".captured-evidence-notours").mkdir()
    lockless = parent / (staging.STAGING_PREFIX + "cd" * 16)
    lockless.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"keep")
    linked = parent / (staging.STAGING_PREFIX + "ef" * 16)
    linked.symlink_to(outside, target_is_directory=True)
    (parent / (staging.STAGING_PREFIX + "ef" * 16 + staging.LOCK_SUFFIX)).write_bytes(b"")
    # live: a staging folder whose lock is held by this process
    with staging.staging_lock(parent) as live:
        (parent / live).mkdir()
        removed = staging.remove_stale_staging(parent)
        assert (parent / live).is_dir()
    assert removed == 1
    assert not folder.exists()
    assert not lock.exists()
    assert lockless.is_dir()
    assert (parent / ".captured-evidence-notours").is_dir()
    assert linked.is_symlink()
    assert (outside / "keep.txt").read_bytes() == b"keep"


def test_orphan_locks_go_once_free_and_a_missing_parent_is_no_error(tmp_path: Path) -> None:
    parent = tmp_path / "out"
    parent.mkdir()
    _, orphan = _stale(parent)
    shutil.rmtree(parent / orphan.name.removesuffix(staging.LOCK_SUFFIX))  # renamed, then killed
    fifo = parent / (staging.STAGING_PREFIX + "cd" * 16 + staging.LOCK_SUFFIX)
    os.mkfifo(fifo)  # not a lock file of ours: never opened for long, never removed
    with staging.staging_lock(parent) as live:  # a live lock whose folder is not made yet
        assert staging.remove_stale_staging(parent) == 0
        assert (parent / (live + staging.LOCK_SUFFIX)).is_file()
    assert _names(parent) == {fifo.name}
    assert staging.remove_stale_staging(tmp_path / "missing") == 0
    assert staging.remove_stale_staging(tmp_path / "out" / fifo.name) == 0


def test_a_killed_evaluate_leaves_staging_that_the_next_start_removes(tmp_path: Path) -> None:
    """A real process stages, is killed with SIGKILL, and the next publication cleans up."""
    parent = tmp_path / "out"
    parent.mkdir()
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from sealeval.captured import staging
        parent = Path(sys.argv[1])
        with staging.staging_lock(parent) as name:
            (parent / name / "records").mkdir(parents=True)
            (parent / name / "records" / "baseline.json").write_bytes(b"{}")
            print(name, flush=True)
            time.sleep(600)
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(parent)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        name = process.stdout.readline().strip()
        assert name.startswith(staging.STAGING_PREFIX)
        # while the process lives, its staging folder is never touched
        assert staging.remove_stale_staging(parent) == 0
        assert (parent / name).is_dir()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:  # pragma: no cover - the kill above failed
            process.kill()
            process.wait(timeout=30)
    assert (parent / name).is_dir()  # the kill left it behind
    deadline = time.monotonic() + 10
    while staging.remove_stale_staging(parent) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # pragma: no cover - the kernel releases the lock at exit
    assert _names(parent) == set()


def _publish(parent: Path, name: str, fill: Any) -> None:
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with staging.staged_publication(fd, name, OutputError) as stage:
            (parent / stage).mkdir()
            fill(parent / stage)
    finally:
        os.close(fd)


def test_staged_publication_renames_on_success_and_cleans_up_on_failure(
    tmp_path: Path, assert_refused: Any
) -> None:
    parent = tmp_path / "out"
    parent.mkdir()
    folder, _ = _stale(parent)  # a killed publisher's folder goes first
    _publish(parent, "done", lambda stage: (stage / "a.json").write_bytes(b"{}"))
    assert _names(parent) == {"done"}
    assert (parent / "done" / "a.json").read_bytes() == b"{}"
    assert not folder.exists()

    def taken(stage: Path) -> None:
        (parent / "late").mkdir()  # the destination appears while staging

    assert_refused(lambda: _publish(parent, "late", taken), "output_exists", "output")

    def broken(stage: Path) -> None:
        (stage / "a.json").write_bytes(b"{}")
        raise PermissionError  # any OSError while staging

    assert_refused(lambda: _publish(parent, "other", broken), "output_unwritable", "output")

    def refused(stage: Path) -> None:
        raise OutputError("unsafe_destination", "output")  # the block's refusal passes

    assert_refused(lambda: _publish(parent, "other", refused), "unsafe_destination", "output")
    assert _names(parent) == {"done", "late"}  # no staging folder or lock file is left
