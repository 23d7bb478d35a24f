"""#13 item 2: a FIFO named as an input never blocks a command; it is refused at once.

Each command runs in a real process with a time limit: before the fix every
one of them blocked forever in ``open()`` on the FIFO (``session run`` while
holding the ledger usage lock).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

COMPONENT_FLAGS = (
    "container",
    "model",
    "policy",
    "post-processing",
    "prompt",
    "threshold",
    "tokenizer",
    "tool-inventory",
)
LIMIT_SECONDS = 60


def _sealeval(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "sealeval", *args],
            capture_output=True,
            text=True,
            timeout=LIMIT_SECONDS,
            cwd=cwd,
            env=environment,
            check=False,
        )
    except subprocess.TimeoutExpired:  # pragma: no cover - the defect this test guards
        pytest.fail("the command blocked on a FIFO")


def _demo_artifacts(destination: Path) -> Path:
    source = resources.files("sealeval") / "_data" / "demo" / "artifacts"
    with resources.as_file(source) as path:
        shutil.copytree(path, destination)
    return destination


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "prompt.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", ["file", "auto"])
def test_manifest_digest_refuses_a_fifo(tmp_path: Path, fifo: Path, kind: str) -> None:
    result = _sealeval(["manifest", "digest", kind, str(fifo)], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "sealeval: error: path: not_regular_file"


def _component_args(artifacts: Path, prompt: Path) -> list[str]:
    args: list[str] = []
    for flag in COMPONENT_FLAGS:
        name = flag.replace("-", "_")
        candidates = [p for p in artifacts.iterdir() if p.stem == name]
        path = prompt if name == "prompt" else candidates[0]
        args += [f"--{flag}", str(path)]
    return args


def test_manifest_seal_refuses_a_fifo_prompt(tmp_path: Path, fifo: Path) -> None:
    artifacts = _demo_artifacts(tmp_path / "artifacts")
    args = _component_args(artifacts, fifo)
    result = _sealeval(["manifest", "seal", *args, "-o", str(tmp_path / "m.json")], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "sealeval: error: prompt: not_regular_file"
    assert not (tmp_path / "m.json").exists()


def test_manifest_verify_refuses_a_fifo_prompt(tmp_path: Path, fifo: Path) -> None:
    artifacts = _demo_artifacts(tmp_path / "artifacts")
    good = _component_args(artifacts, artifacts / "prompt.txt")
    sealed = _sealeval(["manifest", "seal", *good, "-o", str(tmp_path / "m.json")], tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    result = _sealeval(
        ["manifest", "verify", str(tmp_path / "m.json"), *_component_args(artifacts, fifo)],
        tmp_path,
    )
    assert result.returncode == 2  # an input error, not "not eligible" (1)
    assert result.stderr.strip() == "sealeval: error: prompt: not_regular_file"


def test_session_run_refuses_a_fifo_prompt_and_releases_the_lock(tmp_path: Path) -> None:
    source = resources.files("sealeval") / "_data" / "demo" / "session"
    with resources.as_file(source) as path:
        folder = Path(shutil.copytree(path, tmp_path / "session"))
    prompt = folder / "workflow" / "prompt.txt"
    prompt.unlink()
    os.mkfifo(prompt)
    result = _sealeval(["session", "run", str(folder / "attempt-1.yaml")], tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    # the session's closed code for a component that cannot be digested
    assert result.stderr.strip() == "sealeval: error: verification_failed"
    lock = folder / "ledger-usage.json.lock"
    if lock.exists():  # the lock was taken and must have been released
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
