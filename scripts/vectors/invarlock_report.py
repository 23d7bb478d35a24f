"""Regenerate ``invarlock/report.json`` on the regenerated packs (invarlock venv; its CLI only).

Runs after ``invarlock_packs.py``. For every report case on a pack that ``packs.json``
regenerated it replays the case with ``invarlock report`` in a scratch copy of the shared
pack folder (exit code, JSON output, the output files' names and the JUnit text must be the
case's own), runs the same command on the regenerated pack (``packs/alt-<seed>-<name>/``),
writes the rendered files under its ``report/`` folder and keeps the new outcome if the
exit code and the report's ``ok`` and ``errors`` are the same (else the case is copied).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from invarlock_packs import invarlock
from invarlock_verify import moved_packs, scratch_copy

#: command option -> the expected member naming the rendered file.
OUTPUTS = {"--markdown": "markdown_file", "--junit": "junit_file", "--html": "html_file"}


def run_report(command: list[str], cwd: Path, root: str) -> dict[str, Any]:
    """Run ``invarlock report`` in ``cwd``; return the case's expected output."""
    done = subprocess.run(
        [invarlock(), *command], cwd=cwd, capture_output=True, text=True, check=False
    )
    expected: dict[str, Any] = {
        "exit_code": done.returncode,
        "stdout_json": json.loads(done.stdout),
    }
    for option, member in OUTPUTS.items():
        if option not in command:
            continue
        path = cwd / command[command.index(option) + 1]
        expected[member] = f"{root}/report/{path.name}" if path.is_file() else None
        if option == "--junit":
            expected["junit_text"] = path.read_text("utf-8") if path.is_file() else None
    return expected


def regenerate_report(source: Path, output: Path, seed: int) -> tuple[int, int]:
    """Regenerate ``invarlock/report.json``; return (regenerated, copied) case counts."""
    folder = source / "invarlock"
    moved = moved_packs(source, output)
    document = json.loads((folder / "report.json").read_text("utf-8"))
    new_cases, regenerated, copied = [], 0, 0
    for case in document["cases"]:
        given, expected = case["input"], case["expected"]
        root = "/".join(given["pack_dir"].split("/")[:2])
        if root not in moved or given["pack_dir"] != f"{root}/evidence":
            new_cases.append(case)
            copied += 1
            continue
        scratch = scratch_copy(folder / root, given["command"], given["pack_dir"], root)
        replayed = run_report(given["command"], scratch, root)
        shutil.rmtree(scratch.parent)
        if replayed != expected:
            missed = sorted(key for key in expected if replayed.get(key) != expected[key])
            raise SystemExit(f"invarlock/report.json {case['name']}: not reproduced: {missed}")
        new_root = moved[root][0]
        target = output / "invarlock" / new_root
        scratch = scratch_copy(target, given["command"], f"{new_root}/evidence", new_root)
        renewed = run_report(given["command"], scratch, new_root)
        kept = ("ok", "errors", "failed_output")
        if renewed["exit_code"] != expected["exit_code"] or any(
            renewed["stdout_json"].get(key) != expected["stdout_json"].get(key) for key in kept
        ):
            shutil.rmtree(scratch.parent)
            new_cases.append(case)
            copied += 1
            continue
        (target / "report").mkdir(mode=0o755, exist_ok=True)
        for option in OUTPUTS:
            if option in given["command"]:
                path = scratch / given["command"][given["command"].index(option) + 1]
                if path.is_file():
                    shutil.copyfile(path, target / "report" / path.name)
                    (target / "report" / path.name).chmod(0o644)
        shutil.rmtree(scratch.parent)
        new_input = {**given, "pack_dir": f"{new_root}/evidence"}
        new_cases.append({"name": case["name"], "input": new_input, "expected": renewed})
        regenerated += 1
    generator = dict(document.get("generator") or {})
    generator.update({"tool": "scripts/vectors/invarlock_report.py", "seed": seed})
    new_document = {**document, "generator": generator, "cases": new_cases}
    (output / "invarlock" / "report.json").write_text(
        json.dumps(new_document, indent=1) + "\n", "utf-8"
    )
    return regenerated, copied
