"""Component digests: a file, a directory tree, a configuration document.

Every helper streams file contents through SHA-256 in fixed-size chunks, so
memory does not grow with file size. The directory walk and the encoding of
its entries are specified in ``docs/decisions/component-digests.md``; in short:

* the tree digest is SHA-256 over the header line ``sealeval.tree_digest.v1``
  followed by one canonical JSON line per entry (directories, regular files
  with size, content digest and executable bit, and symlinks that stay inside
  the tree, recorded by their resolved target, never followed);
* entries are visited depth first, siblings in the byte order of their UTF-8
  names, a directory before its contents; paths use ``/``;
* a symlink whose target leaves the tree, a dangling symlink, a special file
  (FIFO, socket, device) or a name that is not UTF-8 is refused;
* a file that changes while it is read is refused.

A configuration document (JSON or YAML) is parsed strictly and digested in
the openmed canonical form, so formatting, key order and the choice between
JSON and YAML do not change its digest.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Literal

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


def _hash_open_file(fd: int, hasher: Any, buffer: bytearray) -> int:
    """Feed an open file into ``hasher``; return the number of bytes read."""
    view = memoryview(buffer)
    total = 0
    while True:
        count = os.readv(fd, [view])
        if count == 0:
            return total
        hasher.update(view[:count])
        total += count


def _file_sha256(
    path: str | bytes | os.PathLike[str], *, follow_symlinks: bool, buffer: bytearray
) -> tuple[str, int, bool]:
    """Return (hex digest, size, executable) of a regular file, refusing changes."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ComponentDigestError("not_found", "path") from None
    except OSError:
        raise ComponentDigestError("unreadable", "path") from None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise ComponentDigestError("not_regular_file", "path")
        hasher = hashlib.sha256()
        try:
            size = _hash_open_file(fd, hasher, buffer)
        except OSError:
            raise ComponentDigestError("unreadable", "path") from None
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if (
        size != before.st_size
        or after.st_size != before.st_size
        or after.st_mtime_ns != before.st_mtime_ns
        or after.st_ino != before.st_ino
    ):
        raise ComponentDigestError("file_changed", "path")
    executable = bool(before.st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    return hasher.hexdigest(), size, executable


def digest_file(path: str | os.PathLike[str]) -> str:
    """Return ``sha256:<hex>`` of a regular file's bytes, streamed.

    Raises:
        ComponentDigestError: ``not_found``, ``not_regular_file``,
            ``unreadable`` or ``file_changed`` (field ``path``).
    """
    hex_digest, _, _ = _file_sha256(path, follow_symlinks=True, buffer=bytearray(CHUNK_SIZE))
    return "sha256:" + hex_digest


def _utf8_name(name: bytes) -> str:
    try:
        return name.decode("utf-8")
    except UnicodeDecodeError:
        raise ComponentDigestError("undecodable_name", "path") from None


def _subtree(
    directory: bytes, prefix: str, root_prefix: bytes, buffer: bytearray
) -> Iterator[list[Any]]:
    """Yield the entries below ``directory`` in walk order (see module docstring)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        raise ComponentDigestError("unreadable", "path") from None
    for name in names:
        absolute = os.path.join(directory, name)
        relative = prefix + _utf8_name(name)
        try:
            info = os.lstat(absolute)
        except OSError:
            raise ComponentDigestError("file_changed", "path") from None
        if stat.S_ISLNK(info.st_mode):
            target = os.path.realpath(absolute)
            if target + b"/" == root_prefix:
                yield ["l", relative, "."]
                continue
            if not target.startswith(root_prefix):
                raise ComponentDigestError("symlink_escapes_tree", "path")
            if not os.path.lexists(target):
                raise ComponentDigestError("dangling_symlink", "path")
            yield ["l", relative, _utf8_name(target[len(root_prefix) :])]
        elif stat.S_ISDIR(info.st_mode):
            yield ["d", relative]
            yield from _subtree(absolute, relative + "/", root_prefix, buffer)
        elif stat.S_ISREG(info.st_mode):
            hex_digest, size, executable = _file_sha256(
                absolute, follow_symlinks=False, buffer=buffer
            )
            if size != info.st_size:
                raise ComponentDigestError("file_changed", "path")
            yield ["f", relative, size, "sha256:" + hex_digest, executable]
        else:
            raise ComponentDigestError("special_file", "path")


def digest_tree(path: str | os.PathLike[str]) -> str:
    """Return the tree digest of a directory (see the module docstring).

    The root itself may be named through a symlink (it is resolved once);
    inside the tree symlinks are recorded, never followed.

    Raises:
        ComponentDigestError: ``not_found``, ``not_directory``,
            ``symlink_escapes_tree``, ``dangling_symlink``, ``special_file``,
            ``undecodable_name``, ``unreadable`` or ``file_changed``.
    """
    return digest_tree_entries(_walk_tree(path))


def _walk_tree(path: str | os.PathLike[str]) -> Iterator[list[Any]]:
    root = os.path.realpath(os.fsencode(os.fspath(path)))
    if not os.path.lexists(root):
        raise ComponentDigestError("not_found", "path")
    if not os.path.isdir(root):
        raise ComponentDigestError("not_directory", "path")
    root_prefix = root.rstrip(b"/") + b"/"
    return _subtree(root, "", root_prefix, bytearray(CHUNK_SIZE))


def tree_entries(path: str | os.PathLike[str]) -> tuple[tuple[Any, ...], ...]:
    """Return the entries :func:`digest_tree` hashes, in walk order, from one walk.

    Each entry is ``("d", path)``, ``("f", path, size, "sha256:<hex>",
    executable)`` or ``("l", path, target)``. Pass them to
    :func:`digest_tree_entries` to get the tree digest of the same walk (the
    model-signature check compares the files and seals the digest without
    reading the tree twice).

    Raises:
        ComponentDigestError: as :func:`digest_tree`.
    """
    return tuple(tuple(entry) for entry in _walk_tree(path))


def digest_tree_entries(entries: Iterable[Sequence[Any]]) -> str:
    """Return the tree digest of entries in walk order (see :func:`tree_entries`)."""
    hasher = hashlib.sha256(TREE_DIGEST_HEADER)
    for entry in entries:
        hasher.update(encode_openmed(list(entry)).encode("ascii") + b"\n")
    return "sha256:" + hasher.hexdigest()


def _read_bounded(path: Path, limit: int) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigDocumentError("not_found", "path") from None
    except OSError:
        raise ConfigDocumentError("unreadable", "path") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigDocumentError("not_regular_file", "path")
    if info.st_size > limit:
        raise ConfigDocumentError("too_large", "path")
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        raise ConfigDocumentError("unreadable", "path") from None
    if len(data) > limit:
        raise ConfigDocumentError("too_large", "path")
    return data


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
