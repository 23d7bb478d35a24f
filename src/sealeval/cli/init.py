"""``sealeval init``: write commented starter files that work with the demo data.

::

    sealeval init policy  [-o policy.yaml]
    sealeval init request [-o request.yaml]      # also inputs/baseline.jsonl, inputs/subject.jsonl
    sealeval init session [-o session.yaml]      # for the folder `sealeval demo` writes (session/)
    sealeval init gate-sources [-o gate-sources.yaml]  # the nine gates' evidence (demo smoke data)
    sealeval init trust   [-o trust.json] --baseline-run-digest D --subject-run-digest D
                          --request-digest D --evidence-signer-fingerprint D
                          [--policy policy.yaml] [--verifier-identity ID] [--verifier-key KEY]

Every file is created exclusively (an existing file is never replaced) and
atomically. A trust profile is strict JSON (no comments): its four anchors are
the digests ``sealeval evaluate`` prints, which the recipient must obtain from
the publisher independently of the pack.

Exit status: 0 written (the written files and the next command are printed),
2 refused (``sealeval: error: <option or file>: <code>``, e.g.
``--output: output_exists``; nothing is replaced).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Final, NoReturn

import click

from sealeval._fs import publish_exclusive
from sealeval.canonical import encode_invarlock, is_digest
from sealeval.captured.trust import TRUST_PROFILE_FORMAT, TRUST_PROFILE_KIND
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_ERROR, refusals_exit
from sealeval.errors import SealevalError

__all__ = ["init"]

_DEMO_RUNS: Final = ("baseline.jsonl", "subject.jsonl")


def _refuse(code: str, option: str) -> NoReturn:
    """Refuse naming the option or file the user typed (``sealeval: error: --output: <code>``)."""
    click.echo(f"sealeval: error: {option}: {code}", err=True)
    raise click.exceptions.Exit(EXIT_ERROR)


def _template(name: str) -> bytes:
    return (resources.files("sealeval") / "_data" / "init" / name).read_bytes()


def _write(destination: Path, data: bytes, option: str = "--output") -> None:
    try:
        publish_exclusive(destination, data, mode=0o644, create_parents=option != "--output")
    except SealevalError as error:
        _refuse(error.code, option)


@click.group(context_settings=CONTEXT_SETTINGS)
def init() -> None:
    """Write commented starter files (policy, request, session, trust, gate evidence)."""


def _output_option(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "-o",
        "--output",
        type=click.Path(path_type=Path),
        default=Path(default),
        show_default=True,
        help="File to create (must not exist).",
    )


@init.command("policy", context_settings=CONTEXT_SETTINGS)
@_output_option("policy.yaml")
@refusals_exit
def policy_command(output: Path) -> None:
    """Write a comparison policy (strict YAML): one exact_match metric."""
    _write(output, _template("policy.yaml"))
    click.echo(f"Wrote {output.name} (comparison policy)")
    click.echo("Next: sealeval init request, then sealeval evaluate request.yaml")


@init.command("request", context_settings=CONTEXT_SETTINGS)
@_output_option("request.yaml")
@refusals_exit
def request_command(output: Path) -> None:
    """Write an evaluation request and the two demo result files it names (inputs/)."""
    inputs = output.parent / "inputs"
    targets = [inputs / name for name in _DEMO_RUNS]
    for target in (output, *targets):
        if target.exists() or target.is_symlink():
            _refuse("output_exists", "--output" if target == output else "inputs/")
    _write(output, _template("request.yaml"))
    for target in targets:
        _write(target, _template(f"inputs/{target.name}"), "inputs/")
    click.echo(f"Wrote {output.name} and inputs/{_DEMO_RUNS[0]}, inputs/{_DEMO_RUNS[1]}")
    click.echo("Next: sealeval init policy  (the request names policy.yaml)")
    click.echo("      sealeval evaluate --keygen keys")
    click.echo(f"      sealeval evaluate {output.name} --signing-key keys/private.pem")


@init.command("session", context_settings=CONTEXT_SETTINGS)
@_output_option("session.yaml")
@refusals_exit
def session_command(output: Path) -> None:
    """Write an evaluation session configuration for the demo's session folder."""
    _write(output, _template("session.yaml"))
    click.echo(f"Wrote {output.name} (session configuration for demo-out/session/)")
    click.echo(f"Next: sealeval session run {output.name}")


@init.command("gate-sources", context_settings=CONTEXT_SETTINGS)
@_output_option("gate-sources.yaml")
@refusals_exit
def gate_sources_command(output: Path) -> None:
    """Write the release-gate evidence (strict YAML): the demo's nine metrics, commented."""
    _write(output, _template("gate-sources.yaml"))
    click.echo(f"Wrote {output.name} (release-gate evidence: the demo's smoke data)")
    click.echo(f"Next: sealeval gates evaluate {output.name} --candidate-digest sha256:HEX")


def _anchor(value: str, option: str) -> str:
    if not is_digest(value):
        _refuse("invalid_digest", option)
    return value


@init.command("trust", context_settings=CONTEXT_SETTINGS)
@_output_option("trust.json")
@click.option(
    "--baseline-run-digest", required=True, metavar="DIGEST", help="Expected baseline run."
)
@click.option("--subject-run-digest", required=True, metavar="DIGEST", help="Expected subject run.")
@click.option("--request-digest", required=True, metavar="DIGEST", help="Expected request.")
@click.option(
    "--evidence-signer-fingerprint",
    required=True,
    metavar="DIGEST",
    help="Expected signer (the public key fingerprint `evaluate --keygen` prints).",
)
@click.option(
    "--policy",
    default="policy.yaml",
    show_default=True,
    metavar="PATH",
    help="The recipient's copy of the policy (relative to the profile).",
)
@click.option(
    "--verifier-identity",
    default="example.org/verifier",
    show_default=True,
    metavar="ID",
    help="Verifier identity recorded in receipts.",
)
@click.option(
    "--verifier-key",
    default="keys/private.pem",
    show_default=True,
    metavar="PATH",
    help="Ed25519 key that signs receipts (relative to the profile).",
)
@refusals_exit
def trust_command(
    *,
    output: Path,
    baseline_run_digest: str,
    subject_run_digest: str,
    request_digest: str,
    evidence_signer_fingerprint: str,
    policy: str,
    verifier_identity: str,
    verifier_key: str,
) -> None:
    """Write a trust profile (strict JSON) from the digests sealeval evaluate prints."""
    document = {
        "format": TRUST_PROFILE_FORMAT,
        "kind": TRUST_PROFILE_KIND,
        "policy": {"path": policy},
        "anchors": {
            "baseline_run_digest": _anchor(baseline_run_digest, "--baseline-run-digest"),
            "subject_run_digest": _anchor(subject_run_digest, "--subject-run-digest"),
            "request_digest": _anchor(request_digest, "--request-digest"),
            "evidence_signer_fingerprint": _anchor(
                evidence_signer_fingerprint, "--evidence-signer-fingerprint"
            ),
        },
        "verifier": {"identity": verifier_identity, "signing_key_path": verifier_key},
    }
    _write(output, encode_invarlock(document) + b"\n")
    click.echo(f"Wrote {output.name} (trust profile)")
    click.echo(
        f"Next: sealeval verify evidence --trust-profile {output.name} --receipt receipt.json"
    )
