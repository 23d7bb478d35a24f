"""The confined tree walk: directory descriptors, iterative, bounded, links resolved inside."""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple

from sealeval._fs._base import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ENTRIES,
    DIR_FLAGS,
    HAS_DIR_FD,
    MAX_SYMLINK_HOPS,
    _fail,
)
from sealeval._fs._read import open_directory


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
            if entry.kind == "d" and len(stack) > max_depth:
                raise _fail("too_deep")
            yield entry
            if entry.kind == "d":
                stack.append(_enter(frame, entry, max_entries - seen))
    finally:
        for frame in stack:
            if frame.fd != root_fd:
                os.close(frame.fd)
        os.close(root_fd)
