"""The adapter registry: every importer by name, and recognition by content (``auto``).

:func:`importers` maps each adapter name to its importer: the specified
adapters (:data:`SPECIFIED_ADAPTERS`, spec ``11-adapters.md``) first, then the
native formats of :mod:`sealeval.captured.importers.native`.
:func:`detect_adapter` recognises a file's format for ``adapter="auto"``.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import (
    DETECT_BYTES,
    WIDE_DETECT_BYTES,
    Importer,
    ImportRefusalError,
)
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
    "FALLBACKS",
    "SPECIFIED_ADAPTERS",
    "WIDE_DETECT_BYTES",
    "adapter_names",
    "check_fits",
    "detect_adapter",
    "detect_candidates",
    "detect_folder",
    "get_importer",
    "importers",
    "is_folder",
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
#: For ``adapter="auto"``: a specified adapter, and the native reader of the same
#: files that reads what the specified one refuses (several filters, multiple-choice
#: outputs, list targets, several epochs). Detection claims the specified adapter;
#: the pipeline reads the file with the native one when the specified one refuses it.
FALLBACKS: Final = {
    "lm-eval-samples": "lm-eval-log-samples",
    "inspect-json": "inspect-log-json",
    "promptfoo-jsonl": "promptfoo-results",
}


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


def _matches(head: bytes, target: Path) -> list[str]:
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
    return matches


def _detect(path: str | os.PathLike[str]) -> tuple[list[str], bytes]:
    """Return the adapters that recognise the file and the leading bytes they saw."""
    target = Path(path)
    with open_source(path) as handle:
        try:
            head = handle.read(DETECT_BYTES)
            matches = _matches(head, target)
            if not matches and len(head) == DETECT_BYTES:
                wider = head + handle.read(WIDE_DETECT_BYTES - DETECT_BYTES)
                if len(wider) > len(head):
                    head = wider
                    matches = _matches(head, target)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
    return matches, head


def detect_candidates(path: str | os.PathLike[str]) -> list[str]:
    """Return every adapter that recognises the file (in registry order).

    Detectors see the first :data:`DETECT_BYTES` bytes; when none recognises
    them and the file is longer, they see the first :data:`WIDE_DETECT_BYTES`
    (formats whose identifying members can come after a long block, such as
    an lm-eval results file with a large ``configs`` member).
    """
    return _detect(path)[0]


def _unknown_remedy(head: bytes) -> str | None:
    """Return the remedy of a file no adapter reads, when its shape is a known dead end."""
    from sealeval.captured.importers.native.deepeval_test_run import (  # noqa: PLC0415
        uploaded_only,  # import cycle: the native package imports this registry
    )

    return "deepeval_uploaded" if uploaded_only(head) else None


def detect_adapter(path: str | os.PathLike[str]) -> str:
    """Recognise a file's format from its content (see :func:`detect_candidates`).

    Raises:
        ImportRefusalError: ``unknown_format`` (no importer recognises it;
            marked ``deepeval_uploaded`` for a DeepEval file holding only the
            link of a run uploaded to Confident AI), ``ambiguous_format``
            (several do), ``importer_failed`` (a detector raised), or a file
            refusal (``not_found``, …).
    """
    matches, head = _detect(path)
    if not matches:
        raise ImportRefusalError("unknown_format", "adapter", remedy=_unknown_remedy(head))
    if len(matches) > 1:
        raise refuse("ambiguous_format", "adapter")
    return matches[0]


#: Adapters that read files other adapters claim (a named one is never a mismatch).
_READS_OTHERS_FILES: Final = frozenset(
    {
        "lm-eval-log-samples",  # lm-eval >= 0.4.3 JSONL (claimed by lm-eval-samples)
        "inspect-log-json",  # Inspect JSON logs (claimed by inspect-json)
        "promptfoo-results",  # promptfoo JSONL (claimed by promptfoo-jsonl)
        "evaluator-native-json",  # an evaluator's raw file, mapped by --source's profile
        "unsafe-langfuse-experiment-result",  # langfuse-experiment-result's files
    }
)


def check_fits(adapter: str, path: str | os.PathLike[str]) -> None:
    """Refuse a named adapter that does not recognise a file another adapter recognises.

    The refusal is ``adapter_mismatch`` with the field ``adapter[<name>]``
    naming the adapter that recognises the file (never the file's content).
    A file no adapter recognises is left to the named adapter, whose own
    refusal names the defect.
    """
    importer = get_importer(adapter)
    if is_folder(path):
        if not callable(getattr(importer, "recognises", None)):
            raise refuse("not_regular_file", "file")
        return
    with open_source(path) as handle:
        try:
            head = handle.read(DETECT_BYTES)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
    try:
        fits = importer.detect(head, Path(path)) is True
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - a detector's exception may quote input
        raise refuse("importer_failed", "adapter") from None
    if fits or adapter in _READS_OTHERS_FILES:
        return
    others = [name for name in detect_candidates(path) if name != adapter]
    if len(others) == 1:
        raise refuse("adapter_mismatch", f"adapter[{others[0]}]")


def is_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory itself (a symlink to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def detect_folder(path: str | os.PathLike[str]) -> str:
    """Recognise an output folder (lm-eval ``--output_path``, Inspect logs) for ``auto``."""
    matches = [
        name
        for name, importer in importers().items()
        if callable(getattr(importer, "recognises", None)) and importer.recognises(Path(path))
    ]
    if not matches:
        raise refuse("unknown_format", "adapter")
    if len(matches) > 1:
        raise refuse("ambiguous_format", "adapter")
    return matches[0]


def resolve(adapter: str, path: str | os.PathLike[str]) -> tuple[str, Any]:
    """Return the adapter name and importer for ``adapter`` (``auto``: detected)."""
    if adapter == AUTO:
        name = detect_folder(path) if is_folder(path) else detect_adapter(path)
    else:
        name = adapter
    return name, get_importer(name)
