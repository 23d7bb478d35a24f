"""Compute a fresh component snapshot from paths and precomputed digests.

Each governed component is digested by one *kind* of helper:

========================  ====================================================
kind                      digest
========================  ====================================================
``file``                  SHA-256 of the file's bytes
``tree``                  the tree digest of a directory
``auto``                  ``tree`` for a directory, else ``file``
``config``                canonical digest of a strictly parsed JSON/YAML file
``tool-inventory``        digest of the canonical, PHI-safe tool inventory
========================  ====================================================

Defaults: ``policy`` and ``threshold`` are ``config``, ``tool_inventory`` is
``tool-inventory``, every other component is ``auto``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Literal, get_args

from sealeval.canonical import is_digest
from sealeval.errors import ComponentDigestError, ManifestError, SealevalError
from sealeval.manifest.components import (
    digest_config_document,
    digest_file,
    digest_tree,
    load_config_document,
)
from sealeval.manifest.sealed import COMPONENTS
from sealeval.manifest.tool_inventory import build_tool_inventory

__all__ = [
    "DEFAULT_KINDS",
    "KINDS",
    "ComponentKind",
    "digest_component",
    "digest_tool_inventory_file",
    "snapshot_components",
]

ComponentKind = Literal["auto", "file", "tree", "config", "tool-inventory"]
KINDS: Final[tuple[str, ...]] = get_args(ComponentKind)
DEFAULT_KINDS: Final[Mapping[str, ComponentKind]] = {
    "container": "auto",
    "model": "auto",
    "policy": "config",
    "post_processing": "auto",
    "prompt": "auto",
    "threshold": "config",
    "tokenizer": "auto",
    "tool_inventory": "tool-inventory",
}


def digest_tool_inventory_file(path: str | os.PathLike[str]) -> str:
    """Return the digest of the canonical tool inventory described by a JSON/YAML file."""
    return build_tool_inventory(load_config_document(path)).digest


def _auto(path: str | os.PathLike[str]) -> str:
    return digest_tree(path) if Path(path).is_dir() else digest_file(path)


_HELPERS: Final[Mapping[str, Callable[[str | os.PathLike[str]], str]]] = {
    "auto": _auto,
    "file": digest_file,
    "tree": digest_tree,
    "config": digest_config_document,
    "tool-inventory": digest_tool_inventory_file,
}


def digest_component(kind: str, path: str | os.PathLike[str]) -> str:
    """Digest one component with the named kind of helper.

    Raises:
        ComponentDigestError: ``unknown_kind`` or any helper refusal.
        ConfigDocumentError, ToolInventoryError: from the config helpers.
    """
    helper = _HELPERS.get(kind)
    if helper is None:
        raise ComponentDigestError("unknown_kind", "kind")
    return helper(path)


def snapshot_components(
    paths: Mapping[str, str | os.PathLike[str]],
    digests: Mapping[str, str] | None = None,
    kinds: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Build a component snapshot from paths (digested now) and given digests.

    A component may be given at most once, either as a path or as a digest;
    components given neither are absent from the snapshot (verification then
    reports them as incomplete).

    Raises:
        ManifestError: ``invalid_keys`` (unknown or doubly given component) or
            ``invalid_digest`` (a given digest is malformed).
        SealevalError: a helper's refusal, re-raised with the component name
            as its field.
    """
    digests = digests or {}
    kinds = kinds or {}
    known = set(COMPONENTS)
    if set(paths) - known or set(digests) - known or set(kinds) - known:
        raise ManifestError("invalid_keys", "component_digests")
    if set(paths) & set(digests):
        raise ManifestError("invalid_keys", "component_digests")
    snapshot: dict[str, str] = {}
    for name in COMPONENTS:
        if name in digests:
            if not is_digest(digests[name]):
                raise ManifestError("invalid_digest", f"component_digests.{name}")
            snapshot[name] = digests[name]
        elif name in paths:
            kind = kinds.get(name, DEFAULT_KINDS[name])
            try:
                snapshot[name] = digest_component(kind, paths[name])
            except SealevalError as error:
                # Re-raise naming the component (a fixed vocabulary), not the path.
                raise type(error)(error.code, name) from None
    return snapshot
