"""#13 item 9: one output rule for every writer -- no write through a symlinked folder.

Each command used to follow a symlinked parent folder to write outside the
place the user named; now every writer goes through ``sealeval._fs`` and
refuses with a closed code (exit 2), writing nothing anywhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sealeval.captured.receipt import ReceiptError, publish_receipt
from sealeval.cli import cli

COMPONENT_FILES = (
    "container",
    "model",
    "policy",
    "post-processing",
    "prompt",
    "threshold",
    "tokenizer",
)


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """``work/linked`` is a symlink to ``outside``; return (linked folder, outside)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "linked").symlink_to(outside)
    return work / "linked", outside


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code, result.output


def test_manifest_seal_output(tmp_path: Path, linked: tuple[Path, Path]) -> None:
    folder, outside = linked
    args = ["manifest", "seal"]
    for name in COMPONENT_FILES:
        (tmp_path / name).write_bytes(name.encode())
        args += [f"--{name}", str(tmp_path / name), "--kind", name.replace("-", "_") + "=file"]
    args += ["--digest", "tool_inventory=sha256:" + "a" * 64]
    code, output = _run([*args, "-o", str(folder / "manifest.json")])
    assert code == 2
    assert output.strip().endswith("output: unsafe_destination")
    assert list(outside.iterdir()) == []
    code, _ = _run([*args, "-o", str(tmp_path / "work" / "manifest.json")])
    assert code == 0
    assert (tmp_path / "work" / "manifest.json").is_file()


def test_gates_run_suite_output(linked: tuple[Path, Path]) -> None:
    folder, outside = linked
    code, output = _run(
        ["gates", "run-suite", "recovery", "--source-sha", "a" * 40, "-o", str(folder / "e.json")]
    )
    assert code == 2
    assert "unsafe_destination" in output
    assert list(outside.iterdir()) == []


def test_evaluate_keygen(linked: tuple[Path, Path]) -> None:
    folder, outside = linked
    code, output = _run(["evaluate", "--keygen", str(folder / "keys")])
    assert code == 2
    assert "unsafe_destination" in output
    assert list(outside.iterdir()) == []


def test_receipt_publication(linked: tuple[Path, Path]) -> None:
    folder, outside = linked
    with pytest.raises(ReceiptError) as caught:
        publish_receipt(folder / "deeper" / "receipt.json", b"{}\n")
    assert caught.value.code == "publication_failed"
    with pytest.raises(ReceiptError) as caught:
        publish_receipt(folder / "receipt.json", b"{}\n")
    assert caught.value.code == "publication_failed"
    assert list(outside.iterdir()) == []
