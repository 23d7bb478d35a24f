"""``sealeval report``: readable reports of a captured evidence pack.

Contract: ``33-report.md`` §2 and ``40-cli.md`` §3 of the invarlock
specification (see ``docs/reports.md``)::

    sealeval report EVIDENCE [--html F] [--markdown F] [--junit F] [--explain] [--json]

The pack is examined exactly as verification examines it (inventory, canonical
bytes, digests, ledger, signature if signed, re-normalization, bindings) and
then rendered; nothing is replayed, scored or verified, and no pack byte is
modified. Destinations are validated before anything is rendered and written
no-clobber and atomically (mode 0600). Exit status 0 when everything was
written, 2 on any failure. Without ``--json`` the Markdown report is printed;
with it, the ``invarlock/evidence-report-v2`` result.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import click

from sealeval._io import publish_exclusive
from sealeval._progress import terminal_progress
from sealeval.captured.extended import load_policy_extension
from sealeval.captured.pack_reader import (
    REFERENCE_PACK_LIMITS,
    UNCAPPED_PACK_LIMITS,
    read_evidence_pack,
)
from sealeval.captured.report import (
    ReportError,
    encode_result,
    extended_for_pack,
    render_html,
    render_junit,
    render_markdown,
    report_result,
)
from sealeval.captured.run import read_file_bytes
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_ERROR, decision_order_option, fail
from sealeval.cli._remedies import limit_remedy
from sealeval.errors import OutputError, SealevalError

__all__ = ["check_destinations", "report_command"]

_MAX_EXTENSION_BYTES: Final = 65_536
#: Output formats in the order they are written.
FORMATS: Final = ("html", "junit", "markdown")

#: What the user typed for report's inputs (field -> argument or option).
_TYPED: Final = {
    "pack": "EVIDENCE",
    "extension": "--extension",
    "outputs.html": "--html",
    "outputs.markdown": "--markdown",
    "outputs.junit": "--junit",
}


def _lexical(path: str) -> Path:
    """Return the absolute path without resolving symlinks (``..`` removed lexically)."""
    return Path(os.path.normpath(Path.cwd() / path))


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _check_ancestors(path: Path, where: str) -> None:
    """Refuse a symlink or a non-directory among the existing ancestors of ``path``."""
    for ancestor in reversed(path.parents):
        try:
            mode = ancestor.lstat().st_mode
        except FileNotFoundError:
            return  # missing ancestors are created (mode 0700) at publication
        except OSError:  # pragma: no cover - EACCES (tests run as root)
            raise ReportError("unsafe_destination", where) from None
        if not stat.S_ISDIR(mode):  # a symlink, a file, anything but a real directory
            raise ReportError("unsafe_destination", where)


def check_destinations(evidence: str, requested: Mapping[str, str]) -> dict[str, Path]:
    """Validate report destinations (33-report.md §2) and return their absolute paths.

    Each destination must name a file, must not exist, must not be inside
    the pack (lexically or after resolving symlinks), must not collide with
    another destination, and no existing ancestor may be a symlink or a
    non-directory.

    Raises:
        ReportError: ``invalid_destination``, ``destination_inside_pack``,
            ``unsafe_destination``, ``destination_exists``,
            ``destination_collision`` (field ``outputs.<format>``).
    """
    pack_lexical = _lexical(evidence)
    pack_resolved = Path(os.path.realpath(evidence))
    lexical: dict[str, Path] = {}
    resolved: dict[str, Path] = {}
    for fmt, given in requested.items():
        where = f"outputs.{fmt}"
        if not given or given.endswith(("/", os.sep)) or Path(given).name in ("", ".", ".."):
            raise ReportError("invalid_destination", where)
        path = _lexical(given)
        if _inside(path, pack_lexical):
            raise ReportError("destination_inside_pack", where)
        _check_ancestors(path, where)
        if os.path.lexists(path):
            raise ReportError("destination_exists", where)
        real = Path(os.path.realpath(path.parent)) / path.name
        if _inside(real, pack_resolved):
            raise ReportError("destination_inside_pack", where)
        if path in lexical.values() or real in resolved.values():
            raise ReportError("destination_collision", where)
        lexical[fmt], resolved[fmt] = path, real
    return lexical


def _publish(path: Path, data: bytes, where: str) -> None:
    try:
        for ancestor in reversed(path.parents):
            if not os.path.lexists(ancestor):
                ancestor.mkdir(mode=0o700)
        publish_exclusive(path, data, mode=0o600)
    except OutputError as error:
        code = "destination_exists" if error.code == "output_exists" else "write_failed"
        raise ReportError(code, where) from None
    except OSError:
        raise ReportError("write_failed", where) from None


@click.command("report", context_settings=CONTEXT_SETTINGS)
@click.argument("evidence", metavar="EVIDENCE")
@click.option("--html", "html_path", metavar="FILE", help="Write the HTML report to FILE.")
@click.option(
    "--markdown", "markdown_path", metavar="FILE", help="Write the Markdown report to FILE."
)
@click.option("--junit", "junit_path", metavar="FILE", help="Write JUnit XML to FILE.")
@click.option("--explain", is_flag=True, help="Append policy, context and exact report data.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result, not Markdown.")
@click.option("--uncapped", is_flag=True, help="Read a pack built with evaluate --uncapped.")
@decision_order_option("Read a pack built with evaluate --decision-order width_first.")
@click.option(
    "--extension",
    "extension_path",
    metavar="FILE",
    help="Opt-in sealeval/comparison-policy-extension-v1: add p-values, flips and how many "
    "more pairs (re-scores the pack's runs).",
)
@click.option(
    "--compat",
    type=click.Choice(["invarlock"]),
    default=None,
    help="Write Markdown and JUnit with the reference's exact wording (invarlock's bytes) "
    "and print the Markdown even when writing files, as the reference does.",
)
def report_command(
    evidence: str,
    *,
    html_path: str | None,
    markdown_path: str | None,
    junit_path: str | None,
    explain: bool,
    as_json: bool,
    uncapped: bool,
    decision_order: str,
    extension_path: str | None,
    compat: str | None,
) -> None:
    """Render the stored comparison of a captured evidence pack.

    The report is a presentation of the stored evidence: it examines the
    pack but performs no replay, no scoring and no verification, so it
    confers no verification authority. Exit 0 when rendered, 2 on any
    failure (a pack that fails examination, an inconsistent report, an
    unusable destination). With --extension the opt-in extended
    statistics are added to every format (recomputed from the pack's runs).
    Markdown goes to standard output only when no file is written (and without
    --json); --compat invarlock prints it always, as the reference does.
    """
    wording = "invarlock" if compat == "invarlock" else "sealeval"
    given = {"html": html_path, "junit": junit_path, "markdown": markdown_path}
    requested = {fmt: path for fmt, path in given.items() if path is not None}
    written: dict[str, str] = {}
    failed: str | None = None
    try:
        with terminal_progress() as progress:
            destinations = check_destinations(evidence, requested)
            progress("examining", 0, 1)
            pack = read_evidence_pack(
                evidence,
                limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
                decision_order=decision_order,
                # The report renders the stored comparison: large runs are read as
                # facts (checked and hashed, no record kept); --extension re-scores
                # them streamed from the pack's files.
                runs="outline",
            )
            extended = None
            if extension_path is not None:
                extension = load_policy_extension(
                    read_file_bytes(Path(extension_path), _MAX_EXTENSION_BYTES, "extension")
                )
                extended = extended_for_pack(pack, extension, progress=progress)
            markdown = render_markdown(pack, explain=explain, extended=extended, wording=wording)
            rendered = {
                "html": lambda: render_html(pack, extended=extended).encode("utf-8"),
                "junit": lambda: render_junit(pack, extended=extended, wording=wording),
                "markdown": lambda: markdown.encode("utf-8"),
            }
            chosen = [name for name in FORMATS if name in destinations]
            outputs: dict[str, bytes] = {}
            for name in chosen:
                progress("rendering", len(outputs), len(chosen))
                outputs[name] = rendered[name]()
            for fmt, data in outputs.items():
                failed = fmt
                _publish(destinations[fmt], data, f"outputs.{fmt}")
                written[fmt] = requested[fmt]
                failed = None
    except SealevalError as error:
        if not as_json:
            exit_ = fail(error, _TYPED)
            hint = limit_remedy("report", error.code, error.field, uncapped=uncapped)
            if hint is not None:
                click.echo(f"sealeval: {hint}", err=True)
            raise exit_ from None
        document = report_result(
            ok=False,
            pack_manifest_digest=None,
            requested_outputs=requested,
            written_outputs=written,
            failed_output=failed,
            errors=[str(error)],
        )
        click.echo(encode_result(document), nl=False)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    if as_json:
        document = report_result(
            ok=True,
            pack_manifest_digest=pack.manifest_digest,
            requested_outputs=requested,
            written_outputs=written,
            failed_output=None,
            errors=[],
        )
        click.echo(encode_result(document), nl=False)
    elif not written or compat == "invarlock":
        click.echo(markdown, nl=False)
