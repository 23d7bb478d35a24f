"""Output publication with :class:`~sealeval.errors.OutputError` codes (a thin face on ``_fs``).

The checks live in :mod:`sealeval._fs`; this module only keeps the shared
``OutputError`` wire codes for the writers that report them.
"""

from __future__ import annotations

import os

from sealeval._fs import publish_exclusive as _publish
from sealeval._fs import translated
from sealeval.errors import OutputError

__all__ = ["publish_exclusive"]


def publish_exclusive(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically, refusing an existing or unsafe destination.

    See :func:`sealeval._fs.publish_exclusive`: the parent chain is opened
    without following symlinks, the name must not exist, the bytes are
    fsynced in a temporary file and hard-linked into place.

    Raises:
        OutputError: ``output_exists``, ``output_parent_missing``,
            ``unsafe_destination`` or ``output_unwritable`` (field ``output``).
    """
    with translated(OutputError, "output", default="output_unwritable"):
        _publish(path, data, mode=mode)
