"""Regenerate ``invarlock/packs.json`` with the reference's CLI (invarlock venv; no sealeval).

A pack case is ``invarlock evaluate`` (after its ``--preflight``) run inside a request
directory. For every case this module

1. replays the case: copies the shared request directory to a scratch directory, runs the
   case's command there (with the evidence signer's key as ``signer.pem``) and refuses to go
   on unless the expected output it derives (preflight and evaluate outputs, the published
   inventory and modes, manifest, checksums, anchors, normalized request) is the case's own;
2. renames the runs, runs the reference again, and writes the new request directory and
   published pack under ``packs/alt-<seed>-<name>/`` (modes normalized to 0644/0755 like
   the shared tree). Runs of the ``invarlock`` adapter are renamed here (record ids and run
   ids seeded, fewer records unless the pack has a planted defect; a policy case-set pin
   that matched the runs follows them). Runs read from other evaluators' files (native
   JSONL, hosted, projected, lm-eval samples, ragas) are renamed by ``invarlock_native.py``:
   record ids in each file wherever its format states them, run ids (and a run-digest pin)
   in ``request.yaml``, never fewer records than the policy's ``minimum_count``; if the
   fewer records change the outcome, the pack is renamed again with all of them;
3. keeps a case unchanged (and counts it) if the renamed pack's outcome (exit codes,
   decision, verdict, authentication, published files) differs, or if a file's layout is
   one the renaming does not know: renaming must not change what a case tests.

``verify.json``, ``receipts.json`` and ``report.json`` then follow the regenerated packs
(``invarlock_verify.py``, ``invarlock_receipts.py``, ``invarlock_report.py``); their cases on
tampered variants stay on the shared packs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from invarlock_native import rename_native_request, uses_native_runs
from invarlock_requests import planned_case_set_digest
from renaming import IntegerIds, Rewriter, canonical_text

#: Packs whose runs carry a planted defect at a fixed position keep their size.
KEEP_SIZE = ("missing", "tie", "pinned")
#: What a renaming must keep of a pack case's expected output.
OUTCOME = ("decision",)


def invarlock() -> str:
    """Return the reference CLI of this venv."""
    return str(Path(sys.executable).with_name("invarlock"))


def run_cli(command: list[str], cwd: Path) -> dict[str, Any]:
    """Run ``invarlock COMMAND`` in ``cwd``; return its exit code and JSON output."""
    done = subprocess.run(
        [invarlock(), *command], cwd=cwd, capture_output=True, text=True, check=False
    )
    return {"exit_code": done.returncode, "stdout_json": json.loads(done.stdout)}


def relocate(output: dict[str, Any], work: Path, root: str) -> dict[str, Any]:
    """Rewrite the printed output path as the generator did (relative to ``root``)."""
    fixed = dict(output)
    for key in ("output", "evidence"):
        if isinstance(fixed["stdout_json"].get(key), str):
            stdout = dict(fixed["stdout_json"])
            printed = Path(stdout[key])
            relative = printed.relative_to(work) if printed.is_absolute() else printed
            stdout[key] = f"{root}/{relative.as_posix()}"
            fixed["stdout_json"] = stdout
    return fixed


def inventory(evidence: Path) -> dict[str, Any]:
    """Return the published pack's files (digest, size, mode), directories and root mode."""
    files: dict[str, Any] = {}
    directories: dict[str, str] = {}
    for path in sorted(evidence.rglob("*")):
        name = path.relative_to(evidence).as_posix()
        mode = oct(stat.S_IMODE(path.lstat().st_mode))
        if path.is_dir():
            directories[name] = mode
        else:
            data = path.read_bytes()
            files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            files[name]["mode"] = mode
    return {
        "files": files,
        "directories": directories,
        "root_mode": oct(stat.S_IMODE(evidence.stat().st_mode)),
    }


def evaluate(
    request: Path, command: list[str], key: Path | None, root: str, evidence_dir: str
) -> tuple[dict[str, Any], Path]:
    """Run one pack case in a scratch copy of ``request``; return its expected and the pack."""
    scratch = Path(tempfile.mkdtemp(prefix="vectors-pack-"))
    work = scratch / "request"
    shutil.copytree(request, work)
    for path in [work, *work.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    if key is not None:
        shutil.copyfile(key, work / "signer.pem")
    preflight = run_cli([*command, "--preflight"], work)
    result = run_cli(command, work)
    output = command[command.index("--output") + 1] if "--output" in command else "evidence"
    evidence = work / output
    manifest_bytes = (evidence / "manifest.json").read_bytes()
    manifest = json.loads(manifest_bytes)
    stdout = result["stdout_json"]
    anchors = {
        name: stdout[name]
        for name in ("baseline_run_digest", "subject_run_digest", "request_digest", "policy_digest")
    }
    anchors["evidence_signer_fingerprint"] = manifest.get("signing_key_fingerprint")
    expected = {
        "evidence_dir": evidence_dir,
        "evaluate_preflight": relocate(preflight, work, root),
        "evaluate": relocate(result, work, root),
        "inventory_as_published": inventory(evidence),
        "manifest": manifest,
        "pack_manifest_digest": "sha256:" + hashlib.sha256(manifest_bytes).hexdigest(),
        "checksums_text": (evidence / "checksums.sha256").read_text("utf-8"),
        "decision": stdout.get("decision"),
        "anchors": anchors,
        "normalized_request": json.loads((evidence / "request.json").read_bytes()),
    }
    return expected, scratch


def differences(replayed: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Return the expected keys the replay does not reproduce."""
    return sorted(key for key in expected if replayed.get(key) != expected.get(key))


def outcome(expected: dict[str, Any]) -> Any:
    """Return what renaming must keep: exit codes, decision, verdict and authentication."""
    result = expected["evaluate"]["stdout_json"]
    return (
        expected["evaluate_preflight"]["exit_code"],
        expected["evaluate"]["exit_code"],
        expected["decision"],
        result.get("policy_verdict"),
        result.get("authentication"),
        sorted(expected["inventory_as_published"]["files"]),
    )


def rename_request(work: Path, rewriter: Rewriter, sizes: dict[int, int], name: str) -> None:
    """Rename the runs of request directory ``work`` in place (and a pin that matched them)."""
    runs = {}
    for side in ("baseline", "subject"):
        path = work / "inputs" / f"{side}.json"
        old = json.loads(path.read_text("utf-8"))
        count = len(old["records"])
        keep = any(marker in name for marker in KEEP_SIZE)
        size = count if keep else sizes.setdefault(count, rewriter.size(count))
        runs[side] = (old, rewriter.run(old, size))
        path.write_text(canonical_text(runs[side][1]), "utf-8")
    policy_path = work / "policy.json"
    policy = json.loads(policy_path.read_text("utf-8"))
    pin = policy.get("expected_case_set_digest")
    if pin is not None and pin == planned_case_set_digest(runs["baseline"][0]):
        policy["expected_case_set_digest"] = planned_case_set_digest(runs["baseline"][1])
        policy_path.write_text(canonical_text(policy), "utf-8")


def uses_invarlock_runs(request: Path) -> bool:
    """Return whether both runs of ``request`` are invarlock runs (renamed as documents)."""
    text = (request / "request.yaml").read_text("utf-8")
    adapters = [line.split(":", 1)[1].strip() for line in text.splitlines() if "adapter:" in line]
    return adapters == ['"invarlock"', '"invarlock"']


def publish(source: Path, target: Path, skip: tuple[str, ...] = ()) -> None:
    """Copy ``source`` to ``target`` with the shared tree's modes (0644 files, 0755 folders)."""
    shutil.copytree(source, target, ignore=lambda _folder, names: [n for n in names if n in skip])
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def regenerate_packs(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``invarlock/packs.json``; return (regenerated, copied) case counts."""
    folder = source / "invarlock"
    document = json.loads((folder / "packs.json").read_text("utf-8"))
    rewriter = Rewriter(seed)
    sizes: dict[int, int] = {}  # one new size per original size
    native_sizes: dict[int, int] = {}  # the same for evaluator files (bounded by the policy)
    ids = IntegerIds(seed)
    new_cases, regenerated, copied = [], 0, 0
    for case in document["cases"]:
        given, expected = case["input"], case["expected"]
        request = folder / given["request_dir"]
        key = folder / given["signing_key"] if given["signing_key"] else None
        root = str(Path(given["request_dir"]).parent)
        native = uses_native_runs(request)
        if not native and not uses_invarlock_runs(request):
            new_cases.append(case)
            copied += 1
            continue
        replayed, scratch = evaluate(request, given["command"], key, root, expected["evidence_dir"])
        shutil.rmtree(scratch)
        missed = differences(replayed, expected)
        if missed:
            raise SystemExit(f"invarlock/packs.json {case['name']}: not reproduced: {missed}")
        renamed_root = f"packs/alt-{seed}-{case['name']}"
        keep = any(marker in case["name"] for marker in KEEP_SIZE)
        # A native pack first tries fewer records, then (if that changed the outcome) all.
        for keep_size in (keep, True) if native and not keep else (keep,):
            staging = Path(tempfile.mkdtemp(prefix="vectors-request-")) / "request"
            publish(request, staging)
            try:
                if native:
                    rename_native_request(staging, rewriter, ids, native_sizes, keep_size)
                else:
                    rename_request(staging, rewriter, sizes, case["name"])
            except ValueError:  # a layout the renaming does not know (or not JSON at all)
                shutil.rmtree(staging.parent)
                break
            new_expected, scratch = evaluate(
                staging, given["command"], key, renamed_root, f"{renamed_root}/evidence"
            )
            if outcome(new_expected) == outcome(expected):
                break
            shutil.rmtree(scratch)
            shutil.rmtree(staging.parent)
        if not staging.exists():
            new_cases.append(case)
            copied += 1
            continue
        output_name = "evidence"
        if "--output" in given["command"]:
            output_name = given["command"][given["command"].index("--output") + 1]
        publish(staging, output / "invarlock" / renamed_root / "request")
        publish(scratch / "request" / output_name, output / "invarlock" / renamed_root / "evidence")
        shutil.rmtree(scratch)
        shutil.rmtree(staging.parent)
        new_input = {**given, "request_dir": f"{renamed_root}/request"}
        new_cases.append({"name": case["name"], "input": new_input, "expected": new_expected})
        regenerated += 1
    generator = dict(document.get("generator") or {})
    generator.update({"tool": "scripts/vectors/invarlock_packs.py", "seed": seed})
    new_document = {**document, "generator": generator, "cases": new_cases}
    (output / "invarlock" / "packs.json").write_text(
        json.dumps(new_document, indent=1) + "\n", "utf-8"
    )
    return regenerated, copied
