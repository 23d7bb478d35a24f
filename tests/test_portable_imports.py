"""Every command imports and runs where ``fcntl`` does not exist (Windows); portable locks."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading
import time
import tomllib
import types
from pathlib import Path

import pytest

from sealeval import _fs, _lock
from sealeval.cli import COMMANDS
from support.vectors import PROJECT_ROOT

# Loaded before anything else in the child: ``import fcntl`` raises ImportError there.
_NO_FCNTL = "import sys\nsys.modules['fcntl'] = None\n"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(_NO_FCNTL, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(shim)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_shim_really_removes_fcntl(tmp_path: Path) -> None:
    result = _run(tmp_path, "-c", "import fcntl")
    assert result.returncode == 1
    assert "import of fcntl halted" in result.stderr


def test_every_command_imports_and_helps_without_fcntl(tmp_path: Path) -> None:
    script = (
        "import importlib, sys\n"
        "from click.testing import CliRunner\n"
        "from sealeval.cli import COMMANDS, cli\n"
        "for module, _ in COMMANDS.values():\n"
        "    importlib.import_module(module)\n"
        "assert 'fcntl' not in sys.modules or sys.modules['fcntl'] is None\n"
        "for name in sorted(COMMANDS):\n"
        "    result = CliRunner().invoke(cli, [name, '--help'], prog_name='sealeval')\n"
        "    assert result.exit_code == 0, name\n"
        "    assert result.stdout.startswith('Usage: sealeval ' + name), name\n"
        "print(len(COMMANDS))\n"
    )
    result = _run(tmp_path, "-c", script)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(len(COMMANDS))


def test_a_real_command_runs_without_fcntl(tmp_path: Path) -> None:
    (tmp_path / "prompt.txt").write_text("Answer briefly.\n", encoding="utf-8")
    result = _run(tmp_path, "-m", "sealeval", "manifest", "digest", "file", "prompt.txt")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().startswith("sha256:")


def test_locks_without_any_backend_refuse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_lock, "_BACKENDS", ("no_such_locking_module",))
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="no file-locking facility"):
            _lock.lock_exclusive(fd)
    finally:
        os.close(fd)


def test_lock_is_exclusive_across_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    second = os.open(path, os.O_RDWR)
    try:
        _lock.lock_exclusive(first)
        with pytest.raises(BlockingIOError):
            _lock.lock_exclusive(second)
        _lock.unlock(first)
        _lock.lock_exclusive(second)
        _lock.unlock(second)
    finally:
        os.close(first)
        os.close(second)


def test_a_waiting_lock_is_taken_once_released(tmp_path: Path) -> None:
    assert _lock.process_locks() is hasattr(os, "geteuid")  # flock on POSIX
    holder = _fs.open_lock_file(tmp_path / "lock", create=True)
    waiter = _fs.open_lock_file(tmp_path / "lock")  # its own open file description
    try:
        _lock.lock_exclusive(holder)
        taken = threading.Event()

        def wait_for_it() -> None:
            _lock.lock_exclusive(waiter, wait=True)
            taken.set()

        thread = threading.Thread(target=wait_for_it)
        thread.start()
        time.sleep(0.05)
        assert not taken.is_set()  # still waiting while the holder keeps the lock
        _lock.unlock(holder)
        thread.join(timeout=10)
        assert taken.is_set()
        with pytest.raises(BlockingIOError):
            _lock.lock_exclusive(holder)  # now the waiter holds it
    finally:
        os.close(waiter)
        os.close(holder)


def test_no_backend_means_no_process_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lock, "_BACKENDS", ("no_such_locking_module",))
    assert _lock.process_locks() is False


def test_classifiers_list_exactly_the_interpreters_ci_tests() -> None:
    """pyproject's Python classifiers = the suite's 3.11 plus the Makefile's matrix."""
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    prefix = "Programming Language :: Python :: 3."
    listed = {
        "3." + c.removeprefix(prefix)
        for c in project["project"]["classifiers"]
        if c.startswith(prefix)
    }
    makefile = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8")
    matrix_line = next(line for line in makefile.splitlines() if line.startswith("MATRIX_PYTHONS"))
    tested = {"3.11"} | {
        ".".join(part.split(".")[:2])
        for part in matrix_line.split("/")
        if part[:1].isdigit() and part.count(".") == 2
    }
    assert listed == tested == {"3.11", "3.12", "3.13"}


def test_windows_locking_backend_maps_a_held_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[int, int]] = []
    held = {"now": False}

    def locking(fd: int, mode: int, size: int) -> None:
        assert size == 1
        calls.append((fd, mode))
        if mode == 1 and held["now"]:
            raise PermissionError(errno.EACCES, "held")
        held["now"] = mode == 1

    fake = types.SimpleNamespace(LK_NBLCK=1, LK_UNLCK=0, locking=locking)
    monkeypatch.setitem(sys.modules, "fake_msvcrt", fake)
    monkeypatch.setattr(_lock, "_BACKENDS", ("fake_msvcrt",))
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _lock.lock_exclusive(fd)
        with pytest.raises(BlockingIOError):
            _lock.lock_exclusive(fd)
        _lock.unlock(fd)
        _lock.lock_exclusive(fd)
    finally:
        os.close(fd)
    assert [mode for _, mode in calls] == [1, 1, 0, 1]


def test_windows_locking_backend_passes_other_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def locking(_fd: int, _mode: int, _size: int) -> None:
        raise OSError(errno.EBADF, "bad")

    monkeypatch.setitem(
        sys.modules, "fake_msvcrt", types.SimpleNamespace(LK_NBLCK=1, locking=locking)
    )
    monkeypatch.setattr(_lock, "_BACKENDS", ("fake_msvcrt",))
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError) as caught:
            _lock.lock_exclusive(fd)
        assert caught.value.errno == errno.EBADF
        assert not isinstance(caught.value, BlockingIOError)
    finally:
        os.close(fd)


def test_make_test_stops_at_once_naming_missing_system_packages(tmp_path: Path) -> None:
    """Not root: `make sysdeps` prints one line naming what to install, and fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n", encoding="utf-8")
    (bin_dir / "id").chmod(0o755)
    for tool in ("ls", "sh"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    make = shutil.which("make")
    assert make is not None
    result = subprocess.run(
        [make, "-s", "-C", str(PROJECT_ROOT), "sysdeps", f"PYTHON={sys.executable}"],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("make test needs system packages:")
    assert " npm " in lines[0]  # no npm on this PATH
    assert "apt-get install" in lines[0]


# Windows has neither fcntl nor these POSIX-only open flags: every module must still
# import (the flags are looked up where they are used, or through sealeval._fs).
_NO_POSIX_FLAGS = (
    "import os\n"
    "for _name in ('O_DIRECTORY', 'O_NOFOLLOW', 'O_NONBLOCK', 'O_CLOEXEC'):\n"
    "    if hasattr(os, _name):\n"
    "        delattr(os, _name)\n"
)


def test_every_module_imports_without_posix_only_flags(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_NO_FCNTL + _NO_POSIX_FLAGS, encoding="utf-8")
    script = (
        "import importlib, os, pkgutil\n"
        "import sealeval\n"
        "assert not hasattr(os, 'O_NOFOLLOW')\n"
        "names = [m.name for m in pkgutil.walk_packages(sealeval.__path__, 'sealeval.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(shim)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.strip()) > 100
