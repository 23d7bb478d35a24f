"""Flags, limits and the refusal helper shared by the parts of ``sealeval._fs``."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from typing import Final

from sealeval.errors import FileSystemError, SealevalError

CHUNK_SIZE: Final = 1 << 20
DEFAULT_MAX_DEPTH: Final = 256
DEFAULT_MAX_ENTRIES: Final = 1_000_000
#: Symlink hops followed while resolving one link inside a tree (as Linux's MAXSYMLINKS).
MAX_SYMLINK_HOPS: Final = 40

#: Open flags where the platform has them (0 elsewhere: the checks after opening still hold).
O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
O_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
O_BINARY: Final = getattr(os, "O_BINARY", 0)
#: Flags of every read open: never follow a final symlink, never block on a FIFO.
READ_FLAGS: Final = os.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_BINARY
#: Flags of every directory open inside a walk.
DIR_FLAGS: Final = os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_BINARY
#: Flags of a lock-file open (read-write, never through a symlink, never blocking).
LOCK_FLAGS: Final = os.O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_BINARY
#: Flags of an append-only probe or log file (created if missing, never through a symlink).
APPEND_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_BINARY
#: Whether descriptor-relative calls (``openat`` and friends) are available.
HAS_DIR_FD: Final = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
#: ``errno`` values of opening something that is not a regular file without following it.
NOT_REGULAR_ERRNOS: Final = frozenset(
    {errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK, getattr(errno, "EFTYPE", -1)}
)


def refusal(code: str, field: str = "path") -> FileSystemError:
    """Return the file-system refusal ``code`` at ``field`` (the parts raise it)."""
    return FileSystemError(code, field)


@contextlib.contextmanager
def translated(
    error: type[SealevalError],
    field: str | None,
    renames: Mapping[str, str] | None = None,
    *,
    default: str = "unreadable",
) -> Iterator[None]:
    """Re-raise a :class:`FileSystemError` inside the block as ``error(code, field)``.

    The code is ``renames[code]`` when given, else the same code when
    ``error`` declares it, else ``default`` (which ``error`` must declare).
    The original error is never chained.
    """
    try:
        yield
    except FileSystemError as failure:
        code = (renames or {}).get(failure.code, failure.code)
        if code not in error.codes:
            code = default
        raise error(code, field) from None
