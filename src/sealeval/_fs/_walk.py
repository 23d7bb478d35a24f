"""The confined tree walk: directory descriptors, iterative, bounded, links resolved inside."""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Literal, NamedTuple

from sealeval._fs._base import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ENTRIES,
    DIR_FLAGS,
    HAS_DIR_FD,
    MAX_SYMLINK_HOPS,
    refusal,
)
from sealeval._fs._read import open_directory
from sealeval.errors import FileSystemError


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


@dataclass(slots=True)
class WalkSkips:
    """What a lenient :func:`walk_tree` passed over (filled in while it walks).

    Attributes:
        skipped: entries not yielded: special files, undecodable names, and
            entries or directories that changed or could not be read.
        truncated: the walk stopped at ``max_entries`` (having listed the
            first entries in walk order) or left a directory unentered
            (``max_depth``).
    """

    skipped: int = 0
    truncated: bool = False


def _utf8(name: bytes) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise refusal("undecodable_name") from None


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
                raise refusal("symlink_escapes_tree")
            stack = []
            pending.extendleft(reversed(_split(link[len(root) :])))
        else:
            pending.extendleft(reversed(_split(link)))

    expand(text)
    while pending:
        part = pending.popleft()
        if part == b"..":
            if not stack:
                raise refusal("symlink_escapes_tree")
            stack.pop()
            continue
        candidate = b"/".join([*stack, part])
        try:
            info = os.stat(candidate, dir_fd=root_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            raise refusal("dangling_symlink") from None
        except OSError:
            raise refusal("unreadable") from None
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise refusal("symlink_loop")
            try:
                link = os.readlink(candidate, dir_fd=root_fd)
            except OSError:
                raise refusal("file_changed") from None
            expand(link)
            continue
        if pending and not stat.S_ISDIR(info.st_mode):
            raise refusal("dangling_symlink")
        stack.append(part)
    return stack


class _Frame(NamedTuple):
    fd: int
    prefix: str
    parts: list[bytes]
    names: list[bytes]


def _list(fd: int, budget: int, *, keep_first: bool = False) -> list[bytes]:
    """Return a directory's names sorted by bytes, refusing more than ``budget``.

    With ``keep_first`` (a lenient walk) a longer listing is not refused: the
    ``budget + 1`` first names in byte order are kept (memory stays bounded),
    so the walk lists up to the entry bound and then stops as truncated.
    """
    names: list[bytes] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                names.append(os.fsencode(entry.name))
                if len(names) > budget:
                    if not keep_first:
                        raise refusal("too_many_entries")
                    if len(names) > 2 * (budget + 1):
                        names.sort()
                        del names[budget + 1 :]
    except OSError:
        raise refusal("unreadable") from None
    names.sort()
    del names[budget + 1 :]
    names.reverse()  # popped from the end: ascending byte order
    return names


def _enter(frame: _Frame, entry: TreeEntry, budget: int, *, keep_first: bool = False) -> _Frame:
    """Open a listed child directory without following it; check it is the one listed."""
    try:
        child = os.open(entry.name, DIR_FLAGS, dir_fd=frame.fd)
    except OSError:
        raise refusal("file_changed") from None
    try:
        opened = os.fstat(child)
        same = (opened.st_dev, opened.st_ino) == (entry.info.st_dev, entry.info.st_ino)
        names = _list(child, budget, keep_first=keep_first) if same else None
    except BaseException:
        os.close(child)
        raise
    if names is None:
        os.close(child)
        raise refusal("file_changed")
    return _Frame(child, entry.path + "/", [*frame.parts, entry.name], names)


def _entry(root_fd: int, root: bytes, frame: _Frame, name: bytes) -> TreeEntry:
    """Classify one listed name (never following it)."""
    relative = frame.prefix + _utf8(name)
    try:
        info = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
    except OSError:
        raise refusal("file_changed") from None
    if stat.S_ISDIR(info.st_mode):
        return TreeEntry("d", relative, frame.fd, name, info)
    if stat.S_ISREG(info.st_mode):
        return TreeEntry("f", relative, frame.fd, name, info)
    if not stat.S_ISLNK(info.st_mode):
        raise refusal("special_file")
    try:
        text = os.readlink(name, dir_fd=frame.fd)
    except OSError:
        raise refusal("file_changed") from None
    link_text = _utf8(text)
    target = _resolve_link(root_fd, root, frame.parts, text)
    resolved = _utf8(b"/".join(target)) if target else "."
    return TreeEntry("l", relative, frame.fd, name, info, link_text, resolved)


def _lenient_entry(frame: _Frame, name: bytes) -> TreeEntry | None:
    """Classify one listed name for a lenient walk; ``None``: pass it over.

    A symlink is listed but neither read nor resolved (``link_text`` and
    ``link_target`` stay ``None``).
    """
    try:
        relative = frame.prefix + name.decode("utf-8")
        info = os.stat(name, dir_fd=frame.fd, follow_symlinks=False)
    except (UnicodeDecodeError, OSError):
        return None
    if stat.S_ISDIR(info.st_mode):
        return TreeEntry("d", relative, frame.fd, name, info)
    if stat.S_ISREG(info.st_mode):
        return TreeEntry("f", relative, frame.fd, name, info)
    if stat.S_ISLNK(info.st_mode):
        return TreeEntry("l", relative, frame.fd, name, info)
    return None


def _listing(fd: int, budget: int, lenient: WalkSkips | None) -> list[bytes]:
    """List the root; a lenient walk of an unreadable root is empty."""
    try:
        return _list(fd, budget, keep_first=lenient is not None)
    except FileSystemError:
        if lenient is None:
            raise
        lenient.skipped += 1  # pragma: no cover - an unlistable root (EACCES, unprivileged only)
        return []  # pragma: no cover


def _classify(
    root_fd: int, root: bytes, frame: _Frame, too_deep: bool, lenient: WalkSkips | None
) -> TreeEntry | None:
    """Classify the frame's next name; ``None``: a lenient walk passes it over."""
    name = frame.names.pop()
    if lenient is None:
        entry = _entry(root_fd, root, frame, name)
        if entry.kind == "d" and too_deep:
            raise refusal("too_deep")
        return entry
    found = _lenient_entry(frame, name)
    if found is None:
        lenient.skipped += 1
    return found


def _child(
    frame: _Frame, entry: TreeEntry, budget: int, too_deep: bool, lenient: WalkSkips | None
) -> _Frame | None:
    """Enter a yielded directory; ``None``: a lenient walk leaves it unentered."""
    if lenient is None:
        return _enter(frame, entry, budget)
    if too_deep:
        lenient.truncated = True
        return None
    try:
        return _enter(frame, entry, budget, keep_first=True)
    except FileSystemError:
        lenient.skipped += 1
        return None


def _open_root(root: str | os.PathLike[str], *, follow_root: bool) -> tuple[int, bytes]:
    """Open the walk's root; return its descriptor and its real path (for link resolution)."""
    if not HAS_DIR_FD:  # pragma: no cover - Windows
        raise refusal("unsupported_platform")
    try:
        named = os.fsencode(os.fspath(root))
        real = os.path.realpath(named)
    except (OSError, ValueError):
        raise refusal("not_found") from None
    root_fd = open_directory(real if follow_root else named)
    return root_fd, real.rstrip(b"/") or b"/"


def walk_tree(
    root: str | os.PathLike[str],
    *,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    follow_root: bool = True,
    enter: Callable[[TreeEntry], bool] | None = None,
    lenient: WalkSkips | None = None,
) -> Generator[TreeEntry, None, None]:
    """Walk a directory depth first, siblings in byte order, a directory before its contents.

    The root may be named through a symlink (resolved once) unless
    ``follow_root`` is false (then a symlinked root is ``not_directory``);
    below it every directory is opened with ``O_DIRECTORY | O_NOFOLLOW``
    relative to its parent's descriptor and must be the directory that was
    listed (device and inode), so swapping a directory for a symlink
    mid-walk is refused, never followed. The walk is iterative: depth is
    bounded by ``max_depth`` and the number of entries by ``max_entries``,
    not by the interpreter's stack. ``enter`` (when given) is asked, after a
    directory entry is yielded, whether to walk into it.

    With ``lenient`` (a :class:`WalkSkips` the walk fills in) nothing below
    the root is refused: a symlink is yielded but never read or resolved;
    special files, undecodable names and entries that change or cannot be
    read are passed over (``skipped``); a directory deeper than
    ``max_depth`` is yielded but not entered, and reaching ``max_entries``
    ends the walk (``truncated``). A viewer uses this: one odd entry must
    not hide a whole folder.

    Raises:
        FileSystemError: ``not_found``, ``not_directory``, ``special_file``,
            ``symlink_escapes_tree``, ``dangling_symlink``, ``symlink_loop``,
            ``undecodable_name``, ``too_deep``, ``too_many_entries``,
            ``file_changed``, ``unreadable`` or ``unsupported_platform``
            (with ``lenient``: only the root's ``not_found``,
            ``not_directory``, ``unreadable`` and ``unsupported_platform``).
    """
    root_fd, real = _open_root(root, follow_root=follow_root)
    stack: list[_Frame] = []
    try:
        stack.append(_Frame(root_fd, "", [], _listing(root_fd, max_entries, lenient)))
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
                raise refusal("too_many_entries")
            too_deep = len(stack) > max_depth
            entry = _classify(root_fd, real, frame, too_deep, lenient)
            if entry is None:
                continue
            yield entry
            if entry.kind == "d" and (enter is None or enter(entry)):
                child = _child(frame, entry, max_entries - seen, too_deep, lenient)
                if child is not None:
                    stack.append(child)
    except FileSystemError as error:
        if lenient is None or error.code != "too_many_entries":
            raise
        lenient.truncated = True  # the entry bound: a lenient walk ends here
    finally:
        for frame in stack:
            if frame.fd != root_fd:
                os.close(frame.fd)
        os.close(root_fd)
