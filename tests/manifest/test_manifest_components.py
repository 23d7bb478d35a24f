"""Component digest helpers over real files and directory trees."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import pytest

from sealeval.canonical import encode_openmed
from sealeval.errors import (
    ComponentDigestError,
    ConfigDocumentError,
    ManifestError,
    SealevalError,
)
from sealeval.manifest import components
from sealeval.manifest.components import (
    CHUNK_SIZE,
    TREE_DIGEST_HEADER,
    TreeLimits,
    digest_config_document,
    digest_file,
    digest_tree,
)
from sealeval.manifest.snapshot import digest_component, snapshot_components
from support.refusals import assert_refused


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# Files


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, 3 * CHUNK_SIZE + 17])
def test_file_digest_is_sha256_of_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert digest_file(path) == _sha(data)


def test_file_digest_follows_a_named_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert digest_file(tmp_path / "link") == _sha(b"x")


@pytest.mark.parametrize(
    ("make", "code"),
    [
        pytest.param(lambda p: p / "missing", "not_found", id="not-found"),
        pytest.param(lambda p: p, "not_regular_file", id="directory"),
        pytest.param(lambda p: p / "file" / "below-a-file", "unreadable", id="unreadable"),
    ],
)
def test_file_digest_refusals(tmp_path: Path, make: object, code: str) -> None:
    (tmp_path / "file").write_bytes(b"x")
    error = assert_refused(
        lambda: digest_file(make(tmp_path)),  # type: ignore[operator]
        code,
        canaries=(str(tmp_path),),
    )
    assert isinstance(error, ComponentDigestError)


def test_file_changed_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.bin"
    path.write_bytes(b"a" * 10)
    real = os.readv
    grown: list[bool] = []

    def read_then_grow(fd: int, buffers: list[memoryview]) -> int:
        count = real(fd, buffers)
        if not grown:
            grown.append(True)
            with path.open("ab") as handle:
                handle.write(b"more")
        return count

    monkeypatch.setattr(os, "readv", read_then_grow)
    with pytest.raises(ComponentDigestError) as caught:
        digest_file(path)
    assert caught.value.code == "file_changed"


def test_rewrite_with_restored_mtime_during_the_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#13 item 6, deterministic: same size, inode and mtime; only ctime changes."""
    path = tmp_path / "weights.bin"
    path.write_bytes(b"A" * 100)
    info = path.stat()
    real = os.readv
    rewritten: list[bool] = []

    def read_then_rewrite(fd: int, buffers: list[memoryview]) -> int:
        count = real(fd, buffers)
        if not rewritten:
            rewritten.append(True)
            time.sleep(0.01)  # a coarse clock must see the change time move
            with path.open("r+b") as handle:
                handle.write(b"B")
            os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        return count

    monkeypatch.setattr(os, "readv", read_then_rewrite)
    with pytest.raises(ComponentDigestError) as caught:
        digest_file(path)
    assert caught.value.code == "file_changed"
    assert path.stat().st_mtime_ns == info.st_mtime_ns


def _rewrite_keeping_mtime(path: str, seconds: float) -> None:
    info = os.stat(path)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(path, "r+b") as handle:
            handle.write(b"B")
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        with open(path, "r+b") as handle:
            handle.write(b"A")
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_in_place_rewrite_with_restored_mtime_is_refused(tmp_path: Path) -> None:
    """#13 item 6: size, inode and mtime unchanged; the change time gives it away."""
    path = tmp_path / "weights.bin"
    path.write_bytes(b"A" * (16 << 20))
    writer = multiprocessing.get_context("spawn").Process(
        target=_rewrite_keeping_mtime, args=(str(path), 20.0)
    )
    writer.start()
    try:
        codes: set[str] = set()
        deadline = time.monotonic() + 15
        while not codes and time.monotonic() < deadline:
            try:
                digest_file(path)
            except ComponentDigestError as error:
                codes.add(error.code)
    finally:
        writer.terminate()
        writer.join()
    assert codes == {"file_changed"}


# ---------------------------------------------------------------------------
# Directory trees


def _build_model(root: Path) -> None:
    (root / "shards").mkdir(parents=True)
    (root / "shards" / "00001.bin").write_bytes(b"\x00\x01" * 1000)
    (root / "shards" / "00002.bin").write_bytes(b"\x02\x03" * 1000)
    (root / "config.json").write_text('{"layers": 2}', encoding="utf-8")
    (root / "empty").mkdir()
    (root / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (root / "run.sh").chmod(0o755)
    (root / "config-link.json").symlink_to("config.json")


def _independent_tree_digest() -> str:
    """The tree digest of ``_build_model`` computed from the documented format."""
    entries = [
        ["l", "config-link.json", "config.json", "config.json"],
        ["f", "config.json", 13, _sha(b'{"layers": 2}'), False],
        ["d", "empty"],
        ["f", "run.sh", 10, _sha(b"#!/bin/sh\n"), True],
        ["d", "shards"],
        ["f", "shards/00001.bin", 2000, _sha(b"\x00\x01" * 1000), False],
        ["f", "shards/00002.bin", 2000, _sha(b"\x02\x03" * 1000), False],
    ]
    lines = b"".join(encode_openmed(entry).encode() + b"\n" for entry in entries)
    return _sha(TREE_DIGEST_HEADER + lines)


def test_tree_digest_matches_the_documented_format(tmp_path: Path) -> None:
    _build_model(tmp_path / "model")
    assert digest_tree(tmp_path / "model") == _independent_tree_digest()


def test_tree_digest_is_independent_of_creation_order_and_location(tmp_path: Path) -> None:
    _build_model(tmp_path / "a")
    other = tmp_path / "elsewhere" / "b"
    other.mkdir(parents=True)
    (other / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (other / "run.sh").chmod(0o755)
    (other / "config-link.json").symlink_to("config.json")
    (other / "empty").mkdir()
    (other / "config.json").write_text('{"layers": 2}', encoding="utf-8")
    (other / "shards").mkdir()
    (other / "shards" / "00002.bin").write_bytes(b"\x02\x03" * 1000)
    (other / "shards" / "00001.bin").write_bytes(b"\x00\x01" * 1000)
    assert digest_tree(tmp_path / "a") == digest_tree(other)
    (tmp_path / "alias").symlink_to(other)
    assert digest_tree(tmp_path / "alias") == digest_tree(other)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda r: (r / "config.json").write_text('{"layers": 3}'), id="content"),
        pytest.param(
            lambda r: (r / "shards" / "00001.bin").rename(r / "shards" / "00000.bin"), id="rename"
        ),
        pytest.param(lambda r: (r / "empty" / "new").mkdir(), id="new-empty-dir"),
        pytest.param(lambda r: (r / "shards" / "00003.bin").write_bytes(b""), id="new-empty-file"),
        pytest.param(lambda r: (r / "run.sh").chmod(0o644), id="executable-bit"),
        pytest.param(lambda r: (r / "empty").rmdir(), id="removed-dir"),
        pytest.param(
            lambda r: (
                (r / "config-link.json").unlink(),
                (r / "config-link.json").symlink_to("run.sh"),
            ),
            id="symlink-target",
        ),
    ],
)
def test_tree_digest_sees_every_change(tmp_path: Path, change: object) -> None:
    root = tmp_path / "model"
    _build_model(root)
    before = digest_tree(root)
    change(root)  # type: ignore[operator]
    assert digest_tree(root) != before


def test_symlink_to_the_root_is_recorded_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "model"
    root.mkdir()
    (root / "self").symlink_to(root)
    line = encode_openmed(["l", "self", ".", str(root)]).encode()
    expected = _sha(TREE_DIGEST_HEADER + line + b"\n")
    assert digest_tree(root) == expected


def _escaping_symlink(sub: Path) -> None:
    (sub / "out").symlink_to(sub.parent.parent)


def _escaping_through_parent(sub: Path) -> None:
    (sub.parent.parent / "secret").write_text("x")
    (sub / "out").symlink_to("../../secret")


def _dangling(root: Path) -> None:
    (root / "gone").symlink_to("does-not-exist")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "pipe")


def _undecodable(root: Path) -> None:
    with open(os.path.join(os.fsencode(root), b"\xff\xfe"), "wb") as handle:
        handle.write(b"x")


@pytest.mark.parametrize(
    ("make", "code"),
    [
        pytest.param(_escaping_symlink, "symlink_escapes_tree", id="symlink-escapes"),
        pytest.param(_escaping_through_parent, "symlink_escapes_tree", id="symlink-dotdot"),
        pytest.param(_dangling, "dangling_symlink", id="dangling-symlink"),
        pytest.param(_fifo, "special_file", id="fifo"),
        pytest.param(_undecodable, "undecodable_name", id="undecodable-name"),
    ],
)
def test_tree_refusals(tmp_path: Path, make: object, code: str) -> None:
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    make(root / "sub")  # type: ignore[operator]
    error = assert_refused(lambda: digest_tree(root), code, canaries=(str(tmp_path),))
    assert isinstance(error, ComponentDigestError)


def _loop_pair(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")


def _loop_triple(root: Path) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("c")
    (root / "c").symlink_to("a")


@pytest.mark.parametrize("make", [_loop_pair, _loop_triple], ids=["pair", "triple"])
def test_symlink_loops_are_refused(tmp_path: Path, make: object) -> None:
    """#13 item 5: loops were accepted and two different loops digested equally."""
    root = tmp_path / "model"
    root.mkdir()
    make(root)  # type: ignore[operator]
    with pytest.raises(ComponentDigestError) as caught:
        digest_tree(root)
    assert caught.value.code == "symlink_loop"


def test_link_text_is_part_of_the_digest(tmp_path: Path) -> None:
    """Two links to the same target with different texts digest differently."""
    digests = set()
    for index, text in enumerate(["config.json", "./config.json", "sub/../config.json"]):
        root = tmp_path / f"m{index}"
        (root / "sub").mkdir(parents=True)
        (root / "config.json").write_text("{}")
        (root / "link").symlink_to(text)
        digests.add(digest_tree(root))
    assert len(digests) == 3


def _make_chain(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def _remove_chain(root: Path) -> None:
    fds = [os.open(root, os.O_RDONLY)]
    try:
        while "d" in os.listdir(fds[-1]):
            fds.append(os.open("d", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        while len(fds) > 1:
            os.close(fds.pop())
            os.rmdir("d", dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


def test_deep_tree_is_a_closed_refusal() -> None:
    """#13 item 4: 1,000 levels gave a RecursionError; now ``too_deep`` (iterative walk)."""
    root = Path(tempfile.mkdtemp(prefix="sealeval-deep-"))  # not tmp_path: rmtree recurses
    try:
        _make_chain(root, 1000)
        with pytest.raises(ComponentDigestError) as caught:
            digest_tree(root)
        assert caught.value.code == "too_deep"
        assert digest_tree(root, limits=TreeLimits(max_depth=1000)).startswith("sha256:")
    finally:
        _remove_chain(root)
        root.rmdir()


def test_entry_bound_is_a_closed_refusal(tmp_path: Path) -> None:
    for index in range(5):
        (tmp_path / str(index)).write_text("x")
    with pytest.raises(ComponentDigestError) as caught:
        digest_tree(tmp_path, limits=TreeLimits(max_entries=4))
    assert caught.value.code == "too_many_entries"


def _swap_loop(base: str, seconds: float) -> None:
    victim = os.path.join(base, "model", "sub")
    parked = os.path.join(base, "parked")
    outside = os.path.join(base, "outside")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        os.rename(victim, parked)
        os.symlink(outside, victim)
        os.unlink(victim)
        os.rename(parked, victim)


def test_tree_digest_race_never_digests_outside(tmp_path: Path) -> None:
    """#13 item 1: a directory swapped for a symlink mid-walk; refuse or digest the inside."""
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "weights.bin").write_bytes(b"inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "weights.bin").write_bytes(b"OUTSIDE")
    clean = digest_tree(root)
    (tmp_path / "empty").mkdir()
    empty = digest_tree(tmp_path / "empty")
    outside_view = tmp_path / "copy"
    (outside_view / "sub").mkdir(parents=True)
    (outside_view / "sub" / "weights.bin").write_bytes(b"OUTSIDE")
    leaked = digest_tree(outside_view)
    swapper = multiprocessing.get_context("spawn").Process(
        target=_swap_loop, args=(str(tmp_path), 20.0)
    )
    swapper.start()
    digests: set[str] = set()
    codes: set[str] = set()
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            try:
                digests.add(digest_tree(root))
            except ComponentDigestError as error:
                codes.add(error.code)
    finally:
        swapper.terminate()
        swapper.join()
    assert leaked not in digests
    assert digests <= {clean, empty}
    assert codes <= {"file_changed", "symlink_escapes_tree", "not_found"}


def test_tree_root_refusals(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    for path, code in [(tmp_path / "missing", "not_found"), (tmp_path / "file", "not_directory")]:
        error = assert_refused(lambda path=path: digest_tree(path), code)
        assert isinstance(error, ComponentDigestError)


def test_unreadable_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "model").mkdir()

    def refuse(_path: object) -> list[bytes]:
        raise PermissionError

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(ComponentDigestError) as caught:
        digest_tree(tmp_path / "model")
    assert caught.value.code == "unreadable"


# ---------------------------------------------------------------------------
# Configuration documents


def test_config_digest_ignores_formatting_and_syntax(tmp_path: Path) -> None:
    document = {"threshold": 0.62, "labels": ["a", "b"], "nested": {"k": 1, "z": None}}
    (tmp_path / "compact.json").write_text(json.dumps(document, separators=(",", ":")))
    (tmp_path / "pretty.json").write_text(json.dumps(document, indent=4, sort_keys=True))
    (tmp_path / "doc.yaml").write_text(
        "# comment\nnested:\n  z: null\n  k: 1\nlabels: [a, b]\nthreshold: 0.62\n"
    )
    digests = {
        digest_config_document(tmp_path / name)
        for name in ["compact.json", "pretty.json", "doc.yaml"]
    }
    assert len(digests) == 1
    (tmp_path / "changed.json").write_text(json.dumps({**document, "threshold": 0.63}))
    assert digest_config_document(tmp_path / "changed.json") not in digests


def test_config_digest_keeps_int_float_distinction(tmp_path: Path) -> None:
    (tmp_path / "int.json").write_text('{"t": 1}')
    (tmp_path / "float.json").write_text('{"t": 1.0}')
    assert digest_config_document(tmp_path / "int.json") != digest_config_document(
        tmp_path / "float.json"
    )


@pytest.mark.parametrize(
    ("name", "content", "code"),
    [
        pytest.param("a.toml", b"x = 1", "unknown_format", id="unknown-format"),
        pytest.param("a.json", b'{"a":1,"a":2}', "invalid_document", id="duplicate-key-json"),
        pytest.param("a.yaml", b"a: 1\na: 2\n", "invalid_document", id="duplicate-key-yaml"),
        pytest.param("a.json", b"[NaN]", "invalid_document", id="nan"),
        pytest.param("a.yaml", b"a: &x 1\nb: *x\n", "invalid_document", id="yaml-alias"),
    ],
)
def test_config_refusals(tmp_path: Path, name: str, content: bytes, code: str) -> None:
    (tmp_path / name).write_bytes(content)
    error = assert_refused(lambda: digest_config_document(tmp_path / name), code)
    assert isinstance(error, ConfigDocumentError)


def test_config_file_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "big.json").write_text("[" + "0," * 50 + "0]")
    with pytest.raises(ConfigDocumentError) as caught:
        digest_config_document(tmp_path / "missing.json")
    assert caught.value.code == "not_found"
    with pytest.raises(ConfigDocumentError) as caught:
        digest_config_document(tmp_path / "dir.json")
    assert caught.value.code == "not_regular_file"
    monkeypatch.setattr(components, "CONFIG_MAX_BYTES", 64)
    with pytest.raises(ConfigDocumentError) as caught:
        digest_config_document(tmp_path / "big.json")
    assert caught.value.code == "too_large"


def test_config_format_override(tmp_path: Path) -> None:
    (tmp_path / "policy.conf").write_text("a: 1\n")
    assert digest_config_document(tmp_path / "policy.conf", format="yaml") == _sha(b'{"a":1}')


# ---------------------------------------------------------------------------
# Snapshots


def test_snapshot_uses_default_kinds_and_given_digests(tmp_path: Path) -> None:
    _build_model(tmp_path / "model")
    (tmp_path / "policy.yaml").write_text("a: 1\n")
    (tmp_path / "prompt.txt").write_text("hello")
    given = "sha256:" + "1" * 64
    snapshot = snapshot_components(
        {
            "model": tmp_path / "model",
            "policy": tmp_path / "policy.yaml",
            "prompt": tmp_path / "prompt.txt",
        },
        {"container": given},
        {"prompt": "file"},
    )
    assert snapshot == {
        "container": given,
        "model": digest_tree(tmp_path / "model"),
        "policy": _sha(b'{"a":1}'),
        "prompt": _sha(b"hello"),
    }
    assert digest_component("auto", tmp_path / "prompt.txt") == _sha(b"hello")


@pytest.mark.parametrize(
    ("paths", "digests", "kinds", "error", "message"),
    [
        pytest.param(
            {"weights": "x"},
            {},
            {},
            ManifestError,
            "component_digests: invalid_keys",
            id="unknown-component",
        ),
        pytest.param(
            {"model": "x"},
            {"model": "sha256:" + "1" * 64},
            {},
            ManifestError,
            "component_digests: invalid_keys",
            id="given-twice",
        ),
        pytest.param(
            {},
            {"model": "sha256:XYZ"},
            {},
            ManifestError,
            "component_digests.model: invalid_digest",
            id="bad-digest",
        ),
        pytest.param(
            {"model": "x"},
            {},
            {"model": "weights"},
            ComponentDigestError,
            "model: unknown_kind",
            id="unknown-kind",
        ),
        pytest.param(
            {"prompt": "/nonexistent/prompt"},
            {},
            {},
            ComponentDigestError,
            "prompt: not_found",
            id="helper-error-names-component",
        ),
    ],
)
def test_snapshot_refusals(
    paths: dict[str, str],
    digests: dict[str, str],
    kinds: dict[str, str],
    error: type[SealevalError],
    message: str,
) -> None:
    with pytest.raises(error) as caught:
        snapshot_components(paths, digests, kinds)
    assert str(caught.value) == message
