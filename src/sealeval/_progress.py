"""Progress of long work: phase names and counts on a terminal, silence otherwise.

The one home of progress reporting. Library functions that can take more
than a few seconds accept an optional ``progress`` callback of type
:data:`Progress`, called as ``progress(phase, completed, total)``:

* ``phase`` is one name of :data:`PHASES` (library text, never a value, an
  id, a path or captured content);
* ``completed`` and ``total`` are counts in the phase's unit (records,
  metrics, entries, files, cases, bytes); ``total`` 0 means unknown.

A library function given ``None`` (the default) reports nothing and costs
nothing. Callers may call as often as they like: :class:`TerminalProgress`
redraws at most every :data:`REFRESH_SECONDS` (clock injected), plus on every
change of phase and at each phase's end.

:data:`PLANNED_DRAWS` is not a phase but an announcement a comparison makes
before it spends any work: ``progress(PLANNED_DRAWS, planned, budget)``
(``budget`` -1 means unlimited). :func:`planned_draws_line` words it.

:func:`terminal_progress` is the command line's reporter: a transient bar on
standard error when standard error is a terminal, nothing otherwise (a pipe,
a file, CI logs). Lines a command must print in either case (the planned
draws in human mode) go through :meth:`TerminalProgress.note`, which keeps
them clear of the bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, TextIO

if TYPE_CHECKING:  # rich is imported when a bar is first drawn, not by library code
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

__all__ = [
    "PHASES",
    "PLANNED_DRAWS",
    "REFRESH_SECONDS",
    "Progress",
    "TerminalProgress",
    "notify",
    "phases_only",
    "planned_draws_line",
    "terminal_progress",
]

#: ``progress(phase, completed, total)``: counts only (``total`` 0 = unknown).
Progress = Callable[[str, int, int], None]

#: Every phase a library function may report: name -> (label shown, unit).
PHASES: Final[Mapping[str, tuple[str, str]]] = {
    "importing": ("importing", "bytes"),
    "reading": ("reading runs", "runs"),
    "loading": ("loading request", "steps"),
    "pairing": ("pairing records", "records"),
    "scoring": ("scoring metrics", "metrics"),
    "intervals": ("computing intervals", "entries"),
    "publishing": ("publishing pack", "steps"),
    "examining": ("examining pack", "steps"),
    "replaying": ("replaying comparison", "steps"),
    "rendering": ("rendering reports", "outputs"),
    "cases": ("running cases", "cases"),
    "forensics": ("overlap forensics", "submissions"),
    "adjudication": ("adjudication", "steps"),
}
#: Announcement (not a phase): ``(PLANNED_DRAWS, planned draws, budget or -1)``.
PLANNED_DRAWS: Final = "planned_draws"
#: Least time between two redraws of the same phase.
REFRESH_SECONDS: Final = 0.1


def notify(progress: Progress | None, phase: str, completed: int, total: int = 0) -> None:
    """Call ``progress`` when given (library code's one-line hook)."""
    if progress is not None:
        progress(phase, completed, total)


def phases_only(progress: Progress | None) -> Progress | None:
    """Return ``progress`` without the :data:`PLANNED_DRAWS` announcement (a replay's)."""
    if progress is None:
        return None
    given = progress

    def phases(phase: str, completed: int, total: int) -> None:
        if phase != PLANNED_DRAWS:
            given(phase, completed, total)

    return phases


def planned_draws_line(planned: int, budget: int) -> str:
    """Return the human line announcing a comparison's planned bootstrap draws."""
    allowed = "unlimited" if budget < 0 else f"{budget:,}"
    return f"planned bootstrap draws: {planned:,} (work budget: {allowed})"


class TerminalProgress:
    """A :data:`Progress` callback drawing one transient bar on a terminal.

    When ``enabled`` is false every phase call is ignored; :meth:`note` (and
    with ``announce`` the planned draws) still prints. Unknown phase names
    are ignored: nothing a caller passes is ever shown except a
    :data:`PHASES` label and counts.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        announce: bool = False,
    ) -> None:
        """Prepare the bar (nothing is drawn before the first call)."""
        self._enabled = enabled
        self._stream = stream
        self._clock = clock
        self._announce = announce
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._phase: str | None = None
        self._shown = -REFRESH_SECONDS

    def _start(self, unit: str) -> RichProgress:
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichProgress  # noqa: PLC0415

        counts: ProgressColumn = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
        # Drawn only when the caller found a terminal (or asked for the bar).
        console = Console(file=self._stream or sys.stderr, force_terminal=True)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            counts,
            TextColumn(unit if unit != "bytes" else ""),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        # No refresh thread: the bar is redrawn from the calls themselves, so the
        # work stays single-threaded and may still fork its worker processes.
        bar = RichProgress(*columns, console=console, transient=True, auto_refresh=False)
        bar.start()
        return bar

    def __call__(self, phase: str, completed: int, total: int = 0) -> None:
        """Report ``completed`` of ``total`` in ``phase`` (or announce planned draws)."""
        if phase == PLANNED_DRAWS:
            if self._announce and completed > 0:  # binary metrics only: nothing to plan
                self.note(planned_draws_line(completed, total))
            return
        if not self._enabled or phase not in PHASES:
            return
        label, unit = PHASES[phase]
        now = self._clock()
        changed = phase != self._phase
        finished = total > 0 and completed >= total
        if not (changed or finished or now - self._shown >= REFRESH_SECONDS):
            return
        if changed:
            self._stop()
            self._bar = self._start(unit)
            self._task = self._bar.add_task(label, total=total or None)
            self._phase = phase
        assert self._bar is not None
        assert self._task is not None
        self._bar.update(self._task, completed=completed, total=total or None)
        self._bar.refresh()
        self._shown = now

    def note(self, line: str) -> None:
        """Print one line on standard error (above the bar when one is drawn)."""
        if self._bar is not None:
            self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            print(line, file=self._stream or sys.stderr, flush=True)

    def _stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        self._bar = None
        self._task = None
        self._phase = None

    def close(self) -> None:
        """Remove the bar (it is transient: the terminal is left as it was)."""
        self._stop()


@contextmanager
def terminal_progress(
    *,
    enabled: bool | None = None,
    stream: TextIO | None = None,
    clock: Callable[[], float] = time.monotonic,
    announce: bool = False,
) -> Iterator[TerminalProgress]:
    """Yield the command line's progress callback; the bar is removed on exit.

    Args:
        enabled: draw the bar; ``None`` (the default) draws it exactly when
            standard error (or ``stream``) is a terminal.
        stream: where to draw (default standard error).
        clock: monotonic seconds (injected in tests).
        announce: print the planned draws a comparison announces (one
            :func:`planned_draws_line`, whether or not the bar is drawn).
    """
    if enabled is None:
        target = stream or sys.stderr
        enabled = bool(getattr(target, "isatty", lambda: False)())
    reporter = TerminalProgress(enabled=enabled, stream=stream, clock=clock, announce=announce)
    try:
        yield reporter
    finally:
        reporter.close()
