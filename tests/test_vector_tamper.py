"""scripts/vectors/invarlock_tamper.py: the tamper rules behind `make vectors-alt`, no reference.

`make vectors-alt` rewrites the tampered copies of verify.json's main pack by applying one
rule per tamper kind to the regenerated pack (docs/vectors.md). What can be checked without
the reference venv is checked here: every rule, applied to the untampered pack of the
vector tree (shared or regenerated), gives that tree's variant byte for byte, the receipt
rule gives the tree's forged receipt, and the replay guard refuses a variant it does not
reproduce (so a drifted rule stops the regeneration instead of writing a wrong vector).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

from support.scripts import load_script
from support.vectors import PROJECT_ROOT, load, vectors_dir

SCRIPTS = PROJECT_ROOT / "scripts" / "vectors"
V = vectors_dir() / "invarlock"


@pytest.fixture(scope="module")
def tamper() -> ModuleType:
    # The script imports its sibling ``renaming`` by that name, as the regenerator runs it.
    load_script("renaming", SCRIPTS / "renaming.py")
    return load_script("vectors_invarlock_tamper", SCRIPTS / "invarlock_tamper.py")


def _tampered_roots() -> list[str]:
    """The pack folders whose tampered copies verify.json's cases name."""
    return sorted(
        {
            case["input"]["pack_dir"].split("/tampered/")[0]
            for case in load("invarlock/verify.json")["cases"]
            if "/tampered/" in case["input"]["pack_dir"]
        }
    )


def test_the_vectors_tamper_with_a_pack() -> None:
    assert _tampered_roots()


@pytest.mark.parametrize("root", _tampered_roots())
def test_every_rule_reproduces_its_variant(tamper: ModuleType, root: str) -> None:
    variants = sorted(path.name for path in (V / root / "tampered").iterdir())
    assert variants == sorted(tamper.RULES)  # one rule per tamper kind, no more
    tamper.replay_rules(V / root, tamper.Keys.of(V))  # raises SystemExit on any difference
    tamper.replay_receipt_rules(V / root)


@pytest.mark.parametrize("root", _tampered_roots())
def test_replay_refuses_a_variant_it_does_not_make(
    tamper: ModuleType, root: str, tmp_path: Path
) -> None:
    copy = tmp_path / "pack"
    for folder in ("evidence", "tampered"):
        shutil.copytree(V / root / folder, copy / folder, symlinks=True)
    tamper.normalize_modes(copy)
    (copy / "tampered" / "extra-file" / "notes.txt").write_bytes(b"bye\n")
    with pytest.raises(SystemExit, match="extra-file"):
        tamper.replay_rules(copy, tamper.Keys.of(V))


@pytest.mark.parametrize("root", _tampered_roots())
def test_a_new_variant_without_a_rule_stops_the_replay(
    tamper: ModuleType, root: str, tmp_path: Path
) -> None:
    copy = tmp_path / "pack"
    for folder in ("evidence", "tampered"):
        shutil.copytree(V / root / folder, copy / folder, symlinks=True)
    tamper.normalize_modes(copy)
    (copy / "tampered" / "swapped-runs").mkdir()
    with pytest.raises(SystemExit, match="without a rule"):
        tamper.replay_rules(copy, tamper.Keys.of(V))


def test_stored_links_round_trip(tamper: ModuleType, tmp_path: Path) -> None:
    """A link is stored as a plain file holding its target and restored as the same link."""
    variant = tmp_path / "symlinked-payload"
    (variant / "records").mkdir(parents=True)
    (variant / "records" / "request-real.json").write_bytes(b"{}\n")
    (variant / "request.json").symlink_to("records/request-real.json")
    tamper.store_links(tmp_path)
    assert not (variant / "request.json").is_symlink()
    assert (variant / "request.json").read_text("utf-8") == "records/request-real.json"
    tamper.restore_links(tmp_path)
    assert (variant / "request.json").is_symlink()
    assert (variant / "request.json").read_bytes() == b"{}\n"
