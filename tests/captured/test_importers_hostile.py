"""Hostile inputs to the importers (#13): container amplification, huge ZIP directories.

Each probe runs in a child process whose address space is capped, so a reader
that spends memory before refusing fails the test instead of the machine; the
child's wall time is capped too. Both bounds are generous limits, not
measurements.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sealeval.captured.importers import load_run
from sealeval.captured.importers.base import ImportRefusalError
from sealeval.captured.importers.jsonl import MAX_CONTAINERS, bound_containers
from sealeval.captured.importers.native.inspect_eval import MAX_ARCHIVE_ENTRIES
from support.digests import ARTIFACT

_ADDRESS_SPACE = 1 << 30  # 1 GiB: the undefended readers need several
_WALL_SECONDS = 120
_IDENTITY = {
    "source": {"name": "probe", "version": "1"},
    "run_id": "run-1",
    "artifact_digest": ARTIFACT,
}


def _refusal_in_child(path: Path, adapter: str) -> dict[str, str]:
    """Import ``path`` in a child process with a capped address space; return its outcome."""
    script = textwrap.dedent(
        f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({_ADDRESS_SPACE}, {_ADDRESS_SPACE}))
        from sealeval.captured.importers import load_run
        from sealeval.errors import SealevalError
        try:
            load_run(sys.argv[1], sys.argv[2], **json.loads(sys.argv[3]))
        except SealevalError as error:
            print(json.dumps({{"code": error.code, "field": error.field}}))
        except MemoryError:
            print(json.dumps({{"code": "memory_error"}}))
        else:
            print(json.dumps({{"code": "accepted"}}))
        """
    )
    identity = {} if adapter == "invarlock" else _IDENTITY
    completed = subprocess.run(
        [sys.executable, "-c", script, str(path), adapter, json.dumps(identity)],
        capture_output=True,
        timeout=_WALL_SECONDS,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    outcome: dict[str, str] = json.loads(completed.stdout.decode().strip().splitlines()[-1])
    return outcome


@pytest.fixture(scope="module")
def amplifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid 127 MiB ``{"samples":[[],[],...]}`` document (about 44 million empty arrays)."""
    path = tmp_path_factory.mktemp("amplify") / "log.json"
    count = (127 << 20) // 3
    path.write_bytes(b'{"samples":[' + b"[]," * count + b"[]]}")
    return path


@pytest.mark.parametrize(
    "adapter",
    [
        "inspect-json",  # the strict decoder of the specified adapters
        "evaluator-json",
        "lm-eval-log-samples",  # the importers' NaN-tolerant decoder (native formats)
        "pydantic-evals-report",
        "auto",
    ],
)
def test_container_amplification_is_refused_in_bounded_memory(
    amplifier: Path, adapter: str
) -> None:
    outcome = _refusal_in_child(amplifier, adapter)
    if adapter == "auto":  # no format claims it: refused before any decoding
        assert outcome["code"] in {"unknown_format", "too_large"}
    else:  # the whole document, or its one line for JSONL readers
        assert outcome["code"] == "too_large"
        assert outcome["field"] in {"file", "line[1]"}


def test_container_bound_counts_outside_strings_only() -> None:
    brackets = "[{" * MAX_CONTAINERS
    bound_containers(json.dumps({"text": brackets}).encode(), "file")  # in a string
    bound_containers(json.dumps({"text": '"' + brackets}).encode(), "file")  # escaped quote
    many = json.dumps({"k": [[]] * (MAX_CONTAINERS + 1)}).encode()
    with pytest.raises(ImportRefusalError) as refused:
        bound_containers(many, "line[3]")
    assert (refused.value.code, refused.value.field) == ("too_large", "line[3]")
    escaped = json.dumps({'k"': [[]] * (MAX_CONTAINERS + 1)}).encode()
    with pytest.raises(ImportRefusalError):
        bound_containers(escaped, "file")
    bound_containers(json.dumps({"k": [[]] * (MAX_CONTAINERS - 2)}).encode(), "file")


def test_a_line_of_many_containers_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    good = json.dumps({"id": "a", "input": "x", "expected": None, "output": "y", "scores": {}})
    path.write_bytes(
        good.encode() + b'\n{"id": "b", "context": [' + b"[]," * MAX_CONTAINERS + b"[]]}\n"
    )
    with pytest.raises(ImportRefusalError) as refused:
        load_run(path, "jsonl", **_IDENTITY)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.field) == ("too_large", "line[2]")


def _central_entry() -> bytes:
    """One central-directory entry of an empty stored member with an empty name (46 bytes)."""
    return b"PK\x01\x02" + bytes(42)


def _crafted_zip(path: Path, entries: int, stated_entries: int | None = None) -> Path:
    """A ZIP of ``entries`` empty central-directory entries, built with one repetition."""
    local = b"PK\x03\x04" + struct.pack("<5H3I2H", 20, 0, 0, 0, 0, 0, 0, 0, 11, 0) + b"header.json"
    directory = _central_entry() * entries
    stated = entries if stated_entries is None else stated_entries
    end = b"PK\x05\x06" + struct.pack(
        "<4H2IH", 0, 0, min(stated, 0xFFFF), min(stated, 0xFFFF), len(directory), len(local), 0
    )
    with path.open("wb") as handle:
        handle.write(local)
        handle.write(directory)
        handle.write(end)
    return path


def test_eval_archive_of_millions_of_entries_is_refused(tmp_path: Path) -> None:
    """About 2.2 million entries (a 100 MiB directory): refused from the end record."""
    path = _crafted_zip(tmp_path / "log.eval", (100 << 20) // 46)
    assert _refusal_in_child(path, "inspect-eval") == {"code": "too_large", "field": "file"}
    assert _refusal_in_child(path, "auto") == {"code": "too_large", "field": "file"}


def test_eval_archive_understating_its_entries_is_refused(tmp_path: Path) -> None:
    """The end record says one entry; the directory walk counts the rest."""
    path = _crafted_zip(tmp_path / "log.eval", MAX_ARCHIVE_ENTRIES + 1, stated_entries=1)
    assert _refusal_in_child(path, "inspect-eval") == {"code": "too_large", "field": "file"}


def test_eval_archive_within_the_caps_reaches_the_member_checks(tmp_path: Path) -> None:
    path = _crafted_zip(tmp_path / "log.eval", 3)
    with pytest.raises(ImportRefusalError) as refused:
        load_run(path, "inspect-eval", **_IDENTITY)  # type: ignore[arg-type]
    assert refused.value.code in {"invalid_archive", "incomplete_run"}
