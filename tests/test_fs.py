"""The hardened file-system edge (sealeval._fs): every refusal code, with real files and races."""

from __future__ import annotations

import multiprocessing
import os
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sealeval import _fs
from sealeval._fs import FileSystemError
from sealeval.errors import ComponentDigestError, OutputError

pytestmark = pytest.mark.skipif(not _fs.HAS_DIR_FD, reason="POSIX descriptor calls only")


def _code(error: pytest.ExceptionInfo[FileSystemError]) -> str:
    assert error.value.code in FileSystemError.codes
    return error.value.code


# ---------------------------------------------------------------------------
# open_regular / read_regular


def test_read_regular_reads_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x00abc" * 1000)
    assert _fs.read_regular(path, limit=4000) == b"\x00abc" * 1000


def test_read_regular_missing_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(tmp_path / "missing", limit=10)
    assert _code(error) == "not_found"


def test_read_regular_nul_in_name_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(str(tmp_path) + "/a\0b", limit=10)
    assert _code(error) == "not_found"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(fifo, limit=10)
    assert _code(error) == "not_regular_file"
    with pytest.raises(FileSystemError) as error:
        _fs.digest_regular(fifo, follow_symlinks=True)
    assert _code(error) == "not_regular_file"
    assert time.monotonic() - started < 5


def test_fifo_behind_a_followed_symlink_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "link").symlink_to(fifo)
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(tmp_path / "link", limit=10, follow_symlinks=True)
    assert _code(error) == "not_regular_file"


@pytest.mark.parametrize("kind", ["directory", "symlink", "device", "socket"])
def test_non_regular_files_are_refused(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "x"
    if kind == "directory":
        target.mkdir()
    elif kind == "symlink":
        (tmp_path / "real").write_bytes(b"data")
        target.symlink_to(tmp_path / "real")
    elif kind == "device":
        target = Path("/dev/null")
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
        server.close()
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(target, limit=10)
    assert _code(error) == "not_regular_file"


def test_over_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big"
    with path.open("wb") as handle:
        handle.truncate(1 << 40)  # a sparse terabyte: reading it all would not finish
    started = time.monotonic()
    with pytest.raises(FileSystemError) as error:
        _fs.read_regular(path, limit=1024)
    assert _code(error) == "too_large"
    assert time.monotonic() - started < 5


def test_read_fd_bounded_refuses_growth_past_limit(tmp_path: Path) -> None:
    path = tmp_path / "grow"
    path.write_bytes(b"a" * 10)
    fd = os.open(path, os.O_RDONLY)
    try:
        with path.open("ab") as handle:
            handle.write(b"b" * 10)
        os.lseek(fd, 0, os.SEEK_SET)
        with pytest.raises(FileSystemError) as error:
            _fs.read_fd_bounded(fd, 15)
        assert _code(error) == "too_large"
    finally:
        os.close(fd)


def test_unreadable_descriptor(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)  # reading a directory descriptor fails (EISDIR)
    try:
        with pytest.raises(FileSystemError) as error:
            _fs.read_fd_bounded(fd, 1 << 20)
        assert _code(error) == "unreadable"
    finally:
        os.close(fd)


def _rewrite_restoring_mtime(path: str, stop_after: float) -> None:
    info = os.stat(path)
    deadline = time.monotonic() + stop_after
    flip = False
    while time.monotonic() < deadline:
        with open(path, "r+b") as handle:
            handle.write(b"B" if flip else b"A")
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        flip = not flip


def test_in_place_change_with_mtime_restored_is_detected(tmp_path: Path) -> None:
    """#13 item 6: size, mtime and inode stay; only ctime reveals the rewrite."""
    path = tmp_path / "model.bin"
    path.write_bytes(b"A" * (8 << 20))
    writer = multiprocessing.get_context("spawn").Process(
        target=_rewrite_restoring_mtime, args=(str(path), 20.0)
    )
    writer.start()
    try:
        refused = 0
        codes: set[str] = set()
        deadline = time.monotonic() + 15
        while refused == 0 and time.monotonic() < deadline:
            try:
                _fs.digest_regular(path, buffer=bytearray(1 << 16))
            except FileSystemError as error:
                codes.add(error.code)
                refused += 1
        assert refused > 0
        assert codes == {"file_changed"}
    finally:
        writer.terminate()
        writer.join()


def test_digest_regular_checks_the_expected_inode(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    with pytest.raises(FileSystemError) as error:
        _fs.digest_regular(a, expected=b.stat())
    assert _code(error) == "file_changed"
    digest = _fs.digest_regular(a, expected=a.stat())
    assert digest.size == 1
    assert not digest.executable


# ---------------------------------------------------------------------------
# translated


def test_translated_maps_codes_and_drops_the_cause(tmp_path: Path) -> None:
    with (
        pytest.raises(ComponentDigestError) as error,
        _fs.translated(ComponentDigestError, "path", {"too_large": "unreadable"}),
    ):
        _fs.read_regular(tmp_path / "missing", limit=1)
    assert error.value.code == "not_found"
    assert error.value.__suppress_context__
    assert error.value.__cause__ is None
    with (
        pytest.raises(OutputError) as output,
        _fs.translated(OutputError, "output", default="output_unwritable"),
    ):
        raise FileSystemError("symlink_loop", "path")
    assert output.value.code == "output_unwritable"


# ---------------------------------------------------------------------------
# publish_exclusive / open_destination_parent


def test_publish_writes_atomically_with_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    _fs.publish_exclusive(target, b"{}", mode=0o600)
    assert target.read_bytes() == b"{}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_publish_accepts_chunks_and_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    _fs.publish_exclusive("sub/../sub/x", [b"a", b"b"])
    assert (tmp_path / "sub" / "x").read_bytes() == b"ab"


@pytest.mark.parametrize("existing", ["file", "dangling", "directory"])
def test_publish_refuses_an_existing_destination(tmp_path: Path, existing: str) -> None:
    target = tmp_path / "out"
    if existing == "file":
        target.write_bytes(b"keep")
    elif existing == "dangling":
        target.symlink_to(tmp_path / "nowhere")
    else:
        target.mkdir()
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(target, b"new")
    assert _code(error) == "output_exists"
    assert not (tmp_path / "nowhere").exists()


def test_publish_refuses_a_symlinked_parent(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "link").symlink_to(outside)
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(inside / "link" / "deeper" / "out", b"x", create_parents=True)
    assert _code(error) == "unsafe_destination"
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(inside / "link" / "out", b"x")
    assert _code(error) == "unsafe_destination"
    assert list(outside.iterdir()) == []


def test_publish_refuses_a_file_as_parent_and_bad_names(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(tmp_path / "file" / "out", b"x")
    assert _code(error) == "unsafe_destination"
    for name in ("", str(tmp_path) + "/", str(tmp_path / ".."), "a\0b"):
        with pytest.raises(FileSystemError) as error:
            _fs.publish_exclusive(name, b"x")
        assert _code(error) == "unsafe_destination"


def test_publish_parent_missing_or_created(tmp_path: Path) -> None:
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(tmp_path / "a" / "b" / "out", b"x")
    assert _code(error) == "output_parent_missing"
    _fs.publish_exclusive(tmp_path / "a" / "b" / "out", b"x", create_parents=True)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700


def test_publish_unwritable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        folder = Path("/sys")  # sysfs refuses new files even to root
    else:  # pragma: no cover - the CI container runs as root
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
    with pytest.raises(FileSystemError) as error:
        _fs.publish_exclusive(folder / "out", b"x")
    assert _code(error) == "output_unwritable"


def test_create_exclusive_refuses_existing(tmp_path: Path) -> None:
    fd = _fs.open_directory(tmp_path)
    try:
        assert _fs.create_exclusive(fd, "k", b"abc") == 3
        with pytest.raises(FileSystemError) as error:
            _fs.create_exclusive(fd, "k", b"abc")
        assert _code(error) == "output_exists"
        with pytest.raises(FileSystemError) as error:
            _fs.create_exclusive(fd, "missing/k", b"abc")
        assert _code(error) == "output_parent_missing"
    finally:
        os.close(fd)
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600


def test_create_directory_is_exclusive_exact_and_never_follows(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    fd = _fs.open_directory(tmp_path)
    old_umask = os.umask(0o077)
    try:
        made = _fs.create_directory("made", dir_fd=fd, mode=0o750)
        try:
            assert _fs.list_names(made) == []
            assert stat.S_ISDIR(os.fstat(made).st_mode)
        finally:
            os.close(made)
        for existing in ("made", "link", "target"):
            with pytest.raises(FileSystemError) as error:
                _fs.create_directory(existing, dir_fd=fd)
            assert (_code(error), error.value.field) == ("output_exists", "output")
        with pytest.raises(FileSystemError) as error:
            _fs.create_directory("missing/child", dir_fd=fd)
        assert _code(error) == "output_unwritable"
        assert sorted(_fs.list_names(fd)) == ["link", "made", "target"]
    finally:
        os.umask(old_umask)
        os.close(fd)
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o750  # the umask did not narrow it
    assert list((tmp_path / "target").iterdir()) == []


def _swap_parent(base: str, stop_after: float) -> None:
    real = os.path.join(base, "real")
    outside = os.path.join(base, "outside")
    deadline = time.monotonic() + stop_after
    while time.monotonic() < deadline:
        os.rename(real, real + ".away")
        os.symlink(outside, real)
        os.unlink(real)
        os.rename(real + ".away", real)


def test_publish_never_writes_through_a_parent_swapped_for_a_symlink(tmp_path: Path) -> None:
    """#13 item 9 as a race: another process swaps the parent for a symlink to outside."""
    (tmp_path / "real").mkdir()
    (tmp_path / "outside").mkdir()
    swapper = multiprocessing.get_context("spawn").Process(
        target=_swap_parent, args=(str(tmp_path), 20.0)
    )
    swapper.start()
    try:
        deadline = time.monotonic() + 8
        codes: set[str] = set()
        attempt = 0
        while time.monotonic() < deadline:
            attempt += 1
            try:
                _fs.publish_exclusive(tmp_path / "real" / f"out{attempt}", b"x")
            except FileSystemError as error:
                codes.add(error.code)
    finally:
        swapper.terminate()
        swapper.join()
    assert list((tmp_path / "outside").iterdir()) == []
    assert codes <= {"unsafe_destination", "output_parent_missing"}


def test_fsync_directory_accepts_paths_and_descriptors(tmp_path: Path) -> None:
    _fs.fsync_directory(tmp_path)
    _fs.fsync_directory(tmp_path / "missing")  # best effort: no error
    fd = _fs.open_directory(tmp_path)
    try:
        _fs.fsync_directory(fd)
    finally:
        os.close(fd)


def test_open_directory_refusals(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    (tmp_path / "l").symlink_to(tmp_path)
    for name, code in (("missing", "not_found"), ("f", "not_directory"), ("l", "not_directory")):
        with pytest.raises(FileSystemError) as error:
            _fs.open_directory(tmp_path / name)
        assert _code(error) == code


# ---------------------------------------------------------------------------
# walk_tree


def _walk(root: Path, **limits: int) -> list[tuple[str, str, str | None, str | None]]:
    return [
        (entry.kind, entry.path, entry.link_text, entry.link_target)
        for entry in _fs.walk_tree(root, **limits)
    ]


def test_walk_order_and_links(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z").write_bytes(b"z")
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b" / "up").symlink_to("../a")
    (tmp_path / "root").symlink_to(".")
    (tmp_path / "abs").symlink_to(tmp_path / "b" / "z")
    (tmp_path / "chain").symlink_to("root/b/up")
    assert _walk(tmp_path) == [
        ("f", "a", None, None),
        ("l", "abs", str(tmp_path / "b" / "z"), "b/z"),
        ("d", "b", None, None),
        ("l", "b/up", "../a", "a"),
        ("f", "b/z", None, None),
        ("l", "chain", "root/b/up", "a"),
        ("l", "root", ".", "."),
    ]


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda root: (root / "l").symlink_to("/etc"), "symlink_escapes_tree"),
        (lambda root: (root / "l").symlink_to("../outside"), "symlink_escapes_tree"),
        (lambda root: (root / "l").symlink_to("nowhere"), "dangling_symlink"),
        (lambda root: (root / "l").symlink_to("l"), "symlink_loop"),
        (
            lambda root: ((root / "a").symlink_to("b"), (root / "b").symlink_to("a")),
            "symlink_loop",
        ),
        (lambda root: os.mkfifo(root / "fifo"), "special_file"),
        (lambda root: (root / os.fsdecode(b"\xff")).write_bytes(b""), "undecodable_name"),
        (lambda root: (root / "l").symlink_to(os.fsdecode(b"\xfe")), "undecodable_name"),
    ],
    ids=[
        "absolute-escape",
        "dotdot-escape",
        "dangling",
        "self-loop",
        "pair-loop",
        "fifo",
        "name-not-utf8",
        "link-not-utf8",
    ],
)
def test_walk_refusals(tmp_path: Path, make: object, code: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    make(root)  # type: ignore[operator]
    with pytest.raises(FileSystemError) as error:
        _walk(root)
    assert _code(error) == code


def test_walk_root_refusals(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(FileSystemError) as error:
        _walk(tmp_path / "missing")
    assert _code(error) == "not_found"
    with pytest.raises(FileSystemError) as error:
        _walk(tmp_path / "f")
    assert _code(error) == "not_directory"


@pytest.fixture
def deep_root() -> Iterator[Path]:
    """A 1,000-level chain of ``d`` folders outside pytest's tmp_path.

    pytest removes old tmp_path folders with ``shutil.rmtree``, which recurses
    and fails on such a chain; this fixture removes it iteratively.
    """
    root = Path(tempfile.mkdtemp(prefix="sealeval-deep-"))
    try:
        fd = os.open(root, os.O_RDONLY)
        try:
            for _ in range(1000):
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = child
        finally:
            os.close(fd)
        yield root
    finally:
        _remove_deep(root)
        root.rmdir()


def test_deep_tree_is_refused_iteratively(deep_root: Path) -> None:
    """#13 item 4: a 1,000-level tree is a closed refusal, not a RecursionError."""
    with pytest.raises(FileSystemError) as error:
        _walk(deep_root)
    assert _code(error) == "too_deep"
    assert len(_walk(deep_root, max_depth=2000)) == 1000


def _remove_deep(root: Path) -> None:
    """Remove a deep chain of ``d`` folders iteratively (rmtree would recurse)."""
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


def test_entry_bound(tmp_path: Path) -> None:
    for index in range(20):
        (tmp_path / f"f{index}").write_bytes(b"")
    with pytest.raises(FileSystemError) as error:
        _walk(tmp_path, max_entries=10)
    assert _code(error) == "too_many_entries"
    assert len(_walk(tmp_path, max_entries=20)) == 20


def test_walk_closes_every_descriptor(tmp_path: Path) -> None:
    for depth in range(5):
        (tmp_path.joinpath(*["d"] * (depth + 1))).mkdir()
    before = len(os.listdir("/proc/self/fd"))
    walk = _fs.walk_tree(tmp_path)
    next(walk)
    next(walk)
    walk.close()
    _walk(tmp_path)
    assert len(os.listdir("/proc/self/fd")) == before


def _swap_directory_with_symlink(base: str, stop_after: float) -> None:
    victim = os.path.join(base, "root", "sub")
    outside = os.path.join(base, "outside")
    deadline = time.monotonic() + stop_after
    while time.monotonic() < deadline:
        os.rename(victim, victim + ".real")
        os.symlink(outside, victim)
        os.unlink(victim)
        os.rename(victim + ".real", victim)


def test_walk_never_reads_outside_while_a_directory_is_swapped(tmp_path: Path) -> None:
    """#13 item 1 as a race: the walk refuses or stays inside, never digests outside."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "inside.txt").write_bytes(b"inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_bytes(b"secret")
    swapper = multiprocessing.get_context("spawn").Process(
        target=_swap_directory_with_symlink, args=(str(tmp_path), 20.0)
    )
    swapper.start()
    try:
        walks = 0
        codes: set[str] = set()
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            walks += 1
            try:
                for entry in _fs.walk_tree(root):
                    assert "secret" not in entry.path
                    if entry.kind == "f":
                        digest = _fs.digest_regular(
                            entry.name, dir_fd=entry.dir_fd, expected=entry.info
                        )
                        assert digest.size == len(b"inside")
            except FileSystemError as error:
                codes.add(error.code)
        assert walks > 10
        assert codes <= {"file_changed", "symlink_escapes_tree"}
    finally:
        swapper.terminate()
        swapper.join()


def test_depth_bound_is_inclusive(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    assert len(_walk(tmp_path, max_depth=3)) == 3
    with pytest.raises(FileSystemError) as error:
        _walk(tmp_path, max_depth=2)
    assert _code(error) == "too_deep"


def test_exclusive_writer_streams_and_discards(tmp_path: Path) -> None:
    with _fs.ExclusiveWriter(tmp_path / "run.json", mode=0o600) as writer:
        writer.write(b"a")
        writer.write(b"b")
        assert not (tmp_path / "run.json").exists()
        writer.publish()
    assert (tmp_path / "run.json").read_bytes() == b"ab"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]

    def interrupted() -> None:
        with _fs.ExclusiveWriter(tmp_path / "other") as writer:
            writer.write(b"partial")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        interrupted()
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    with _fs.ExclusiveWriter(tmp_path / "late") as writer:
        (tmp_path / "late").write_bytes(b"theirs")
        with pytest.raises(FileSystemError) as error:
            writer.publish()
        assert _code(error) == "output_exists"
    assert (tmp_path / "late").read_bytes() == b"theirs"
    with pytest.raises(FileSystemError) as error:
        writer.write(b"after")
    assert _code(error) == "output_unwritable"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late", "run.json"]


# ---------------------------------------------------------------------------
# The lenient walk (the viewer's catalog), descend, lock files


def _lenient(root: Path, **options: object) -> tuple[list[tuple[str, str]], _fs.WalkSkips]:
    skips = _fs.WalkSkips()
    entries = [
        (entry.kind, entry.path)
        for entry in _fs.walk_tree(root, lenient=skips, **options)  # type: ignore[arg-type]
    ]
    return entries, skips


def test_lenient_walk_passes_over_what_a_strict_walk_refuses(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "kept.txt").write_bytes(b"k")
    (root / "escape").symlink_to("/etc")
    (root / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "fifo")
    (root / os.fsdecode(b"\xff")).write_bytes(b"")
    with pytest.raises(FileSystemError):
        _walk(root)
    entries, skips = _lenient(root)
    # links are listed (never read or resolved); the FIFO and the undecodable name are skipped
    assert entries == [("l", "dangling"), ("l", "escape"), ("d", "sub"), ("f", "sub/kept.txt")]
    assert skips == _fs.WalkSkips(skipped=2, truncated=False)


def test_lenient_walk_links_carry_no_target(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "l").symlink_to("a")
    skips = _fs.WalkSkips()
    links = [entry for entry in _fs.walk_tree(tmp_path, lenient=skips) if entry.kind == "l"]
    assert [(link.link_text, link.link_target) for link in links] == [(None, None)]


def test_lenient_walk_truncates_instead_of_refusing(tmp_path: Path) -> None:
    _files(tmp_path, "a/b/c/f")
    entries, skips = _lenient(tmp_path, max_depth=1)
    assert entries == [("d", "a"), ("d", "a/b")]  # a/b is listed but not entered
    assert skips.truncated
    for index in range(5):
        (tmp_path / f"f{index}").write_bytes(b"")
    entries, skips = _lenient(tmp_path, max_entries=3)
    assert len(entries) == 3
    assert skips.truncated
    entries, skips = _lenient(tmp_path)
    assert len(entries) == 9
    assert skips == _fs.WalkSkips()


def _swap_for_link(entry: _fs.TreeEntry) -> bool:
    """An ``enter`` hook that swaps the listed directory for a link just before it is entered."""
    os.rename(entry.name, entry.name + b".moved", src_dir_fd=entry.dir_fd, dst_dir_fd=entry.dir_fd)
    os.symlink(entry.name + b".moved", entry.name, dir_fd=entry.dir_fd)
    return True


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
def test_a_directory_swapped_before_it_is_entered(tmp_path: Path, lenient: bool) -> None:
    root = _files(tmp_path / "root", "sub/inside", "z.txt")
    skips = _fs.WalkSkips() if lenient else None
    walk = _fs.walk_tree(root, enter=_swap_for_link, lenient=skips)
    if not lenient:
        with pytest.raises(FileSystemError) as error:
            list(walk)
        assert _code(error) == "file_changed"
        return
    assert [entry.path for entry in walk] == ["sub", "z.txt"]  # never read through the link
    assert skips == _fs.WalkSkips(skipped=1, truncated=False)


def _files(root: Path, *relatives: str) -> Path:
    """Create empty files (and their folders) below ``root``; return ``root``."""
    for relative in relatives:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(b"")
    return root


def test_walk_enter_prunes_and_root_follow_is_optional(tmp_path: Path) -> None:
    root = _files(tmp_path / "root", "skip/inside", "keep/inside")
    seen = [entry.path for entry in _fs.walk_tree(root, enter=lambda entry: entry.name != b"skip")]
    assert seen == ["keep", "keep/inside", "skip"]
    (tmp_path / "alias").symlink_to(root)
    assert len(_walk(tmp_path / "alias")) == 4
    with pytest.raises(FileSystemError) as error:
        list(_fs.walk_tree(tmp_path / "alias", follow_root=False))
    assert _code(error) == "not_directory"


def test_descend_opens_a_chain_and_owns_the_descriptor(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_bytes(b"x")
    (tmp_path / "a" / "link").symlink_to("b")
    before = len(os.listdir("/proc/self/fd"))
    fd = _fs.descend(_fs.open_directory(tmp_path), ["a", "b"])
    try:
        assert _fs.read_regular("f", limit=1, dir_fd=fd) == b"x"
    finally:
        os.close(fd)
    for parts, code in ((["a", "link"], "not_directory"), (["a", "missing"], "not_found")):
        with pytest.raises(FileSystemError) as error:
            _fs.descend(_fs.open_directory(tmp_path), parts)
        assert _code(error) == code
    assert len(os.listdir("/proc/self/fd")) == before  # every descriptor closed


def test_open_lock_file_refusals(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    with pytest.raises(FileSystemError) as error:
        _fs.open_lock_file(lock)
    assert _code(error) == "not_found"
    fd = _fs.open_lock_file(lock, create=True)
    os.close(fd)
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    with pytest.raises(FileSystemError) as error:
        _fs.open_lock_file(lock, exclusive=True)
    assert _code(error) == "output_exists"
    (tmp_path / "link.lock").symlink_to(lock)
    os.mkfifo(tmp_path / "fifo.lock")
    for name in ("link.lock", "fifo.lock"):  # never followed, never blocks
        with pytest.raises(FileSystemError) as error:
            _fs.open_lock_file(tmp_path / name, create=True)
        assert _code(error) == "not_regular_file"
    (tmp_path / "dangling").symlink_to("nowhere")
    with pytest.raises(FileSystemError) as error:
        _fs.open_lock_file(tmp_path / "dangling", exclusive=True)
    assert _code(error) == "output_exists"  # O_EXCL refuses even a dangling link


def test_read_below_names_a_linked_or_missing_component(tmp_path: Path) -> None:
    _files(tmp_path, "a/b/f")
    (tmp_path / "link").symlink_to("a")
    assert _fs.read_below(tmp_path, "a/b/f", limit=1) == b""
    for base, relative, code in (
        (tmp_path, "link/b/f", "not_regular_file"),
        (tmp_path, "a/missing/f", "not_found"),
        (tmp_path / "missing", "a/b/f", "not_found"),
    ):
        with pytest.raises(FileSystemError) as error:
            _fs.read_below(base, relative, limit=1)
        assert _code(error) == code


# ---------------------------------------------------------------------------
# open_append, point_at_null, widen_pipe


def test_open_append_creates_privately_and_only_appends(tmp_path: Path) -> None:
    path = tmp_path / "probe.log"
    for chunk in (b"one\n", b"two\n"):
        fd = _fs.open_append(path)
        try:
            assert os.get_blocking(fd)
            assert not os.get_inheritable(fd)
            os.lseek(fd, 0, os.SEEK_SET)  # O_APPEND: every write still goes to the end
            os.write(fd, chunk)
        finally:
            os.close(fd)
    assert path.read_bytes() == b"one\ntwo\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_open_append_never_follows_a_link_nor_blocks(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"kept")
    (tmp_path / "link").symlink_to(target)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")  # no reader: a blocking open would hang here
    (tmp_path / "folder").mkdir()
    started = time.monotonic()
    for name in ("link", "dangling", "fifo", "folder"):
        with pytest.raises(FileSystemError) as error:
            _fs.open_append(tmp_path / name)
        assert _code(error) == "not_regular_file", name
    assert time.monotonic() - started < 5
    assert target.read_bytes() == b"kept"
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(FileSystemError) as error:
        _fs.open_append(tmp_path / "missing" / "probe.log")
    assert _code(error) == "not_found"


def test_point_at_null_cuts_a_descriptor_off_its_pipe() -> None:
    read_end, write_end = os.pipe()
    try:
        _fs.point_at_null(write_end)
        assert os.write(write_end, b"lost") == 4  # the null device swallows it
        assert not os.get_inheritable(write_end)
        os.close(write_end)
        write_end = -1
        assert os.read(read_end, 16) == b""  # the pipe's only writer is gone: end of file
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    with pytest.raises(FileSystemError) as error:
        _fs.point_at_null(-1)
    assert _code(error) == "unreadable"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_widen_pipe_widens_a_linux_pipe_and_nothing_else(tmp_path: Path) -> None:
    import fcntl  # noqa: PLC0415 - Linux only

    read_end, write_end = os.pipe()
    try:
        assert _fs.widen_pipe(write_end, 1 << 18) is True
        assert fcntl.fcntl(write_end, fcntl.F_GETPIPE_SZ) >= 1 << 18
    finally:
        os.close(read_end)
        os.close(write_end)
    path = tmp_path / "regular"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _fs.widen_pipe(fd, 1 << 18) is False  # not a pipe: nothing changes
    finally:
        os.close(fd)


def test_widen_pipe_is_a_no_op_elsewhere_or_without_fcntl(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(sys, "platform", "win32")
            assert _fs.widen_pipe(write_end, 1 << 18) is False
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, "fcntl", None)  # ``import fcntl`` raises ImportError
            assert _fs.widen_pipe(write_end, 1 << 18) is False
        assert os.write(write_end, b"x") == 1  # the pipe works as before
        assert os.read(read_end, 1) == b"x"
    finally:
        os.close(read_end)
        os.close(write_end)
