"""``sealeval view``: catalog, confinement, HTTP surface and command (no browser)."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from sealeval.captured.pack_reader import read_evidence_pack
from sealeval.view import (
    CONTENT_SECURITY_POLICY,
    CatalogLimits,
    ViewError,
    ViewerServer,
    paired_outcomes,
    scan,
    start_viewer,
)
from sealeval.view.catalog import open_below, read_below
from support.integration_samples import FLIPPED_ID
from support.view_workspace import OUTSIDE_CANARY, Workspace, build_workspace


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("view"))


@pytest.fixture(scope="module")
def server(workspace: Workspace) -> Iterator[ViewerServer]:
    viewer, thread = start_viewer(workspace.root)
    try:
        yield viewer
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(timeout=10)


def _get(
    server: ViewerServer, target: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {"Host": host} if host is not None else {}
    connection.request(method, target, headers=headers)
    response = connection.getresponse()
    body = response.read().decode("utf-8")
    connection.close()
    return response.status, dict(response.getheaders()), body


def test_catalog_lists_every_kind_and_skips_links(workspace: Workspace) -> None:
    catalog = scan(workspace.root)
    found = {(item.kind, item.path) for item in catalog.items}
    assert {
        ("pack", workspace.pack),
        ("pack", workspace.vector_pack),
        ("receipt", workspace.receipt),
        ("comparison", workspace.comparison),
        ("run", workspace.hostile_run),
        ("run", "gate/runs/baseline.run.json"),
        ("run", "gate/runs/candidate.run.json"),
    } == found
    assert catalog.skipped_links == 2
    assert not catalog.truncated
    assert [item.kind for item in catalog.items] == sorted(
        (item.kind for item in catalog.items), key=("pack", "comparison", "run", "receipt").index
    )


def test_catalog_bounds_stop_the_walk(workspace: Workspace) -> None:
    shallow = scan(workspace.root, limits=CatalogLimits(max_depth=1))
    assert shallow.truncated
    assert all("/" not in item.path for item in shallow.items)
    few = scan(workspace.root, limits=CatalogLimits(max_items=2))
    assert len(few.items) == 2
    assert few.truncated


def test_catalog_passes_odd_entries_over_and_keeps_the_first_within_the_bound(
    tmp_path: Path,
) -> None:
    head = b'{"format": "invarlock/evaluation-run-v1"}'
    names = [f"r{index}.run.json" for index in range(5)]
    for name in names:
        (tmp_path / name).write_bytes(head)
    os.mkfifo(tmp_path / "a.fifo.json")  # a special file: skipped, never opened
    (tmp_path / os.fsdecode(b"\xff.json")).write_bytes(head)  # an undecodable name: skipped
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.run.json").write_bytes(head)  # hidden folders are not searched
    catalog = scan(tmp_path)
    assert [item.path for item in catalog.items] == names
    assert not catalog.truncated
    bounded = scan(tmp_path, limits=CatalogLimits(max_entries=4))
    assert bounded.truncated
    # the first entries in name order: .hidden, a.fifo.json, r0, r1 -- then the bound
    assert [item.path for item in bounded.items] == names[:2]


@pytest.mark.parametrize(
    ("relative", "code"),
    [
        pytest.param("../outside/note.txt", "unsafe_path", id="parent"),
        pytest.param("/etc/hostname", "unsafe_path", id="absolute"),
        pytest.param("gate/./runs", "unsafe_path", id="dot-component"),
        pytest.param("linked.run.json", "not_found", id="symlinked-file"),
        pytest.param("linked-dir/note.txt", "not_found", id="symlinked-directory"),
        pytest.param("gate", "not_found", id="directory-as-file"),
        pytest.param("missing.json", "not_found", id="missing"),
    ],
)
def test_confined_reads_refuse_with_codes(workspace: Workspace, relative: str, code: str) -> None:
    with pytest.raises(ViewError) as caught:
        read_below(workspace.root, relative)
    assert caught.value.code == code
    assert OUTSIDE_CANARY not in str(caught.value)
    assert relative not in str(caught.value)


def test_confined_read_limits_size(workspace: Workspace) -> None:
    with pytest.raises(ViewError) as caught:
        read_below(workspace.root, workspace.hostile_run, limits=CatalogLimits(max_file_bytes=10))
    assert caught.value.code == "too_large"
    with open_below(workspace.root, "gate", directory=True) as fd:
        assert os.fstat(fd).st_ino == (workspace.root / "gate").stat().st_ino


def test_scan_refuses_a_non_directory(workspace: Workspace) -> None:
    for target in (
        workspace.root / "missing",
        workspace.root / "linked-dir",
        workspace.root / workspace.hostile_run,
    ):
        with pytest.raises(ViewError) as caught:
            scan(target)
        assert caught.value.code == "not_a_directory"


def test_paired_outcomes_find_the_flipped_case(workspace: Workspace) -> None:
    pack = read_evidence_pack(workspace.root / workspace.pack)
    outcomes = paired_outcomes(pack.baseline, pack.subject, pack.policy)
    flipped = [outcome for outcome in outcomes if outcome.change in ("regressed", "improved")]
    assert [(o.record_id, o.change, o.transition) for o in flipped] == [
        (FLIPPED_ID, "regressed", "right → wrong")
    ]
    errored = {record.id for record in pack.baseline.records if record.error is not None}
    assert errored
    assert {o.record_id for o in outcomes if o.change == "missing"} == errored
    assert len(outcomes) == len(pack.baseline.records) * len(pack.policy.metrics)
    assert flipped[0].scopes == ("overall", "easy")


def _tree(base: Path) -> dict[str, bytes]:
    """Every entry below ``base``: file bytes, or a link's target marked as such."""
    found: dict[str, bytes] = {}
    for directory, names, files in os.walk(base):
        for name in [*names, *files]:
            path = Path(directory, name)
            relative = path.relative_to(base).as_posix()
            if path.is_symlink():
                found[relative] = b"link:" + os.fsencode(os.readlink(path))
            elif path.is_file():
                found[relative] = path.read_bytes()
    return found


def _viewer_pages(root: Path) -> dict[str, bytes]:
    """The index and every listed item's page (packs: their cases page too), as served."""
    targets = ["/"]
    for item in scan(root).items:
        targets.append(f"/{item.kind}?" + urlencode({"path": item.path}))
        if item.kind == "pack":
            targets.append("/cases?" + urlencode({"path": item.path}))
    viewer, thread = start_viewer(root)
    try:
        served = {target: _get(viewer, target) for target in targets}
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(timeout=10)
    assert all(status == 200 for status, _, _ in served.values())
    return {target: body.encode("utf-8") for target, (_, _, body) in served.items()}


def test_two_builds_in_two_folders_give_the_same_bytes_and_pages(
    workspace: Workspace, tmp_path: Path
) -> None:
    again = build_workspace(tmp_path)
    assert again.root != workspace.root
    first, second = _tree(workspace.root.parent), _tree(again.root.parent)
    assert "evidence-folder/gate/evidence/manifest.json" in first
    assert sorted(first) == sorted(second)
    assert [name for name in first if first[name] != second[name]] == []
    first_pages, second_pages = _viewer_pages(workspace.root), _viewer_pages(again.root)
    assert len(first_pages) == 1 + len(scan(workspace.root).items) + 2
    assert first_pages == second_pages
    assert all(os.fsencode(workspace.root) not in body for body in first_pages.values())


def test_http_surface_is_read_only_loopback_and_strict(
    server: ViewerServer, workspace: Workspace
) -> None:
    assert server.server_address[0] == "127.0.0.1"
    status, headers, body = _get(server, "/")
    assert status == 200
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'none'" in CONTENT_SECURITY_POLICY
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    assert workspace.pack in body
    assert "2 symbolic links skipped" in body
    assert "<script" not in body
    for method in ("POST", "PUT", "DELETE"):
        assert _get(server, "/", method=method)[0] == 405
    assert _get(server, "/", host="attacker.example")[0] == 403
    assert _get(server, "/nope")[0] == 404
    for path in ("../outside/secret.run.json", "/etc/passwd", "linked.run.json", "gate/runs"):
        status, _, body = _get(server, "/run?" + urlencode({"path": path}))
        assert status == 404
        assert "not_listed" in body
        assert OUTSIDE_CANARY not in body
    status, _, body = _get(server, "/pack?" + urlencode({"path": workspace.receipt}))
    assert status == 404


def test_item_pages_render_each_kind(server: ViewerServer, workspace: Workspace) -> None:
    pages = {
        "pack": workspace.pack,
        "run": workspace.hostile_run,
        "comparison": workspace.comparison,
        "receipt": workspace.receipt,
    }
    for kind, path in pages.items():
        status, _, body = _get(server, f"/{kind}?" + urlencode({"path": path}))
        assert status == 200, kind
        assert 'id="error-code"' not in body, kind
    _, _, receipt = _get(server, "/receipt?" + urlencode({"path": workspace.receipt}))
    assert "verdict.decision" in receipt
    _, _, hostile = _get(server, "/run?" + urlencode({"path": workspace.hostile_run}))
    assert "<script>" not in hostile
    assert "&lt;script&gt;" in hostile
    assert "<img" not in hostile


def test_server_logs_nothing(
    server: ViewerServer, workspace: Workspace, capfd: pytest.CaptureFixture[str]
) -> None:
    query = urlencode({"path": workspace.pack, "q": "What is 2+2"})
    assert _get(server, "/cases?" + query)[0] == 200
    _get(server, "/run?" + urlencode({"path": "../" + OUTSIDE_CANARY}))
    _get(server, "/", method="POST")
    captured = capfd.readouterr()
    assert captured.out == ""
    assert captured.err == ""


def test_port_refusals(workspace: Workspace) -> None:
    with pytest.raises(ViewError) as caught:
        ViewerServer(workspace.root, port=70_000)
    assert caught.value.code == "invalid_port"
    first = ViewerServer(workspace.root)
    try:
        with pytest.raises(ViewError) as busy:
            ViewerServer(workspace.root, port=first.port)
        assert busy.value.code == "port_unavailable"
    finally:
        first.server_close()


def test_command_serves_until_interrupted(workspace: Workspace) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sealeval", "view", str(workspace.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("sealeval view: 7 items; open http://127.0.0.1:")
        url = line.split("open ", 1)[1].split(" ", 1)[0]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0
    assert str(workspace.root) not in out + err
    assert err == ""


def test_command_refuses_a_missing_directory_without_echo(tmp_path: Path) -> None:
    missing = tmp_path / OUTSIDE_CANARY
    completed = subprocess.run(
        [sys.executable, "-m", "sealeval", "view", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == "sealeval: error: directory: not_a_directory"
    assert OUTSIDE_CANARY not in completed.stdout + completed.stderr


@pytest.mark.parametrize("port", ["70000", "-1", "CANARY-port", "1e3", ""])
def test_command_refuses_a_bad_port_without_echo(workspace: Workspace, port: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "sealeval", "view", str(workspace.root), "--port", port],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr.strip() == "sealeval: error: port: invalid_port"
    assert "CANARY" not in completed.stdout + completed.stderr
