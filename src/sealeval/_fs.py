"""The one hardened file-system edge: every sealeval read and write of a named file goes here.

Jobs (each has exactly this one home):

* **no-follow open** -- :func:`open_regular` opens with ``O_NOFOLLOW |
  O_NONBLOCK | O_CLOEXEC`` (a FIFO, a socket or a device never blocks the
  open), checks the descriptor with ``fstat`` and refuses anything that is not a regular
  file before a byte is read; then the descriptor is made blocking again;
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
* **exclusive atomic publish** -- :func:`publish_exclusive` writes a temporary
  file beside the destination, fsyncs it, hard-links it into place (``link``
  never replaces anything) and fsyncs the folder;
* **confined tree walk** -- :func:`walk_tree` walks a directory iteratively
  with descriptors (``openat`` with ``O_NOFOLLOW | O_DIRECTORY``, checking the
  opened directory is the one listed), with bounded depth and entry count; a
  symlink is never followed: its link text is read and resolved *lexically
  inside the tree* (escapes, dangling targets and loops are refused).

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

Portability: the module imports everywhere. POSIX-only flags are looked up
with ``getattr`` (0 when absent). Where ``O_NOFOLLOW`` is missing (Windows) the
final component is checked with ``lstat`` first (best effort, racy); the tree
walk and the destination walk need ``dir_fd`` support and raise
``unsupported_platform`` without it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, NamedTuple

from sealeval.errors import FileSystemError, SealevalError

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ENTRIES",
    "DIR_FLAGS",
    "HAS_DIR_FD",
    "READ_FLAGS",
    "FileDigest",
    "FileSignature",
    "FileSystemError",
    "TreeEntry",
    "create_exclusive",
    "digest_regular",
    "fsync_directory",
    "open_destination_parent",
    "open_directory",
    "open_regular",
    "publish_exclusive",
    "read_fd_bounded",
    "read_regular",
    "signature",
    "translated",
    "walk_tree",
]

CHUNK_SIZE: Final = 1 << 20
DEFAULT_MAX_DEPTH: Final = 256
DEFAULT_MAX_ENTRIES: Final = 1_000_000
#: Symlink hops followed while resolving one link inside a tree (as Linux's MAXSYMLINKS).
MAX_SYMLINK_HOPS: Final = 40

_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY: Final = getattr(os, "O_DIRECTORY", 0)
_O_BINARY: Final = getattr(os, "O_BINARY", 0)
#: Flags of every read open: never follow a final symlink, never block on a FIFO.
READ_FLAGS: Final = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY
#: Flags of every directory open inside a walk.
DIR_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_WRITE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
#: Whether descriptor-relative calls (``openat`` and friends) are available.
HAS_DIR_FD: Final = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd
#: ``errno`` values of opening something that is not a regular file without following it.
_NOT_REGULAR_ERRNOS: Final = frozenset(
    {errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK, getattr(errno, "EFTYPE", -1)}
)


def _fail(code: str, field: str = "path") -> FileSystemError:
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


# ---------------------------------------------------------------------------
# Reading


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
        return _fail("not_found")
    if error.errno in _NOT_REGULAR_ERRNOS:
        return _fail("not_regular_file")
    if isinstance(error, NotADirectoryError):
        return _fail("not_found")
    return _fail("unreadable")


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
    flags = READ_FLAGS & ~_O_NOFOLLOW if follow_symlinks else READ_FLAGS
    try:
        if (
            not follow_symlinks
            and not _O_NOFOLLOW
            and stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        ):  # pragma: no cover - Windows
            raise _fail("not_regular_file")
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as error:
        raise _open_error(error) from None
    except ValueError:  # an embedded NUL: nothing can exist there
        raise _fail("not_found") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if regular and _O_NONBLOCK:
            os.set_blocking(fd, True)
    except OSError:  # pragma: no cover - fstat on a fresh descriptor does not fail
        regular = False
    if not regular:
        os.close(fd)
        raise _fail("not_regular_file")
    return fd


def read_fd_bounded(fd: int, limit: int) -> bytes:
    """Read an open regular file to its end, at most ``limit`` bytes.

    A stated size over the limit is refused before reading; so is a file
    that yields more than ``limit`` bytes (it grew while read).

    Raises:
        FileSystemError: ``too_large`` or ``unreadable``.
    """
    try:
        if os.fstat(fd).st_size > limit:
            raise _fail("too_large")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(CHUNK_SIZE, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _fail("too_large")
    except OSError:
        raise _fail("unreadable") from None


def _check_unchanged(fd: int, before: FileSignature, count: int) -> None:
    try:
        after = signature(os.fstat(fd))
    except OSError:  # pragma: no cover - fstat on an open descriptor does not fail
        raise _fail("unreadable") from None
    if after != before or count != before.size:
        raise _fail("file_changed")


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
            raise _fail("file_changed")
        hasher = hashlib.sha256()
        view = memoryview(buffer if buffer is not None else bytearray(CHUNK_SIZE))
        total = 0
        try:
            while count := os.readv(fd, [view]):
                hasher.update(view[:count])
                total += count
        except OSError:
            raise _fail("unreadable") from None
        _check_unchanged(fd, before, total)
    finally:
        os.close(fd)
    executable = bool(info.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    return FileDigest(hasher.hexdigest(), total, executable)


# ---------------------------------------------------------------------------
# Directories


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
    flags = DIR_FLAGS & ~_O_NOFOLLOW if follow_symlinks else DIR_FLAGS
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _fail("not_found") from None
    except OSError as error:
        if error.errno in (errno.ENOTDIR, errno.ELOOP, errno.EMLINK):
            raise _fail("not_directory") from None
        raise _fail("unreadable") from None
    except ValueError:
        raise _fail("not_found") from None
    if not _O_DIRECTORY:  # pragma: no cover - Windows has no directory descriptors
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                os.close(fd)
                raise _fail("not_directory")
    return fd


def fsync_directory(directory: int | str | os.PathLike[str]) -> None:
    """Flush a directory's entries to disk (best effort: some systems refuse it)."""
    if isinstance(directory, int):
        with contextlib.suppress(OSError):
            os.fsync(directory)
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------
# Writing


def _require_dir_fd() -> None:
    if not HAS_DIR_FD:  # pragma: no cover - Windows
        raise _fail("unsupported_platform", "output")


def open_destination_parent(
    path: str | os.PathLike[str],
    *,
    create_parents: bool = False,
    directory_mode: int = 0o700,
) -> tuple[int, str]:
    """Open a destination's parent without following any symlink; return ``(fd, name)``.

    The walk starts at the file-system root for an absolute path and at the
    working directory otherwise, then opens every component with
    ``O_DIRECTORY | O_NOFOLLOW``: a symlink (or a file) anywhere in the chain
    is refused. ``..`` is opened like any other component (it is never a
    symlink). Missing components are refused, or created with
    ``directory_mode`` when ``create_parents``. The final name must not exist.

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_exists``,
            ``output_parent_missing``, ``output_unwritable`` or
            ``unsupported_platform`` (field ``output``).
    """
    _require_dir_fd()
    text = os.fspath(path)
    if not isinstance(text, str) or not text or "\0" in text:
        raise _fail("unsafe_destination", "output")
    destination = Path(text)
    if text.endswith(("/", os.sep)) or destination.name in ("", ".", ".."):
        raise _fail("unsafe_destination", "output")
    start = destination.anchor if destination.is_absolute() else "."
    parts = destination.parts[1:-1] if destination.is_absolute() else destination.parts[:-1]
    try:
        fd = os.open(start, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError:
        raise _fail("output_unwritable", "output") from None
    try:
        for part in parts:
            if part in ("", "."):
                continue
            fd = _step(fd, part, create=create_parents, mode=directory_mode)
        try:
            os.stat(destination.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        except OSError:
            raise _fail("output_unwritable", "output") from None
        else:
            raise _fail("output_exists", "output")
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
            raise _fail("output_parent_missing", "output") from None
        try:
            os.mkdir(name, mode, dir_fd=fd)
        except FileExistsError:
            pass  # created concurrently: opened without following below
        except OSError:
            raise _fail("output_unwritable", "output") from None
        fsync_directory(fd)
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            raise _fail("unsafe_destination", "output") from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise _fail("unsafe_destination", "output") from None
        raise _fail("output_unwritable", "output") from None
    os.close(fd)
    return child


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
        fd = os.open(name, _WRITE_FLAGS, 0o600, dir_fd=dir_fd)
    except FileExistsError:
        raise _fail("output_exists", "output") from None
    except FileNotFoundError:
        raise _fail("output_parent_missing", "output") from None
    except OSError:
        raise _fail("output_unwritable", "output") from None
    total = 0
    try:
        for chunk in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
            view = memoryview(chunk)
            while view:
                written = os.write(fd, view)
                view = view[written:]
                total += written
        os.fchmod(fd, mode)
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise _fail("output_unwritable", "output") from None
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return total


def publish_exclusive(
    path: str | os.PathLike[str],
    data: bytes | Iterable[bytes],
    *,
    mode: int = 0o644,
    create_parents: bool = False,
) -> None:
    """Publish ``data`` at ``path`` atomically, never replacing anything.

    The destination's parent is opened by :func:`open_destination_parent`
    (no symlinked component, the name must not exist); the bytes go to a
    fresh temporary file beside it, are fsynced, then hard-linked to the
    final name (``link`` fails on any existing entry, so a concurrent writer
    is never overwritten and readers never see a partial file); the folder
    is fsynced.

    Raises:
        FileSystemError: ``unsafe_destination``, ``output_exists``,
            ``output_parent_missing``, ``output_unwritable`` or
            ``unsupported_platform`` (field ``output``).
    """
    parent_fd, name = open_destination_parent(path, create_parents=create_parents)
    temporary = f".{name[:64]}.{secrets.token_hex(8)}.tmp"
    try:
        create_exclusive(parent_fd, temporary, data, mode=mode)
        try:
            os.link(temporary, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except FileExistsError:
            raise _fail("output_exists", "output") from None
        except OSError:
            raise _fail("output_unwritable", "output") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent_fd)
        fsync_directory(parent_fd)
    finally:
        os.close(parent_fd)


# ---------------------------------------------------------------------------
# The confined tree walk


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One entry of :func:`walk_tree`.

    Attributes:
        kind: ``"d"`` directory, ``"f"`` regular file, ``"l"`` symlink.
        path: the path relative to the root, ``/``-joined (UTF-8 names).
        dir_fd: the open parent directory, valid only until the walk moves on.
        name: the entry's name inside ``dir_fd``.
        info: the entry's ``lstat`` (what :func:`digest_regular` checks against).
        link_text: a symlink's link text (else ``None``).
        link_target: a symlink's target resolved inside the tree, relative to
            the root (``"."`` for the root itself; else ``None``).
    """

    kind: Literal["d", "f", "l"]
    path: str
    dir_fd: int
    name: bytes
    info: os.stat_result
    link_text: str | None = None
    link_target: str | None = None


def _utf8(name: bytes) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("undecodable_name") from None


def _split(text: bytes) -> list[bytes]:
    return [part for part in text.split(b"/") if part not in (b"", b".")]


def _resolve_link(root_fd: int, root: bytes, parent: list[bytes], text: bytes) -> list[bytes]:
    """Resolve a link's text inside the tree (lexically, following in-tree links).

    Nothing is opened: only ``lstat`` and ``readlink`` relative to the root
    descriptor, so a race can at worst change the recorded target, never
    what is read.
    """
    stack: list[bytes] = list(parent)
    pending: deque[bytes] = deque()
    hops = 0

    def expand(link: bytes) -> None:
        nonlocal stack
        if link.startswith(b"/"):
            if link.rstrip(b"/") != root and not link.startswith(root + b"/"):
                raise _fail("symlink_escapes_tree")
            stack = []
            pending.extendleft(reversed(_split(link[len(root) :])))
        else:
            pending.extendleft(reversed(_split(link)))

    expand(text)
    while pending:
        part = pending.popleft()
        if part == b"..":
            if not stack:
                raise _fail("symlink_escapes_tree")
            stack.pop()
            continue
        candidate = b"/".join([*stack, part])
        try:
            info = os.stat(candidate, dir_fd=root_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            raise _fail("dangling_symlink") from None
        except OSError:
            raise _fail("unreadable") from None
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise _fail("symlink_loop")
            try:
                link = os.readlink(candidate, dir_fd=root_fd)
            except OSError:
                raise _fail("file_changed") from None
            expand(link)
            continue
        if pending and not stat.S_ISDIR(info.st_mode):
            raise _fail("dangling_symlink")
        stack.append(part)
    return stack


class _Frame(NamedTuple):
    fd: int
    prefix: str
    parts: list[bytes]
    names: list[bytes]


def _list(fd: int, budget: int) -> list[bytes]:
    """Return a directory's names sorted by bytes, refusing more than ``budget``."""
    names: list[bytes] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                names.append(os.fsencode(entry.name))
                if len(names) > budget:
                    raise _fail("too_many_entries")
    except OSError:
        raise _fail("unreadable") from None
    names.sort(reverse=True)  # popped from the end: ascending byte order
    return names


def _enter(frame: _Frame, entry: TreeEntry, budget: int) -> _Frame:
    """Open a listed child directory without following it; check it is the one listed."""
    try:
        child = os.open(entry.name, DIR_FLAGS, dir_fd=frame.fd)
    except OSError:
        raise _fail("file_changed") from None
    try:
        opened = os.fstat(child)
        same = (opened.st_dev, opened.st_ino) == (entry.info.st_dev, entry.info.st_ino)
        names = _list(child, budget) if same else None
    except BaseException:
        os.close(child)
        raise
    if names is None:
        os.close(child)
        raise _fail("file_changed")
    return _Frame(child, entry.path + "/", [*frame.parts, entry.name], names)


def _entry(root_fd: int, root: bytes, frame: _Frame, name: bytes) -> TreeEntry:
    """Classify one listed name (never following it)."""
    relative = frame.prefix + _utf8(name)
    try:
        info = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
    except OSError:
        raise _fail("file_changed") from None
    if stat.S_ISDIR(info.st_mode):
        return TreeEntry("d", relative, frame.fd, name, info)
    if stat.S_ISREG(info.st_mode):
        return TreeEntry("f", relative, frame.fd, name, info)
    if not stat.S_ISLNK(info.st_mode):
        raise _fail("special_file")
    try:
        text = os.readlink(name, dir_fd=frame.fd)
    except OSError:
        raise _fail("file_changed") from None
    link_text = _utf8(text)
    target = _resolve_link(root_fd, root, frame.parts, text)
    resolved = _utf8(b"/".join(target)) if target else "."
    return TreeEntry("l", relative, frame.fd, name, info, link_text, resolved)


def walk_tree(
    root: str | os.PathLike[str],
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> Iterator[TreeEntry]:
    """Walk a directory depth first, siblings in byte order, a directory before its contents.

    The root may be named through a symlink (resolved once); below it every
    directory is opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to its
    parent's descriptor and must be the directory that was listed (device and
    inode), so swapping a directory for a symlink mid-walk is refused, never
    followed. The walk is iterative: depth is bounded by ``max_depth`` and the
    number of entries by ``max_entries``, not by the interpreter's stack.

    Raises:
        FileSystemError: ``not_found``, ``not_directory``, ``special_file``,
            ``symlink_escapes_tree``, ``dangling_symlink``, ``symlink_loop``,
            ``undecodable_name``, ``too_deep``, ``too_many_entries``,
            ``file_changed``, ``unreadable`` or ``unsupported_platform``.
    """
    if not HAS_DIR_FD:  # pragma: no cover - Windows
        raise _fail("unsupported_platform")
    try:
        real = os.path.realpath(os.fsencode(os.fspath(root)))
    except (OSError, ValueError):
        raise _fail("not_found") from None
    root_fd = open_directory(real)
    real = real.rstrip(b"/") or b"/"
    stack: list[_Frame] = []
    try:
        stack.append(_Frame(root_fd, "", [], _list(root_fd, max_entries)))
        seen = 0
        while stack:
            frame = stack[-1]
            if not frame.names:
                stack.pop()
                if frame.fd != root_fd:
                    os.close(frame.fd)
                continue
            seen += 1
            if seen > max_entries:
                raise _fail("too_many_entries")
            entry = _entry(root_fd, real, frame, frame.names.pop())
            if entry.kind == "d" and len(stack) >= max_depth:
                raise _fail("too_deep")
            yield entry
            if entry.kind == "d":
                stack.append(_enter(frame, entry, max_entries - seen))
    finally:
        for frame in stack:
            if frame.fd != root_fd:
                os.close(frame.fd)
        os.close(root_fd)
