"""Print ``src/sealeval/_data/demo/captured/candidate.jsonl`` from the bundled baseline.

The baseline is a real ragas 0.4.3 output (``../shared/samples/evaluators/ragas/
evaluation_result.records.jsonl``, copied byte for byte). The candidate is that
file with one deterministic edit standing in for a better model: the answer to
"Largest planet?" becomes the reference answer, and the two scores ragas
recorded for it become 1.0. Every other byte is unchanged.

    python scripts/demo/make_candidate.py > src/sealeval/_data/demo/captured/candidate.jsonl

``tests/cli/test_demo_captured.py`` regenerates it and compares the bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BASELINE = Path(__file__).resolve().parents[2] / "src/sealeval/_data/demo/captured/baseline.jsonl"
QUESTION = "Largest planet?"


def candidate(baseline: bytes) -> bytes:
    """Return the candidate file's bytes."""
    lines = []
    for line in baseline.decode("utf-8").splitlines():
        record = json.loads(line)
        if record["user_input"] != QUESTION:
            lines.append(line)
            continue
        record["response"] = record["reference"]
        record["exact_match"] = 1.0
        record["string_present"] = 1.0
        lines.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode("utf-8")


def main() -> None:
    """Print the candidate."""
    sys.stdout.buffer.write(candidate(BASELINE.read_bytes()))


if __name__ == "__main__":
    main()
