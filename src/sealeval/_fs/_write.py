"""Writing: safe destinations, exclusive atomic publication, no-replace renames."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

from sealeval._fs._base import (
    CHUNK_SIZE,
    DIR_FLAGS,
    HAS_DIR_FD,
    O_CLOEXEC,
    O_DIRECTORY,
    WRITE_FLAGS,
    refusal,
)
from sealeval._fs._read import fsync_directory


def _require_dir_fd() -> None:
    if not HAS_DIR_FD:  # pragma: no cover - Windows
        raise refusal("unsupported_platform", "output")


def open_destination_parent(
    path: str | os.PathLike[str],
    *,
    create_parents: bool = False,
    directory_mode: int = 0o700,
    anchor: str | os.PathLike[str] | None = None,
) -> tuple[int, str]:
    """Open a destination's parent without following any symlink; return ``(fd, name)``.

    The walk starts at the file-system root for an absolute path and at the
    working directory otherwise, then opens every component with
    ``O_DIRECTORY | O_NOFOLLOW``: a symlink (or a file) anywhere in the chain
    is refused. ``..`` is opened like any other component (it is never a
    symlink). Missing components are refused, or created with
    ``directory_mode`` when ``create_parents``. The final name must not exist.

    With ``anchor`` (a trusted existing folder) the walk starts there
    instead: ``path`` is relative to it (or absolute below it) and a ``..``
    component is refused, so nothing outside the anchor can be named.

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_exists``,
            ``output_parent_missing``, ``output_unwritable`` or
            ``unsupported_platform`` (field ``output``).
    """
    fd, name = _open_parent_chain(path, create=create_parents, mode=directory_mode, anchor=anchor)
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return fd, name
    except OSError:
        os.close(fd)
        raise refusal("output_unwritable", "output") from None
    os.close(fd)
    raise refusal("output_exists", "output")


def _below_anchor(destination: Path, anchor: str | os.PathLike[str]) -> tuple[str, tuple[str, ...]]:
    base = Path(anchor)
    if destination.is_absolute():
        try:
            destination = destination.relative_to(base)
        except ValueError:
            raise refusal("unsafe_destination", "output") from None
    parts = destination.parts
    if not parts or ".." in parts:
        raise refusal("unsafe_destination", "output")
    return os.fspath(base), parts[:-1]


def _open_parent_chain(
    path: str | os.PathLike[str],
    *,
    create: bool,
    mode: int,
    anchor: str | os.PathLike[str] | None = None,
) -> tuple[int, str]:
    """Open the parent of ``path`` component by component, never following a link."""
    _require_dir_fd()
    text = os.fspath(path)
    if not isinstance(text, str) or not text or "\0" in text:
        raise refusal("unsafe_destination", "output")
    destination = Path(text)
    if text.endswith(("/", os.sep)) or destination.name in ("", ".", ".."):
        raise refusal("unsafe_destination", "output")
    if anchor is not None:
        start, parts = _below_anchor(destination, anchor)
    elif destination.is_absolute():
        start, parts = destination.anchor, destination.parts[1:-1]
    else:
        start, parts = ".", destination.parts[:-1]
    try:
        fd = os.open(start, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    except OSError:
        raise refusal("output_unwritable", "output") from None
    try:
        for part in parts:
            if part not in ("", "."):
                fd = _step(fd, part, create=create, mode=mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, destination.name


def _step(fd: int, name: str, *, create: bool, mode: int) -> int:
    """Replace ``fd`` by its child directory ``name`` (closing ``fd``), never following a link."""
    try:
        child = os.open(name, DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise refusal("output_parent_missing", "output") from None
        try:
            os.mkdir(name, mode, dir_fd=fd)
        except FileExistsError:
            pass  # created concurrently: opened without following below
        except OSError:
            raise refusal("output_unwritable", "output") from None
        fsync_directory(fd)
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            raise refusal("unsafe_destination", "output") from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise refusal("unsafe_destination", "output") from None
        raise refusal("output_unwritable", "output") from None
    os.close(fd)
    return child


def create_directory(name: str, *, dir_fd: int, mode: int = 0o700) -> int:
    """Create the directory ``name`` in ``dir_fd`` exclusively; return it opened, no link followed.

    ``mkdir`` fails on any existing entry (a link included), so nothing is
    reused; the new directory is then opened with ``O_DIRECTORY | O_NOFOLLOW``
    and set to exactly ``mode`` (the umask cannot widen or narrow it). The
    caller closes the descriptor, fsyncs ``dir_fd`` when durability matters,
    and removes the directory when what it fills in fails.

    Raises:
        FileSystemError: ``output_exists`` (the name exists),
            ``unsafe_destination`` (replaced before it could be opened) or
            ``output_unwritable`` (field ``output``).
    """
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
    except FileExistsError:
        raise refusal("output_exists", "output") from None
    except OSError:
        raise refusal("output_unwritable", "output") from None
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        raise refusal("unsafe_destination", "output") from None
    try:
        os.fchmod(fd, mode)
    except OSError:
        os.close(fd)
        raise refusal("output_unwritable", "output") from None
    return fd


def create_exclusive(
    dir_fd: int, name: str, data: bytes | Iterable[bytes], *, mode: int = 0o600
) -> int:
    """Create ``name`` in ``dir_fd`` exclusively (no symlink followed), write, fsync.

    Returns the number of bytes written. On a write failure the file is removed.

    Raises:
        FileSystemError: ``output_exists``, ``output_parent_missing`` or
            ``output_unwritable`` (field ``output``).
    """
    try:
        fd = os.open(name, WRITE_FLAGS, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        raise refusal("output_exists", "output") from None
    except FileNotFoundError:
        raise refusal("output_parent_missing", "output") from None
    except OSError:
        raise refusal("output_unwritable", "output") from None
    total = 0
    try:
        with os.fdopen(os.dup(fd), "wb", buffering=CHUNK_SIZE) as handle:
            for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
                total += handle.write(chunk)
        os.fchmod(fd, mode)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise refusal("output_unwritable", "output") from None
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return total


class ExclusiveWriter:
    """Stream bytes into a new file that appears atomically, never replacing anything.

    The destination's folder is opened by :func:`open_destination_parent`
    (no symlinked component; the name must not exist). Bytes go to a fresh
    temporary file beside it (``O_EXCL | O_NOFOLLOW``, relative to the folder
    descriptor); :meth:`publish` fsyncs it and hard-links it to the final
    name (``link`` fails on any existing entry), then fsyncs the folder.
    :meth:`discard` (or leaving a ``with`` block by an exception) removes the
    temporary file: nothing partial is ever visible.

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_exists``,
            ``output_parent_missing``, ``output_unwritable`` or
            ``unsupported_platform`` (field ``output``).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, mode: int = 0o644, create_parents: bool = False
    ) -> None:
        """Open the folder and create the temporary file (mode ``mode``)."""
        self._handle: IO[bytes] | None = None
        self._parent_fd, self._name = open_destination_parent(path, create_parents=create_parents)
        self._temporary = f".{self._name[:64]}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(self._temporary, WRITE_FLAGS, 0o600, dir_fd=self._parent_fd)
        except OSError:
            os.close(self._parent_fd)
            raise refusal("output_unwritable", "output") from None
        try:
            os.fchmod(fd, mode)
        except OSError:  # pragma: no cover - fchmod of our own new file does not fail
            os.close(fd)
            self.discard()
            raise refusal("output_unwritable", "output") from None
        self._handle = os.fdopen(fd, "wb", buffering=CHUNK_SIZE)

    def __enter__(self) -> ExclusiveWriter:
        """Return the writer."""
        return self

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        """Discard the temporary file when the block raised (or never published)."""
        self.discard()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes to the temporary file."""
        if self._handle is None:
            raise refusal("output_unwritable", "output")
        try:
            self._handle.write(data)
        except OSError:
            self.discard()
            raise refusal("output_unwritable", "output") from None

    def publish(self) -> None:
        """Flush, fsync and link the file into place; fsync the folder."""
        handle, self._handle = self._handle, None
        if handle is None:
            raise refusal("output_unwritable", "output")
        try:
            try:
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                handle.close()
            os.link(
                self._temporary, self._name, src_dir_fd=self._parent_fd, dst_dir_fd=self._parent_fd
            )
        except FileExistsError:
            self.discard()
            raise refusal("output_exists", "output") from None
        except OSError:
            self.discard()
            raise refusal("output_unwritable", "output") from None
        with contextlib.suppress(OSError):
            os.unlink(self._temporary, dir_fd=self._parent_fd)
        fsync_directory(self._parent_fd)
        self.discard()

    def discard(self) -> None:
        """Remove the temporary file and release the folder (idempotent)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
        if self._parent_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary, dir_fd=self._parent_fd)
            fd, self._parent_fd = self._parent_fd, -1
            os.close(fd)


def publish_exclusive(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    mode: int = 0o644,
    create_parents: bool = False,
) -> None:
    """Publish ``data`` at ``path`` atomically, never replacing anything.

    See :class:`ExclusiveWriter` (this is its one-shot form).

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_exists``,
            ``output_parent_missing``, ``output_unwritable`` or
            ``unsupported_platform`` (field ``output``).
    """
    with ExclusiveWriter(path, mode=mode, create_parents=create_parents) as writer:
        for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
            writer.write(chunk)
        writer.publish()


def replace_atomic(
    path: str | os.PathLike[str], data: bytes | Iterable[bytes], *, mode: int = 0o600
) -> None:
    """Replace (or create) the file at ``path`` atomically: temporary file, fsync, rename, fsync.

    For state files that are rewritten in place (a ledger usage file). The
    parent chain is opened as by :func:`open_destination_parent` (no
    symlinked component); an existing name is replaced, never followed.

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_parent_missing``,
            ``output_unwritable`` or ``unsupported_platform`` (field ``output``).
    """
    parent_fd, name = _open_parent_chain(path, create=False, mode=0o700)
    temporary = f".{name[:64]}.{secrets.token_hex(8)}.tmp"
    try:
        create_exclusive(parent_fd, temporary, data, mode=mode)
        try:
            os.replace(temporary, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent_fd)
            raise refusal("output_unwritable", "output") from None
        fsync_directory(parent_fd)
    finally:
        os.close(parent_fd)


def _load_noreplace() -> tuple[Any, int] | None:
    """Return the platform's no-replace rename ``(function, flag)``, if the C library has one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, TypeError):  # pragma: no cover - Windows has no default C library
        return None
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        name, flag = "renameatx_np", 0x4  # RENAME_EXCL
    else:
        name, flag = "renameat2", 0x1  # RENAME_NOREPLACE
    function = getattr(libc, name, None)
    if function is None:  # pragma: no cover - glibc < 2.28, musl
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function, flag


#: The no-replace rename in use (``None``: the claimed-directory fallback).
_NOREPLACE: tuple[Any, int] | None = _load_noreplace()
_UNSUPPORTED: Final = frozenset(
    {errno.ENOSYS, errno.EINVAL, getattr(errno, "ENOTSUP", -1), getattr(errno, "EOPNOTSUPP", -1)}
)


def _rename_claimed(dir_fd: int, old: str, new: str) -> None:
    """Claim ``new`` with an exclusive mkdir, then rename the directory ``old`` onto the claim."""
    try:
        os.mkdir(new, 0o700, dir_fd=dir_fd)
    except FileExistsError:
        raise refusal("output_exists", "output") from None
    except OSError:
        raise refusal("output_unwritable", "output") from None
    try:
        os.rename(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.rmdir(new, dir_fd=dir_fd)  # only succeeds while the claim is still empty
        exists = error.errno in (errno.EEXIST, errno.ENOTEMPTY)
        raise refusal("output_exists" if exists else "output_unwritable", "output") from None


def rename_noreplace(dir_fd: int, old: str, new: str) -> None:
    """Atomically rename the directory ``old`` to ``new`` inside ``dir_fd``, never replacing.

    Uses ``renameat2(RENAME_NOREPLACE)`` (Linux) or ``renameatx_np(RENAME_EXCL)``
    (macOS); elsewhere ``new`` is first claimed with an exclusive ``mkdir``
    and ``old`` renamed onto the empty claim (``rename`` replaces only an
    empty directory, so a concurrent writer's content is never replaced).

    Raises:
        FileSystemError: ``output_exists`` or ``output_unwritable`` (field ``output``).
    """
    noreplace = _NOREPLACE
    if noreplace is not None:
        function, flag = noreplace
        result = function(dir_fd, os.fsencode(old), dir_fd, os.fsencode(new), flag)
        if result == 0:
            return
        code = ctypes.get_errno()
        if code in (errno.EEXIST, errno.ENOTEMPTY):
            raise refusal("output_exists", "output")
        if code not in _UNSUPPORTED:
            raise refusal("output_unwritable", "output")
    _rename_claimed(dir_fd, old, new)
