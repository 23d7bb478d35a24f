"""Two processes for large JSONL imports.

A forked worker reads the same source file on its own and turns the rows of batches
of physical lines ahead of the parent into ``plain_record_bytes`` results: ``(id,
canonical bytes)`` per line, or ``None`` ("not shown valid": blank, undecodable,
refused by the adapter, or outside the fast path). The parent reads every line
itself (hashing, progress, line limits). At each batch it takes the worker's results
when they are there, waits only for a batch the worker is encoding, and otherwise
encodes the batch itself: the split follows the speed of each process, and on a busy
machine the parent never waits for a worker that has not started. It maps its own
batches and the worker's ``None`` lines exactly as the one-process import does and
appends everything in file order through the same RunWriter (ids, limits, size,
output hash), so every refusal is the parent's own, raised at the same line as
without the worker. With each batch the worker sends the SHA-256 of the bytes it read
through that batch; the parent compares it with its own at the same line and refuses
a mismatch (``source_changed``): records the worker encoded always come from the
bytes the parent hashed. A worker that dies or sends a malformed message only stops
helping: the parent maps the remaining lines itself. Memory: one batch in each
process and the pipe (1 MiB).

The lines are mapped by a parallel-safe ``LinesImporter`` (its ``map_row``) or by
a native reader's :class:`~sealeval.captured.importers.base.LineMapper` (its
``map_line``; its ``accept`` checks each record's id in the parent, in file order,
whichever process encoded it).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from sealeval._fs import widen_pipe
from sealeval.captured.importers.base import ImportOptions, LineMapper
from sealeval.captured.importers.inputs import ImportRequest, ImportSummary, Sink, Tally, guarded
from sealeval.captured.importers.jsonl import (
    LinesImporter,
    decode_line,
    is_blank,
    iter_lines,
    open_source,
    refuse,
)
from sealeval.captured.run import RunHeader, RunWriter, plain_record_bytes
from sealeval.errors import SealevalError

__all__ = ["PARALLEL_MIN_BYTES", "can_fork", "mappable", "use_worker", "write_lines"]

#: JSONL sources of at least this many bytes are imported with a worker process (when
#: the machine has two CPUs, the process one thread, and the adapter is parallel_safe).
PARALLEL_MIN_BYTES: Final = 4 << 20
_BATCH_LINES: Final = 256
_BATCH_BYTES: Final = 128 << 10
_PIPE_BYTES: Final = 1 << 20
# The worker encodes only batches at least this far ahead of the parent, so that they
# are ready when the parent reaches them; the parent encodes the batches it skipped.
_LEAD = 4
_PARALLEL_ENABLED = True  # tests switch the worker off or force it on small files
_parallel_min_bytes = PARALLEL_MIN_BYTES


def mappable(request: ImportRequest) -> bool:
    """Whether the rows can be mapped line by line here (``write_lines``).

    True for a parallel-safe adapter (its ``rows`` is ``LinesImporter.rows``:
    decode each non-blank line, ``map_row``) without an input projection.
    """
    importer = request.importer
    return (
        request.projection is None
        and getattr(type(importer), "parallel_safe", False) is True
        and type(importer).rows is LinesImporter.rows
    )


def use_worker(request: ImportRequest, size: int) -> bool:
    """Whether a source of ``size`` bytes is imported with a worker process."""
    return mappable(request) and can_fork(size)


def can_fork(size: int) -> bool:
    """Whether a mappable source of ``size`` bytes may be imported with a worker process.

    On Linux, with at least two CPUs, a single-threaded process and a source of
    at least :data:`PARALLEL_MIN_BYTES`.
    """
    return (
        _PARALLEL_ENABLED
        and size >= _parallel_min_bytes
        and sys.platform.startswith("linux")
        and threading.active_count() == 1
        and len(os.sched_getaffinity(0)) > 1
    )


_Mapping = LinesImporter | LineMapper


def _tolerance(importer: _Mapping, options: ImportOptions) -> Callable[[str], bool] | None:
    """Return the NaN rule ``LinesImporter.rows`` passes to ``iter_rows`` (none for a mapper)."""
    if isinstance(importer, LineMapper):
        return None
    tolerant = type(importer).nan_member is not LinesImporter.nan_member
    return importer.nan_member if tolerant and options.nan_as_missing_score else None


class _Batches:
    """Cuts physical lines into numbered batches, identically in both processes."""

    __slots__ = ("index", "lines", "size")

    def __init__(self) -> None:
        self.index = 0
        self.lines = 0
        self.size = 0

    def add(self, line: bytes) -> bool:
        """Count a line; return whether it ends the current batch."""
        self.lines += 1
        self.size += len(line)
        if self.lines < _BATCH_LINES and self.size < _BATCH_BYTES:
            return False
        self.index += 1
        self.lines = 0
        self.size = 0
        return True


def _mapped(
    importer: _Mapping,
    line: bytes,
    where: str,
    options: ImportOptions,
    tolerate: Callable[[str], bool] | None,
) -> tuple[Any, tuple[dict[str, Any], int] | None]:
    """Decode and map one non-blank line: the record and ``(row, bound)`` when known."""
    if isinstance(importer, LineMapper):
        return importer.map_line(line, where)
    row, height = decode_line(line, where, tolerate)
    return importer.map_row(row, where, options), None if height is None else (row, height)


def _encoded(
    importer: _Mapping,
    line: bytes,
    number: int,
    options: ImportOptions,
    tolerate: Callable[[str], bool] | None,
) -> tuple[str, bytes, bool, object] | None:
    """Return the worker's result for one line, or ``None``.

    The result is the record's id and bytes, whether it is errored and its
    ``metadata.task`` (for the import summary).
    """
    if is_blank(line):
        return None
    where = f"line[{number}]"
    try:
        item, decoded = _mapped(importer, line, where, options, tolerate)
        if type(item) is not dict:
            return None
        plain = plain_record_bytes(item, decoded=decoded)
        if plain is None:
            return None
        metadata = item.get("metadata")
        task = metadata.get("task") if type(metadata) is dict else None
        return plain[0], plain[1], item.get("error") is not None, task
    except Exception:  # noqa: BLE001 - the parent maps this line again and names the refusal
        return None


class _Board:
    """Two batch indexes shared with the worker (an anonymous shared mapping).

    ``position``: the batch the parent is at; ``working``: the batch the worker
    is encoding. The worker only starts batches ``_LEAD`` ahead of the parent.
    A stale read costs at most duplicate work, never a wrong record: the
    parent matches batches by index and drops one it encoded itself.
    """

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, 16)  # MAP_SHARED: the forked worker sees the same bytes
        self.publish(-1)
        self.work(-1)

    def publish(self, index: int) -> None:
        struct.pack_into("q", self._map, 0, index)

    def position(self) -> int:
        return int(struct.unpack_from("q", self._map, 0)[0])

    def work(self, index: int) -> None:
        struct.pack_into("q", self._map, 8, index)

    def working(self) -> int:
        return int(struct.unpack_from("q", self._map, 8)[0])


_Entries = list[tuple[str, bytes, bool, object] | None]


def _work(
    fd: int,
    path: Path,
    importer: _Mapping,
    options: ImportOptions,
    board: _Board | None = None,
) -> None:
    """Run the worker: encode batches ahead of the parent and send them in order.

    Without a board every batch is encoded.
    """
    tolerate = _tolerance(importer, options)
    hasher = hashlib.sha256()
    batches = _Batches()
    entries: _Entries = []
    mine = False
    with Connection(fd, readable=False) as connection, open_source(path) as handle:
        for number, line in iter_lines(handle, options.max_line_bytes, hasher.update):
            index = batches.index
            if batches.lines == 0 and board is not None:
                mine = index >= board.position() + _LEAD
                if mine:
                    board.work(index)
            elif batches.lines == 0:
                mine = True
            if mine:
                entries.append(_encoded(importer, line, number, options, tolerate))
            if batches.add(line) and mine:
                connection.send((index, hasher.digest(), entries))
                entries = []
        if batches.lines and mine:
            connection.send((batches.index, hasher.digest(), entries))


def _pin(cpus: list[int], which: int) -> set[int] | None:
    """On a two-CPU machine, keep this process on ``cpus[which]``; return the old set.

    The parent and the worker then never share a CPU while a third process
    (another job) takes the other one: each gets one CPU for itself half the
    time instead of both sharing one. Elsewhere the scheduler decides. The
    parent is single-threaded, so pinning it only fixes where it runs; its
    affinity is restored when the import ends.
    """
    if len(cpus) != 2:
        return None
    try:
        os.sched_setaffinity(0, {cpus[which]})
    except OSError:
        return None
    return set(cpus)


class _Worker:
    """The forked worker process, the read end of its pipe and the shared board."""

    def __init__(self, path: Path, importer: _Mapping, options: ImportOptions) -> None:
        """Fork the worker; without a pipe or a process the parent simply works alone."""
        self._pid: int | None = None
        self._pending: tuple[int, bytes, _Entries] | None = None
        self._affinity: set[int] | None = None
        try:
            self._board = _Board()
            read_fd, write_fd = os.pipe()
        except OSError:
            return
        widen_pipe(write_fd, _PIPE_BYTES)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return
        cpus = sorted(os.sched_getaffinity(0))
        if pid == 0:  # pragma: no cover - the child (coverage is not collected there)
            try:
                os.close(read_fd)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                _pin(cpus, 1)
                _work(write_fd, path, importer, options, self._board)
            finally:
                os._exit(0)
        os.close(write_fd)
        self._pid = pid
        self._connection = Connection(read_fd, writable=False)
        self._affinity = _pin(cpus, 0)

    def batch(self, index: int) -> tuple[_Entries, bytes] | None:
        """Return the worker's batch ``index``: its entries and the source digest after it.

        ``None`` when the parent encodes that batch itself: the worker has not
        started it (the parent does not wait for a worker that may be
        descheduled on a busy machine), skipped it, or cannot work any more
        (then it is stopped). Only a batch the worker is encoding is waited for.
        """
        if self._pid is not None:
            self._board.publish(index)
        while self._pid is not None:
            message, self._pending = self._pending, None
            if message is None:
                if not self._connection.poll(0) and not self._encoding(index):
                    return None
                message = self._receive()
                if message is None:
                    return None
            if message[0] < index:
                continue  # a batch the parent encoded itself
            if message[0] > index:
                self._pending = message  # the worker skipped this one
                return None
            return message[2], message[1]
        return None

    def _encoding(self, index: int) -> bool:
        """Whether the worker is encoding batch ``index`` (the parent then waits for it)."""
        return self._board.working() == index

    def _receive(self) -> tuple[int, bytes, _Entries] | None:
        try:
            message = self._connection.recv()
        except Exception:  # noqa: BLE001 - EOF, a broken pipe: the parent goes on alone
            message = None
        if type(message) is not tuple or len(message) != 3 or type(message[0]) is not int:
            self.close()
            return None
        return message

    def close(self) -> None:
        """Stop the worker (it keeps no state worth waiting for) and reap it."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        self._connection.close()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        if self._affinity is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self._affinity)


class _NoWorker(_Worker):
    """No worker process: every batch is the parent's."""

    def __init__(self) -> None:
        self._pid = None
        self._pending = None
        self._affinity = None


_NO_WORKER: Final = _NoWorker()


def _append_line(
    writer: RunWriter,
    importer: _Mapping,
    line: bytes,
    number: int,
    *,
    options: ImportOptions,
    tolerate: Callable[[str], bool] | None,
    tally: Tally,
) -> None:
    """Decode, map and append one line in the parent, with ``guarded``'s refusals.

    A plain record mapped from a row the strict decoder produced is encoded
    without walking that row again (``plain_record_bytes(decoded=...)``);
    anything the fast path does not accept goes to ``RunWriter.add``.
    """
    where = f"line[{number}]"
    try:
        item, decoded = _mapped(importer, line, where, options, tolerate)
        if isinstance(importer, LineMapper):
            importer.accept(item.get("id") if type(item) is dict else None, where)
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - an importer's exception may quote input
        raise refuse("importer_failed", "file") from None
    tally.note(item)
    plain = None
    if type(item) is dict and decoded is not None:
        plain = plain_record_bytes(item, decoded=decoded)
    if plain is None:
        writer.add(item)
    else:
        writer._add_plain_bytes(*plain)


def write_lines(
    request: ImportRequest,
    destination: str | os.PathLike[str],
    header: RunHeader,
    sink: Sink,
    *,
    parallel: bool,
    mapper: LineMapper | None = None,
) -> ImportSummary:
    """Stream a parallel-safe JSONL source: ``LinesImporter.rows`` and ``_write`` in one loop.

    With ``parallel``, a worker process encodes batches ahead (see above). With
    ``mapper``, the lines are mapped by it instead of the request's importer.
    """
    importer: _Mapping = request.importer if mapper is None else mapper
    options = request.options
    tolerate = _tolerance(importer, options)
    source_digest = header.source_digest
    worker = _Worker(request.path, importer, options) if parallel else _NO_WORKER
    tally = Tally()
    try:
        with (
            open_source(request.path) as handle,
            RunWriter(destination, header, limits=request.limits) as writer,
        ):
            batches = _Batches()
            entries: _Entries = []
            offered: bytes | None = None  # the worker's digest through this batch
            expected: bytes | None = None  # the same, once a worker record is used
            lines = guarded(iter_lines(handle, options.max_line_bytes, sink))
            for number, line in lines:
                if batches.lines == 0:
                    received = worker.batch(batches.index)
                    entries, offered = received if received is not None else ([], None)
                    entries.reverse()  # consumed from the end, one per line
                entry = entries.pop() if entries else None
                if entry is not None:
                    if mapper is not None:
                        mapper.accept(entry[0], f"line[{number}]")
                    writer._add_plain_bytes(entry[0], entry[1])
                    tally.mark(entry[2], entry[3])
                    expected = offered
                elif not is_blank(line):
                    _append_line(
                        writer,
                        importer,
                        line,
                        number,
                        options=options,
                        tolerate=tolerate,
                        tally=tally,
                    )
                if batches.add(line) and expected is not None:
                    if sink.hash.digest() != expected:
                        raise refuse("source_changed", "file")
                    expected = None
            if expected is not None and sink.hash.digest() != expected:
                raise refuse("source_changed", "file")
            if sink.digest != source_digest:
                raise refuse("source_changed", "file")
            if writer.record_count == 0:
                raise refuse("no_records", "file")
            summary = writer.finish()
    finally:
        worker.close()
    return tally.summary(request.name, summary, source_digest)
