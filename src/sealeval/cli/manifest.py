"""``sealeval manifest``: digest components, seal a manifest, verify at evaluation start."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Console
from rich.table import Table

from sealeval._io import publish_exclusive
from sealeval.canonical import is_digest
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_NEGATIVE,
    EXIT_OK,
    is_terminal,
    refusals_exit,
    refusals_naming,
)
from sealeval.errors import ConfigDocumentError, ManifestError, UsageError
from sealeval.manifest.components import load_config_document
from sealeval.manifest.model_signature import check_model_signature
from sealeval.manifest.sealed import (
    COMPONENTS,
    ManifestVerification,
    seal_workflow_manifest,
    verify_at_evaluation_start,
)
from sealeval.manifest.snapshot import KINDS, digest_component, snapshot_components

__all__ = ["manifest"]

_OPTION_NAMES: Final = {name: "--" + name.replace("_", "-") for name in COMPONENTS}


def _component_name(text: str) -> str:
    name = text.strip().replace("-", "_")
    if name not in COMPONENTS:
        raise UsageError("unknown_component", "component")
    return name


def _assignments(values: tuple[str, ...], option: str) -> dict[str, str]:
    """Parse repeated ``NAME=VALUE`` options into a mapping keyed by component."""
    result: dict[str, str] = {}
    for item in values:
        name, separator, value = item.partition("=")
        if not separator or not value:
            raise UsageError("invalid_assignment", option)
        component = _component_name(name)
        if component in result:
            raise UsageError("duplicate_component", option)
        result[component] = value
    return result


def _component_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add one ``--<component> PATH`` option per governed component."""
    for name in reversed(COMPONENTS):
        command = click.option(
            _OPTION_NAMES[name],
            name,
            type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
            default=None,
            help=f"Path of the {name.replace('_', ' ')} artifact.",
        )(command)
    command = click.option(
        "--digest",
        "digest_assignments",
        multiple=True,
        metavar="NAME=sha256:HEX",
        help="A precomputed component digest instead of a path (repeatable).",
    )(command)
    return click.option(
        "--kind",
        "kind_assignments",
        multiple=True,
        metavar="NAME=KIND",
        help=f"Digest a component as one of: {', '.join(KINDS)} (repeatable).",
    )(command)


@contextlib.contextmanager
def _working(message: str) -> Iterator[None]:
    """Show a spinner on an interactive terminal, nothing otherwise."""
    if is_terminal():
        with Console(stderr=True).status(message):
            yield
    else:
        yield


def _snapshot(
    paths: Mapping[str, Path | None],
    digests: tuple[str, ...],
    kinds: tuple[str, ...],
    model_signature: tuple[Path | None, Path | None] = (None, None),
) -> dict[str, str]:
    given = {name: path for name, path in paths.items() if path is not None}
    digest_map = _assignments(digests, "digest")
    kind_map = _assignments(kinds, "kind")
    if any(kind not in KINDS for kind in kind_map.values()):
        raise UsageError("unknown_kind", "kind")
    for name, value in digest_map.items():
        if not is_digest(value):
            raise ManifestError("invalid_digest", f"component_digests.{name}")
    signature, public_key = model_signature
    if (signature is None) != (public_key is None):
        raise UsageError("model_signature_incomplete", "model-signature")
    if signature is not None and public_key is not None:
        model = given.pop("model", None)
        if model is None or kind_map.get("model", "tree") not in ("auto", "tree"):
            raise UsageError("model_signature_needs_directory", "model")
        kind_map.pop("model", None)
        with _working("checking the model signature"):
            digest_map["model"] = check_model_signature(model, signature, public_key).model_digest
    with _working("digesting components"):
        return snapshot_components(given, digest_map, kind_map)


def _model_signature_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--model-signature FILE --model-public-key FILE`` (OpenSSF Model Signing)."""
    command = click.option(
        "--model-public-key",
        type=click.Path(path_type=Path),
        default=None,
        help="PEM ECDSA public key of the model signature.",
    )(command)
    return click.option(
        "--model-signature",
        type=click.Path(path_type=Path),
        default=None,
        help="OpenSSF Model Signing signature of the --model directory, checked offline "
        "before digesting (needs sealeval[model-signing]).",
    )(command)


@click.group(context_settings=CONTEXT_SETTINGS)
def manifest() -> None:
    """Seal what is evaluated and re-verify it at evaluation start."""


@manifest.command("digest", context_settings=CONTEXT_SETTINGS)
@click.argument("kind", metavar="KIND")
@click.argument("path", type=click.Path(path_type=Path))
@refusals_exit
def digest_command(kind: str, path: Path) -> None:
    """Print one component digest.

    KIND is one of: auto, file, tree, config, tool-inventory.
    """
    if kind not in KINDS:
        raise UsageError("unknown_kind", "kind")
    with _working("digesting"):
        click.echo(digest_component(kind, path))


@manifest.command("seal", context_settings=CONTEXT_SETTINGS)
@_component_options
@_model_signature_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the manifest (must not exist).",
)
@refusals_naming({"output": "--output"})
def seal_command(
    output: Path,
    digest_assignments: tuple[str, ...],
    kind_assignments: tuple[str, ...],
    model_signature: Path | None,
    model_public_key: Path | None,
    **paths: Path | None,
) -> None:
    """Digest all eight components and write a sealed manifest.

    Every component is given exactly once, as a path or with --digest. With
    --model-signature and --model-public-key the model directory must carry a
    valid OpenSSF signature covering exactly its files.
    """
    snapshot = _snapshot(
        paths, digest_assignments, kind_assignments, (model_signature, model_public_key)
    )
    sealed = seal_workflow_manifest(snapshot)
    publish_exclusive(output, sealed.to_json().encode("ascii"))
    click.echo(sealed.manifest_digest)


def _print_verification(result: ManifestVerification) -> None:
    console = Console(highlight=False, soft_wrap=True)
    affected = set(result.affected_components)
    table = Table(title="sealed components at evaluation start")
    table.add_column("component")
    table.add_column("status")
    for name in COMPONENTS:
        table.add_row(name, "[red]affected[/red]" if name in affected else "[green]ok[/green]")
    console.print(table)
    verdict = (
        "[bold green]eligible for sealed results[/bold green]"
        if result.eligible_for_sealed_results
        else "[bold red]NOT eligible for sealed results[/bold red]"
    )
    console.print(verdict)
    console.print("reasons: " + ", ".join(result.reason_codes))


@manifest.command("verify", context_settings=CONTEXT_SETTINGS)
@click.argument("manifest_path", metavar="MANIFEST", type=click.Path(path_type=Path))
@_component_options
@_model_signature_options
@click.option("--json", "as_json", is_flag=True, help="Print the canonical verification document.")
@refusals_exit
def verify_command(
    manifest_path: Path,
    *,
    digest_assignments: tuple[str, ...],
    kind_assignments: tuple[str, ...],
    as_json: bool,
    model_signature: Path | None,
    model_public_key: Path | None,
    **paths: Path | None,
) -> None:
    """Recompute the component snapshot and verify it against MANIFEST.

    With --model-signature and --model-public-key the model's OpenSSF
    signature is checked first. Exit status: 0 eligible, 1 not eligible, 2
    usage or input error (a refused model signature included).
    """
    try:
        document = load_config_document(manifest_path, format="json")
    except ConfigDocumentError as error:
        raise ConfigDocumentError(error.code, "manifest") from None
    snapshot = _snapshot(
        paths, digest_assignments, kind_assignments, (model_signature, model_public_key)
    )
    result = verify_at_evaluation_start(document, snapshot)
    if as_json:
        click.echo(result.to_json())
    else:
        _print_verification(result)
    raise click.exceptions.Exit(EXIT_OK if result.eligible_for_sealed_results else EXIT_NEGATIVE)
