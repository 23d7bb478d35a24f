"""Find the runs, comparisons, evidence packs and receipts in a folder, confined to it.

The walk opens every directory with ``O_DIRECTORY | O_NOFOLLOW`` relative to
its parent's descriptor and never follows a symbolic link (links are listed
as skipped, never entered or read), so nothing outside the folder is
reached. It is bounded: depth, directory entries visited and items found.
Files are recognised from their first bytes (a JSON ``format`` member naming
a known contract); a directory holding an evidence-pack ``manifest.json`` is
a pack (not descended into). Every item is read later, on demand, by the
project's own readers (:mod:`.load`) from the same confined descriptors.

Every open, bounded read and the walk itself go through :mod:`sealeval._fs`:
the catalog is a *lenient* :func:`sealeval._fs.walk_tree`, which passes over
what a strict walk would refuse (links are counted, special files,
undecodable names and unreadable entries skipped), because one odd entry
must not hide a whole folder from the viewer.

Nothing here logs or raises with a path or content: an unreadable entry is
simply not listed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from sealeval._fs import (
    TreeEntry,
    WalkSkips,
    descend,
    open_directory,
    open_regular,
    read_fd_bounded,
    translated,
    walk_tree,
)
from sealeval.errors import CapturedError, FileSystemError

__all__ = [
    "CATALOG_LIMITS",
    "KINDS",
    "Catalog",
    "CatalogLimits",
    "Item",
    "ViewError",
    "open_below",
    "read_below",
    "scan",
]

RUN_FORMAT: Final = "invarlock/evaluation-run-v1"
COMPARISON_FORMAT: Final = "invarlock/multi-metric-comparison-v1"
RECEIPT_FORMAT: Final = "invarlock/evidence-verification-receipt-v3"
PACK_FORMAT: Final = "invarlock/evidence-pack-v2"
#: Item kinds, in listing order.
KINDS: Final = ("pack", "comparison", "run", "receipt")
_FILE_KINDS: Final = {RUN_FORMAT: "run", COMPARISON_FORMAT: "comparison", RECEIPT_FORMAT: "receipt"}
_FORMAT_MEMBER: Final = re.compile(rb'"format(?:_version)?"\s*:\s*"([A-Za-z0-9./_-]{1,80})"')
_HEAD_BYTES: Final = 65_536
#: File-system codes as the viewer reports them (the root, then a listed path).
_ROOT_CODES: Final = {"not_found": "not_a_directory", "not_directory": "not_a_directory"}
_PATH_CODES: Final = {"not_regular_file": "not_found", "not_directory": "not_found"}


class ViewError(CapturedError):
    """A refusal of the viewer (message ``<field>: <code>``; never a path or value)."""

    module = "sealeval.view"
    codes = frozenset(
        {
            "not_a_directory",
            "unsafe_path",
            "not_found",
            "too_large",
            "unreadable",
            "invalid_port",
            "port_unavailable",
        }
    )


@dataclass(frozen=True, slots=True)
class CatalogLimits:
    """Bounds of one scan and of one read."""

    max_depth: int = 8
    max_entries: int = 50_000
    max_items: int = 2_000
    max_file_bytes: int = 134_217_728


CATALOG_LIMITS: Final = CatalogLimits()


@dataclass(frozen=True, slots=True)
class Item:
    """One thing found: its kind and its path relative to the folder (POSIX, no ``..``)."""

    kind: str
    path: str
    size: int


@dataclass(frozen=True, slots=True)
class Catalog:
    """What a scan found, in listing order (kind, then path)."""

    items: tuple[Item, ...]
    skipped_links: int
    truncated: bool

    def find(self, kind: str, path: str) -> Item | None:
        """Return the listed item of that kind and path, else ``None`` (nothing else is served)."""
        for item in self.items:
            if item.kind == kind and item.path == path:
                return item
        return None


@contextmanager
def _closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _head(fd: int) -> bytes:
    return os.read(fd, _HEAD_BYTES)


def _file_kind(parent: int, name: bytes) -> tuple[str, int] | None:
    if not name.endswith(b".json"):
        return None
    try:
        with _closing(open_regular(name, dir_fd=parent)) as fd:
            size = os.fstat(fd).st_size
            head = _head(fd)
    except (FileSystemError, OSError):
        return None
    for match in _FORMAT_MEMBER.finditer(head):
        kind = _FILE_KINDS.get(match.group(1).decode("ascii"))
        if kind is not None:
            return kind, size
    return None


def _is_pack(directory: int) -> bool:
    try:
        with _closing(open_regular("manifest.json", dir_fd=directory)) as fd:
            return PACK_FORMAT.encode() in _head(fd)
    except (FileSystemError, OSError):
        return False


def _is_pack_entry(entry: TreeEntry) -> bool:
    try:
        with _closing(open_directory(entry.name, dir_fd=entry.dir_fd)) as fd:
            return _is_pack(fd)
    except FileSystemError:
        return False


def scan(root: str | os.PathLike[str], *, limits: CatalogLimits = CATALOG_LIMITS) -> Catalog:
    """Walk ``root`` (a real directory) and list the items found, confined and bounded.

    Raises:
        ViewError: ``not_a_directory`` (``root`` is missing, a symlink or not
            a directory).
    """
    with translated(ViewError, "directory", _ROOT_CODES, default="not_a_directory"):
        root_fd = open_directory(os.fspath(root))
    with _closing(root_fd):
        if _is_pack(root_fd):
            return Catalog((Item("pack", ".", 0),), 0, False)
    items: list[Item] = []
    links = 0
    skips = WalkSkips()

    def enter(entry: TreeEntry) -> bool:
        """Hidden folders are not searched; a pack is listed, not descended into."""
        if entry.name.startswith(b"."):
            return False
        if _is_pack_entry(entry):
            items.append(Item("pack", entry.path, 0))
            return False
        return True

    with translated(ViewError, "directory", _ROOT_CODES, default="not_a_directory"):
        walk = walk_tree(
            root,
            max_depth=limits.max_depth - 1,
            max_entries=limits.max_entries,
            follow_root=False,
            enter=enter,
            lenient=skips,
        )
        for entry in walk:
            if len(items) >= limits.max_items:
                skips.truncated = True
                break
            if entry.kind == "l":
                links += 1
            elif entry.kind == "f":
                found = _file_kind(entry.dir_fd, entry.name)
                if found is not None:
                    items.append(Item(found[0], entry.path, found[1]))
        walk.close()
    items.sort(key=lambda item: (KINDS.index(item.kind), item.path))
    return Catalog(tuple(items), links, skips.truncated)


def _parts(relative: str) -> list[str]:
    if relative == ".":
        return []
    parts = relative.split("/")
    if "\x00" in relative or any(part in ("", ".", "..") for part in parts):
        raise ViewError("unsafe_path", "path")
    return parts


@contextmanager
def open_below(root: str | os.PathLike[str], relative: str, *, directory: bool) -> Iterator[int]:
    """Yield a descriptor for ``root/relative``, opened component by component without links.

    Raises:
        ViewError: ``not_a_directory`` (``root``), ``unsafe_path`` (absolute,
            ``..``, ``.`` or empty components), ``not_found`` (missing, a link,
            or the wrong type).
    """
    parts = _parts(relative)
    with translated(ViewError, "directory", _ROOT_CODES, default="not_a_directory"):
        current = open_directory(os.fspath(root))
    with translated(ViewError, "path", _PATH_CODES, default="not_found"):
        folders = parts if directory else parts[:-1]
        current = descend(current, folders)
        if not directory and parts:
            with _closing(current):
                current = open_regular(parts[-1], dir_fd=current)
    with _closing(current):
        yield current


def read_below(
    root: str | os.PathLike[str], relative: str, *, limits: CatalogLimits = CATALOG_LIMITS
) -> bytes:
    """Read the regular file ``root/relative`` (confined, at most ``max_file_bytes``).

    Raises:
        ViewError: ``unsafe_path``, ``not_found``, ``too_large``, ``unreadable``.
    """
    with open_below(root, relative, directory=False) as fd, translated(ViewError, "path"):
        return read_fd_bounded(fd, limits.max_file_bytes)
