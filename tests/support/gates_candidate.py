"""Candidate-runner recipes shared by the gates and CLI tests.

Moved out of ``test_gates_candidate.py`` so that no test module imports another."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.vectors import PROJECT_ROOT, load

VECTORS = "openmed/candidate_runner.json"


SCRIPT = PROJECT_ROOT / "scripts" / "release" / "agent_release_gate.py"


def _case(name: str) -> dict[str, Any]:
    for case in load(VECTORS)["cases"]:
        if case["name"] == name:
            return case  # type: ignore[no-any-return]
    raise LookupError(name)


RECIPE = _case("recipe")


HEAD = RECIPE["expected"]["head_sha"]


KEY = bytes.fromhex(RECIPE["input"]["signing_key_hex"])


READY = _case("ready")


def runner_env(workspace: Path) -> dict[str, str]:
    """The recipe's runner_env for ``workspace`` (ceiling = its parent directory)."""
    env = dict(RECIPE["input"]["recipe"]["runner_env"])
    env["GIT_CEILING_DIRECTORIES"] = str(workspace.parent)
    return env


def subprocess_env(workspace: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("GIT_")}
    env.update(runner_env(workspace))
    return env


def git(workspace: Path, cwd: str, *args: str, env: dict[str, str] | None = None) -> str:
    recipe = RECIPE["input"]["recipe"]
    full = {**subprocess_env(workspace), **recipe["git_env"], **(env or {})}
    completed = subprocess.run(
        ["git", *args], cwd=workspace / cwd, env=full, check=True, capture_output=True
    )
    return completed.stdout.decode("utf-8").strip()


def build_recipe(workspace: Path) -> None:
    """Apply the recipe's ordered steps in the empty directory ``workspace``."""
    workspace.mkdir(parents=True)
    for step in RECIPE["input"]["recipe"]["steps"]:
        target = workspace / step.get("path", ".")
        if step["op"] == "mkdir":
            target.mkdir(parents=True)
        elif step["op"] == "write":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(step["content"].encode("utf-8"))
        elif step["op"] == "git":
            git(workspace, step["cwd"], *step["args"], env=step.get("env"))
        else:
            pytest.fail("vector case shape not understood")


def fresh(template: Path, parent: Path) -> Path:
    """A fresh copy of the recipe workspace under ``parent`` (itself the git ceiling)."""
    workspace = parent / "ws"
    parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template, workspace, symlinks=True)
    return workspace
