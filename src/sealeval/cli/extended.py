"""``sealeval extended``: sign a pack's opt-in extended statistics, or check such a seal.

A thin layer over :mod:`sealeval.captured.extended_seal`::

    sealeval extended EVIDENCE --extension FILE --signing-key KEY --output SEAL
    sealeval extended EVIDENCE --check SEAL [--json]

The first form recomputes the ``sealeval/extended-comparison-v1`` numbers
from the pack's runs and signs them, bound to the pack's manifest, with the
key that signed the pack (``--signing-key``, env ``SEALEVAL_SIGNING_KEY``);
the seal is written beside the pack (never inside it: the pack stays
invarlock's, byte for byte), atomically and never over an existing file. The
second form checks a seal against the pack: signer, signature, pack,
extension and a recomputation of the numbers; ``--json`` prints the sealed
extended document. Both forms re-score the pack's runs streamed from its
files (memory bounded by the record count, never by content); ``--uncapped``
reads a pack built with ``evaluate --uncapped``.

Exit status 0 when sealed or the seal holds, 2 on any refusal, reported as
``sealeval: error: <field>: <code>`` (field names and codes only).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import click

from sealeval._fs import publish_exclusive
from sealeval.canonical import encode_invarlock
from sealeval.captured.extended import load_policy_extension
from sealeval.captured.extended_seal import MAX_SEAL_BYTES, seal_extended, verify_extended_seal
from sealeval.captured.pack_reader import (
    REFERENCE_PACK_LIMITS,
    UNCAPPED_PACK_LIMITS,
    EvidencePack,
    read_evidence_pack,
)
from sealeval.captured.run import read_file_bytes
from sealeval.captured.signing import load_signing_key
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_OK, refusals_naming
from sealeval.errors import UsageError

__all__ = ["extended_command"]

_MAX_EXTENSION_BYTES: Final = 65_536


def _read_pack(evidence: str, *, uncapped: bool) -> EvidencePack:
    """Examine the pack; its runs are re-scored streamed from its files, never held."""
    return read_evidence_pack(
        evidence,
        limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
        runs="outline",
    )


def _inside(path: Path, pack: Path) -> bool:
    resolved = Path(os.path.realpath(path.parent)) / path.name
    root = Path(os.path.realpath(pack))
    return resolved == root or root in resolved.parents


@click.command("extended", context_settings=CONTEXT_SETTINGS)
@click.argument("evidence", metavar="EVIDENCE")
@click.option(
    "--extension",
    "extension_path",
    metavar="FILE",
    help="The sealeval/comparison-policy-extension-v1 the numbers are computed with.",
)
@click.option(
    "--signing-key",
    metavar="KEY",
    envvar="SEALEVAL_SIGNING_KEY",
    help="The Ed25519 private key (PEM) that signed the pack [env: SEALEVAL_SIGNING_KEY].",
)
@click.option("--output", "output_path", metavar="SEAL", help="Write the seal to SEAL (new file).")
@click.option("--check", "check_path", metavar="SEAL", help="Check SEAL against the pack.")
@click.option("--json", "as_json", is_flag=True, help="With --check: print the sealed document.")
@click.option("--uncapped", is_flag=True, help="Read a pack built with evaluate --uncapped.")
@refusals_naming(
    {
        "pack": "EVIDENCE",
        "extension": "--extension",
        "signing_key": "--signing-key",
        "output": "--output",
        "seal": "--check",
    }
)
def extended_command(
    *,
    evidence: str,
    extension_path: str | None,
    signing_key: str | None,
    output_path: str | None,
    check_path: str | None,
    as_json: bool,
    uncapped: bool,
) -> None:
    """Seal a signed pack's extended statistics with its key, or check a seal.

    Seal: EVIDENCE --extension FILE --signing-key KEY --output SEAL. Check:
    EVIDENCE --check SEAL. The pack itself is never changed.
    """
    if check_path is not None:
        if extension_path is not None or output_path is not None:
            raise UsageError("invalid_option_usage", "--check")
        pack = _read_pack(evidence, uncapped=uncapped)
        sealed = verify_extended_seal(
            pack, read_file_bytes(Path(check_path), MAX_SEAL_BYTES, "seal")
        )
        if as_json:
            click.echo(encode_invarlock(sealed.extended_document()), nl=False)
        else:
            click.echo(f"Seal holds: extended decision {sealed.extended_document()['decision']}")
            click.echo(f"Signer fingerprint: {sealed.signer}")
            click.echo(f"Pack manifest digest: {sealed.pack_manifest_digest}")
        raise click.exceptions.Exit(EXIT_OK)
    if extension_path is None:
        raise UsageError("missing_option", "--extension")
    if signing_key is None:
        raise UsageError("missing_option", "--signing-key")
    if output_path is None:
        raise UsageError("missing_option", "--output")
    if as_json:
        raise UsageError("invalid_option_usage", "--json")
    if _inside(Path(output_path), Path(evidence)):
        raise UsageError("invalid_value", "--output")
    extension = load_policy_extension(
        read_file_bytes(Path(extension_path), _MAX_EXTENSION_BYTES, "extension")
    )
    key = load_signing_key(signing_key)
    pack = _read_pack(evidence, uncapped=uncapped)
    data = seal_extended(pack, extension, key)
    publish_exclusive(output_path, data, mode=0o644)
    click.echo(f"Sealed extended statistics: {output_path}")
    click.echo(f"Check with: sealeval extended {evidence} --check {output_path}")
    raise click.exceptions.Exit(EXIT_OK)
