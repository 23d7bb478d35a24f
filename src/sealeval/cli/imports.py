"""``sealeval import``: turn a recorded result file into a canonical evaluation run.

The command streams records from the source into the run file while it is
hashed (:func:`sealeval.captured.importers.import_run_streaming`): memory
does not grow with the records already written, and there is no record cap
unless ``--compat-invarlock`` asks for the reference's envelope (50,000
records, 128 MiB). The output is created exclusively (never overwritten) and
published atomically; on any refusal nothing is written.

Exit status: 0 written (the run digest is printed on standard output and a
summary line on standard error; ``--json`` prints the summary as JSON on
standard output instead), 2
refused (``sealeval: error: <field>: <code>`` on standard error; values and
paths are never printed). A progress bar is shown on standard error for
large sources when it is a terminal; otherwise the command is quiet.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import click

from sealeval._progress import terminal_progress
from sealeval.canonical import encode_invarlock
from sealeval.captured.importers import (
    AUTO,
    SPECIFIED_ADAPTERS,
    ImportOptions,
    ImportSummary,
    adapter_names,
    import_run_streaming,
    load_run,
)
from sealeval.captured.importers.base import ImportRefusalError
from sealeval.captured.importers.inputs import ImportArguments
from sealeval.captured.importers.jsonl import decode_document, read_source
from sealeval.captured.importers.per_task import import_inspect_tasks
from sealeval.captured.importers.registry import FALLBACKS
from sealeval.captured.run import INVARLOCK_LIMITS, UNLIMITED
from sealeval.captured.service_identity import validate_service_identity
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    fail,
    is_terminal,
    refusals_naming,
)
from sealeval.cli._remedies import limit_remedy
from sealeval.errors import CapturedError, SealevalError

__all__ = ["PROGRESS_MIN_BYTES", "adapter_suggestion", "import_command"]

#: Sources at least this large get a progress bar (when standard error is a terminal).
PROGRESS_MIN_BYTES: Final = 8 * 1_048_576
#: Largest ``--service-identity`` / ``--score-provenance`` file.
_OPTION_FILE_BYTES: Final = 4 * 1_048_576


def adapter_suggestion(typed: str) -> str | None:
    """Return the valid adapter name closest to ``typed`` (a list entry, never the input)."""
    names = (AUTO, *adapter_names())
    close = difflib.get_close_matches(typed.lower(), names, n=1, cutoff=0.5)
    return close[0] if close else None


def _check_adapter(adapter: str) -> None:
    """Refuse an unknown ``--adapter``, listing the valid names and the closest one (exit 2)."""
    if adapter == AUTO or adapter in adapter_names():
        return
    click.echo("sealeval: error: adapter: unknown_adapter", err=True)
    click.echo(f"sealeval: valid adapters: {', '.join((AUTO, *adapter_names()))}", err=True)
    suggestion = adapter_suggestion(adapter)
    if suggestion is not None:
        click.echo(f"sealeval: did you mean --adapter {suggestion}?", err=True)
    raise click.exceptions.Exit(EXIT_ERROR)


def _source(spec: str | None) -> dict[str, str] | None:
    """``NAME@VERSION`` (split at the last ``@``) → ``{name, version}``."""
    if spec is None:
        return None
    name, separator, version = spec.rpartition("@")
    if not separator or not name or not version:
        raise ImportRefusalError("adapter_option_invalid", "source")
    return {"name": name, "version": version}


def _json_file(path: Path | None, field: str) -> Any:
    if path is None:
        return None
    return decode_document(read_source(path, _OPTION_FILE_BYTES, field), field)


def _provenance(path: Path | None) -> Mapping[str, Any] | None:
    value = _json_file(path, "score_provenance")
    if value is not None and type(value) is not dict:
        raise ImportRefusalError("not_object", "score_provenance")
    return value


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


#: What the user typed for import's own inputs (field -> option).
_TYPED: Final = {
    "run_id": "--run-id",
    "artifact_digest": "--artifact-digest",
    "service_identity": "--service-identity",
    "score_provenance": "--score-provenance",
    "input_projection": "--input-projection",
    "output": "--output",
}


@contextmanager
def _progress_bar(path: Path) -> Iterator[Any]:
    """Yield a ``progress(completed, total)`` callback, or ``None`` when quiet.

    The bar is :mod:`sealeval._progress`'s (phase ``importing``, bytes).
    """
    if not is_terminal() or _size(path) < PROGRESS_MIN_BYTES:
        yield None
        return
    with terminal_progress(enabled=True) as reporter:

        def update(completed: int, total: int) -> None:
            reporter("importing", completed, total)

        yield update


@click.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=click.Path(path_type=Path, dir_okay=True, file_okay=True))
@click.option(
    "--adapter",
    default=AUTO,
    show_default=True,
    metavar="NAME",
    help=(
        "Source format: auto (recognised from the content), "
        + ", ".join(SPECIFIED_ADAPTERS)
        + ", or a native format (docs/importers.md)."
    ),
)
@click.option(
    "--source",
    "source_spec",
    metavar="NAME@VERSION",
    help="The evaluator that produced the results (split at the last @).",
)
@click.option("--run-id", metavar="ID", help="The run's id.")
@click.option(
    "--artifact-digest",
    metavar="sha256:HEX",
    help="Digest of the evaluated model artifact.",
)
@click.option(
    "--service-identity",
    type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
    metavar="FILE",
    help="Hosted service descriptor (JSON) instead of an artifact digest.",
)
@click.option(
    "--score-provenance",
    type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
    metavar="FILE",
    help="JSON object: score name -> {kind, source, version, unit, rubric_digest}.",
)
@click.option(
    "--input-projection",
    metavar="POINTER",
    help="JSON pointer selecting each record's text input (/input/... or /context/...).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
    help="The canonical run file to create (never overwritten).",
)
@click.option(
    "--compat-invarlock",
    is_flag=True,
    help="Apply invarlock's limits (50,000 records, 128 MiB).",
)
@click.option(
    "--nan-as-error",
    is_flag=True,
    help="Refuse NaN metrics in lm-eval samples instead of treating them as missing scores.",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Import a file holding fewer records than it states (counts kept in the context).",
)
@click.option(
    "--metadata-field",
    "metadata_fields",
    multiple=True,
    metavar="PATH",
    help="Keep a document field as slice metadata (dotted path, e.g. doc.subject; repeatable).",
)
@click.option(
    "--timestamp",
    metavar="STAMP",
    help="lm-eval output folder: read this run timestamp (default: the latest per task).",
)
@click.option(
    "--per-task",
    is_flag=True,
    help="Inspect log folder: one run per task, <task>.json in the new folder -o.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the import summary as one JSON object on standard output.",
)
@refusals_naming(_TYPED)
def import_command(
    *,
    path: Path,
    adapter: str,
    source_spec: str | None,
    run_id: str | None,
    artifact_digest: str | None,
    service_identity: Path | None,
    score_provenance: Path | None,
    input_projection: str | None,
    output: Path,
    compat_invarlock: bool,
    nan_as_error: bool,
    allow_partial: bool,
    metadata_fields: tuple[str, ...],
    timestamp: str | None,
    per_task: bool,
    as_json: bool,
) -> None:
    """Import recorded evaluation results (a file or an output folder) as a run.

    After the import one summary line goes to standard error: the adapter
    used, records, errored records, tasks and the run digest (--json: the
    same facts as one JSON object on standard output instead of the digest).
    """
    identity = _json_file(service_identity, "service_identity")
    _check_adapter(adapter)
    arguments: ImportArguments = {
        "source": _source(source_spec),
        "run_id": run_id,
        "artifact_digest": artifact_digest,
        "service_identity": None if identity is None else validate_service_identity(identity),
        "score_provenance": _provenance(score_provenance),
        "input_projection": (
            None
            if input_projection is None
            else {"kind": "json-pointer", "pointer": input_projection}
        ),
        "limits": INVARLOCK_LIMITS if compat_invarlock else UNLIMITED,
        "options": ImportOptions(
            nan_as_missing_score=not nan_as_error,
            allow_partial=allow_partial,
            metadata_fields=tuple(metadata_fields),
            timestamp=timestamp,
        ),
    }
    if per_task:
        _per_task(path, adapter, output, arguments, as_json=as_json)
        return
    summary: ImportSummary
    try:
        with _progress_bar(path) as progress:
            summary = import_run_streaming(
                path, output, adapter=adapter, progress=progress, **arguments
            )
    except CapturedError as error:
        _hint(path, adapter, arguments)
        remedy = limit_remedy(
            "import", error.code, error.field, compat_invarlock=compat_invarlock
        ) or _marked_remedy(error, allow_partial=allow_partial)
        if remedy is None:
            raise
        exit_ = fail(error, _TYPED)
        click.echo(f"sealeval: {remedy}", err=True)
        raise exit_ from None
    if as_json:
        click.echo(encode_invarlock(summary.document()).decode("utf-8"))
    else:
        click.echo(summary.run_digest)
        click.echo(summary.line(), err=True)


def _per_task(
    path: Path, adapter: str, output: Path, arguments: ImportArguments, *, as_json: bool
) -> None:
    """``--per-task``: one run file per task of an Inspect log folder (stdout: file, digest)."""
    if adapter not in (AUTO, "inspect-folder"):
        raise ImportRefusalError("adapter_option_invalid", "per_task")
    if not path.is_dir():
        raise ImportRefusalError("adapter_option_invalid", "per_task")
    runs = import_inspect_tasks(path, output, **arguments)
    if as_json:
        document = {"runs": [run.document() for run in runs]}
        click.echo(encode_invarlock(document).decode("utf-8"))
        return
    for run in runs:
        click.echo(f"{run.file} {run.summary.run_digest}")
        click.echo(f"{run.file}: {run.summary.line()}", err=True)


#: Refusals ``--allow-partial`` may lift (a short export, a cancelled Inspect log).
_PARTIAL_CODES: Final = frozenset({"incomplete_export", "incomplete_run"})
_PARTIAL_REMEDY: Final = (
    "--allow-partial imports the samples this file holds "
    "(the stated and present counts go into each record's context)"
)
#: The other remedies an importer may mark (ImportRefusalError.REMEDIES); never the file's values.
_REMEDIES: Final = {
    "deepeval_uploaded": (
        "hint: this DeepEval file holds only the link of a test run uploaded to Confident AI, "
        "not its results; run deepeval with DEEPEVAL_RESULTS_FOLDER set to a local folder "
        "(it then writes test_run_<timestamp>.json there) and import that file"
    ),
}


def _marked_remedy(error: CapturedError, *, allow_partial: bool) -> str | None:
    """Return the remedy the importer marked on its refusal (nothing read again), else ``None``.

    ``--allow-partial`` is named after a refusal it lifts (``incomplete_export``,
    ``incomplete_run``: the importer's mark says so), never when it was given.
    """
    if not isinstance(error, ImportRefusalError):
        return None
    if error.lifted_by_allow_partial:
        return None if allow_partial or error.code not in _PARTIAL_CODES else _PARTIAL_REMEDY
    return _REMEDIES.get(error.remedy or "")


def _hint(path: Path, adapter: str, arguments: ImportArguments) -> None:
    """After a named specified adapter's refusal, name the native reader that reads the file."""
    fallback = FALLBACKS.get(adapter)
    if fallback is None:
        return
    try:
        load_run(path, fallback, **arguments)
    except SealevalError:
        return
    click.echo(f"sealeval: hint: --adapter {fallback} (or auto) reads this file", err=True)
