"""Reference side of the invarlock interoperability check (runs in the invarlock 0.17.1 venv).

Reads a plan written by ``invarlock_interop.py``, runs the reference's own
command line (``invarlock evaluate``, ``invarlock verify``, ``invarlock
report``) for every job, and prints one JSON object ``{"results": {job:
{"exit_code", "stdout_json"}}}``. It never imports sealeval and uses only the
reference's public command line (found with ``invarlock --help``).

Usage: python invarlock_reference_side.py PLAN.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

INVARLOCK = Path(sys.executable).with_name("invarlock")
#: Nothing here needs the network; the reference refuses sockets unless allowed.
ENVIRONMENT = {key: value for key, value in os.environ.items() if not key.startswith("INVARLOCK_")}


def _run(arguments: list[str], cwd: str) -> dict[str, Any]:
    completed = subprocess.run(
        [str(INVARLOCK), *arguments],
        cwd=cwd,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    try:
        stdout = json.loads(completed.stdout) if completed.stdout.strip() else None
    except json.JSONDecodeError:
        stdout = None
    return {
        "exit_code": completed.returncode,
        "stdout_json": stdout,
        "stderr_tail": completed.stderr[-400:],
    }


def main() -> int:
    """Run every job of the plan with the reference CLI and print the results."""
    plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    results: dict[str, Any] = {}
    for job in plan["jobs"]:
        results[job["name"]] = _run(job["arguments"], job["cwd"])
    print(json.dumps({"results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
