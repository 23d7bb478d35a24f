"""Run a sealeval command with standard error on a pseudo-terminal, or on a pipe."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

#: ``python -c`` body: the whole command line, as an installed ``sealeval`` runs it.
_MAIN = "import sys; from sealeval.cli import cli; sys.exit(cli(prog_name='sealeval'))"


def sealeval_argv(*args: str | Path) -> list[str]:
    """Return the argv running ``sealeval ARGS`` with this interpreter."""
    return [sys.executable, "-c", _MAIN, *(str(arg) for arg in args)]


def on_terminal(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with standard error on a pty: (status, standard output, terminal bytes)."""
    primary, secondary = pty.openpty()
    environment = {**os.environ, "COLUMNS": "120", "TERM": "xterm", **(env or {})}
    process = subprocess.Popen(
        list(argv), stdout=subprocess.PIPE, stderr=secondary, cwd=cwd, env=environment
    )
    os.close(secondary)
    shown = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(primary, 65_536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert process.stdout is not None
    stdout = process.stdout.read()
    status = process.wait(timeout=60)
    os.close(primary)
    return status, stdout, shown


def on_pipe(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run ``argv`` with standard error on a pipe: (status, standard output, standard error)."""
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(
        list(argv), capture_output=True, cwd=cwd, env=environment, check=False, timeout=120
    )
    return done.returncode, done.stdout, done.stderr
