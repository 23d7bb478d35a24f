"""Reading: no-follow opens (read, lock, append), regular-file check, bounded and stable reads.

Also the directories a reader opens, and the null device an inherited
descriptor is pointed at.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from sealeval._fs._base import (
    APPEND_FLAGS,
    CHUNK_SIZE,
    DIR_FLAGS,
    LOCK_FLAGS,
    NOT_REGULAR_ERRNOS,
    O_CLOEXEC,
    O_DIRECTORY,
    O_NOFOLLOW,
    O_NONBLOCK,
    READ_FLAGS,
    refusal,
)
from sealeval.errors import FileSystemError


class FileSignature(NamedTuple):
    """What must not change while a file is read."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int


def signature(info: os.stat_result) -> FileSignature:
    """Return the identity and change signature of a ``stat`` result."""
    return FileSignature(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _open_error(error: OSError) -> FileSystemError:
    if isinstance(error, FileNotFoundError):
        return refusal("not_found")
    if error.errno in NOT_REGULAR_ERRNOS:
        return refusal("not_regular_file")
    return refusal("unreadable")  # ENOTDIR (a file used as a folder), EACCES, EIO, ...


def _open_checked(
    path: str | bytes | os.PathLike[str],
    flags: int,
    dir_fd: int | None,
    *,
    follow_symlinks: bool = False,
    mode: int = 0o600,
) -> int:
    """Open with ``flags`` (non-blocking), refuse anything but a regular file, make it blocking."""
    try:
        if (
            not follow_symlinks
            and not O_NOFOLLOW
            and stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        ):  # pragma: no cover - Windows
            raise refusal("not_regular_file")
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
    except FileExistsError:
        raise refusal("output_exists") from None
    except OSError as error:
        raise _open_error(error) from None
    except ValueError:  # an embedded NUL: nothing can exist there
        raise refusal("not_found") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if regular and O_NONBLOCK:
            os.set_blocking(fd, True)
    except OSError:  # pragma: no cover - fstat on a fresh descriptor does not fail
        regular = False
    if not regular:
        os.close(fd)
        raise refusal("not_regular_file")
    return fd


def open_regular(
    path: str | bytes | os.PathLike[str],
    *,
    dir_fd: int | None = None,
    follow_symlinks: bool = False,
) -> int:
    """Open a regular file read-only and return a blocking descriptor.

    The open never blocks (``O_NONBLOCK``) and, unless ``follow_symlinks``,
    never follows a final symlink. Anything but a regular file (a directory,
    FIFO, socket, device or symlink) is refused before a byte is read.

    Raises:
        FileSystemError: ``not_found``, ``not_regular_file`` or ``unreadable``.
    """
    flags = READ_FLAGS & ~O_NOFOLLOW if follow_symlinks else READ_FLAGS
    return _open_checked(path, flags, dir_fd, follow_symlinks=follow_symlinks)


def open_lock_file(
    path: str | bytes | os.PathLike[str],
    *,
    dir_fd: int | None = None,
    create: bool = False,
    exclusive: bool = False,
    mode: int = 0o600,
) -> int:
    """Open (or create) a lock file read-write, never through a symlink; return a blocking fd.

    ``create`` creates a missing file with ``mode``; ``exclusive`` (implies
    ``create``) refuses an existing name, link or not. Like
    :func:`open_regular`, the open never blocks and anything but a regular
    file is refused. The caller takes the lock with :mod:`sealeval._lock`.

    Raises:
        FileSystemError: ``not_found``, ``not_regular_file``,
            ``output_exists`` (``exclusive``) or ``unreadable``.
    """
    flags = LOCK_FLAGS
    if create or exclusive:
        flags |= os.O_CREAT
    if exclusive:
        flags |= os.O_EXCL
    return _open_checked(path, flags, dir_fd, mode=mode)


def open_append(
    path: str | bytes | os.PathLike[str], *, dir_fd: int | None = None, mode: int = 0o600
) -> int:
    """Open (or create with ``mode``) a regular file for appending, never through a symlink.

    Returns a blocking write-only descriptor whose every write goes to the
    file's end (``O_APPEND``: writers in several threads or processes never
    overwrite each other). Like :func:`open_regular`, the open never blocks (a
    FIFO without a reader is refused at once) and anything but a regular file
    is refused. For logs and probe files inside a folder the caller owns
    (e.g. the adversarial suite's private temporary folder).

    Raises:
        FileSystemError: ``not_found`` (a missing folder), ``not_regular_file``
            (a symlink, FIFO, device or folder) or ``unreadable`` (no permission).
    """
    return _open_checked(path, APPEND_FLAGS | O_NONBLOCK, dir_fd, mode=mode)


def point_at_null(descriptor: int) -> None:
    """Make ``descriptor`` refer to the null device (``os.devnull``) instead of what it held.

    For a descriptor that must stay open but must never reach its file or
    socket again: a forked child points the sockets it inherited at the null
    device, so finalising their connections cannot write on the parent's.
    The descriptor is close-on-exec afterwards.

    Raises:
        FileSystemError: ``unreadable`` (the null device cannot be opened or
            ``descriptor`` is not open).
    """
    try:
        null = os.open(os.devnull, os.O_RDWR | O_CLOEXEC)
    except OSError:  # pragma: no cover - the null device exists on every platform
        raise refusal("unreadable") from None
    try:
        os.dup2(null, descriptor, inheritable=False)
    except OSError:
        raise refusal("unreadable") from None
    finally:
        os.close(null)


def read_fd_bounded(fd: int, limit: int) -> bytes:
    """Read an open regular file to its end, at most ``limit`` bytes.

    A stated size over the limit is refused before reading; so is a file
    that yields more than ``limit`` bytes (it grew while read).

    Raises:
        FileSystemError: ``too_large`` or ``unreadable``.
    """
    try:
        if os.fstat(fd).st_size > limit:
            raise refusal("too_large")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(CHUNK_SIZE, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise refusal("too_large")
    except OSError:
        raise refusal("unreadable") from None


def _check_unchanged(fd: int, before: FileSignature, count: int) -> None:
    try:
        after = signature(os.fstat(fd))
    except OSError:  # pragma: no cover - fstat on an open descriptor does not fail
        raise refusal("unreadable") from None
    if after != before or count != before.size:
        raise refusal("file_changed")


def read_regular(
    path: str | bytes | os.PathLike[str],
    *,
    limit: int,
    dir_fd: int | None = None,
    follow_symlinks: bool = False,
) -> bytes:
    """Read a whole regular file (no-follow, bounded, stable) in one call.

    Raises:
        FileSystemError: ``not_found``, ``not_regular_file``, ``too_large``,
            ``file_changed`` or ``unreadable``.
    """
    fd = open_regular(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    try:
        before = signature(os.fstat(fd))
        data = read_fd_bounded(fd, limit)
        _check_unchanged(fd, before, len(data))
    finally:
        os.close(fd)
    return data


def descend(fd: int, parts: Iterable[str | bytes]) -> int:
    """Open each of ``parts`` in turn as a directory below ``fd``, never following a link.

    Takes ownership of ``fd``: every descriptor but the last one opened is
    closed, on success and on failure. Returns the last directory opened
    (``fd`` itself when ``parts`` is empty).

    Raises:
        FileSystemError: as :func:`open_directory` (``not_found``,
            ``not_directory`` for a symlink or a file, ``unreadable``).
    """
    try:
        for part in parts:
            child = open_directory(part, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_directory_below(base: str | os.PathLike[str], parts: Iterable[str]) -> int:
    """Open ``base`` (the caller's trusted folder), then each of ``parts`` without following.

    Raises:
        FileSystemError: ``not_found`` (a missing component or base),
            ``not_regular_file`` (a component is a symlink or a file) or
            ``unreadable``.
    """
    try:
        fd = os.open(base, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    except (OSError, ValueError):
        raise refusal("not_found") from None
    try:
        return descend(fd, parts)
    except FileSystemError as error:
        if error.code == "not_directory":
            raise refusal("not_regular_file") from None
        raise


def read_below(base: str | os.PathLike[str], relative: str, *, limit: int) -> bytes:
    """Read ``base/relative`` (``/``-separated) with no component below ``base`` followed.

    Raises:
        FileSystemError: as :func:`open_directory_below` and :func:`read_regular`.
    """
    parts = relative.split("/")
    fd = open_directory_below(base, parts[:-1])
    try:
        return read_regular(parts[-1], limit=limit, dir_fd=fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class FileDigest:
    """SHA-256 of a regular file's bytes with its size and executable bit."""

    hex: str
    size: int
    executable: bool


def digest_regular(
    path: str | bytes | os.PathLike[str],
    *,
    dir_fd: int | None = None,
    follow_symlinks: bool = False,
    expected: os.stat_result | None = None,
    buffer: bytearray | None = None,
) -> FileDigest:
    """Stream a regular file through SHA-256 in constant memory, refusing changes.

    ``expected`` is an earlier ``lstat`` of the same name (a tree walk): the
    opened file must be that very file (device and inode).

    Raises:
        FileSystemError: ``not_found``, ``not_regular_file``,
            ``file_changed`` or ``unreadable``.
    """
    fd = open_regular(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)
    try:
        info = os.fstat(fd)
        before = signature(info)
        if expected is not None and (expected.st_dev, expected.st_ino) != before[:2]:
            raise refusal("file_changed")
        hasher = hashlib.sha256()
        view = memoryview(buffer if buffer is not None else bytearray(CHUNK_SIZE))
        total = 0
        try:
            while count := os.readv(fd, [view]):
                hasher.update(view[:count])
                total += count
        except OSError:
            raise refusal("unreadable") from None
        _check_unchanged(fd, before, total)
    finally:
        os.close(fd)
    executable = bool(info.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    return FileDigest(hasher.hexdigest(), total, executable)


def open_directory(
    path: str | bytes | os.PathLike[str],
    *,
    dir_fd: int | None = None,
    follow_symlinks: bool = False,
) -> int:
    """Open a directory (no final symlink followed unless asked).

    Raises:
        FileSystemError: ``not_found``, ``not_directory`` or ``unreadable``.
    """
    flags = DIR_FLAGS & ~O_NOFOLLOW if follow_symlinks else DIR_FLAGS
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise refusal("not_found") from None
    except OSError as error:
        if error.errno in (errno.ENOTDIR, errno.ELOOP, errno.EMLINK):
            raise refusal("not_directory") from None
        raise refusal("unreadable") from None
    except ValueError:
        raise refusal("not_found") from None
    if not O_DIRECTORY:  # pragma: no cover - Windows has no directory descriptors
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                os.close(fd)
                raise refusal("not_directory")
    return fd


def list_names(dir_fd: int) -> list[str]:
    """List the names in a directory given as a descriptor (nothing is opened or followed)."""
    return os.listdir(dir_fd)


def fsync_directory(directory: int | str | os.PathLike[str]) -> None:
    """Flush a directory's entries to disk (best effort: some systems refuse it)."""
    if isinstance(directory, int):
        with contextlib.suppress(OSError):
            os.fsync(directory)
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
