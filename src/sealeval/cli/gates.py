"""``sealeval gates``: the exact-source candidate runner, packet verification, gate evaluation.

``agent-release`` binds a release decision to one commit, four artifacts and
the gate evidence and writes a signed bundle (``22-candidate-runner.md``):
exit 0 READY, 1 signed NOT_READY, 2 configuration or output error. Its output
formats are the reference's, byte for byte: the canonical packet (human mode),
a pretty JSON envelope (``--json``), and, for the release-script entry point
(:data:`release_script`), the canonical packet or ``{"error_code": ...}``.
Errors of this command print the bare code (``<code>``), as the reference does.

``verify-packet`` checks a packet or bundle with the HMAC key or, for bundles
signed with ``--ed25519-key-file``, with the Ed25519 public key alone.
``evaluate`` runs the nine gates over an evidence file and prints a table or
the canonical report.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal, NoReturn

import click
from rich.console import Console
from rich.table import Table

from sealeval._io import publish_exclusive
from sealeval.canonical import decode, encode_openmed, is_digest
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    EXIT_NEGATIVE,
    EXIT_OK,
    is_terminal,
    refusals_exit,
    refusals_naming,
)
from sealeval.errors import CanonicalError, UsageError, YamlError
from sealeval.gates.candidate import (
    AgentCandidatePacket,
    CandidateBundle,
    CandidateRunnerError,
    EvidenceEnvelopeError,
    decode_evidence_bytes,
    parse_evidence_document,
    verify_packet_ed25519,
)
from sealeval.gates.evaluation import AgentReleaseReport, evaluate_agent_release_gates
from sealeval.gates.registry import GateError
from sealeval.gates.runner import (
    MAX_EVIDENCE_BYTES,
    AgentReleaseOptions,
    read_ed25519_public_key,
    read_hmac_key,
    read_input_file,
    read_regular_file,
    run_agent_release,
)
from sealeval.gates.suites import SUITES, bundled_suite_evidence, evidence_envelope
from sealeval.strict_yaml import YamlLimits, load_strict_yaml

__all__ = ["KEY_NEWLINE_WARNING", "gates", "release_script"]

_COMMAND: Final = "gates agent-release"
#: Printed on standard error when the HMAC key file ends with a newline.
KEY_NEWLINE_WARNING: Final = (
    "sealeval: warning: the key file ends with a newline; the newline is part of the HMAC key"
)

Mode = Literal["human", "json", "script"]


def _agent_release_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the flags shared by ``agent-release`` and the release-script entry point."""
    options = [
        click.option(
            "--repo-root",
            default=None,
            metavar="PATH",
            help="Git checkout to check (default: the working directory).",
        ),
        click.option(
            "--source-sha", required=True, metavar="SHA", help="Expected full commit SHA."
        ),
        click.option("--tag", default=None, metavar="NAME", help="Tag that must resolve to SHA."),
        click.option("--wheel", required=True, metavar="PATH", help="Wheel artifact."),
        click.option("--sdist", required=True, metavar="PATH", help="Source distribution."),
        click.option("--tool-catalog", required=True, metavar="PATH", help="Tool catalog."),
        click.option("--policy", required=True, metavar="PATH", help="Policy file."),
        click.option(
            "--evidence",
            multiple=True,
            metavar="PATH",
            help="Evidence envelope file (repeatable).",
        ),
        click.option(
            "--signing-key-file",
            required=True,
            metavar="PATH",
            help="Raw HMAC key bytes (at least 32, used verbatim).",
        ),
        click.option(
            "--output",
            required=True,
            metavar="PATH",
            help="Bundle file to create (must not exist).",
        ),
        click.option(
            "--ed25519-key-file",
            default=None,
            metavar="PATH",
            help="PKCS#8 PEM Ed25519 private key: add a detached signature to the bundle.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _pretty(document: object) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def _run_agent_release(mode: Mode, params: dict[str, Any]) -> NoReturn:
    options = AgentReleaseOptions(
        repo_root=params["repo_root"],
        source_sha=params["source_sha"],
        tag=params["tag"],
        wheel=params["wheel"],
        sdist=params["sdist"],
        tool_catalog=params["tool_catalog"],
        policy=params["policy"],
        evidence=tuple(params["evidence"]),
        signing_key_file=params["signing_key_file"],
        output=params["output"],
        ed25519_key_file=params["ed25519_key_file"],
    )
    try:
        outcome = run_agent_release(options)
    except CandidateRunnerError as error:
        if mode == "human":
            click.echo(error.code, err=True)
        elif mode == "json":
            message = {"code": error.code, "message": error.code}
            click.echo(_pretty({"command": _COMMAND, "error": message, "ok": False}))
        else:
            click.echo(encode_openmed({"error_code": error.code}))
        raise click.exceptions.Exit(EXIT_ERROR) from None
    # The reference signs with the verbatim bytes; its vectors fix stderr to be
    # empty, so the warning is shown only to a person at a terminal.
    if outcome.key_ends_with_newline and is_terminal():
        click.echo(KEY_NEWLINE_WARNING, err=True)
    decision = outcome.decision
    if mode == "json":
        click.echo(_pretty({"command": _COMMAND, "data": decision.bundle(), "ok": True}))
    else:
        click.echo(decision.packet.to_json())
    raise click.exceptions.Exit(EXIT_OK if decision.ready else EXIT_NEGATIVE)


@click.group(context_settings=CONTEXT_SETTINGS)
def gates() -> None:
    """Evaluate the nine release gates and sign exact-source candidate decisions."""


@gates.command(
    "agent-release",
    context_settings=CONTEXT_SETTINGS,
    short_help="Sign a release decision bound to one exact commit.",
)
@_agent_release_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON envelope on standard output.")
def agent_release_command(as_json: bool, **params: Any) -> None:
    """Bind a release decision to one exact commit and write a signed bundle.

    Checks HEAD, the optional tag and a clean tree before and after reading
    the artifacts and evidence, evaluates the nine gates and signs the packet
    with HMAC-SHA256. Exit status: 0 READY, 1 NOT_READY (signed), 2
    configuration or output error (the bare code on standard error).
    """
    _run_agent_release("json" if as_json else "human", params)


@click.command("agent_release_gate.py")
@_agent_release_options
def release_script(**params: Any) -> None:
    """Release-script entry point of the candidate runner.

    Prints the canonical packet, or {"error_code": CODE} on a configuration or
    output error. Exit status: 0 READY, 1 NOT_READY, 2 error.
    """
    _run_agent_release("script", params)


# ---------------------------------------------------------------------------
# verify-packet


def _load_document(path: str) -> CandidateBundle | AgentCandidatePacket:
    data = read_input_file(path)
    if data is None:
        raise CandidateRunnerError("packet_unavailable")
    try:
        document = decode(data)
    except CanonicalError:
        raise CandidateRunnerError("packet_invalid") from None
    if isinstance(document, dict) and "packet" in document:
        return CandidateBundle.from_dict(document)
    return AgentCandidatePacket.from_dict(document)


@gates.command(
    "verify-packet",
    context_settings=CONTEXT_SETTINGS,
    short_help="Verify a candidate packet or bundle.",
)
@click.argument("document_path", metavar="BUNDLE_OR_PACKET")
@click.option("--hmac-key-file", default=None, metavar="PATH", help="Shared HMAC key (raw bytes).")
@click.option(
    "--ed25519-public-key",
    default=None,
    metavar="PATH",
    help="PEM Ed25519 public key (bundles signed with --ed25519-key-file).",
)
@refusals_exit
def verify_packet_command(
    document_path: str, hmac_key_file: str | None, ed25519_public_key: str | None
) -> None:
    """Verify a candidate packet, or a bundle written by agent-release.

    Give exactly one of --hmac-key-file or --ed25519-public-key. For a bundle
    the manifest must also hash to the digest the packet names. Exit status: 0
    valid, 1 invalid, 2 usage or input error.
    """
    if (hmac_key_file is None) == (ed25519_public_key is None):
        raise click.UsageError("give exactly one of --hmac-key-file or --ed25519-public-key")
    loaded = _load_document(document_path)
    bundle = loaded if isinstance(loaded, CandidateBundle) else None
    packet = loaded.packet if isinstance(loaded, CandidateBundle) else loaded
    if hmac_key_file is not None:
        algorithm = "hmac-sha256"
        key = read_hmac_key(hmac_key_file)
        if key.ends_with_newline:
            click.echo(KEY_NEWLINE_WARNING, err=True)
        valid = packet.verify(key)
    else:
        assert ed25519_public_key is not None
        algorithm = "ed25519"
        public_key = read_ed25519_public_key(ed25519_public_key)
        detached = bundle.packet_ed25519 if bundle is not None else None
        valid = detached is not None and verify_packet_ed25519(packet, detached, public_key)
    if bundle is not None:
        valid = valid and bundle.consistent()
    if valid:
        click.echo(f"valid: {algorithm}, decision {packet.decision}")
        raise click.exceptions.Exit(EXIT_OK)
    click.echo(f"invalid: {algorithm}")
    raise click.exceptions.Exit(EXIT_NEGATIVE)


# ---------------------------------------------------------------------------
# evaluate


def _threshold(direction: str, threshold: float) -> str:
    return f"{'<=' if direction == 'maximum' else '>='} {threshold!r}"


def _print_report(report: AgentReleaseReport) -> None:
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    table = Table(title="agent release gates")
    table.add_column("#", justify="right")
    table.add_column("metric", no_wrap=True)
    table.add_column("critical")
    table.add_column("threshold", no_wrap=True)
    table.add_column("evaluated bound", justify="right")
    table.add_column("reason", no_wrap=True)
    table.add_column("result")
    for index, result in enumerate(report.gate_results, 1):
        gate = result.gate
        bound = "-" if result.evaluated_bound is None else repr(result.evaluated_bound)
        table.add_row(
            str(index),
            gate.metric,
            "[bold]yes[/bold]" if gate.critical else "",
            _threshold(gate.direction, gate.threshold),
            bound,
            result.reason_code,
            "[green]PASS[/green]" if result.passed else "[red]FAIL[/red]",
        )
    console.print(table)
    console.print("critical is presentational only: every gate blocks a release on its own.")
    style = "bold green" if report.ready else "bold red"
    console.print(f"decision: [{style}]{report.decision}[/{style}]")
    console.print(f"report digest: {report.report_digest}")


def _decode_evidence(path: str, data: bytes) -> Any:
    """Decode an evidence file: strict JSON, or strict YAML for a ``.yaml``/``.yml`` name."""
    if not path.lower().endswith((".yaml", ".yml")):
        return decode_evidence_bytes(data)
    try:
        return load_strict_yaml(data, limits=YamlLimits(max_bytes=MAX_EVIDENCE_BYTES))
    except YamlError as error:
        click.echo(f"sealeval: error: evidence: {error.code}", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None


@gates.command("evaluate", context_settings=CONTEXT_SETTINGS)
@click.argument("evidence_path", metavar="EVIDENCE.json")
@click.option(
    "--candidate-digest",
    required=True,
    metavar="sha256:HEX",
    help="Digest of the candidate the evidence is about.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the canonical report.")
@refusals_naming({"candidate_digest": "--candidate-digest"})
def evaluate_command(evidence_path: str, candidate_digest: str, as_json: bool) -> None:
    """Evaluate the nine release gates over an evidence file.

    EVIDENCE.json is a JSON array of MetricEvidence documents or a candidate
    evidence envelope {schema_version, source_sha, metrics}; both are parsed
    strictly. A file named *.yaml or *.yml is read as strict YAML (`sealeval
    init gate-sources` writes a commented one): the same evidence written as
    YAML gives the same report. Exit status: 0 READY, 1 NOT_READY, 2 invalid
    input.
    """
    if not is_digest(candidate_digest):
        raise GateError("invalid_digest", "candidate_digest")
    read = read_regular_file(Path(evidence_path), limit=MAX_EVIDENCE_BYTES)
    if read is None:
        raise EvidenceEnvelopeError("unavailable", "evidence")
    if read[1] is None:
        raise EvidenceEnvelopeError("too_large", "evidence")
    metrics = parse_evidence_document(_decode_evidence(evidence_path, read[1]))
    report = evaluate_agent_release_gates(metrics, candidate_digest=candidate_digest)
    if as_json:
        click.echo(report.to_json())
    else:
        _print_report(report)
    raise click.exceptions.Exit(EXIT_OK if report.ready else EXIT_NEGATIVE)


@gates.command("run-suite", context_settings=CONTEXT_SETTINGS)
@click.argument("suite", metavar="SUITE")
@click.option("--source-sha", required=True, metavar="SHA", help="Commit the evidence is for.")
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Evidence envelope to create (must not exist).",
)
@refusals_naming({"output": "--output", "suite": "SUITE"})
def run_suite_command(suite: str, source_sha: str, output: Path) -> None:
    """Run a bundled executable suite and write source-bound evidence.

    SUITE is `adversarial` (the default tool-dispatch corpus through sealeval's
    reference boundary; probes stay in a temporary folder and on loopback) or
    `recovery` (the synthetic recovery scenarios in all six phases). The file
    is a candidate evidence envelope for `gates agent-release --evidence`.
    Exit status: 0 written, 2 usage or output error.
    """
    if suite not in SUITES:
        raise UsageError("unknown_suite", "suite")
    envelope = evidence_envelope(bundled_suite_evidence(suite), source_sha=source_sha)
    publish_exclusive(output, (encode_openmed(envelope) + "\n").encode("ascii"))
    for item in envelope["metrics"]:
        click.echo(
            f"{item['metric']}: {item['event_count']}/{item['sample_size']} "
            f"over {len(item['slices'])} slices  {item['evidence_digest']}"
        )
