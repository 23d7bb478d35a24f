"""``sealeval demo``: an end-to-end walkthrough on bundled synthetic artifacts.

The demo writes everything into one folder (``./demo-out`` by default) that it
marks as its own, so running it again replaces only its own earlier output.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.rule import Rule
from rich.table import Table

from sealeval.canonical import decode, encode_openmed, pretty
from sealeval.captured.signing import load_verify_key
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_NEGATIVE, is_terminal, refusals_exit
from sealeval.cli.session import describe_outcome, read_store, run_attempt
from sealeval.errors import SealevalError, UsageError
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
from sealeval.session.config import session_clock

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
#: The three session configurations (one store, one ledger usage file, three keys).
_SESSION_ATTEMPTS: Final = ("attempt-1.yaml", "attempt-2.yaml", "attempt-3.yaml")
#: What the three attempts must give: detailed, coarse, refused by the budget.
_SESSION_EXPECTED: Final = ("detailed", "coarse", "rerun_budget_exhausted")
_SESSION_TERMINALS: Final = ("released", "released", "budget_denied")
#: The captured section's two real tool files (see _data/demo/captured/README.md).
_CAPTURED_RUNS: Final = (("baseline", "baseline.jsonl"), ("candidate", "candidate.jsonl"))
_CAPTURED_SOURCE: Final = "ragas@0.4.3"
_CAPTURED_OUTPUTS: Final = ("receipt.json", "report.html", "report.md", "junit.xml")


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
        evidence = resources.files("sealeval") / "_data" / "gates" / f"{name}.json"
        (out / f"evidence-{name}.json").write_bytes(evidence.read_bytes())
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


def _session_section(console: Console, out: Path) -> bool:
    """Run three official attempts against one store and ledger; return whether it behaved."""
    console.print(Rule("5. Evaluation sessions: three official attempts on a synthetic holdout"))
    folder = out / "session"
    _copy_tree(resources.files("sealeval") / "_data" / "demo" / "session", folder)
    clock = session_clock(os.environ)
    console.print(
        "2 made-up cases; feedback policy: 1 detailed result, 1 rerun, coarse bands at 0.5 and 0.8"
    )
    observed: list[str] = []
    attempts: dict[str, int] = {}
    for number, name in enumerate(_SESSION_ATTEMPTS, 1):
        console.print(f"[bold]attempt {number}[/bold]: sealeval session run {name}")
        try:
            outcome = run_attempt(folder / name, clock=clock)
        except SealevalError as error:
            console.print(f"  error: {error}", markup=False)
            observed.append(error.code)
            continue
        for line in describe_outcome(outcome):
            console.print("  " + line, markup=False)
        attempts[outcome.session_key] = number
        document = encode_openmed(outcome.to_dict())
        (folder / f"outcome-{number}.json").write_text(document, encoding="ascii")
        decision = outcome.decision
        observed.append(decision.feedback_level if decision.accepted else decision.reason_code)
    try:
        listing = read_store(folder / "sessions.sqlite3")
    except SealevalError as error:
        console.print(f"session store: error: {error}", markup=False)
        return False
    table = Table(show_header=True)
    table.add_column("attempt")
    table.add_column("session key")
    table.add_column("steps")
    table.add_column("terminal phase")
    table.add_column("band")
    terminals: list[str] = []
    for record in listing.sessions:
        last = record.steps[-1] if record.steps else None
        terminals.append("" if last is None else last.phase)
        band = "-" if last is None or last.band is None else str(last.band)
        attempt = str(attempts.get(record.session_key, "?"))
        steps = str(len(record.steps))
        table.add_row(attempt, _short(record.session_key), steps, terminals[-1], band)
    console.print(table)
    claimed = [row.claimed for row in listing.budgets]
    console.print(f"budget rows: {len(claimed)}, claimed: {sum(claimed)}")
    console.print(
        "written: demo-out/session/sessions.sqlite3 (digests, counts, ticks and bands only), "
        "demo-out/session/ledger-usage.json (budget usage counters)"
    )
    by_key = {record.session_key: record for record in listing.sessions}
    return (
        tuple(observed) == _SESSION_EXPECTED
        and len(by_key) == len(_SESSION_ATTEMPTS)
        and sorted(terminals) == sorted(_SESSION_TERMINALS)
        and claimed == [False]
    )


def _root_group() -> click.Group:
    """Return the ``sealeval`` group running the demo (found at run time: it imports this module).

    The demo is a subcommand: invoked on its own (``demo.main()`` from Python)
    it has no group whose commands it could run.
    """
    root = click.get_current_context().find_root().command
    if not isinstance(root, click.Group):
        raise TypeError("run the demo as a subcommand of the sealeval group")
    return root


def _command(console: Console, args: list[str], *, show: bool = True) -> tuple[int, str]:
    """Run ``sealeval ARGS`` in this process; print (or only return) its output."""
    cli = _root_group()
    console.print("$ sealeval " + " ".join(args), markup=False)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            code = cli.main(args=args, prog_name="sealeval", standalone_mode=False)
        except click.ClickException as error:
            error.show()
            code = error.exit_code
    output = buffer.getvalue()
    if show:
        for line in output.splitlines():
            console.print("  " + line, markup=False)
    return (code if isinstance(code, int) else 0), output


def _captured_section(console: Console, out: Path) -> bool:
    """Import two real tool files, compare, evaluate, verify, report; return whether it behaved."""
    console.print(
        Rule("6. Captured runs: import, compare, signed evidence pack, verify, receipt, reports")
    )
    folder = out / "captured"
    _copy_tree(resources.files("sealeval") / "_data" / "demo" / "captured", folder)
    console.print(
        "two runs of one task: a real ragas 0.4.3 output and a copy with one answer fixed "
        f"({folder / 'README.md'})"
    )
    codes: list[int] = []
    for name, source in _CAPTURED_RUNS:
        artifact = "sha256:" + hashlib.sha256(f"demo {name} model".encode()).hexdigest()
        codes.append(
            _command(
                console,
                [
                    "import",
                    str(folder / source),
                    "--adapter",
                    "auto",
                    "--source",
                    _CAPTURED_SOURCE,
                    "--run-id",
                    name,
                    "--artifact-digest",
                    artifact,
                    "-o",
                    str(folder / f"{name}.run.json"),
                ],
            )[0]
        )
    runs = [str(folder / f"{name}.run.json") for name, _ in _CAPTURED_RUNS]
    codes.append(_command(console, ["compare", *runs, "--policy", str(folder / "policy.json")])[0])
    for keys in ("keys", "recipient-keys"):
        codes.append(_command(console, ["evaluate", "--keygen", str(folder / keys)])[0])
    request = str(folder / "request.yaml")
    signing = str(folder / "keys" / "private.pem")
    code, output = _command(
        console, ["evaluate", request, "--signing-key", signing, "--json"], show=False
    )
    codes.append(code)
    try:
        result = decode(output)
        anchors = {
            "baseline_run_digest": result["baseline_run_digest"],
            "subject_run_digest": result["subject_run_digest"],
            "request_digest": result["request_digest"],
            "evidence_signer_fingerprint": load_verify_key(
                folder / "keys" / "public.pem"
            ).fingerprint,
        }
        console.print(f"  decision: {result['decision']}; signed pack: {folder / 'evidence'}")
    except (ValueError, KeyError, TypeError, SealevalError):
        console.print("  evaluate: no result")
        return False
    trust = {
        "format": "invarlock/trust-inputs-v2",
        "kind": "captured",
        "policy": {"path": "policy.json"},
        "anchors": anchors,
        "verifier": {
            "identity": "demo-recipient",
            "signing_key_path": "recipient-keys/private.pem",
        },
    }
    text = pretty(trust, sort_keys=False)  # the members in the order written above
    (folder / "trust.json").write_text(text + "\n", encoding="utf-8")
    console.print(f"written: {folder / 'trust.json'} (the recipient's trust anchors)")
    codes.append(
        _command(
            console,
            [
                "verify",
                str(folder / "evidence"),
                "--trust-profile",
                str(folder / "trust.json"),
                "--receipt",
                str(folder / "receipt.json"),
            ],
        )[0]
    )
    codes.append(
        _command(
            console,
            [
                "report",
                str(folder / "evidence"),
                "--html",
                str(folder / "report.html"),
                "--markdown",
                str(folder / "report.md"),
                "--junit",
                str(folder / "junit.xml"),
            ],
            show=False,
        )[0]
    )
    written = all((folder / name).is_file() for name in _CAPTURED_OUTPUTS)
    if written:
        console.print(f"open the HTML report: {(folder / 'report.html').resolve().as_uri()}")
    return written and codes == [0] * len(codes) and result.get("decision") == "pass"


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
    _root_group()  # before writing anything: the captured section runs sealeval commands
    # A wide page when writing to a file or pipe (a terminal keeps its own width).
    console = Console(highlight=False, width=None if is_terminal() else 110)
    _prepare(out)
    console.print("[bold]sealeval demo[/bold]: synthetic artifacts, no real model or data")
    behaved = _manifest_section(console, out)
    sealed = SealedWorkflowManifest.from_json((out / "manifest.json").read_bytes())
    behaved = _gates_section(console, out, sealed.manifest_digest) and behaved
    behaved = _session_section(console, out) and behaved
    behaved = _captured_section(console, out) and behaved
    console.print(Rule())
    if behaved:
        console.print(
            "demo complete: the untouched submission was eligible, one changed byte was "
            "refused, the critical failure blocked the release, and the feedback budget "
            "gave one detailed result, one coarse band, then refused the third attempt; "
            "the captured runs were compared, signed, verified into a receipt and reported."
        )
    else:
        console.print("[bold red]demo did not behave as expected[/bold red]")
        raise click.exceptions.Exit(EXIT_NEGATIVE)
