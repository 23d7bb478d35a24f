"""Pipes: widening a pipe's buffer (Linux ``F_SETPIPE_SZ``; nothing elsewhere)."""

from __future__ import annotations

import contextlib
import sys

__all__ = ["widen_pipe"]


def widen_pipe(descriptor: int, size: int) -> bool:
    """Ask the kernel for a pipe buffer of ``size`` bytes on ``descriptor``; return whether it did.

    Linux only (``fcntl(F_SETPIPE_SZ)``): a writer that fills a wider buffer
    waits for its reader less often (the parallel importer's worker pipe).
    Elsewhere, without ``fcntl``, or when the kernel refuses (``size`` over
    ``/proc/sys/fs/pipe-max-size`` for an unprivileged process, a descriptor
    that is not a pipe), nothing changes and ``False`` is returned: the pipe
    works as before, only with its default buffer.
    """
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(ImportError, OSError, AttributeError):
        import fcntl  # noqa: PLC0415 - Linux only; an interpreter may lack it

        return fcntl.fcntl(descriptor, fcntl.F_SETPIPE_SZ, size) >= size
    return False
