"""``sealeval attest``: in-toto attestations of sealed manifests, release decisions, receipts.

Each emitting command reads one sealeval document, checks it with the
library's strict parser, wraps it in an in-toto Statement v1 and writes a
DSSE envelope signed with an Ed25519 key of ``evaluate --keygen``
(``--signing-key``). ``attest verify`` checks an envelope with a trusted
public key. See ``docs/attestations.md``.

Exit status: 0 written or verified; 1 ``attest verify`` refused the
attestation; 2 usage or input error.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import click

from sealeval._io import publish_exclusive
from sealeval.attest import (
    PREDICATE_TYPES,
    RELEASE_SUBJECT_ROLES,
    AttestationError,
    Statement,
    release_decision_statement,
    sealed_manifest_statement,
    sign_statement,
    verification_receipt_statement,
    verify_attestation,
)
from sealeval.canonical import decode, encode_openmed
from sealeval.captured.receipt import MAX_RECEIPT_BYTES
from sealeval.captured.signing import load_signing_key, load_verify_key
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_NEGATIVE, fail, refusals_naming
from sealeval.errors import CanonicalError
from sealeval.gates.candidate import (
    CandidateBundle,
    CandidateRunnerError,
    verify_packet_ed25519,
)
from sealeval.gates.runner import (
    MAX_EVIDENCE_BYTES,
    read_ed25519_public_key,
    read_hmac_key,
    read_input_file,
    read_regular_file,
)
from sealeval.manifest.sealed import SealedWorkflowManifest

__all__ = ["attest"]

_MAX_MANIFEST_BYTES: Final = 1 << 20
_MAX_ENVELOPE_BYTES: Final = 16 * 1024 * 1024

#: What the user typed for attest's inputs (field -> option), for the refusal line.
_TYPED: Final = {
    "output": "--output",
    "signing_key": "--signing-key",
    "public_key": "--public-key",
}


def _read(path: str, option: str, limit: int) -> bytes:
    data = read_input_file(path, limit=limit)
    if data is None:
        raise AttestationError("input_unavailable", option)
    return data


def _document(path: str, option: str, limit: int) -> object:
    try:
        return decode(_read(path, option, limit))
    except CanonicalError:
        raise AttestationError("invalid_json", option) from None


def _emit(statement: Statement, signing_key: str, output: Path) -> None:
    key = load_signing_key(signing_key)
    publish_exclusive(output, sign_statement(statement, key))
    click.echo(f"predicate: {statement.predicate_type}")
    click.echo(f"keyid: {key.fingerprint}")
    click.echo("verify with: sealeval attest verify ENVELOPE --public-key PUBLIC_KEY_PEM")


def _signing_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "-o",
        "--output",
        required=True,
        type=click.Path(path_type=Path),
        help="Where to write the DSSE envelope (must not exist).",
    )(command)
    return click.option(
        "--signing-key",
        required=True,
        metavar="PATH",
        help="Ed25519 private key PEM (as written by `evaluate --keygen`).",
    )(command)


@click.group(context_settings=CONTEXT_SETTINGS)
def attest() -> None:
    """Emit and verify in-toto attestations (DSSE envelopes, Ed25519)."""


@attest.command("manifest", context_settings=CONTEXT_SETTINGS)
@click.argument("manifest_path", metavar="MANIFEST")
@_signing_options
@refusals_naming(_TYPED)
def manifest_command(manifest_path: str, signing_key: str, output: Path) -> None:
    """Attest a sealed manifest: one subject per sealed component."""
    sealed = SealedWorkflowManifest.from_json(_read(manifest_path, "manifest", _MAX_MANIFEST_BYTES))
    _emit(sealed_manifest_statement(sealed), signing_key, output)


def _artifact_names(bundle: CandidateBundle, files: dict[str, str | None]) -> dict[str, str]:
    """Check each given artifact file against the manifest's digest; return subject names."""
    names: dict[str, str] = {}
    artifacts = bundle.manifest.get("artifacts")
    for role, path in files.items():
        if path is None:
            continue
        read = read_regular_file(path, limit=0)
        if read is None:
            raise AttestationError("input_unavailable", role)
        if not isinstance(artifacts, dict) or artifacts.get(role) != read[0]:
            raise AttestationError("subject_mismatch", role)
        names[role] = Path(path).name
    return names


def _check_packet(
    bundle: CandidateBundle, hmac_key_file: str | None, packet_public_key: str | None
) -> None:
    if (hmac_key_file is None) == (packet_public_key is None):
        raise click.UsageError("give exactly one of --hmac-key-file or --packet-public-key")
    if hmac_key_file is not None:
        valid = bundle.packet.verify(read_hmac_key(hmac_key_file))
    else:
        assert packet_public_key is not None
        public_key = read_ed25519_public_key(packet_public_key)
        valid = verify_packet_ed25519(bundle.packet, bundle.packet_ed25519, public_key)
    if not valid:
        raise AttestationError("predicate_signature_invalid", "packet")


@attest.command("release", context_settings=CONTEXT_SETTINGS)
@click.argument("bundle_path", metavar="BUNDLE")
@click.option("--wheel", default=None, metavar="FILE", help="The wheel (names its subject).")
@click.option("--sdist", default=None, metavar="FILE", help="The sdist (names its subject).")
@click.option(
    "--hmac-key-file", default=None, metavar="PATH", help="HMAC key that signed the packet."
)
@click.option(
    "--packet-public-key",
    default=None,
    metavar="PATH",
    help="Ed25519 public key of the bundle's packet_ed25519 signature.",
)
@_signing_options
@refusals_naming(_TYPED)
def release_command(  # noqa: PLR0917 - one parameter per click option
    bundle_path: str,
    wheel: str | None,
    sdist: str | None,
    hmac_key_file: str | None,
    packet_public_key: str | None,
    signing_key: str,
    output: Path,
) -> None:
    """Attest an agent release decision (BUNDLE from `gates agent-release`).

    Subjects: the wheel and sdist digests the decision recorded. The packet is
    verified first with exactly one of --hmac-key-file or --packet-public-key;
    --wheel/--sdist files must have the recorded digests.
    """
    document = _document(bundle_path, "bundle", MAX_EVIDENCE_BYTES)
    try:
        bundle = CandidateBundle.from_dict(document)
    except CandidateRunnerError:
        raise AttestationError("invalid_predicate", "bundle") from None
    _check_packet(bundle, hmac_key_file, packet_public_key)
    names = _artifact_names(bundle, dict(zip(RELEASE_SUBJECT_ROLES, (wheel, sdist), strict=True)))
    assert isinstance(document, dict)
    _emit(release_decision_statement(document, names=names), signing_key, output)


@attest.command("receipt", context_settings=CONTEXT_SETTINGS)
@click.argument("receipt_path", metavar="RECEIPT")
@_signing_options
@refusals_naming(_TYPED)
def receipt_command(receipt_path: str, signing_key: str, output: Path) -> None:
    """Attest an evidence-pack verification receipt (subject: the pack's manifest.json)."""
    document = _document(receipt_path, "receipt", MAX_RECEIPT_BYTES)
    if not isinstance(document, dict):
        raise AttestationError("invalid_predicate", "receipt")
    _emit(verification_receipt_statement(document), signing_key, output)


@attest.command("verify", context_settings=CONTEXT_SETTINGS)
@click.argument("envelope_path", metavar="ENVELOPE")
@click.option("--public-key", required=True, metavar="PATH", help="Trusted Ed25519 public key PEM.")
@click.option(
    "--type",
    "kind",
    type=click.Choice(sorted(PREDICATE_TYPES)),
    default=None,
    help="Require this predicate type.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verified statement (canonical).")
@refusals_naming(_TYPED)
def verify_command(envelope_path: str, public_key: str, kind: str | None, as_json: bool) -> None:
    """Verify a DSSE envelope with a trusted key and check its statement.

    Exit status: 0 verified, 1 refused, 2 usage or input error.
    """
    key = load_verify_key(public_key)
    data = _read(envelope_path, "envelope", _MAX_ENVELOPE_BYTES)
    expected = None if kind is None else PREDICATE_TYPES[kind]
    try:
        verified = verify_attestation(data, key, predicate_type=expected)
    except AttestationError as error:
        fail(error)
        raise click.exceptions.Exit(EXIT_NEGATIVE) from None
    statement = verified.statement
    if as_json:
        click.echo(encode_openmed(statement.to_dict()))
        return
    click.echo(f"verified: {statement.predicate_type}")
    click.echo(f"keyid: {verified.keyid}")
    for subject in statement.subjects:
        click.echo(f"subject: {subject.digest}")
