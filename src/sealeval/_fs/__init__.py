"""The one hardened file-system edge: every sealeval read and write of a named file goes here.

Jobs (each has exactly this one home):

* **no-follow open** -- :func:`open_regular` opens with ``O_NOFOLLOW |
  O_NONBLOCK | O_CLOEXEC`` (a FIFO, a socket or a device never blocks the
  open), checks the descriptor with ``fstat`` and refuses anything that is not a regular
  file before a byte is read; then the descriptor is made blocking again;
* **lock files** -- :func:`open_lock_file` opens (or creates, optionally
  exclusively) a lock file read-write the same way; :mod:`sealeval._lock`
  takes the lock;
* **append files** -- :func:`open_append` opens (or creates) a regular file
  for appending the same way (probe and log files in a private folder);
* **the null device** -- :func:`point_at_null` makes an open descriptor refer
  to ``os.devnull`` (sockets a forked child inherited);
* **pipe buffers** -- :func:`widen_pipe` asks Linux for a wider pipe buffer
  (``F_SETPIPE_SZ``; nothing elsewhere);
* **directory chains** -- :func:`descend` opens a chain of directories below
  a descriptor, one ``O_DIRECTORY | O_NOFOLLOW`` open per component;
* **bounded read** -- :func:`read_fd_bounded` refuses a file whose stated size
  is over the limit before reading, and never reads more than ``limit + 1``
  bytes (a file growing while read is refused too);
* **stable read** -- :func:`read_regular` and :func:`digest_regular` compare
  device, inode, size, modification *and change* time before and after the
  read (restoring the modification time with ``utime`` still changes ``ctime``);
* **directory fsync** -- :func:`fsync_directory`;
* **safe destination** -- :func:`open_destination_parent` walks every component
  of a destination's parent with directory descriptors (``O_DIRECTORY |
  O_NOFOLLOW``), so a symlinked parent anywhere in the chain is refused, and
  the final name must not exist (not even as a dangling symlink);
* **new directory** -- :func:`create_directory` creates a directory
  exclusively, opens it without following a link and sets its exact mode;
* **exclusive atomic publish** -- :func:`publish_exclusive` writes a temporary
  file beside the destination, fsyncs it, hard-links it into place (``link``
  never replaces anything) and fsyncs the folder; a staged directory is
  published with :func:`rename_noreplace`; a rewritten state file with
  :func:`replace_atomic`;
* **confined tree walk** -- :func:`walk_tree` walks a directory iteratively
  with descriptors (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``, checking the
  opened directory is the one listed), with bounded depth and entry count; a
  symlink is never followed: its link text is read and resolved *lexically
  inside the tree* (escapes, dangling targets and loops are refused). A
  *lenient* walk (``lenient=WalkSkips()``) passes odd entries over instead
  of refusing them (the viewer's catalog).

Error design: every function raises :class:`~sealeval.errors.FileSystemError`,
a family-neutral error with the closed codes below and field ``path`` (or
``output`` for writers). A caller turns it into its own family's error with
:func:`translated`, a context manager that maps codes (identity by default) --
so each module keeps its documented wire codes while the checks live here::

    with translated(SigningKeyError, "signing_key", {"symlink": "not_regular_file"}):
        data = read_regular(path, limit=MAX_KEY_FILE_BYTES)

Codes: ``not_found``, ``not_regular_file``, ``not_directory``, ``unreadable``,
``too_large``, ``file_changed``, ``special_file``, ``symlink_escapes_tree``,
``dangling_symlink``, ``symlink_loop``, ``undecodable_name``, ``too_deep``,
``too_many_entries``, ``output_exists``, ``output_parent_missing``,
``output_unwritable``, ``unsafe_destination``, ``unsupported_platform``.
Every ``OSError`` is mapped to one of them; none is chained (``from None``)
and no path or name ever appears in a message.

Layout: this face re-exports everything; ``_base`` (flags, limits,
:func:`translated`), ``_read`` (opening and reading), ``_write``
(destinations and publication), ``_walk`` (the tree walk) and ``_pipe``
(pipe buffers) hold the code.

Portability: the package imports everywhere. POSIX-only flags are looked up
with ``getattr`` (0 when absent). Where ``O_NOFOLLOW`` is missing (Windows) the
final component is checked with ``lstat`` first (best effort, racy); the tree
walk and the destination walk need ``dir_fd`` support and raise
``unsupported_platform`` without it.
"""

from __future__ import annotations

from sealeval._fs._base import (
    APPEND_FLAGS,
    CHUNK_SIZE,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ENTRIES,
    DIR_FLAGS,
    HAS_DIR_FD,
    LOCK_FLAGS,
    MAX_SYMLINK_HOPS,
    READ_FLAGS,
    translated,
)
from sealeval._fs._pipe import widen_pipe
from sealeval._fs._read import (
    FileDigest,
    FileSignature,
    descend,
    digest_regular,
    fsync_directory,
    list_names,
    open_append,
    open_directory,
    open_directory_below,
    open_lock_file,
    open_regular,
    point_at_null,
    read_below,
    read_fd_bounded,
    read_regular,
    signature,
)
from sealeval._fs._walk import TreeEntry, WalkSkips, walk_tree
from sealeval._fs._write import (
    ExclusiveWriter,
    create_directory,
    create_exclusive,
    open_destination_parent,
    publish_exclusive,
    rename_noreplace,
    replace_atomic,
)
from sealeval.errors import FileSystemError

__all__ = [
    "APPEND_FLAGS",
    "CHUNK_SIZE",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ENTRIES",
    "DIR_FLAGS",
    "HAS_DIR_FD",
    "LOCK_FLAGS",
    "MAX_SYMLINK_HOPS",
    "READ_FLAGS",
    "ExclusiveWriter",
    "FileDigest",
    "FileSignature",
    "FileSystemError",
    "TreeEntry",
    "WalkSkips",
    "create_directory",
    "create_exclusive",
    "descend",
    "digest_regular",
    "fsync_directory",
    "list_names",
    "open_append",
    "open_destination_parent",
    "open_directory",
    "open_directory_below",
    "open_lock_file",
    "open_regular",
    "point_at_null",
    "publish_exclusive",
    "read_below",
    "read_fd_bounded",
    "read_regular",
    "rename_noreplace",
    "replace_atomic",
    "signature",
    "translated",
    "walk_tree",
    "widen_pipe",
]
