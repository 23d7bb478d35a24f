"""Regenerate ``invarlock/adapters.json`` with other record ids and run ids (invarlock venv).

Each case loads one file's exact bytes with ``load_run``. The regenerated case renames, with
one renaming for the whole file, every record id the shared file's runs carry and every run
id a case declares: in the declared ``run_id`` and wherever the file's text states the id as
a JSON string (``"id"``). The expected run, digests or refusal are invarlock's own output.

Formats whose reference derives the record id from an integer member
(``renaming.DERIVED_ID_FORMATS``: lm-eval's ``doc_id``, Inspect's integer sample ``id``,
promptfoo's ``testIdx`` in ``"<testIdx>:<promptIdx>"``) get that member renamed to other
distinct integers (``renaming.IntegerIds``, one renaming for the whole file), and the derived
ids must follow.

A case whose outcome would change beyond the renaming is copied unchanged and counted: a
format that states ids outside JSON strings (CSV), or a refusal that depends on the exact
id. The script prints how many.

Only the public facade ``invarlock.engine`` is used.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from invarlock.engine import load_run, run_digest
from renaming import (
    DERIVED_ID_FORMATS,
    IntegerIds,
    Rewriter,
    UnknownLayoutError,
    canonical_text,
    rename_integer_members,
)

#: A record id a derived-id format may have derived from an integer member (not renamed as text).
DERIVED_ID = re.compile(r"[0-9]+(:[0-9]+)?")

#: Keyword arguments of ``load_run`` a case may give.
OPTIONS = (
    "source",
    "run_id",
    "artifact_digest",
    "service_identity",
    "score_provenance",
    "input_projection",
)


def file_bytes(given: dict[str, Any]) -> bytes:
    """Return the exact bytes of a case's file."""
    if "file_b64" in given:
        return base64.b64decode(given["file_b64"])
    return str(given["file_text"]).encode("utf-8")


def load(given: dict[str, Any]) -> dict[str, Any]:
    """Return the expected output of one adapter case (the reference's result)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "source.data"
        path.write_bytes(file_bytes(given))
        try:
            run = load_run(
                path,
                adapter=given["adapter"],
                **{key: given[key] for key in OPTIONS if key in given},
            )
        except Exception as error:  # noqa: BLE001 - any refusal of the reference is the expected output
            return {
                "error": {"class": type(error).__name__, "exit_code": None, "message": str(error)}
            }
    return {
        "run_canonical": canonical_text(run),
        "run": run,
        "run_digest": run_digest(run),
        "source_digest": run["source_digest"],
        "record_count": len(run["records"]),
    }


def rename_text(text: str, names: dict[str, str]) -> str:
    """Return ``text`` with every JSON string ``"old"`` of ``names`` replaced by ``"new"``."""
    for old, new in names.items():
        quoted = json.dumps(old, ensure_ascii=False)
        if quoted == f'"{old}"':  # ids needing escapes are left alone
            text = text.replace(quoted, json.dumps(new, ensure_ascii=False))
    return text


def unrename(message: str, names: dict[str, str]) -> str:
    """Return ``message`` with every new name replaced by the old one."""
    for old, new in names.items():
        message = message.replace(new, old)
    return message


def rename_derived(adapter: str, data: bytes, ids: IntegerIds) -> tuple[bytes, dict[int, int]]:
    """Return ``data`` with its derived-id integers renamed, and the integers renamed.

    A file this renaming cannot write back is returned unchanged (no integers renamed).
    """
    if adapter not in DERIVED_ID_FORMATS:
        return data, {}
    renamed: dict[int, int] = {}

    def rename(old: int) -> int:
        renamed[old] = ids.integer_id(old)
        return renamed[old]

    try:
        return rename_integer_members(adapter, data, rename), renamed
    except UnknownLayoutError:
        return data, {}


def derived_names(adapter: str, old: dict[str, Any], renamed: dict[int, int]) -> dict[str, str]:
    """Return old id -> new id for the record ids derived from a renamed integer.

    lm-eval and Inspect state the integer as the id; promptfoo as ``"<testIdx>:<promptIdx>"``.
    Error messages (no run) get each renamed integer's text.
    """
    if "error" in old:
        return {str(before): str(after) for before, after in renamed.items()}
    names: dict[str, str] = {}
    for record in old["run"]["records"]:
        head, colon, tail = record["id"].partition(":")
        if adapter != "promptfoo-jsonl" and colon:
            continue
        if head.isdigit() and str(int(head)) == head and int(head) in renamed:
            names[record["id"]] = f"{renamed[int(head)]}{colon}{tail}"
    return names


def same_outcome(old: dict[str, Any], new: dict[str, Any], names: dict[str, str]) -> bool:
    """Return whether two outcomes agree up to the renaming."""
    if "error" in old or "error" in new:
        return (
            "error" in old
            and "error" in new
            and unrename(new["error"]["message"], names) == old["error"]["message"]
        )
    renamed_ids = [names.get(record["id"], record["id"]) for record in old["run"]["records"]]
    # Everything a record carries but its id (and the context quoting the file) must stay.
    facts = [
        [{k: v for k, v in record.items() if k not in ("id", "context")} for record in run]
        for run in (old["run"]["records"], new["run"]["records"])
    ]
    return (
        set(old) == set(new)
        and [record["id"] for record in new["run"]["records"]] == renamed_ids
        and facts[0] == facts[1]
        and new["run"]["run_id"] == names.get(old["run"]["run_id"], old["run"]["run_id"])
    )


def regenerate_adapters(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``adapters.json``; return (renamed, copied unchanged) case counts."""
    name = "adapters.json"
    document = json.loads((source / "invarlock" / name).read_text("utf-8"))
    rewriter = Rewriter(seed)
    ids = IntegerIds(seed)
    names: dict[str, str] = {}
    for case in document["cases"]:
        derived = case["input"]["adapter"] in DERIVED_ID_FORMATS
        for record in case["expected"].get("run", {}).get("records", []):
            if not (derived and DERIVED_ID.fullmatch(record["id"])):  # follows its integer
                names[record["id"]] = rewriter.record_id(record["id"])
    for case in document["cases"]:
        for run_id in (case["input"].get("run_id"), case["expected"].get("run", {}).get("run_id")):
            if isinstance(run_id, str) and run_id.strip() and run_id not in names:
                names[run_id] = rewriter.run_id(run_id)
    cases = []
    kept = 0
    for case in document["cases"]:
        given = case["input"]
        if load(given) != case["expected"]:
            raise SystemExit(f"invarlock/{name} {case['name']}: the reference differs")
        renamed = copy.deepcopy(given)
        if isinstance(given.get("run_id"), str):
            renamed["run_id"] = names.get(given["run_id"], given["run_id"])
        data, integers = rename_derived(given["adapter"], file_bytes(given), ids)
        if "file_b64" in given:
            text = rename_text(data.decode("utf-8", "surrogateescape"), names)
            data = text.encode("utf-8", "surrogateescape")
            renamed["file_b64"] = base64.b64encode(data).decode("ascii")
        else:
            renamed["file_text"] = rename_text(data.decode("utf-8"), names)
        expected = load(renamed)
        derived = derived_names(given["adapter"], case["expected"], integers)
        if renamed == given or not same_outcome(case["expected"], expected, {**names, **derived}):
            cases.append(case)
            kept += 1
            continue
        cases.append({"name": case["name"], "input": renamed, "expected": expected})
    generator = {**(document.get("generator") or {}), "tool": "scripts/vectors/regenerate.py"}
    generator["seed"] = seed
    regenerated = {**document, "generator": generator, "cases": cases}
    (output / "invarlock" / name).write_text(json.dumps(regenerated, indent=1) + "\n", "utf-8")
    return len(cases) - kept, kept
