"""A folder for the viewer tests: a real pack that flipped a case, runs, a report, a receipt.

The pack compares the real Inspect ``.eval`` log (baseline) with the same log
after a model that answers ``q1`` wrongly (``support.integration_samples``), built by
``sealeval evaluate``. A signed reference pack and its receipt are copied
from the golden vectors. A run whose output is HTML checks escaping, and a
symbolic link points outside the folder. Same inputs, same bytes: two builds
into two folders hold identical files (no random id, clock or absolute path).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner
from inspect_ai.log import read_eval_log

from sealeval.captured import write_run
from sealeval.captured.importers.live import run_from_inspect_log
from sealeval.cli import cli
from support.integration_samples import (
    BASELINE_ARTIFACT,
    CANDIDATE_ARTIFACT,
    inspect_eval_log,
    model_output,
    policy,
    provenance,
    regressed_log,
    write_json,
)
from support.vectors import pack_folder

HOSTILE_OUTPUT = '<script>document.title="owned"</script><img src="http://192.0.2.1/x.png">'
OUTSIDE_CANARY = "CANARY-outside-view-5e2c"
REQUEST = """format_version: "invarlock/evaluation-request-v2"
execution: {mode: "captured"}
comparison:
  baseline: {path: "runs/baseline.run.json", adapter: "invarlock"}
  subject: {path: "runs/candidate.run.json", adapter: "invarlock"}
  policy: "policy.json"
output: {evidence: "evidence"}
"""


@dataclass(frozen=True)
class Workspace:
    root: Path
    outside: Path
    pack: str = "gate/evidence"
    vector_pack: str = "reference/evidence"
    receipt: str = "reference/receipt.json"
    comparison: str = "gate/comparison.json"
    hostile_run: str = "hostile.run.json"


def build_workspace(base: Path) -> Workspace:
    root = base / "evidence-folder"
    gate = root / "gate"
    (gate / "runs").mkdir(parents=True)
    baseline = run_from_inspect_log(
        read_eval_log(inspect_eval_log()),
        run_id="baseline",
        artifact_digest=BASELINE_ARTIFACT,
        score_provenance=provenance(),
    )
    candidate = run_from_inspect_log(
        regressed_log(),
        run_id="candidate",
        artifact_digest=CANDIDATE_ARTIFACT,
        score_provenance=provenance(),
    )
    write_run(baseline, gate / "runs" / "baseline.run.json")
    write_run(candidate, gate / "runs" / "candidate.run.json")
    write_json(gate / "policy.json", policy())
    (gate / "request.yaml").write_text(REQUEST, encoding="utf-8")
    runner = CliRunner()
    evaluated = runner.invoke(cli, ["evaluate", str(gate / "request.yaml"), "--unsigned"])
    assert evaluated.exit_code == 0, evaluated.output
    compared = runner.invoke(
        cli,
        [
            "compare",
            str(gate / "runs" / "baseline.run.json"),
            str(gate / "runs" / "candidate.run.json"),
            "--policy",
            str(gate / "policy.json"),
            "--json",
        ],
    )
    (gate / "comparison.json").write_bytes(compared.stdout_bytes)
    reference = pack_folder("json-200-signed")
    shutil.copytree(reference / "evidence", root / "reference" / "evidence")
    shutil.copyfile(
        reference / "verify" / "trust-profile.receipt.json", root / "reference" / "receipt.json"
    )
    log = read_eval_log(inspect_eval_log())
    samples = [
        sample.model_copy(
            update={"output": model_output("m", HOSTILE_OUTPUT, message_id=f"hostile-{sample.id}")}
        )
        for sample in log.samples or []
    ]
    hostile = run_from_inspect_log(
        log, samples=samples, run_id="hostile", artifact_digest=CANDIDATE_ARTIFACT
    )
    write_run(hostile, root / "hostile.run.json")
    outside = base / "outside"
    outside.mkdir()
    write_run(baseline, outside / "secret.run.json")
    (outside / "note.txt").write_text(OUTSIDE_CANARY, encoding="utf-8")
    # Relative targets: they leave the folder all the same, and two builds stay byte-identical.
    (root / "linked.run.json").symlink_to(Path("..", "outside", "secret.run.json"))
    (root / "linked-dir").symlink_to(Path("..", "outside"), target_is_directory=True)
    return Workspace(root=root, outside=outside)
