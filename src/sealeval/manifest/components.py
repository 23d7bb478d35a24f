"""Component digests: a file, a directory tree, a configuration document.

Every helper streams file contents through SHA-256 in fixed-size chunks, so
memory does not grow with file size. The directory walk and the encoding of
its entries are specified in ``docs/decisions/component-digests.md``; in short:

* the tree digest is SHA-256 over the header line ``sealeval.tree_digest.v1``
  followed by one canonical JSON line per entry (directories, regular files
  with size, content digest and executable bit, and symlinks that stay inside
  the tree, recorded by their resolved target and their link text, never
  followed);
* entries are visited depth first, siblings in the byte order of their UTF-8
  names, a directory before its contents; paths use ``/``;
* a symlink whose target leaves the tree, a dangling symlink, a symlink loop,
  a special file (FIFO, socket, device) or a name that is not UTF-8 is refused;
* a file that changes while it is read is refused (ctime included);
* the walk itself is :func:`sealeval._fs.walk_tree`: directory descriptors,
  iterative, bounded depth and entry count (:class:`TreeLimits`).

A configuration document (JSON or YAML) is parsed strictly and digested in
the openmed canonical form, so formatting, key order and the choice between
JSON and YAML do not change its digest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from sealeval._fs import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ENTRIES,
    FileSystemError,
    digest_regular,
    read_regular,
    translated,
    walk_tree,
)
from sealeval.canonical import DecodeLimits, decode, digest_openmed, encode_openmed
from sealeval.errors import (
    CanonicalError,
    ComponentDigestError,
    ConfigDocumentError,
    YamlError,
)
from sealeval.strict_yaml import YamlLimits, load_strict_yaml

__all__ = [
    "CHUNK_SIZE",
    "CONFIG_MAX_BYTES",
    "TREE_DIGEST_HEADER",
    "ConfigFormat",
    "TreeLimits",
    "digest_config_document",
    "digest_file",
    "digest_tree",
    "digest_tree_entries",
    "load_config_document",
    "tree_entries",
]

CHUNK_SIZE: Final = 1 << 20
TREE_DIGEST_HEADER: Final = b"sealeval.tree_digest.v1\n"
CONFIG_MAX_BYTES: Final = 16 * 1024 * 1024
ConfigFormat = Literal["json", "yaml"]
_CONFIG_SUFFIXES: Final[dict[str, ConfigFormat]] = {
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
}


@dataclass(frozen=True, slots=True)
class TreeLimits:
    """Bounds of a tree digest walk (``too_deep`` / ``too_many_entries`` beyond them)."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_entries: int = DEFAULT_MAX_ENTRIES


_FILE_RENAMES: Final[dict[str, str]] = {"too_large": "unreadable"}
_TREE_RENAMES: Final[dict[str, str]] = {
    "not_regular_file": "file_changed",  # a listed file replaced by something else
}


def digest_file(path: str | os.PathLike[str]) -> str:
    """Return ``sha256:<hex>`` of a regular file's bytes, streamed.

    A path naming a symlink is followed (the user named it); the open never
    blocks, so a FIFO, socket or device is refused before anything is read.

    Raises:
        ComponentDigestError: ``not_found``, ``not_regular_file``,
            ``unreadable`` or ``file_changed`` (field ``path``).
    """
    with translated(ComponentDigestError, "path", _FILE_RENAMES):
        return "sha256:" + digest_regular(path, follow_symlinks=True).hex


def _tree_lines(root: str | os.PathLike[str], limits: TreeLimits) -> Iterator[list[Any]]:
    """Yield the entry arrays of a tree in walk order (see module docstring)."""
    buffer = bytearray(CHUNK_SIZE)
    for entry in walk_tree(root, max_depth=limits.max_depth, max_entries=limits.max_entries):
        if entry.kind == "d":
            yield ["d", entry.path]
        elif entry.kind == "l":
            yield ["l", entry.path, entry.link_target, entry.link_text]
        else:
            found = digest_regular(
                entry.name, dir_fd=entry.dir_fd, expected=entry.info, buffer=buffer
            )
            if found.size != entry.info.st_size:
                raise FileSystemError("file_changed", "path")
            yield ["f", entry.path, found.size, "sha256:" + found.hex, found.executable]


def digest_tree(path: str | os.PathLike[str], *, limits: TreeLimits | None = None) -> str:
    """Return the tree digest of a directory (see the module docstring).

    The root itself may be named through a symlink (it is resolved once);
    inside the tree every directory is opened by descriptor without following
    links, symlinks are recorded (resolved target and link text), never
    followed. The walk is iterative and bounded by ``limits``.

    Raises:
        ComponentDigestError: ``not_found``, ``not_directory``,
            ``symlink_escapes_tree``, ``dangling_symlink``, ``symlink_loop``,
            ``special_file``, ``undecodable_name``, ``too_deep``,
            ``too_many_entries``, ``unreadable`` or ``file_changed``.
    """
    with translated(ComponentDigestError, "path", _TREE_RENAMES):
        return digest_tree_entries(_tree_lines(path, limits or TreeLimits()))


def tree_entries(
    path: str | os.PathLike[str], *, limits: TreeLimits | None = None
) -> tuple[tuple[Any, ...], ...]:
    """Return the entries :func:`digest_tree` hashes, in walk order, from one walk.

    Each entry is ``("d", path)``, ``("f", path, size, "sha256:<hex>",
    executable)`` or ``("l", path, target, link text)``. Pass them to
    :func:`digest_tree_entries` to get the tree digest of the same walk (the
    model-signature check compares the files and seals the digest without
    reading the tree twice).

    Raises:
        ComponentDigestError: as :func:`digest_tree`.
    """
    with translated(ComponentDigestError, "path", _TREE_RENAMES):
        return tuple(tuple(entry) for entry in _tree_lines(path, limits or TreeLimits()))


def digest_tree_entries(entries: Iterable[Sequence[Any]]) -> str:
    """Return the tree digest of entries in walk order (see :func:`tree_entries`)."""
    hasher = hashlib.sha256(TREE_DIGEST_HEADER)
    for entry in entries:
        hasher.update(encode_openmed(list(entry)).encode("ascii") + b"\n")
    return "sha256:" + hasher.hexdigest()


def _read_bounded(path: Path, limit: int) -> bytes:
    """Read a configuration document (a named symlink is followed; FIFOs never block)."""
    with translated(ConfigDocumentError, "path", {"file_changed": "unreadable"}):
        return read_regular(path, limit=limit, follow_symlinks=True)


def load_config_document(
    path: str | os.PathLike[str],
    *,
    format: ConfigFormat | None = None,
) -> Any:
    """Strictly load a JSON or YAML configuration document.

    The format comes from ``format`` or else from the suffix (``.json``,
    ``.yaml``, ``.yml``).

    Raises:
        ConfigDocumentError: ``not_found``, ``not_regular_file``,
            ``too_large``, ``unknown_format``, ``unreadable`` or
            ``invalid_document`` (field ``path``).
    """
    source = Path(path)
    chosen = format or _CONFIG_SUFFIXES.get(source.suffix.lower())
    if chosen not in ("json", "yaml"):
        raise ConfigDocumentError("unknown_format", "path")
    data = _read_bounded(source, CONFIG_MAX_BYTES)
    try:
        if chosen == "json":
            return decode(data, limits=DecodeLimits(max_bytes=CONFIG_MAX_BYTES))
        return load_strict_yaml(data, limits=YamlLimits(max_bytes=CONFIG_MAX_BYTES))
    except (CanonicalError, YamlError):
        raise ConfigDocumentError("invalid_document", "path") from None


def digest_config_document(
    path: str | os.PathLike[str],
    *,
    format: ConfigFormat | None = None,
) -> str:
    """Return the openmed canonical digest of a strictly parsed JSON/YAML document."""
    value = load_config_document(path, format=format)
    try:
        return digest_openmed(value)
    except CanonicalError:
        raise ConfigDocumentError("invalid_document", "path") from None
