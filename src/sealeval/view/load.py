"""Read a listed item with the project's own readers, from confined descriptors.

Runs go through :func:`sealeval.captured.run.parse_run`, packs through
:func:`sealeval.captured.pack_reader.read_evidence_pack` (the examination
verification performs, reference decision order first, then sealeval's
width-first order; large run files kept as facts, ``runs="outline"``: the
pages stream them again), receipts through
:func:`sealeval.captured.receipt.parse_receipt`, comparison reports through
the strict JSON decoder (displayed, not re-validated: they are shown as
found and say so). A failure is a closed code, never content.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval.canonical import decode
from sealeval.captured.pack_reader import UNCAPPED_PACK_LIMITS, EvidencePack, read_evidence_pack
from sealeval.captured.receipt import parse_receipt
from sealeval.captured.run import Run, parse_run
from sealeval.errors import SealevalError
from sealeval.view.catalog import CATALOG_LIMITS, CatalogLimits, Item, open_below, read_below

__all__ = ["Loaded", "Loader"]

_CACHED: Final = 8


@dataclass(frozen=True, slots=True)
class Loaded:
    """An item's content (``value``) or the closed code that refused it (``error``)."""

    item: Item
    value: Any
    error: str | None


class Loader:
    """Read items below one folder; the last few read items are kept (keyed by file identity)."""

    def __init__(
        self, root: str | os.PathLike[str], limits: CatalogLimits = CATALOG_LIMITS
    ) -> None:
        """Bind the loader to ``root`` (every read is confined to it)."""
        self._root = os.fspath(root)
        self._limits = limits
        self._cache: OrderedDict[tuple[Any, ...], Loaded] = OrderedDict()

    def _identity(self, item: Item) -> tuple[Any, ...]:
        directory = item.kind == "pack"
        with open_below(self._root, item.path, directory=directory) as fd:
            info = os.fstat(fd)
            if directory:
                try:
                    manifest = os.stat("manifest.json", dir_fd=fd, follow_symlinks=False)
                except OSError:
                    manifest = info
                return (item, info.st_ino, manifest.st_ino, manifest.st_mtime_ns, manifest.st_size)
            return (item, info.st_ino, info.st_mtime_ns, info.st_size)

    def load(self, item: Item) -> Loaded:
        """Read ``item`` (or return the cached reading of the unchanged file)."""
        try:
            key = self._identity(item)
        except SealevalError as error:
            return Loaded(item, None, error.code)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        try:
            loaded = Loaded(item, self._read(item), None)
        except SealevalError as error:
            loaded = Loaded(item, None, error.code)
        self._cache[key] = loaded
        while len(self._cache) > _CACHED:
            self._cache.popitem(last=False)
        return loaded

    def _read(self, item: Item) -> Any:
        if item.kind == "pack":
            return self._pack(item)
        data = read_below(self._root, item.path, limits=self._limits)
        if item.kind == "run":
            return parse_run(data)
        document = decode(data)
        if item.kind == "receipt":
            return parse_receipt(document)
        return document

    def _pack(self, item: Item) -> EvidencePack:
        path = Path(self._root) / item.path
        try:
            return read_evidence_pack(path, limits=UNCAPPED_PACK_LIMITS, runs="outline")
        except SealevalError:
            return read_evidence_pack(
                path, limits=UNCAPPED_PACK_LIMITS, decision_order="width_first", runs="outline"
            )


def run_summary(run: Run) -> dict[str, Any]:
    """Return the facts a run page shows (identities and digests, no record content)."""
    return {
        "run_id": run.run_id,
        "source": f"{run.source.name} {run.source.version}",
        "run_digest": run.digest,
        "artifact_digest": run.artifact_digest,
        "source_digest": run.source_digest,
        "records": len(run.records),
    }
