#!/usr/bin/env python3
"""Release-script entry point of the exact-source candidate runner.

Same flags as ``sealeval gates agent-release`` (without ``--json``). Prints the
canonical signed packet and exits 0 (READY) or 1 (NOT_READY); on a
configuration or output error prints ``{"error_code": CODE}`` and exits 2.
It never builds, tags, publishes or opens the network.
"""

from __future__ import annotations

from sealeval.cli.gates import release_script


def main() -> None:
    """Run the candidate runner with the process arguments."""
    release_script.main(prog_name="agent_release_gate.py")


if __name__ == "__main__":
    main()
