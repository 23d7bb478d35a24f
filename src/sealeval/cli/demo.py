"""``sealeval demo``: an end-to-end walkthrough on bundled synthetic artifacts.

The demo writes everything into one folder (``./demo-out`` by default) that it
marks as its own, so running it again replaces only its own earlier output.
"""

from __future__ import annotations

import shutil
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_NEGATIVE, is_terminal, refusals_exit
from sealeval.errors import UsageError
from sealeval.gates.evaluation import AgentReleaseReport, evaluate_agent_release_gates
from sealeval.gates.fixtures import load_fixture
from sealeval.manifest.sealed import (
    COMPONENTS,
    ManifestVerification,
    SealedWorkflowManifest,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)
from sealeval.manifest.snapshot import snapshot_components

__all__ = ["demo"]

_MARKER: Final = ".sealeval-demo"
_ARTIFACTS: Final = {
    "container": "container",
    "model": "model",
    "policy": "policy.yaml",
    "post_processing": "post_processing.py",
    "prompt": "prompt.txt",
    "threshold": "threshold.json",
    "tokenizer": "tokenizer",
    "tool_inventory": "tool_inventory.yaml",
}
#: The byte the demo changes to show a refusal.
_TAMPERED: Final = ("model", "model/weights-00002-of-00002.bin", 1234)


def _prepare(out: Path) -> None:
    """Create ``out``, or replace it if (and only if) an earlier demo made it."""
    if out.is_symlink() or (out.exists() and not (out / _MARKER).is_file()):
        raise UsageError("demo_dir_not_ours", "out")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / _MARKER).write_text("written by `sealeval demo`; safe to delete\n", encoding="utf-8")


def _copy_tree(source: Traversable, destination: Path) -> None:
    if source.is_dir():
        destination.mkdir()
        for child in sorted(source.iterdir(), key=lambda item: item.name):
            _copy_tree(child, destination / child.name)
    else:
        destination.write_bytes(source.read_bytes())


def _short(digest: str) -> str:
    return digest[:19] + "…"


def _verification_table(console: Console, result: ManifestVerification) -> None:
    affected = set(result.affected_components)
    table = Table(show_header=True)
    table.add_column("component")
    table.add_column("status")
    for name in COMPONENTS:
        table.add_row(name, "[red]changed[/red]" if name in affected else "[green]ok[/green]")
    console.print(table)
    if result.eligible_for_sealed_results:
        console.print("[bold green]eligible for sealed results[/bold green]")
    else:
        console.print("[bold red]NOT eligible for sealed results[/bold red]")
    console.print("reason codes: " + ", ".join(result.reason_codes))


def _bound_text(report: AgentReleaseReport, index: int) -> str:
    result = report.gate_results[index]
    bound = "-" if result.evaluated_bound is None else f"{result.evaluated_bound:g}"
    mark = "[green]pass[/green]" if result.passed else "[red]FAIL[/red]"
    return f"{bound} {mark}"


def _gates_section(console: Console, out: Path, candidate_digest: str) -> bool:
    """Evaluate the two bundled fixtures side by side; return whether it behaved."""
    console.print(Rule("4. Release gates: passing baseline vs critical failure (smoke fixtures)"))
    reports = {
        name: evaluate_agent_release_gates(load_fixture(name), candidate_digest=candidate_digest)
        for name in ("baseline_pass", "critical_failure")
    }
    table = Table(show_header=True)
    table.add_column("gate")
    table.add_column("critical")
    table.add_column("threshold")
    table.add_column("baseline_pass")
    table.add_column("critical_failure")
    baseline = reports["baseline_pass"]
    for index, result in enumerate(baseline.gate_results):
        gate = result.gate
        sign = "<=" if gate.direction == "maximum" else ">="
        table.add_row(
            gate.metric,
            "[bold]yes[/bold]" if gate.critical else "",
            f"{sign} {gate.threshold:g}",
            _bound_text(baseline, index),
            _bound_text(reports["critical_failure"], index),
        )
    console.print(table)
    for name, report in reports.items():
        (out / f"gates-{name}.json").write_text(report.to_json(), encoding="ascii")
        console.print(f"{name}: decision [bold]{report.decision}[/bold]  {report.report_digest}")
    console.print("evidence is synthetic smoke data: it exercises the gates, it proves nothing.")
    return baseline.ready and not reports["critical_failure"].ready


def _manifest_section(console: Console, out: Path) -> bool:
    """Seal, verify, tamper with one byte, verify again; return whether it behaved."""
    artifacts = out / "artifacts"
    _copy_tree(resources.files("sealeval") / "_data" / "demo" / "artifacts", artifacts)
    paths = {name: artifacts / relative for name, relative in _ARTIFACTS.items()}

    console.print(Rule("1. Seal the workflow submission"))
    snapshot = snapshot_components(paths)
    sealed = seal_workflow_manifest(snapshot)
    (out / "manifest.json").write_text(sealed.to_json(), encoding="ascii")
    table = Table(show_header=True)
    table.add_column("component")
    table.add_column("artifact")
    table.add_column("digest")
    for name in COMPONENTS:
        table.add_row(name, _ARTIFACTS[name], _short(sealed.component_digests[name]))
    console.print(table)
    console.print(f"manifest digest: {sealed.manifest_digest}")
    console.print("written: demo-out/manifest.json (digests only, no content)")

    console.print(Rule("2. Verify at evaluation start (nothing changed)"))
    fresh = verify_at_evaluation_start(sealed, snapshot_components(paths))
    _verification_table(console, fresh)
    (out / "verification-unchanged.json").write_text(fresh.to_json(), encoding="ascii")

    component, relative, offset = _TAMPERED
    console.print(Rule(f"3. Change one byte of the {component} and verify again"))
    target = artifacts / relative
    data = bytearray(target.read_bytes())
    data[offset] ^= 0x01
    target.write_bytes(bytes(data))
    console.print(f"flipped one bit at byte {offset} of artifacts/{relative}")
    tampered = verify_at_evaluation_start(sealed, snapshot_components(paths))
    _verification_table(console, tampered)
    (out / "verification-tampered.json").write_text(tampered.to_json(), encoding="ascii")
    return (
        fresh.eligible_for_sealed_results
        and not tampered.eligible_for_sealed_results
        and tampered.affected_components == (component,)
    )


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("demo-out"),
    show_default=True,
    help="Folder for the demo's artifacts and documents.",
)
@refusals_exit
def demo(out: Path) -> None:
    """Run the end-to-end walkthrough on bundled synthetic artifacts.

    Writes into --out (default ./demo-out), replacing only a folder that an
    earlier demo created.
    """
    # A wide page when writing to a file or pipe (a terminal keeps its own width).
    console = Console(highlight=False, width=None if is_terminal() else 110)
    _prepare(out)
    console.print("[bold]sealeval demo[/bold]: synthetic artifacts, no real model or data")
    behaved = _manifest_section(console, out)
    sealed = SealedWorkflowManifest.from_json((out / "manifest.json").read_bytes())
    behaved = _gates_section(console, out, sealed.manifest_digest) and behaved
    console.print(Rule())
    if behaved:
        console.print(
            "demo complete: the untouched submission was eligible, one changed byte was "
            "refused, and the critical failure blocked the release."
        )
    else:
        console.print("[bold red]demo did not behave as expected[/bold red]")
        raise click.exceptions.Exit(EXIT_NEGATIVE)
