"""Log an evidence pack, its decision and its reports to an MLflow run (extra ``sealeval[mlflow]``).

:func:`log_pack_to_mlflow` first examines the pack exactly as ``sealeval
report`` does (:func:`~sealeval.captured.pack_reader.read_evidence_pack`:
inventory, digests, ledger, signature if signed, bindings), then logs:

* **artifacts** — the pack's files under ``sealeval/evidence/`` (byte for
  byte, so ``sealeval verify`` can run on a download) and the rendered
  reports under ``sealeval/reports/`` (``report.md``, ``report.html``,
  ``junit.xml``);
* **tags** — ``sealeval.decision``, ``sealeval.authentication``,
  ``sealeval.pack_manifest_digest``, ``sealeval.comparison_id``,
  ``sealeval.request_digest``, ``sealeval.policy_digest``,
  ``sealeval.baseline_run_digest``, ``sealeval.subject_run_digest``;
* **metrics** — per report entry with an interval, ``sealeval.<metric>.<slice>.delta``
  (and ``.baseline_mean`` / ``.subject_mean``), names reduced to MLflow's
  allowed characters.

Memory does not grow with the runs: the pack is examined with its large run
files kept as outlines (``runs="outline"``, as ``sealeval report`` does); the
metrics come from the stored comparison report; the pack's files are copied
into a private temporary folder in 1 MiB chunks through descriptors (no link
followed, each file the one examined, and the pack re-scanned unchanged after
the copy), and MLflow uploads that copy.

Logging is not verification: the tags say what the pack *records*. With no
``run_id`` a new run is created in ``experiment_name`` and ended
(``FINISHED``, or ``FAILED`` if logging failed). Refusals are
:class:`MlflowLogError` with a closed code; MLflow's own messages (which may
quote paths or URIs) are never passed on.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._fs import (
    create_directory,
    create_exclusive,
    descend,
    open_directory,
    open_regular,
    translated,
)
from sealeval._progress import Progress, notify
from sealeval.captured.pack_reader import (
    REFERENCE_PACK_LIMITS,
    UNCAPPED_PACK_LIMITS,
    EvidencePack,
    EvidencePackError,
    read_evidence_pack,
)
from sealeval.captured.report import render_html, render_junit, render_markdown
from sealeval.errors import CapturedError, SealevalError

__all__ = [
    "COPY_CHUNK_BYTES",
    "EVIDENCE_PATH",
    "REPORTS_PATH",
    "MlflowLogError",
    "MlflowLogged",
    "copy_examined_pack",
    "log_pack_to_mlflow",
]

#: Artifact folder of the pack's files.
EVIDENCE_PATH: Final = "sealeval/evidence"
#: Artifact folder of the rendered reports.
REPORTS_PATH: Final = "sealeval/reports"
#: Bytes per read when the pack's files are copied for upload.
COPY_CHUNK_BYTES: Final = 1_048_576
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_\-. /]")


class MlflowLogError(CapturedError):
    """Logging to MLflow was refused or failed (message ``<field>: <code>``)."""

    module = "sealeval.integrations.mlflow"
    codes = frozenset(
        {"mlflow_unavailable", "mlflow_failed", "invalid_run_id", "scratch_unwritable"}
    )


@dataclass(frozen=True, slots=True)
class MlflowLogged:
    """Where the pack went: the MLflow run, the recorded decision and the tags set."""

    run_id: str
    decision: str
    tags: dict[str, str]


def pack_tags(pack: EvidencePack) -> dict[str, str]:
    """Return the tags of a pack (digests, decision, authentication)."""
    request = pack.request
    return {
        "sealeval.decision": pack.decision,
        "sealeval.authentication": pack.authentication,
        "sealeval.pack_manifest_digest": pack.manifest_digest,
        "sealeval.comparison_id": pack.comparison_id,
        "sealeval.request_digest": request.digest,
        "sealeval.policy_digest": request.policy_digest,
        "sealeval.baseline_run_digest": request.baseline_run_digest,
        "sealeval.subject_run_digest": request.subject_run_digest,
    }


def _metric_name(*parts: str) -> str:
    return _UNSAFE_NAME.sub("_", ".".join(("sealeval", *parts)))[:250]


def pack_metrics(pack: EvidencePack) -> dict[str, float]:
    """Return the numeric facts of the report's entries (means and delta), by metric name."""
    metrics: dict[str, float] = {}
    for entry in pack.report.get("metrics", ()):
        for member in ("delta", "baseline_mean", "subject_mean"):
            value = entry.get(member)
            if type(value) in (int, float):
                metrics[_metric_name(entry["name"], entry["slice"], member)] = float(value)
    return metrics


def _client(tracking_uri: str | None) -> Any:
    try:
        from mlflow.tracking import MlflowClient  # noqa: PLC0415 - optional extra
    except ImportError:
        raise MlflowLogError("mlflow_unavailable", "mlflow") from None
    return MlflowClient(tracking_uri=tracking_uri)


def _copy_file(root_fd: int, name: str, identity: Any, target_fd: int) -> None:
    """Copy one examined file in chunks; refuse (``file_changed``) another file in its place.

    ``target_fd`` is the copy's root folder; the file is created below it
    exclusively (``0600``), its folders being the ones created before it.
    """
    *parents, leaf = name.split("/")
    with translated(EvidencePackError, "pack", default="file_changed"):
        folder = descend(os.dup(root_fd), parents)
        try:
            source = open_regular(leaf, dir_fd=folder)
        finally:
            os.close(folder)
    try:
        found = os.fstat(source)
        if (found.st_dev, found.st_ino, found.st_size) != (
            identity.device,
            identity.inode,
            identity.size,
        ):
            raise EvidencePackError("file_changed", "pack")
        with _scratch():
            parent = descend(os.dup(target_fd), parents)
            try:
                create_exclusive(parent, leaf, iter(lambda: os.read(source, COPY_CHUNK_BYTES), b""))
            finally:
                os.close(parent)
    finally:
        os.close(source)


def _scratch() -> Any:
    """Map a write refusal in the private scratch folder onto ``scratch_unwritable``."""
    return translated(MlflowLogError, "scratch", default="scratch_unwritable")


def _make_folder(parent_fd: int, name: str) -> None:
    """Create ``name`` (``a/b``: below its folders) under ``parent_fd``, 0700, exclusively."""
    *parents, leaf = name.split("/")
    with _scratch():
        parent = descend(os.dup(parent_fd), parents)
        try:
            os.close(create_directory(leaf, dir_fd=parent, mode=0o700))
        finally:
            os.close(parent)


def copy_examined_pack(pack: EvidencePack, folder: Path) -> None:
    """Copy every entry of an examined pack into ``folder`` (an empty private folder).

    Folders are created 0700 and files 0600, exclusively and below a
    descriptor of ``folder`` (:mod:`sealeval._fs`: nothing existing is
    reused, no link followed); each file is opened below the pack's root by
    descriptor, must be the file examined (device, inode, size) and is copied
    in :data:`COPY_CHUNK_BYTES` chunks. The pack is then re-scanned
    (:meth:`EvidencePack.check_unchanged`), so the copy holds the examined bytes.

    Raises:
        EvidencePackError: ``file_changed`` (the pack changed since it was examined).
        MlflowLogError: ``scratch_unwritable`` (``folder`` is missing, not
            empty where the pack has an entry, or cannot be written).
    """
    with _scratch():
        target_fd = open_directory(folder)
    try:
        with translated(EvidencePackError, "pack", default="file_changed"):
            root_fd = open_directory(pack.path)
        try:
            for name in sorted(pack.snapshot.entries):
                identity = pack.snapshot.entries[name]
                if name == ".":
                    continue
                if stat.S_ISDIR(identity.mode):
                    _make_folder(target_fd, name)
                else:
                    _copy_file(root_fd, name, identity, target_fd)
        finally:
            os.close(root_fd)
    finally:
        os.close(target_fd)
    pack.check_unchanged()


def _write_reports(pack: EvidencePack, folder_fd: int) -> None:
    outputs = {
        "report.md": render_markdown(pack).encode("utf-8"),
        "report.html": render_html(pack).encode("utf-8"),
        "junit.xml": render_junit(pack),
    }
    for name, data in outputs.items():
        with _scratch():
            create_exclusive(folder_fd, name, data)


def _experiment(client: Any, name: str) -> str:
    found = client.get_experiment_by_name(name)
    return str(found.experiment_id if found is not None else client.create_experiment(name))


def log_pack_to_mlflow(
    pack_dir: str | os.PathLike[str],
    run_id: str | None = None,
    *,
    tracking_uri: str | None = None,
    experiment_name: str = "sealeval",
    run_name: str | None = None,
    client: Any = None,
    uncapped: bool = False,
    decision_order: str = "reference",
    progress: Progress | None = None,
) -> MlflowLogged:
    """Examine ``pack_dir`` and log it, its decision and its reports to an MLflow run.

    Args:
        pack_dir: the evidence pack directory.
        run_id: an existing MLflow run to log into (left running); ``None``
            creates a run in ``experiment_name`` and ends it.
        tracking_uri: the tracking URI (default: MLflow's own resolution,
            ``MLFLOW_TRACKING_URI``).
        experiment_name: the experiment of a new run.
        run_name: the name of a new run.
        client: an ``mlflow.tracking.MlflowClient`` to use instead.
        uncapped: read a pack built with ``evaluate --uncapped``.
        decision_order: read a pack built with ``--decision-order width_first``.
        progress: optional :data:`sealeval._progress.Progress` callback
            (``examining``, ``rendering``); counts only.

    Returns:
        The run id, the recorded decision and the tags set.

    Raises:
        EvidencePackError: the pack fails examination, or changed before it
            was copied (``file_changed``) (nothing is logged).
        ReportError: the report fails the consistency checks (nothing is logged).
        MlflowLogError: ``mlflow_unavailable`` (extra not installed),
            ``invalid_run_id``, ``mlflow_failed`` (MLflow refused; its
            message is dropped), ``scratch_unwritable`` (the private
            temporary copy could not be written).
    """
    if run_id is not None and (type(run_id) is not str or not run_id):
        raise MlflowLogError("invalid_run_id", "run_id")
    notify(progress, "examining", 0, 1)
    pack = read_evidence_pack(
        pack_dir,
        limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
        decision_order=decision_order,
        runs="outline",
    )
    tags = pack_tags(pack)
    metrics = pack_metrics(pack)
    mlflow = client if client is not None else _client(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="sealeval-mlflow-") as scratch:
        reports = Path(scratch) / "reports"
        evidence = Path(scratch) / "evidence"
        with _scratch():
            scratch_fd = open_directory(scratch)
            try:
                os.close(create_directory(evidence.name, dir_fd=scratch_fd))
                reports_fd = create_directory(reports.name, dir_fd=scratch_fd)
            finally:
                os.close(scratch_fd)
        notify(progress, "rendering", 0, 2)
        try:
            _write_reports(pack, reports_fd)
        finally:
            os.close(reports_fd)
        notify(progress, "rendering", 1, 2)
        copy_examined_pack(pack, evidence)
        notify(progress, "rendering", 2, 2)
        created = run_id is None
        try:
            if run_id is None:
                run_id = str(
                    mlflow.create_run(
                        _experiment(mlflow, experiment_name), run_name=run_name
                    ).info.run_id
                )
            for name, value in tags.items():
                mlflow.set_tag(run_id, name, value)
            for name, number in metrics.items():
                mlflow.log_metric(run_id, name, number)
            mlflow.log_artifacts(run_id, os.fspath(evidence), EVIDENCE_PATH)
            mlflow.log_artifacts(run_id, os.fspath(reports), REPORTS_PATH)
        except SealevalError:
            raise
        except Exception:  # noqa: BLE001 - MLflow's messages may quote paths and URIs
            if created and run_id is not None:
                _end(mlflow, run_id, "FAILED")
            raise MlflowLogError("mlflow_failed", "mlflow") from None
    if created:
        _end(mlflow, run_id, "FINISHED")
    return MlflowLogged(run_id=run_id, decision=pack.decision, tags=tags)


def _end(client: Any, run_id: str, status: str) -> None:
    try:
        client.set_terminated(run_id, status=status)
    except Exception:  # noqa: BLE001 - best effort; the caller gets the closed code
        raise MlflowLogError("mlflow_failed", "mlflow") from None
