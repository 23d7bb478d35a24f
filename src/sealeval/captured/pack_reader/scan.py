"""The inventory of an evidence pack, scanned by descriptor, and its manifest identified.

Part of :mod:`sealeval.captured.pack_reader` (``32-verify.md`` §3, steps 1
and 3): :class:`PackSnapshot` records the identity of every entry when the
pack was examined; :class:`Scanner` lists and opens the pack's entries
beneath its root descriptor (never following a link), refuses unknown,
unsafe, missing and oversized entries, reads each file once with identity
checks and streams large run files; :func:`identify` reads and identifies
``manifest.json`` (step 1); :func:`rescan` proves nothing changed.
"""

from __future__ import annotations

import hashlib
import os
import stat
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._fs import FileSystemError, open_directory, open_regular, translated
from sealeval._fs import list_names as list_directory
from sealeval._validate import decode_object
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack_layout import (
    CHECKSUMS_NAME,
    DIRECTORIES,
    MANIFEST_NAME,
    MAX_CONTROL_BYTES,
    MAX_MANIFEST_DETECT_BYTES,
    PACK_FORMAT,
    PACK_JSON_CODES,
    PACK_KIND,
    REFERENCE_PACK_LIMITS,
    ROLE_PATHS,
    ROLES,
    SIGNATURE_NAME,
    EvidencePackError,
    PackLimits,
)
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.run import Run, read_canonical_run
from sealeval.captured.run_facts import RunFacts, read_run_facts

__all__ = [
    "Identity",
    "OutlineRequest",
    "PackSnapshot",
    "Scanner",
    "identify",
    "open_root",
    "rescan",
]

#: Bytes per read while a streamed run file is hashed.
_READ_BYTES: Final = 1_048_576
#: A pack file that is gone or no longer a regular file (a link, a folder, a FIFO) changed.
_GONE: Final = {"not_found": "file_changed", "not_regular_file": "file_changed"}


@dataclass(frozen=True, slots=True)
class Identity:
    """What must not change while a pack is examined."""

    device: int
    inode: int
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, result: os.stat_result) -> Identity:
        """Return the identity of an ``lstat``/``fstat`` result."""
        return cls(
            result.st_dev,
            result.st_ino,
            result.st_mode,
            result.st_size,
            result.st_mtime_ns,
            result.st_ctime_ns,
        )


@dataclass(frozen=True, slots=True, repr=False)
class PackSnapshot:
    """The identities of every entry of a pack when it was examined.

    Keys are pack-relative names (``"."`` for the root, ``"records"``,
    ``"records/baseline.json"``, …). :meth:`EvidencePack.check_unchanged`
    compares a fresh scan with it (verification re-scans after replay).
    """

    entries: Mapping[str, Identity]

    def __repr__(self) -> str:
        """Show the entry count only."""
        return f"PackSnapshot(entries={len(self.entries)})"

    @property
    def total_bytes(self) -> int:
        """Sum of the sizes of all files."""
        return sum(
            identity.size for identity in self.entries.values() if stat.S_ISREG(identity.mode)
        )


def open_root(path: str | os.PathLike[str]) -> int:
    """Open the pack directory (no symlink); ``not_directory`` otherwise."""
    try:
        return open_directory(path)
    except FileSystemError:
        raise EvidencePackError("not_directory", "pack") from None


def lstat_entry(dir_fd: int, name: str, where: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError:  # pragma: no cover - EACCES
        raise EvidencePackError("unreadable", where) from None


def list_names(dir_fd: int, where: str) -> list[str]:
    try:
        return sorted(list_directory(dir_fd))
    except OSError:  # pragma: no cover - EACCES
        raise EvidencePackError("unreadable", where) from None


def expected_files(signed: bool) -> dict[str, str]:
    """Pack-relative file name -> size-limit key."""
    files = {MANIFEST_NAME: "control", CHECKSUMS_NAME: "control"}
    if signed:
        files[SIGNATURE_NAME] = "control"
    for role in ROLES:
        files[ROLE_PATHS[role]] = role
    return files


def size_limit(kind: str, limits: PackLimits) -> int | None:
    return MAX_CONTROL_BYTES if kind == "control" else limits.role_limit(kind)


@dataclass(frozen=True, slots=True)
class OutlineRequest:
    """Read large run files as their facts: the policy (slices, case-set pin), keep the ids."""

    policy: ComparisonPolicy | None
    keep_ids: bool


class Scanner:
    """The inventory scan: names, types, then presence, then sizes (31-pack.md §1)."""

    def __init__(
        self, root_fd: int, signed: bool, limits: PackLimits = REFERENCE_PACK_LIMITS
    ) -> None:
        """Scan beneath ``root_fd`` for a signed or unsigned pack within ``limits``."""
        self.root_fd = root_fd
        self.expected = expected_files(signed)
        self.limits = limits
        self.dir_fds: dict[str, int] = {}

    def close(self) -> None:
        """Close the directories opened by the scan."""
        for fd in self.dir_fds.values():
            os.close(fd)
        self.dir_fds.clear()

    def _entries(self, dir_fd: int, prefix: str) -> dict[str, os.stat_result]:
        found: dict[str, os.stat_result] = {}
        for name in list_names(dir_fd, prefix or "pack"):
            relative = f"{prefix}{name}"
            result = lstat_entry(dir_fd, name, "pack")
            if result is not None:
                found[relative] = result
        return found

    def _check_entries(self, entries: Mapping[str, os.stat_result], *, top: bool) -> None:
        """Refuse unknown names first, then entries of the wrong type."""
        for name in entries:
            if name not in self.expected and not (top and name in DIRECTORIES):
                raise EvidencePackError("unknown_entry", "pack")
        for name, result in entries.items():
            wanted = stat.S_ISDIR if top and name in DIRECTORIES else stat.S_ISREG
            if not wanted(result.st_mode):
                raise EvidencePackError("unsafe_entry", "pack")

    def _open_directories(self, top: Mapping[str, os.stat_result]) -> dict[str, os.stat_result]:
        """Open the pack's real directories (no symlink) and list them."""
        nested: dict[str, os.stat_result] = {}
        for directory in DIRECTORIES:
            if directory not in top:
                continue
            try:
                fd = open_directory(directory, dir_fd=self.root_fd)
            except FileSystemError:  # pragma: no cover - replaced after the listing
                raise EvidencePackError("unsafe_entry", "pack") from None
            self.dir_fds[directory] = fd
            if Identity.of(os.fstat(fd)) != Identity.of(top[directory]):  # pragma: no cover
                raise EvidencePackError("file_changed", "pack")
            nested.update(self._entries(fd, f"{directory}/"))
        return nested

    def _check_sizes(self, found: Mapping[str, os.stat_result]) -> None:
        total = 0
        for name, kind in self.expected.items():
            size = found[name].st_size
            total += size
            limit = size_limit(kind, self.limits)
            if limit is not None and size > limit:
                raise EvidencePackError("too_large", kind if kind != "control" else name)
        maximum = self.limits.max_total_bytes
        if maximum is not None and total > maximum:
            raise EvidencePackError("too_large", "pack")

    def scan(self) -> PackSnapshot:
        """Return the snapshot, refusing unknown, unsafe, missing and oversized entries."""
        top = self._entries(self.root_fd, "")
        self._check_entries(top, top=True)
        nested = self._open_directories(top)
        self._check_entries(nested, top=False)
        found = {**top, **nested}
        for name in (*self.expected, *DIRECTORIES):
            if name not in found:
                raise EvidencePackError("missing_entry", "pack")
        self._check_sizes(found)
        entries = {".": Identity.of(os.fstat(self.root_fd))}
        entries.update((name, Identity.of(result)) for name, result in found.items())
        return PackSnapshot(types.MappingProxyType(entries))

    def streamed_run(
        self,
        name: str,
        snapshot: PackSnapshot,
        role: str,
        expected_digest: str,
        outline: OutlineRequest | None = None,
    ) -> Run | RunFacts | None:
        """Read a large canonical run file without holding its bytes (uncapped packs).

        Two passes over one open file: the digest (``digest_mismatch`` as the
        whole-file path), then :func:`~sealeval.captured.run.read_canonical_run`,
        whose run digest — the hash of exactly the bytes it parsed, canonical
        ones — must equal the file digest (``file_changed`` otherwise). Any
        refusal of the parse returns ``None``: the caller then takes the
        whole-file path, which names the refusal exactly as for a small file.
        With ``outline`` the second pass builds a :class:`RunFacts` (the
        run's facts without its records) instead of the run.
        """
        fd = self.open_file(name, snapshot)
        expected = snapshot.entries[name]
        try:
            with os.fdopen(os.dup(fd), "rb") as handle:
                hasher = hashlib.sha256()
                size = 0
                while chunk := handle.read(_READ_BYTES):
                    hasher.update(chunk)
                    size += len(chunk)
                if size != expected.size or Identity.of(os.fstat(fd)) != expected:
                    raise EvidencePackError("file_changed", "pack")
                if "sha256:" + hasher.hexdigest() != expected_digest:
                    raise EvidencePackError("digest_mismatch", role)
                handle.seek(0)
                run: Run | RunFacts
                try:
                    if outline is None:
                        run = read_canonical_run(handle, limits=self.limits.run_limits())
                    else:
                        run = read_run_facts(
                            handle,
                            policy=outline.policy,
                            limits=self.limits.run_limits(),
                            keep_ids=outline.keep_ids,
                        )
                except CapturedRunError:
                    return None
            if run.digest != expected_digest or Identity.of(os.fstat(fd)) != expected:
                raise EvidencePackError("file_changed", "pack")
        except OSError:  # pragma: no cover - an I/O error after a successful open
            raise EvidencePackError("unreadable", "pack") from None
        finally:
            os.close(fd)
        return run

    def _open_regular(self, name: str) -> int:
        """Open one pack file (blocking, no link followed); gone or not a file: ``file_changed``."""
        directory, _, leaf = name.rpartition("/")
        dir_fd = self.dir_fds[directory] if directory else self.root_fd
        with translated(EvidencePackError, "pack", _GONE, default="unreadable"):
            return open_regular(leaf, dir_fd=dir_fd)

    def open_file(self, name: str, snapshot: PackSnapshot) -> int:
        """Open one snapshotted file (blocking), refusing a changed identity."""
        fd = self._open_regular(name)
        try:
            same = Identity.of(os.fstat(fd)) == snapshot.entries[name]
        except OSError:  # pragma: no cover - an I/O error after a successful open
            os.close(fd)
            raise EvidencePackError("unreadable", "pack") from None
        if not same:
            os.close(fd)
            raise EvidencePackError("file_changed", "pack")
        return fd

    def read(self, name: str, snapshot: PackSnapshot) -> bytes:
        """Read one snapshotted file once, refusing any change of identity or size."""
        expected = snapshot.entries[name]
        fd = self._open_regular(name)
        try:
            if Identity.of(os.fstat(fd)) != expected:
                raise EvidencePackError("file_changed", "pack")
            with os.fdopen(os.dup(fd), "rb") as handle:
                data: bytes = handle.read(expected.size + 1)
            if len(data) != expected.size or Identity.of(os.fstat(fd)) != expected:
                raise EvidencePackError("file_changed", "pack")
        except OSError:  # pragma: no cover - an I/O error after a successful open
            raise EvidencePackError("unreadable", "pack") from None
        finally:
            os.close(fd)
        return data


def rescan(path: Path, signed: bool, snapshot: PackSnapshot, limits: PackLimits) -> None:
    """Scan the pack again; refuse (``file_changed``) anything unlike ``snapshot``."""
    fd = open_root(path)
    scanner = Scanner(fd, signed, limits)
    try:
        try:
            current = scanner.scan()
        except EvidencePackError:
            raise EvidencePackError("file_changed", "pack") from None
        if dict(current.entries) != dict(snapshot.entries):
            raise EvidencePackError("file_changed", "pack")
    finally:
        scanner.close()
        os.close(fd)


def identify(root_fd: int) -> tuple[bytes, dict[str, Any], Identity]:
    """Step 1: read and identify ``manifest.json`` (failures carry no manifest digest)."""
    result = lstat_entry(root_fd, MANIFEST_NAME, MANIFEST_NAME)
    if result is None:
        raise EvidencePackError("manifest_missing", MANIFEST_NAME)
    if not stat.S_ISREG(result.st_mode):
        raise EvidencePackError("unsafe_entry", MANIFEST_NAME)
    if result.st_size > MAX_MANIFEST_DETECT_BYTES:
        raise EvidencePackError("too_large", MANIFEST_NAME)
    identity = Identity.of(result)
    try:
        fd = open_regular(MANIFEST_NAME, dir_fd=root_fd)
    except FileSystemError:  # pragma: no cover - replaced after the lstat
        raise EvidencePackError("unsafe_entry", MANIFEST_NAME) from None
    try:
        if Identity.of(os.fstat(fd)) != identity:  # pragma: no cover - replaced after the lstat
            raise EvidencePackError("file_changed", MANIFEST_NAME)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data: bytes = handle.read(MAX_MANIFEST_DETECT_BYTES + 1)
        if len(data) != identity.size or Identity.of(os.fstat(fd)) != identity:
            raise EvidencePackError("file_changed", MANIFEST_NAME)
    except OSError:  # pragma: no cover - an I/O error after a successful open
        raise EvidencePackError("unreadable", MANIFEST_NAME) from None
    finally:
        os.close(fd)
    document = decode_object(
        data,
        MANIFEST_NAME,
        error=EvidencePackError,
        limit=MAX_MANIFEST_DETECT_BYTES,
        codes=PACK_JSON_CODES,
    )
    if document.get("format") != PACK_FORMAT or document.get("kind") != PACK_KIND:
        raise EvidencePackError("unsupported_format", MANIFEST_NAME)
    if len(data) > MAX_CONTROL_BYTES:
        raise EvidencePackError("too_large", MANIFEST_NAME)
    return data, document, identity
