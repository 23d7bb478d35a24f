"""Atomic, no-clobber publication of output files."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from sealeval.errors import OutputError

__all__ = ["publish_exclusive"]


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def publish_exclusive(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically, refusing an existing file or symlink.

    The bytes are written to a fresh temporary file beside the destination,
    flushed to disk, then hard-linked into place; linking fails if anything
    (a file, a directory, a dangling symlink) already has the name, so a
    concurrent writer can never be overwritten and readers never see a
    partial file.

    Raises:
        OutputError: ``output_exists``, ``output_parent_missing`` or
            ``output_unwritable`` (field ``output``).
    """
    destination = Path(path)
    parent = destination.parent
    if os.path.lexists(destination):
        raise OutputError("output_exists", "output")
    if not parent.is_dir():
        raise OutputError("output_parent_missing", "output")
    temporary = parent / f".{destination.name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except OSError:
        raise OutputError("output_unwritable", "output") from None
    try:
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(temporary, destination)
        except FileExistsError:
            raise OutputError("output_exists", "output") from None
        except OSError:
            raise OutputError("output_unwritable", "output") from None
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    _fsync_directory(parent)
