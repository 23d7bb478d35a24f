"""Regenerate ``invarlock/verify.json`` on the regenerated packs (invarlock venv; its CLI only).

Runs after ``invarlock_packs.py``. For every verify case on the *published* evidence of a
pack that ``packs.json`` regenerated (``packs/alt-<seed>-<name>/``) it

1. replays the case with ``invarlock verify`` in a scratch copy of the shared pack folder
   and refuses to go on unless the exit code, JSON output, receipt file name and receipt
   bytes are the case's own;
2. writes the pack's trust folders (``trust*/``) beside the regenerated pack, each digest
   of their text files mapped to the regenerated pack's digest at the same place (run,
   request, policy digests and the signer fingerprint; a digest the pack does not hold, a
   deliberately wrong anchor, gets a fresh renamed digest), and a trust policy that was the
   pack's policy becomes the new pack's policy;
3. runs the case's command (its digests mapped the same way) on the regenerated pack and
   keeps the new outcome if the exit code, decision and errors are the same; otherwise the
   case is copied unchanged and counted.

The same holds for every case shape of the file (``SHAPES``, ``TWICE``): a verification
with its receipt, a refusal before any receipt, and two runs onto one receipt destination.

The cases on tampered copies (``packs/<main>/tampered/<name>/``) follow the same steps on
the variants ``invarlock_tamper.py`` writes beside the regenerated pack: one rule per
tamper kind, each first replayed on the shared pack (it must give the shared variant byte
for byte) and then applied to a copy of the regenerated pack's published evidence; the
command and trust profile are the case's own, so the expected outcome (exit code, error,
receipt) is the reference's verdict on the new variant.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from invarlock_packs import invarlock
from invarlock_tamper import RULES, Keys, replay_rules, restore_links, write_variants
from renaming import DIGEST, DigestRenamer

#: The verify case shapes this module regenerates (others are copied): a verification with
#: its receipt, a refusal before any receipt (with or without ``receipt_file``), and two runs
#: onto the same receipt destination (``first`` publishes it, ``second`` is refused).
RECEIPT = ("exit_code", "stdout_json", "receipt_file", "receipt", "receipt_is_canonical")
SHAPES = (set(RECEIPT), {"exit_code", "stdout_json", "receipt_file"}, {"exit_code", "stdout_json"})
TWICE = {"first", "second"}


def run_verify(command: list[str], cwd: Path, root: str) -> dict[str, Any]:
    """Run ``invarlock verify`` in ``cwd``; return the case's expected output."""
    done = subprocess.run(
        [invarlock(), *command], cwd=cwd, capture_output=True, text=True, check=False
    )
    receipt_path = cwd / command[command.index("--receipt") + 1]
    expected: dict[str, Any] = {
        "exit_code": done.returncode,
        "stdout_json": json.loads(done.stdout),
        "receipt_file": None,
        "receipt": None,
        "receipt_is_canonical": None,
    }
    if receipt_path.is_file():
        data = receipt_path.read_bytes()
        receipt = json.loads(data)
        canonical = json.dumps(receipt, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        expected["receipt_file"] = f"{root}/verify/{receipt_path.name}"
        expected["receipt"] = receipt
        expected["receipt_is_canonical"] = data in (canonical.encode(), canonical.encode() + b"\n")
    return expected


def run_case(command: list[str], cwd: Path, root: str, expected: dict[str, Any]) -> dict[str, Any]:
    """Run the case's command in ``cwd`` (twice for a ``first``/``second`` case).

    Return what the case's expected output holds of the result (its own keys).
    """
    if set(expected) == TWICE:
        runs = [run_verify(command, cwd, root) for _ in range(2)]
        return {
            part: {key: result[key] for key in expected[part]}
            for part, result in zip(("first", "second"), runs, strict=True)
        }
    result = run_verify(command, cwd, root)
    return {key: result[key] for key in expected}


def scratch_copy(pack_root: Path, command: list[str], pack_dir: str, root: str) -> Path:
    """Copy ``pack_root`` (writable, stored links restored); put the evidence where named."""
    scratch = Path(tempfile.mkdtemp(prefix="vectors-verify-")) / "pack"
    shutil.copytree(pack_root, scratch, symlinks=True)
    for path in [scratch, *scratch.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    restore_links(scratch)
    evidence = scratch / command[1]
    if not evidence.exists():
        shutil.copytree(scratch / Path(pack_dir).relative_to(root), evidence)
    return scratch


def mapped(text: str, aligned: dict[str, str], renamer: DigestRenamer) -> str:
    """Return ``text`` with every digest mapped to its aligned twin (or renamed)."""

    def one(match: Any) -> str:
        digest = match.group(0)
        return aligned.get(digest) or renamer.digest(digest)

    return DIGEST.sub(one, text)


def alignment(old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    """Return the digests of a shared pack case mapped to its regenerated twin's."""
    pairs = {
        old["anchors"][key]: new["anchors"][key]
        for key in old["anchors"]
        if isinstance(old["anchors"][key], str)
    }
    pairs[old["pack_manifest_digest"]] = new["pack_manifest_digest"]
    return pairs


def write_trust(
    shared_root: Path, new_root: Path, aligned: dict[str, str], renamer: DigestRenamer
) -> None:
    """Write the shared pack's trust folders beside the regenerated pack, digests mapped."""
    old_policy = (shared_root / "request" / "policy.json").read_bytes()
    new_policy = (new_root / "request" / "policy.json").read_bytes()
    for folder in sorted(shared_root.glob("trust*")):
        target = new_root / folder.name
        target.mkdir(mode=0o755)
        for path in sorted(folder.iterdir()):
            data = path.read_bytes()
            if data == old_policy:
                data = new_policy
            elif path.suffix == ".json":
                data = mapped(data.decode("utf-8"), aligned, renamer).encode("utf-8")
            (target / path.name).write_bytes(data)
            (target / path.name).chmod(0o644)


def same_outcome(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Return whether a renamed case kept its exit code, decision, verdict and errors."""
    if set(old) == TWICE:
        return all(same_outcome(old[part], new[part]) for part in TWICE)
    keys = ("decision", "errors", "policy_verdict", "integrity_ok", "ok", "reason")
    return old["exit_code"] == new["exit_code"] and all(
        old["stdout_json"].get(key) == new["stdout_json"].get(key) for key in keys
    )


def moved_packs(source: Path, output: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Return shared pack folder -> (regenerated pack folder, digest alignment)."""
    packs_old = json.loads((source / "invarlock" / "packs.json").read_text("utf-8"))["cases"]
    packs_new = json.loads((output / "invarlock" / "packs.json").read_text("utf-8"))["cases"]
    moved: dict[str, tuple[str, dict[str, str]]] = {}
    for old, new in zip(packs_old, packs_new, strict=True):
        old_root = str(Path(old["input"]["request_dir"]).parent)
        new_root = str(Path(new["input"]["request_dir"]).parent)
        if old_root != new_root:
            moved[old_root] = (new_root, alignment(old["expected"], new["expected"]))
    return moved


def regenerated_dir(pack_dir: str, root: str, new_root: Path) -> bool:
    """Return whether case folder ``pack_dir`` has a regenerated twin under ``new_root``.

    That is the published evidence, or a tampered copy of it written by a rule.
    """
    if pack_dir == f"{root}/evidence":
        return True
    name = pack_dir.removeprefix(f"{root}/tampered/")
    return name != pack_dir and name in RULES and (new_root / "tampered" / name).is_dir()


def regenerate_verify(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``invarlock/verify.json``; return (regenerated, copied) case counts."""
    folder = source / "invarlock"
    moved = moved_packs(source, output)
    renamer = DigestRenamer(seed)
    keys = Keys.of(output / "invarlock")
    for old_root, (new_root, aligned) in moved.items():
        write_trust(folder / old_root, output / "invarlock" / new_root, aligned, renamer)
        if (folder / old_root / "tampered").is_dir():
            replay_rules(folder / old_root, Keys.of(folder))
            write_variants(output / "invarlock" / new_root, keys)
    document = json.loads((folder / "verify.json").read_text("utf-8"))
    new_cases, regenerated, copied = [], 0, 0
    for case in document["cases"]:
        given, expected = case["input"], case["expected"]
        root = "/".join(given["pack_dir"].split("/")[:2])
        if (
            root not in moved
            or not regenerated_dir(given["pack_dir"], root, output / "invarlock" / moved[root][0])
            or not (set(expected) in SHAPES or set(expected) == TWICE)
        ):
            new_cases.append(case)
            copied += 1
            continue
        scratch = scratch_copy(folder / root, given["command"], given["pack_dir"], root)
        replayed = run_case(given["command"], scratch, root, expected)
        shutil.rmtree(scratch.parent)
        if replayed != expected:
            missed = sorted(key for key in expected if replayed.get(key) != expected[key])
            raise SystemExit(f"invarlock/verify.json {case['name']}: not reproduced: {missed}")
        new_root, aligned = moved[root]
        command = [mapped(arg, aligned, renamer) for arg in given["command"]]
        new_dir = given["pack_dir"].replace(root, new_root, 1)
        target = output / "invarlock" / new_root
        scratch = scratch_copy(target, command, new_dir, new_root)
        renewed = run_case(command, scratch, new_root, expected)
        receipt = scratch / command[command.index("--receipt") + 1]
        if not same_outcome(expected, renewed):
            shutil.rmtree(scratch.parent)
            new_cases.append(case)
            copied += 1
            continue
        if renewed.get("receipt_file"):
            (target / "verify").mkdir(mode=0o755, exist_ok=True)
            shutil.copyfile(receipt, target / "verify" / receipt.name)
            (target / "verify" / receipt.name).chmod(0o644)
        shutil.rmtree(scratch.parent)
        new_input = {**given, "pack_dir": new_dir, "command": command}
        for key in ("trust_dir", "cwd"):
            if given.get(key):
                new_input[key] = given[key].replace(root, new_root, 1)
        new_cases.append({"name": case["name"], "input": new_input, "expected": renewed})
        regenerated += 1
    generator = dict(document.get("generator") or {})
    generator.update({"tool": "scripts/vectors/invarlock_verify.py", "seed": seed})
    new_document = {**document, "generator": generator, "cases": new_cases}
    (output / "invarlock" / "verify.json").write_text(
        json.dumps(new_document, indent=1) + "\n", "utf-8"
    )
    return regenerated, copied
