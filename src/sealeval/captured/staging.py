"""Private staging folders of publication: the publish sequence, ownership locks, stale removal.

A pack (or a per-task import folder) is written into
``.captured-evidence-<32 hex>`` beside its destination and renamed into place
by :func:`staged_publication`, the one sequence both
:func:`sealeval.captured.pack.publish_pack` and
:func:`sealeval.captured.importers.import_inspect_tasks` use. A
process killed while staging leaves that folder behind. To tell a dead
owner's folder from a live one, the publisher first creates the lock file
``.captured-evidence-<32 hex>.lock`` next to it (exclusively, mode 0600, no
link followed) and holds an exclusive ``flock`` on it for the whole staging;
the kernel releases the lock when the process dies, however it dies.

:func:`remove_stale_staging` (run before every publication) removes a staging
folder only when all of these hold: its name is exactly ours; it is a real
directory (a symlink is never followed nor removed) owned by the current
user; its lock file exists, is a regular file owned by the current user; and
the lock can be taken without waiting (no live process owns it). A folder
without a lock file (another tool's, or one from before locks existed) is
left alone. Removal walks with directory descriptors and never follows a
link. Everything here is best effort: a failure leaves the entry in place and
never fails the publication.

Every open goes through :mod:`sealeval._fs` (no-follow, regular-file
checks) and every lock through :mod:`sealeval._lock`. Without POSIX locks
(Windows) staging is not locked and nothing is removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from typing import Final

from sealeval import _lock
from sealeval._fs import list_names, open_directory, open_lock_file, rename_noreplace, translated
from sealeval.errors import FileSystemError, SealevalError

__all__ = [
    "LOCK_SUFFIX",
    "STAGING_PREFIX",
    "remove_stale_staging",
    "remove_tree",
    "staged_publication",
    "staging_lock",
]

#: Name prefix of the private staging directory created beside the destination.
STAGING_PREFIX: Final = ".captured-evidence-"
#: Suffix of a staging directory's lock file (beside it, same token).
LOCK_SUFFIX: Final = ".lock"

_TOKEN_BYTES: Final = 16
_STAGING_NAME: Final = re.compile(re.escape(STAGING_PREFIX) + r"[0-9a-f]{32}")


@contextlib.contextmanager
def _directory(parent: int | str | os.PathLike[str]) -> Iterator[int]:
    """Yield a descriptor of ``parent`` (borrowed when given as one)."""
    if isinstance(parent, int):
        yield parent
        return
    fd = open_directory(parent)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def staging_lock(parent: int | str | os.PathLike[str]) -> Iterator[str]:
    """Reserve a fresh staging name in ``parent`` and hold its lock; yield the name.

    The caller creates the staging folder under the yielded name and removes
    or renames it before the block ends; the lock file is removed on exit.

    Raises:
        FileSystemError: ``parent`` or the lock file could not be opened or created.
        OSError: the lock could not be taken.
    """
    with _directory(parent) as parent_fd:
        name = STAGING_PREFIX + secrets.token_hex(_TOKEN_BYTES)
        lock_name = name + LOCK_SUFFIX
        fd = open_lock_file(lock_name, dir_fd=parent_fd, exclusive=True)
        try:
            if _lock.process_locks():
                _lock.lock_exclusive(fd, wait=True)
            try:
                yield name
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(lock_name, dir_fd=parent_fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def staged_publication(
    parent_fd: int, name: str, error: type[SealevalError], field: str = "output"
) -> Iterator[str]:
    """Stage an output beside ``name`` in ``parent_fd``, then rename it into place; yield the stage.

    The one publication sequence: stale staging folders are removed
    (:func:`remove_stale_staging`), a fresh staging name is reserved and locked
    (:func:`staging_lock`), the caller creates and fills the folder of the
    yielded name inside the block, and on a clean exit it is renamed to
    ``name`` without replacing anything. On any failure the staging folder is
    removed (:func:`remove_tree`) and the lock released. The caller owns
    ``parent_fd`` (and fsyncs it when durability matters).

    Raises:
        SealevalError: ``error(code, field)``: ``output_exists`` when ``name``
            appeared meanwhile, ``output_unwritable`` for any other
            file-system failure (the block's own refusals pass unchanged).
    """
    remove_stale_staging(parent_fd)  # folders of killed publishers (no live owner)
    try:
        with staging_lock(parent_fd) as staging:
            try:
                yield staging
                with translated(error, field, default="output_unwritable"):
                    rename_noreplace(parent_fd, staging, name)
            except BaseException:
                remove_tree(parent_fd, staging)
                raise
    except (OSError, FileSystemError):
        raise error("output_unwritable", field) from None


def remove_tree(parent_fd: int, name: str) -> None:
    """Remove a directory tree we created (files first, then directories); links not followed.

    Best effort: entries that cannot be removed stay.
    """
    try:
        fd = open_directory(name, dir_fd=parent_fd)
    except FileSystemError:  # never created, already gone, or not a directory (a link)
        return
    try:
        for entry in list_names(fd):
            try:
                info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            except OSError:  # pragma: no cover - removed concurrently
                continue
            if stat.S_ISDIR(info.st_mode):
                remove_tree(fd, entry)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(name, dir_fd=parent_fd)


def _owned(info: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or info.st_uid == os.geteuid()


@contextlib.contextmanager
def _free_lock(parent_fd: int, lock_name: str) -> Iterator[bool]:
    """Yield whether ``lock_name`` is our regular lock file and no live process holds it.

    While the block runs the lock is held (when free). A missing lock file
    (not ours to judge), a link, another user's file or a held lock: ``False``.
    """
    try:
        lock_fd = open_lock_file(lock_name, dir_fd=parent_fd)
    except FileSystemError:
        yield False
        return
    try:
        free = _owned(os.fstat(lock_fd))
        if free:
            try:
                _lock.lock_exclusive(lock_fd)
            except OSError:  # held: a live process is staging
                free = False
        yield free
    finally:
        os.close(lock_fd)


def _remove_if_stale(parent_fd: int, name: str) -> bool:
    """Remove one staging folder when its owner is gone; return whether it was removed."""
    info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode) or not _owned(info):
        return False
    with _free_lock(parent_fd, name + LOCK_SUFFIX) as free:
        if not free:
            return False
        remove_tree(parent_fd, name)
        with contextlib.suppress(OSError):
            os.unlink(name + LOCK_SUFFIX, dir_fd=parent_fd)
        return True


def _remove_orphan_lock(parent_fd: int, lock_name: str) -> None:
    """Remove a lock file whose folder is gone (killed after the rename) once it is free."""
    with _free_lock(parent_fd, lock_name) as free:
        if free:
            with contextlib.suppress(OSError):
                os.unlink(lock_name, dir_fd=parent_fd)


def remove_stale_staging(parent: int | str | os.PathLike[str]) -> int:
    """Remove the stale staging folders (and orphan lock files) in ``parent``.

    Returns the number of staging folders removed. Never raises.
    """
    if not _lock.process_locks():  # pragma: no cover - Windows: ownership cannot be proven
        return 0
    removed = 0
    try:
        with _directory(parent) as parent_fd:
            names = set(list_names(parent_fd))
            for name in sorted(names):
                if _STAGING_NAME.fullmatch(name) is not None:
                    with contextlib.suppress(OSError):
                        removed += _remove_if_stale(parent_fd, name)
            for name in sorted(names):
                if name.endswith(LOCK_SUFFIX):
                    folder = name[: -len(LOCK_SUFFIX)]
                    if _STAGING_NAME.fullmatch(folder) is not None and folder not in names:
                        _remove_orphan_lock(parent_fd, name)
    except (OSError, FileSystemError):
        return removed
    return removed
