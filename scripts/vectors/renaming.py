"""Seeded, consistent renaming used by the vector regenerators (no reference import).

The regenerators (``regenerate.py`` in the invarlock venv, ``regenerate_openmed.py`` in the
openmed venv) rewrite a vector case's *inputs* -- record ids, run ids, metric names, digests --
and then ask the reference for the expected output. This module holds only the renaming, so a
fast test of the suite (``tests/test_vector_regenerator.py``) can check its properties without
either reference installed: the same seed gives the same names, distinct names stay distinct,
a renamed digest is still a well-formed digest and a malformed one is left as it is. It also
renames the record ids of other evaluators' files (``rename_native``: JSONL, lm-eval samples,
a native evaluator JSON export) with their layout kept, for ``invarlock_native.py``.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from typing import Any

#: A well-formed digest (the only form both references accept): renamed consistently.
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def canonical_text(document: Any) -> str:
    """Return invarlock's canonical JSON text (sorted keys, compact, UTF-8, one newline)."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


class Rewriter:
    """Consistent, seeded renaming of record ids, run ids and metric names."""

    def __init__(self, seed: int) -> None:
        """Start an empty renaming drawn from ``seed``."""
        self.seed = seed
        self.random = random.Random(seed)
        self.ids: dict[str, str] = {}
        self.runs: dict[str, str] = {}
        self.metrics: dict[str, str] = {}

    def record_id(self, old: str) -> str:
        """Return the new id of record ``old`` (the same for every run and case)."""
        if old not in self.ids:
            taken = set(self.ids.values())
            new = old
            while new == old or new in taken:  # distinct ids stay distinct
                new = f"item-{self.seed}-{self.random.randrange(16**6):06x}"
            self.ids[old] = new
        return self.ids[old]

    def run_id(self, old: str) -> str:
        """Return the new run id of run ``old``."""
        return self.runs.setdefault(old, f"{old}-s{self.seed}")

    def metric(self, old: str) -> str:
        """Return the new name of metric ``old``."""
        return self.metrics.setdefault(old, f"{old}_s{self.seed}")

    def size(self, count: int) -> int:
        """Return another record count for a run of ``count`` records (small runs keep theirs)."""
        if count < 3:
            return count
        # Another size: between half and all-but-one of the records, seeded.
        return self.random.randrange(count // 2 + 1, count)

    def run(self, document: dict[str, Any], size: int | None = None) -> dict[str, Any]:
        """Return run ``document`` renamed and cut to its first ``size`` records (all if None)."""
        new = copy.deepcopy(document)
        new["run_id"] = self.run_id(document["run_id"])
        records = new["records"] if size is None else new["records"][:size]
        new["records"] = [{**record, "id": self.record_id(record["id"])} for record in records]
        return new

    def policy(self, policy: dict[str, Any]) -> dict[str, Any]:
        """Return ``policy`` with every metric renamed."""
        new = copy.deepcopy(policy)
        for metric in new.get("metrics", []):
            metric["name"] = self.metric(metric["name"])
        return new


class DigestRenamer:
    """Consistent, seeded renaming of every well-formed ``sha256:`` digest in a document."""

    def __init__(self, seed: int) -> None:
        """Start an empty renaming drawn from ``seed``."""
        self.random = random.Random(f"digests-{seed}")
        self.digests: dict[str, str] = {}

    def digest(self, old: str) -> str:
        """Return the new digest of ``old`` (a new, distinct, well-formed digest)."""
        if old not in self.digests:
            taken = set(self.digests.values())
            new = old
            while new == old or new in taken:
                new = "sha256:" + self.random.randbytes(32).hex()
            self.digests[old] = new
        return self.digests[old]

    def rename(self, value: Any, keep: Callable[[str], bool] | None = None) -> Any:
        """Return ``value`` with every string that is exactly a well-formed digest renamed.

        Malformed digests (upper-case, short, prefixed differently) are left unchanged, so a
        refusal case stays the refusal it was; ``keep`` names digests that must not change.
        """
        if isinstance(value, dict):
            return {key: self.rename(item, keep) for key, item in value.items()}
        if isinstance(value, list):
            return [self.rename(item, keep) for item in value]
        if isinstance(value, str) and DIGEST.fullmatch(value):
            if keep is not None and keep(value):
                return value
            return self.digest(value)
        return value


def strings_in(value: Any) -> set[str]:
    """Return every string in ``value`` (keys and values), for checks that ids did not leak."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            found |= strings_in(item)
    elif isinstance(value, list):
        for item in value:
            found |= strings_in(item)
    elif isinstance(value, str):
        found.add(value)
    return found


class IntegerIds:
    """Consistent, seeded renaming of integer record ids (lm-eval's ``doc_id``)."""

    def __init__(self, seed: int) -> None:
        """Start an empty renaming drawn from ``seed`` (its own stream: other draws stay put)."""
        self.random = random.Random(f"integer-ids-{seed}")
        self.ids: dict[int, int] = {}

    def integer_id(self, old: int) -> int:
        """Return the new id of ``old``: a distinct non-negative integer, never ``old`` itself."""
        if old not in self.ids:
            taken = set(self.ids.values())
            new = old
            while new == old or new in taken:
                new = self.random.randrange(10**6)
            self.ids[old] = new
        return self.ids[old]


def bounded_size(rewriter: Rewriter, count: int, floor: int) -> int:
    """Return another record count for ``count`` records, never below ``floor``.

    Like ``Rewriter.size`` (between half and all-but-one of the records, seeded by the
    rewriter), but a run whose policy needs ``floor`` records keeps at least that many; when
    no smaller size fits, the run keeps its size. A run already below ``floor`` (a pack that
    tests too few records) shrinks like any other.
    """
    if count < floor:
        return rewriter.size(count)
    low = max(count // 2 + 1, floor)
    if count < 3 or low >= count:
        return count
    return rewriter.random.randrange(low, count)


class UnknownLayoutError(ValueError):
    """An evaluator file this renaming cannot rewrite without changing more than its ids."""


#: How an evaluator format states its record ids: adapter -> (layout, id member, id type).
#: ``lines`` is one JSON object a line (JSONL); ``array`` is one JSON list of objects.
NATIVE_FORMATS: dict[str, tuple[str, str, type]] = {
    "jsonl": ("lines", "id", str),
    "lm-eval-samples": ("lines", "doc_id", int),
    "evaluator-native-json": ("array", "id", str),
}


def _dumper(document: Any, text: str) -> Callable[[Any], str]:
    """Return the ``json.dumps`` settings that write ``document`` as exactly ``text``."""
    for separators in ((", ", ": "), (",", ":")):
        for ensure_ascii in (False, True):

            def dump(value: Any, s: tuple[str, str] = separators, a: bool = ensure_ascii) -> str:
                return json.dumps(value, separators=s, ensure_ascii=a)

            if dump(document) == text:
                return dump
    raise UnknownLayoutError("a layout json.dumps does not reproduce")


def _renamed_record(record: Any, member: str, kind: type, rename: Callable[[Any], Any]) -> Any:
    """Return ``record`` (a JSON object) with its id member renamed; refuse another shape."""
    if not isinstance(record, dict) or member not in record:
        raise UnknownLayoutError("a record without its id member")
    value = record[member]
    if type(value) is not kind:  # bool is not an int id
        raise UnknownLayoutError("an id of another type")
    return {**record, member: rename(value)}


def native_record_count(adapter: str, data: bytes) -> int:
    """Return how many records an evaluator file of ``adapter`` holds."""
    layout = NATIVE_FORMATS[adapter][0]
    text = data.decode("utf-8")
    if layout == "lines":
        return sum(1 for line in text.split("\n") if line.strip())
    document = json.loads(text)
    if not isinstance(document, list):
        raise UnknownLayoutError("not a JSON list")
    return len(document)


def rename_native(
    adapter: str, data: bytes, rename: Callable[[Any], Any], size: int | None = None
) -> bytes:
    """Return evaluator file ``data`` with every record id renamed and the first ``size`` kept.

    ``adapter`` names the format (``NATIVE_FORMATS``); ``rename`` maps an old id to its new
    one (``Rewriter.record_id`` for string ids, ``IntegerIds.integer_id`` for lm-eval's
    ``doc_id``). Everything else of each record is kept, and so is the file's layout (key
    order, separators, escaping, the final newline); a layout ``json.dumps`` cannot write
    back, a blank line inside JSONL, or a record without its id raises ``UnknownLayoutError``, so
    the caller copies the case instead of changing what it tests.
    """
    layout, member, kind = NATIVE_FORMATS[adapter]
    text = data.decode("utf-8")
    if layout == "lines":
        ending = "\n" if text.endswith("\n") else ""
        lines = text[: len(text) - len(ending)].split("\n")
        if any(not line.strip() for line in lines):
            raise UnknownLayoutError("a blank line inside JSONL")
        kept = lines if size is None else lines[:size]
        renamed = []
        for line in kept:
            record = json.loads(line)
            dump = _dumper(record, line)
            renamed.append(dump(_renamed_record(record, member, kind, rename)))
        return ("\n".join(renamed) + ending).encode("utf-8")
    ending = "\n" if text.endswith("\n") else ""
    body = text[: len(text) - len(ending)]
    document = json.loads(body)
    if not isinstance(document, list):
        raise UnknownLayoutError("not a JSON list")
    dump = _dumper(document, body)
    kept_records = document if size is None else document[:size]
    return (
        dump([_renamed_record(record, member, kind, rename) for record in kept_records]) + ending
    ).encode("utf-8")


#: Evaluator formats whose record id the reference derives from an integer member (found by
#: comparing a case's file with its expected run): adapter -> (layout, member). lm-eval's id is
#: ``doc_id``; Inspect's is the sample's ``id`` when it is an integer (a string ``id`` is
#: renamed as a JSON string); promptfoo's is ``"<testIdx>:<promptIdx>"`` unless the test
#: states ``invarlock_id``. ``samples`` is one JSON object whose ``samples`` list holds them.
DERIVED_ID_FORMATS: dict[str, tuple[str, str]] = {
    "lm-eval-samples": ("lines", "doc_id"),
    "inspect-json": ("samples", "id"),
    "promptfoo-jsonl": ("lines", "testIdx"),
}


def _renamed_integer(record: Any, member: str, rename: Callable[[int], int]) -> Any:
    """Return ``record`` with ``member`` renamed if it is an integer (not a bool); else as is."""
    if isinstance(record, dict) and type(record.get(member)) is int:
        return {**record, member: rename(record[member])}
    return record


def rename_integer_members(adapter: str, data: bytes, rename: Callable[[int], int]) -> bytes:
    """Return evaluator file ``data`` with each record's integer id member renamed.

    ``adapter`` names the format (``DERIVED_ID_FORMATS``); ``rename`` maps an old integer to
    its new one (``IntegerIds.integer_id``). Unlike ``rename_native`` a record whose member is
    missing or not an integer is left as it is (a refusal case tests exactly that), and every
    record is kept. The layout is kept as ``rename_native`` keeps it; a file that is not
    UTF-8 JSON in the format's layout, or whose layout ``json.dumps`` cannot write back,
    raises ``UnknownLayoutError`` so the caller copies the case unchanged.
    """
    layout, member = DERIVED_ID_FORMATS[adapter]
    try:
        text = data.decode("utf-8")
        ending = "\n" if text.endswith("\n") else ""
        body = text[: len(text) - len(ending)]
        if layout == "lines":
            renamed = []
            for line in body.split("\n"):
                if not line.strip():
                    raise UnknownLayoutError("a blank line inside JSONL")
                record = json.loads(line)
                renamed.append(_dumper(record, line)(_renamed_integer(record, member, rename)))
            return ("\n".join(renamed) + ending).encode("utf-8")
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnknownLayoutError("not JSON in the format's layout") from error
    if not isinstance(document, dict) or not isinstance(document.get("samples"), list):
        raise UnknownLayoutError("not an object with a samples list")
    dump = _dumper(document, body)
    samples = [_renamed_integer(sample, member, rename) for sample in document["samples"]]
    return (dump({**document, "samples": samples}) + ending).encode("utf-8")
