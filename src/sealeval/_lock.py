"""Portable exclusive file locks: the one home of file locking.

POSIX systems lock with :func:`fcntl.flock`, Windows with
:func:`msvcrt.locking` (one byte at offset 0). The platform module is imported
when a lock is first taken, so every sealeval module imports on any
platform; a platform with neither refuses to lock (``OSError``), never
pretends to.
"""

from __future__ import annotations

import errno
import importlib
import os
from types import ModuleType
from typing import Any, Final

__all__ = ["lock_exclusive", "process_locks", "unlock"]

_BACKENDS: Final = ("fcntl", "msvcrt")


def _backend() -> tuple[str, Any]:
    for name in _BACKENDS:
        try:
            module: ModuleType = importlib.import_module(name)
        except ImportError:
            continue
        return name, module
    raise OSError(errno.ENOTSUP, "no file-locking facility on this platform")


def process_locks() -> bool:
    """Return whether locks are POSIX ``flock`` locks (whole-file, released when the holder dies).

    Code that judges another process's file by its lock (stale staging
    folders) does so only then.
    """
    try:
        return _backend()[0] == "fcntl"
    except OSError:  # a platform with no locking at all
        return False


def lock_exclusive(fd: int, *, wait: bool = False) -> None:
    """Take an exclusive lock on the open file ``fd`` (without waiting unless ``wait``).

    Raises:
        BlockingIOError: another process (or descriptor) holds the lock (not ``wait``).
        OSError: the file cannot be locked here.
    """
    name, module = _backend()
    if name == "fcntl":
        module.flock(fd, module.LOCK_EX if wait else module.LOCK_EX | module.LOCK_NB)
        return
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        module.locking(fd, module.LK_LOCK if wait else module.LK_NBLCK, 1)
    except OSError as error:
        if error.errno in (errno.EACCES, errno.EDEADLK):
            raise BlockingIOError(errno.EAGAIN, "locked") from None
        raise


def unlock(fd: int) -> None:
    """Release a lock taken with :func:`lock_exclusive`."""
    name, module = _backend()
    if name == "fcntl":
        module.flock(fd, module.LOCK_UN)
        return
    os.lseek(fd, 0, os.SEEK_SET)
    module.locking(fd, module.LK_UNLCK, 1)
