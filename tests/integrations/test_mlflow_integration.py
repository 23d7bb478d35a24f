"""log_pack_to_mlflow against a real MLflow client and a local file store (``file:`` URI).

MLflow 3 keeps its file store in maintenance mode behind
``MLFLOW_ALLOW_FILE_STORE=true``; the test opts in for its own store only.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

import sealeval.captured.pack_reader as pack_reader_module
import sealeval.integrations.mlflow as mlflow_module
from sealeval.captured.pack_reader import EvidencePack, EvidencePackError, read_evidence_pack
from sealeval.captured.run_facts import RunFacts
from sealeval.integrations.mlflow import (
    EVIDENCE_PATH,
    REPORTS_PATH,
    MlflowLogError,
    copy_examined_pack,
    log_pack_to_mlflow,
    pack_metrics,
)
from support.refusals import CANARY
from support.view_workspace import Workspace, build_workspace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("mlflow"))


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def _files(client: MlflowClient, run_id: str, path: str) -> set[str]:
    found: set[str] = set()
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            found |= _files(client, run_id, info.path)
        else:
            found.add(info.path)
    return found


@pytest.mark.parametrize("pack_name", ["pack", "vector_pack"])
def test_pack_decision_and_reports_are_logged(
    workspace: Workspace, store: str, tmp_path: Path, pack_name: str
) -> None:
    pack_dir = workspace.root / getattr(workspace, pack_name)
    pack = read_evidence_pack(pack_dir)
    logged = log_pack_to_mlflow(pack_dir, tracking_uri=store, run_name="gate")
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(logged.run_id)
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["sealeval.decision"] == pack.decision == logged.decision
    assert tags["sealeval.pack_manifest_digest"] == pack.manifest_digest
    assert tags["sealeval.authentication"] == pack.authentication
    assert tags["sealeval.baseline_run_digest"] == pack.baseline.digest
    assert tags["sealeval.subject_run_digest"] == pack.subject.digest
    assert tags["sealeval.comparison_id"] == pack.comparison_id
    with_delta = [entry for entry in pack.report["metrics"] if entry["delta"] is not None]
    for entry in with_delta:
        name = f"sealeval.{entry['name']}.{entry['slice']}.delta"
        assert run.data.metrics[name] == pytest.approx(entry["delta"])
    evidence = {str(path.relative_to(pack_dir)) for path in pack_dir.rglob("*") if path.is_file()}
    logged_evidence = {
        path.removeprefix(EVIDENCE_PATH + "/")
        for path in _files(client, logged.run_id, EVIDENCE_PATH)
    }
    assert logged_evidence == evidence
    downloaded = Path(client.download_artifacts(logged.run_id, EVIDENCE_PATH, str(tmp_path)))
    for relative in evidence:
        original = hashlib.sha256((pack_dir / relative).read_bytes()).hexdigest()
        assert hashlib.sha256((downloaded / relative).read_bytes()).hexdigest() == original
    assert read_evidence_pack(downloaded).manifest_digest == pack.manifest_digest
    reports = {path.rsplit("/", 1)[1] for path in _files(client, logged.run_id, REPORTS_PATH)}
    assert reports == {"report.md", "report.html", "junit.xml"}


def test_logging_into_an_existing_run_leaves_it_running(workspace: Workspace, store: str) -> None:
    client = MlflowClient(tracking_uri=store)
    experiment = client.create_experiment("mine")
    run = client.create_run(experiment)
    logged = log_pack_to_mlflow(workspace.root / workspace.pack, run.info.run_id, client=client)
    assert logged.run_id == run.info.run_id
    refreshed = client.get_run(run.info.run_id)
    assert refreshed.info.status == "RUNNING"
    assert refreshed.data.tags["sealeval.decision"] == "regression"


def test_refusals(workspace: Workspace, store: str, tmp_path: Path) -> None:
    with pytest.raises(MlflowLogError) as caught:
        log_pack_to_mlflow(workspace.root / workspace.pack, "", tracking_uri=store)
    assert (caught.value.code, caught.value.field) == ("invalid_run_id", "run_id")
    with pytest.raises(MlflowLogError) as failed:
        log_pack_to_mlflow(
            workspace.root / workspace.pack, "0" * 32, tracking_uri=store
        )  # no such run
    assert failed.value.code == "mlflow_failed"
    assert store not in str(failed.value)
    not_a_pack = tmp_path / "not-a-pack"
    not_a_pack.mkdir()
    with pytest.raises(EvidencePackError):
        log_pack_to_mlflow(not_a_pack, tracking_uri=store)
    client = MlflowClient(tracking_uri=store)
    assert client.search_experiments() == [] or all(
        not client.search_runs([experiment.experiment_id])
        for experiment in client.search_experiments()
    )


def _spied_reader(monkeypatch: pytest.MonkeyPatch, after: Any = None) -> list[EvidencePack]:
    """Record the packs the integration examines; run ``after`` on each."""
    seen: list[EvidencePack] = []

    def spied(*args: Any, **kwargs: Any) -> EvidencePack:
        pack = read_evidence_pack(*args, **kwargs)
        seen.append(pack)
        if after is not None:
            after(pack)
        return pack

    monkeypatch.setattr(mlflow_module, "read_evidence_pack", spied)
    return seen


def test_large_runs_are_logged_as_outlines_with_the_same_bytes(
    workspace: Workspace, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run files past the streaming threshold are never held; the upload is byte for byte."""
    pack_dir = workspace.root / workspace.pack
    monkeypatch.setattr(pack_reader_module, "STREAM_MIN_BYTES", 0)
    seen = _spied_reader(monkeypatch)
    phases: list[str] = []
    logged = log_pack_to_mlflow(
        pack_dir,
        tracking_uri=store,
        uncapped=True,
        progress=lambda phase, _done, _total: phases.append(phase),
    )
    assert isinstance(seen[0].baseline, RunFacts)
    assert isinstance(seen[0].subject, RunFacts)
    assert {"examining", "rendering"} <= set(phases)
    client = MlflowClient(tracking_uri=store)
    run = client.get_run(logged.run_id)
    assert run.data.tags["sealeval.decision"] == seen[0].decision
    assert set(run.data.metrics) == set(pack_metrics(seen[0]))
    downloaded = Path(client.download_artifacts(logged.run_id, EVIDENCE_PATH, str(tmp_path)))
    originals = {
        p.relative_to(pack_dir): p.read_bytes() for p in pack_dir.rglob("*") if p.is_file()
    }
    copies = {
        p.relative_to(downloaded): p.read_bytes() for p in downloaded.rglob("*") if p.is_file()
    }
    assert copies == originals


def test_a_pack_changed_after_examination_is_refused_and_nothing_logged(
    workspace: Workspace, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack_dir = tmp_path / "pack"
    shutil.copytree(workspace.root / workspace.pack, pack_dir)
    record = pack_dir / "records" / "subject.json"

    def replace(_pack: EvidencePack) -> None:
        record.unlink()
        shutil.copyfile(pack_dir / "records" / "baseline.json", record)

    _spied_reader(monkeypatch, replace)
    with pytest.raises(EvidencePackError) as caught:
        log_pack_to_mlflow(pack_dir, tracking_uri=store)
    assert caught.value.code == "file_changed"
    assert str(tmp_path) not in str(caught.value)
    client = MlflowClient(tracking_uri=store)
    assert all(
        not client.search_runs([experiment.experiment_id])
        for experiment in client.search_experiments()
    )


def test_the_scratch_copy_is_private_exclusive_and_refused_when_occupied(
    workspace: Workspace, tmp_path: Path
) -> None:
    """copy_examined_pack writes through sealeval._fs: 0700 folders, 0600 files, never reusing."""
    pack_dir = workspace.root / workspace.pack
    pack = read_evidence_pack(pack_dir)
    copy = tmp_path / "copy"
    copy.mkdir(mode=0o700)
    copy_examined_pack(pack, copy)
    originals = {p.relative_to(pack_dir): p for p in pack_dir.rglob("*")}
    copies = {p.relative_to(copy): p for p in copy.rglob("*")}
    assert set(copies) == set(originals)
    assert any(p.is_dir() for p in copies.values())
    for relative, path in copies.items():
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir():
            assert mode == 0o700, relative
        else:
            assert mode == 0o600, relative
            assert path.read_bytes() == originals[relative].read_bytes()
    # an occupied folder (an entry of the pack already there) or a missing one is refused
    for target in (copy, tmp_path / CANARY):
        with pytest.raises(MlflowLogError) as caught:
            copy_examined_pack(pack, target)
        assert (caught.value.code, caught.value.field) == ("scratch_unwritable", "scratch")
        assert CANARY not in str(caught.value)
        assert str(tmp_path) not in str(caught.value)
