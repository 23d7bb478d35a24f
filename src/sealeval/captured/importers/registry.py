"""The adapter registry: every importer by name, and recognition by content (``auto``).

:func:`importers` maps each adapter name to its importer: the specified
adapters (:data:`SPECIFIED_ADAPTERS`, spec ``11-adapters.md``) first, then the
native formats of :mod:`sealeval.captured.importers.native`.
:func:`detect_adapter` recognises a file's format for ``adapter="auto"``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import DETECT_BYTES, Importer
from sealeval.captured.importers.evaluator_json import (
    EvaluatorJsonImporter,
    EvaluatorNativeJsonImporter,
)
from sealeval.captured.importers.inspect_json import InspectJsonImporter
from sealeval.captured.importers.invarlock_doc import InvarlockImporter
from sealeval.captured.importers.jsonl import JsonlImporter, open_source, refuse
from sealeval.captured.importers.langfuse_json import LangfuseJsonImporter
from sealeval.captured.importers.lm_eval_samples import LmEvalSamplesImporter
from sealeval.captured.importers.promptfoo_jsonl import PromptfooJsonlImporter
from sealeval.errors import SealevalError

__all__ = [
    "AUTO",
    "SPECIFIED_ADAPTERS",
    "adapter_names",
    "detect_adapter",
    "get_importer",
    "importers",
    "resolve",
]

#: ``adapter="auto"``: recognise the format from the file's content.
AUTO: Final = "auto"
#: The adapters of the specification, in its order.
SPECIFIED_ADAPTERS: Final = (
    "invarlock",
    "jsonl",
    "inspect-json",
    "lm-eval-samples",
    "promptfoo-jsonl",
    "langfuse-json",
    "evaluator-json",
    "evaluator-native-json",
)


def _specified() -> tuple[Any, ...]:
    return (
        InvarlockImporter(),
        JsonlImporter(),
        InspectJsonImporter(),
        LmEvalSamplesImporter(),
        PromptfooJsonlImporter(),
        LangfuseJsonImporter(),
        EvaluatorJsonImporter(),
        EvaluatorNativeJsonImporter(),
    )


def _native() -> tuple[Importer, ...]:
    """Return the native formats (``sealeval.captured.importers.native.NATIVE_IMPORTERS``)."""
    from sealeval.captured.importers.native import NATIVE_IMPORTERS  # noqa: PLC0415 - import cycle

    return tuple(NATIVE_IMPORTERS)


@functools.cache
def importers() -> Mapping[str, Any]:
    """Every importer by adapter name: the specified adapters, then the native formats."""
    registry: dict[str, Any] = {importer.name: importer for importer in _specified()}
    for importer in _native():
        if not isinstance(importer, Importer) or importer.name in registry:
            raise RuntimeError("native importer missing or duplicating an adapter name")
        if importer.name == AUTO:
            raise RuntimeError("an importer cannot be named 'auto'")
        registry[importer.name] = importer
    return registry


def adapter_names() -> tuple[str, ...]:
    """Every adapter name ``load_run`` accepts (without ``"auto"``)."""
    return tuple(importers())


def get_importer(adapter: str) -> Any:
    """Return the importer of an adapter name (``unknown_adapter`` otherwise)."""
    importer = importers().get(adapter) if type(adapter) is str else None
    if importer is None:
        raise refuse("unknown_adapter", "adapter")
    return importer


def detect_adapter(path: str | os.PathLike[str]) -> str:
    """Recognise a file's format from its first :data:`DETECT_BYTES` bytes.

    Raises:
        ImportRefusalError: ``unknown_format`` (no importer recognises it),
            ``ambiguous_format`` (several do), ``importer_failed`` (a
            detector raised), or a file refusal (``not_found``, …).
    """
    with open_source(path) as handle:
        try:
            head = handle.read(DETECT_BYTES)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "source") from None
    target = Path(path)
    matches: list[str] = []
    for name, importer in importers().items():
        try:
            found = importer.detect(head, target)
        except SealevalError:
            raise
        except Exception:  # noqa: BLE001 - a detector's exception may quote input
            raise refuse("importer_failed", "adapter") from None
        if found is True:
            matches.append(name)
    if not matches:
        raise refuse("unknown_format", "adapter")
    if len(matches) > 1:
        raise refuse("ambiguous_format", "adapter")
    return matches[0]


def resolve(adapter: str, path: str | os.PathLike[str]) -> tuple[str, Any]:
    """Return the adapter name and importer for ``adapter`` (``auto``: detected)."""
    name = detect_adapter(path) if adapter == AUTO else adapter
    return name, get_importer(name)
