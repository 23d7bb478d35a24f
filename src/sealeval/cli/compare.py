"""``sealeval compare``: the paired multi-metric comparison of two captured runs.

Reads the baseline and subject runs (canonical or plain run documents, see
``docs/captured-runs.md``) and the comparison policy, runs
:func:`sealeval.captured.comparison.compare_runs`, and prints one table row per
metric and scope (pairs, means, change or ratio, interval, decision, reasons),
or with ``--json`` the report's canonical bytes exactly as an evidence pack
stores them.

The human output fits the console (``COLUMNS`` if set, the terminal's width,
else 80 columns): when the table is wider, each entry becomes a block of its
own (name, decision, pairs, means, change, interval, reasons wrapped at word
boundaries); names are never cut. Numbers use the HTML report's units and
precision (percentages and percentage points for binary metrics, four
significant digits, see :mod:`sealeval.captured.report.wording`). An
``insufficient_evidence`` entry, which the report leaves without means, shows
the means over its scored pairs (said in its reasons), or ``n/a`` with "no
scored pairs".

Exit status (the captured CLI's): 0 the policy passed; 7 the policy did not
pass (``regression`` or ``insufficient_evidence``; the report is still
printed); 2 an input or local error (unreadable or invalid file, pairing,
budget, unsupported Unicode version, usage), reported on standard error as
``sealeval: error: <field>: <code>``. Messages never contain ids, values or
paths; the table shows policy names and counts, never ids or captured text
(the ``--json`` report lists missing ids, as the wire format requires).

``--extension FILE`` (opt-in, sealeval only) adds the extended statistics of
:func:`sealeval.captured.extended.extend_report` below the table: p-values,
multiplicity-adjusted p-values and decisions, flips per metric and slice (counts
and the first K record ids; ids only), and for ``insufficient_evidence`` "about N
more paired cases in slice X". The exit status then follows the extended
decision, and ``--json`` prints the ``sealeval/extended-comparison-v1`` document
(bound to the reference report by ``comparison_digest``) instead of the
reference bytes. Without ``--extension`` nothing changes. With ``--uncapped``
the runs are streamed for the extended statistics too (memory bounded by the
record count).
"""

from __future__ import annotations

import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sealeval._progress import TerminalProgress, terminal_progress
from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import (
    DECISION_ORDERS,
    Bindings,
    ComparisonReport,
    MetricEntry,
    ScopeValues,
    compare_run_files,
    compare_runs,
    scope_values,
    scope_values_files,
)
from sealeval.captured.extended import (
    PolicyExtension,
    check_extension,
    extend_report,
    load_policy_extension,
)
from sealeval.captured.planning import DEFAULT_WORK_BUDGET
from sealeval.captured.policy import (
    MAX_CANONICAL_BYTES,
    ComparisonPolicy,
    ComparisonPolicyError,
    load_comparison_policy,
)
from sealeval.captured.report.model import ReportEntry, ReportInterval
from sealeval.captured.report.wording import (
    change_text,
    change_unit,
    level_text,
    mean_text,
    scaled,
    significant,
)
from sealeval.captured.run import COMPAT_MAX_BYTES, Limits, Run, RunReader, read_file_bytes
from sealeval.captured.run.reader import read_run_file
from sealeval.cli._common import (
    CONTEXT_SETTINGS,
    EXIT_ERROR,
    EXIT_OK,
    printable,
    shared_remedy,
)
from sealeval.cli._remedies import limit_remedy
from sealeval.errors import CanonicalError, SealevalError

__all__ = ["EXIT_POLICY_NOT_PASSED", "compare_command", "refusal_lines"]

#: The policy was evaluated and did not pass (``regression`` or ``insufficient_evidence``).
EXIT_POLICY_NOT_PASSED: Final = 7
_DRAWS: Final = re.compile(r"[0-9]{1,30}")
_MAX_EXTENSION_BYTES: Final = 65_536


class _RefusalError(Exception):
    """A refusal to report as ``<field>: <code>`` (field already rooted)."""

    def __init__(self, field: str, code: str) -> None:
        super().__init__(code)
        self.field = field
        self.code = code


#: What the user typed for each of compare's inputs (field -> argument or option).
_TYPED: Final = {
    "baseline": "BASELINE",
    "subject": "SUBJECT",
    "policy": "--policy",
    "extension": "--extension",
    "max_bootstrap_draws": "--max-bootstrap-draws",
    "decision_order": "--decision-order",
}


def refusal_lines(field: str, code: str) -> list[str]:
    """Return the refusal naming what the user typed, then its remedy (never a value).

    A run that is not a run file (``BASELINE: invalid_json``) is to be
    imported first; a recorded score without the accepted provenance is to be
    re-imported with ``--score-provenance``.
    """
    typed = _TYPED.get(field, field)
    lines = [f"sealeval: error: {typed}: {code}"]
    if typed in {"BASELINE", "SUBJECT"} and code == "invalid_json":
        lines.append(
            f"sealeval: {typed} must be a run file: sealeval import FILE -o RUN.json "
            "writes one from your evaluator's results"
        )
    hint = shared_remedy(code)
    if hint is not None:
        lines.append(f"sealeval: {hint}")
    return lines


def _rooted(root: str, error: SealevalError, own_root: str | None = None) -> _RefusalError:
    """Root a library error's field at ``root`` (``own_root`` is the library's name for it)."""
    field = error.field
    if field is None or field == own_root:
        return _RefusalError(root, error.code)
    if own_root is not None and field.startswith((own_root + ".", own_root + "[")):
        return _RefusalError(root + field[len(own_root) :], error.code)
    return _RefusalError(f"{root}.{field}", error.code)


def _read_run(path: Path, side: str, *, uncapped: bool = False) -> Run:
    try:
        return read_run_file(path, uncapped=uncapped)
    except SealevalError as error:
        raise _rooted(side, error, "run") from None


def _read_policy(path: Path) -> ComparisonPolicy:
    try:
        return load_comparison_policy(read_file_bytes(path, MAX_CANONICAL_BYTES, "policy"))
    except SealevalError as error:
        raise _rooted("policy", error, "policy") from None


def _read_extension(path: Path) -> PolicyExtension:
    try:
        return load_policy_extension(read_file_bytes(path, _MAX_EXTENSION_BYTES, "extension"))
    except SealevalError as error:
        raise _rooted("extension", error, "extension") from None


def _budget(max_draws: str | None, unlimited: bool) -> int | None:
    if unlimited:
        if max_draws is not None:
            raise _RefusalError("max_bootstrap_draws", "conflicting_options")
        return None
    if max_draws is None:
        return DEFAULT_WORK_BUDGET
    if _DRAWS.fullmatch(max_draws) is None:
        raise _RefusalError("max_bootstrap_draws", "invalid_budget")
    return int(max_draws)


class _Sides:
    """The two runs as ``compare`` reads them: held, or streamed (``--uncapped``).

    One flow for both (:func:`_compare`): :meth:`report` compares, and
    :meth:`values` gives the per-pair values (the extended statistics and the
    means of unevaluated entries), computed once.
    """

    def __init__(self) -> None:
        self._values: tuple[ScopeValues, ...] | None = None

    def report(
        self,
        policy: ComparisonPolicy,
        *,
        budget: int | None,
        decision_order: str,
        progress: TerminalProgress,
    ) -> ComparisonReport:
        raise NotImplementedError  # pragma: no cover - abstract

    def _scope_values(self, policy: ComparisonPolicy) -> tuple[ScopeValues, ...]:
        raise NotImplementedError  # pragma: no cover - abstract

    def values(self, policy: ComparisonPolicy) -> tuple[ScopeValues, ...]:
        """Return the per-pair values of every entry (computed on first use)."""
        if self._values is None:
            self._values = self._scope_values(policy)
        return self._values

    def check_files(self) -> None:
        """Refuse a run file before an input read after it (nothing to do when held)."""


class _HeldSides(_Sides):
    """Both runs read whole first (the reference's envelope unless ``--uncapped``)."""

    def __init__(self, baseline: Path, subject: Path, progress: TerminalProgress) -> None:
        super().__init__()
        progress("reading", 0, 2)
        self.baseline = _read_run(baseline, "baseline")
        progress("reading", 1, 2)
        self.subject = _read_run(subject, "subject")
        progress("reading", 2, 2)

    def report(
        self,
        policy: ComparisonPolicy,
        *,
        budget: int | None,
        decision_order: str,
        progress: TerminalProgress,
    ) -> ComparisonReport:
        return compare_runs(
            baseline=self.baseline,
            subject=self.subject,
            policy=policy,
            max_bootstrap_draws=budget,
            decision_order=decision_order,
            progress=progress,
        )

    def _scope_values(self, policy: ComparisonPolicy) -> tuple[ScopeValues, ...]:
        return scope_values(baseline=self.baseline, subject=self.subject, policy=policy)


class _StreamedSides(_Sides):
    """``--uncapped``: the run files streamed into per-record columns, never held.

    :func:`compare_run_files` for the report and :func:`scope_values_files`
    (a second streamed pass) for the per-pair values: memory is bounded by
    the number of records, not their content.
    """

    def __init__(self, baseline: Path, subject: Path) -> None:
        super().__init__()
        self.paths = (baseline, subject)
        self.limits = _uncapped_limits(self.paths)
        self.bindings: Bindings | None = None  # what the report's pass read

    def check_files(self) -> None:
        for path, side in zip(self.paths, ("baseline", "subject"), strict=True):
            _check_run_file(path, side, self.limits)

    def report(
        self,
        policy: ComparisonPolicy,
        *,
        budget: int | None,
        decision_order: str,
        progress: TerminalProgress,
    ) -> ComparisonReport:
        try:
            report = compare_run_files(
                baseline=self.paths[0],
                subject=self.paths[1],
                policy=policy,
                max_bootstrap_draws=budget,
                decision_order=decision_order,
                limits=self.limits,
                progress=progress,
            )
        except CanonicalError:  # a file that is not JSON: name the side as _read_run does
            self.check_files()
            raise _RefusalError("comparison", "invalid_json") from None  # pragma: no cover
        self.bindings = report.bindings
        return report

    def _scope_values(self, policy: ComparisonPolicy) -> tuple[ScopeValues, ...]:
        return scope_values_files(  # a file rewritten since the report's pass: unreadable
            baseline=self.paths[0],
            subject=self.paths[1],
            policy=policy,
            limits=self.limits,
            digests=self.bindings,
        )


def _compare(
    baseline: Path,
    subject: Path,
    policy_path: Path,
    extension_path: Path | None,
    *,
    budget: int | None,
    decision_order: str,
    uncapped: bool,
    progress: TerminalProgress,
) -> tuple[ComparisonReport, dict[str, Any] | None, _Sides, ComparisonPolicy]:
    """Read the inputs and compare (every library refusal becomes a rooted refusal).

    One flow, held or streamed: with ``--uncapped`` the run files are never
    held (:class:`_StreamedSides`, memory bounded by records, ``--extension``
    included); otherwise both runs are read first. Same report bytes and
    refusals in the same order either way: a run file is refused before the
    policy and the extension (the streamed path checks the files then).
    """
    _check_order(decision_order)
    sides: _Sides = (
        _StreamedSides(baseline, subject) if uncapped else _HeldSides(baseline, subject, progress)
    )
    try:
        policy = _read_policy(policy_path)
        extension = None if extension_path is None else _read_extension(extension_path)
    except _RefusalError:
        sides.check_files()
        raise
    extended: dict[str, Any] | None = None
    try:
        report = sides.report(
            policy, budget=budget, decision_order=decision_order, progress=progress
        )
        if extension is not None:
            check_extension(extension, policy)
            extended = extend_report(
                report=report, per_pair=sides.values(policy), policy=policy, extension=extension
            )
    except ComparisonPolicyError as error:
        raise _rooted("policy", error) from None
    except SealevalError as error:
        raise _RefusalError(error.field or "comparison", error.code) from None
    return report, extended, sides, policy


def _uncapped_limits(paths: tuple[Path, Path]) -> Limits:
    """Limits of ``--uncapped``: no caps; a non-canonical file is read whole at its own size."""
    sizes = [COMPAT_MAX_BYTES]
    for path in paths:
        try:
            sizes.append(path.stat().st_size)
        except OSError:  # the reader names the refusal (not_found, unreadable, ...)
            continue
    return Limits(max_file_bytes=max(sizes))


def _check_run_file(path: Path, side: str, limits: Limits) -> None:
    """Validate one run file in one streamed pass (nothing held); refuse it as ``_read_run``."""
    try:
        reader = RunReader(path, limits=limits)
        for _record in reader:
            pass
    except SealevalError as error:
        if error.code != "not_canonical":
            raise _rooted(side, error, "run") from None
        _read_run(path, side, uncapped=True)  # strict JSON, not canonical: read whole


def _check_order(decision_order: str) -> None:
    if decision_order not in DECISION_ORDERS:
        raise _RefusalError("decision_order", "invalid_decision_order")


def _printable(text: str) -> Text:
    """Policy text for the terminal: control and format characters escaped, no markup."""
    return Text(printable(text))


#: Output width when standard output is not a terminal and ``COLUMNS`` is not set.
_PIPE_WIDTH: Final = 80
_TABLE_TITLE: Final = "captured comparison"
_UNBOUNDED: Final = 1_000_000
_STYLES: Final = {"pass": "green", "regression": "red"}


def _console() -> Console:
    """Return the human output's console: ``COLUMNS`` if set, the terminal's width, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return Console(highlight=False, width=int(columns))
    return Console(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH)


class _Shown:
    """One entry as the terminal shows it, in the HTML report's units and precision."""

    def __init__(self, position: int, entry: MetricEntry, policy: ComparisonPolicy) -> None:
        metric = next(item for item in policy.metrics if item.name == entry.name)
        interval = entry.interval
        self.entry = entry
        self.view = ReportEntry(
            position=position,
            name=entry.name,
            slice=entry.slice,
            decision=entry.decision,
            reasons=entry.reasons,
            count=entry.count,
            missing_ids=entry.missing_ids,
            baseline_mean=entry.baseline_mean,
            subject_mean=entry.subject_mean,
            delta=entry.delta,
            ratio=entry.ratio,
            interval=None
            if interval is None
            else ReportInterval(
                lower=interval.lower,
                upper=interval.upper,
                method=interval.method,
                mass=interval.mass,
                replicates=interval.replicates,
            ),
            metric=metric,
        )
        self.notes: list[str] = []
        self.baseline = self._mean(entry.baseline_mean)
        self.subject = self._mean(entry.subject_mean)

    def _mean(self, value: float | None) -> str:
        return "n/a" if value is None else mean_text(self.view, value)

    def fill_means(self, values: ScopeValues | None) -> None:
        """Means of an entry the report left unevaluated, over its scored pairs (or ``n/a``)."""
        if self.entry.baseline_mean is not None:
            return
        usable = 0 if values is None else int((~values.missing).sum())
        if values is None or usable == 0:
            self.notes.append("means n/a: no scored pairs")
            return
        kept = ~values.missing
        try:  # the engine's mean (``fsum / n``), over the scored pairs only
            baseline = math.fsum(values.baseline[kept].tolist()) / usable
            subject = math.fsum(values.subject[kept].tolist()) / usable
        except OverflowError:
            self.notes.append("means n/a: overflow")
            return
        self.baseline = mean_text(self.view, baseline)
        self.subject = mean_text(self.view, subject)
        self.notes.append(f"means over the {usable:,} scored pairs (no interval)")

    @property
    def change(self) -> str:
        return "-" if self.view.interval is None else change_text(self.view)

    @property
    def interval(self) -> str:
        interval = self.view.interval
        if interval is None:
            return "-"
        lower = significant(scaled(self.view, interval.lower))
        upper = significant(scaled(self.view, interval.upper))
        return f"{level_text(interval.mass)}: {lower} to {upper} {change_unit(self.view)}"

    @property
    def reasons(self) -> str:
        return "; ".join((*self.entry.reasons, *self.notes))

    @property
    def decision(self) -> Text:
        entry = self.entry
        return Text(entry.decision, style=_STYLES.get(entry.decision, "yellow"))

    def row(self) -> list[Text | str]:
        entry = self.entry
        return [
            _printable(entry.name),
            _printable(entry.slice),
            f"{entry.usable_count}/{entry.count}",
            self.baseline,
            self.subject,
            self.change,
            self.interval,
            self.decision,
            self.reasons,
        ]

    def block(self) -> Table:
        entry = self.entry
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        grid.add_row("metric", _printable(entry.name))
        grid.add_row("slice", _printable(entry.slice))
        grid.add_row("decision", self.decision)
        grid.add_row("pairs", f"{entry.usable_count:,} usable of {entry.count:,}")
        grid.add_row("baseline", self.baseline)
        grid.add_row("subject", self.subject)
        grid.add_row("change", self.change)
        grid.add_row("interval", self.interval)
        grid.add_row("reasons", self.reasons or "-")
        return grid


def _shown(
    report: ComparisonReport,
    policy: ComparisonPolicy,
    values: tuple[ScopeValues, ...] | None,
) -> list[_Shown]:
    shown = [_Shown(position, entry, policy) for position, entry in enumerate(report.metrics)]
    by_scope = {(item.metric.name, item.scope): item for item in values or ()}
    for item in shown:
        item.fill_means(by_scope.get((item.entry.name, item.entry.slice)))
    return shown


def _full_table(shown: list[_Shown]) -> Table:
    table = Table(title=_TABLE_TITLE)
    for column in ("metric", "slice"):
        table.add_column(column, no_wrap=True, overflow="fold")
    for column in ("usable/pairs", "baseline", "subject", "change"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("interval", no_wrap=True)
    table.add_column("decision", no_wrap=True)
    table.add_column("reasons", no_wrap=True)
    for item in shown:
        table.add_row(*item.row())
    return table


def _print_table(
    report: ComparisonReport,
    policy: ComparisonPolicy,
    values: tuple[ScopeValues, ...] | None,
) -> None:
    """Print the table, or one block per entry when the table is wider than the console."""
    console = _console()
    shown = _shown(report, policy, values)
    table = _full_table(shown)
    if Console(width=_UNBOUNDED).measure(table).maximum <= console.width:
        console.print(table)
    else:
        console.print(_TABLE_TITLE, justify="center")
        for item in shown:
            console.print()
            console.print(item.block())
        console.print()
    if report.decision_order == "width_first":
        console.print("decision order: width first (sealeval/width-first-v1, not invarlock)")
    style = "bold green" if report.passed else "bold red"
    console.print(Text.assemble("decision: ", Text(report.decision, style=style)))
    line = f"report digest: {report.digest}"
    if len(line) > console.width:  # the digest stays whole, on a line of its own
        line = f"report digest:\n{report.digest}"
    console.print(line, overflow="fold")


def _probability(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _print_extended(document: dict[str, Any]) -> None:
    """Print the opt-in extended statistics: p-values, decisions, flips, more pairs."""
    console = _console()
    multiplicity = document["multiplicity"]
    table = Table(title="extended statistics (sealeval/extended-comparison-v1, not invarlock)")
    for column in (
        "metric",
        "slice",
        "p",
        "adjusted p",
        "decision",
        "right->wrong",
        "wrong->right",
    ):
        if column[-1:] == "p":
            table.add_column(column, justify="right", overflow="fold")
        else:
            table.add_column(column, overflow="fold")
    for row in document["entries"]:
        flips = row["flips"] or {}
        style = {"pass": "green", "regression": "red"}.get(row["decision"], "yellow")
        table.add_row(
            _printable(row["metric"]),
            _printable(row["slice"]),
            _probability(row["p_value"]),
            _probability(row["adjusted_p_value"]),
            Text(row["decision"], style=style),
            str(flips.get("right_to_wrong", "-")),
            str(flips.get("wrong_to_right", "-")),
        )
    console.print(table)
    console.print(
        f"multiplicity: {multiplicity['method']} at {multiplicity['alpha']} over "
        f"{multiplicity['family_size']} entries; binary interval: {document['binary_interval']}"
    )
    for row in document["entries"]:
        where = Text.assemble(_printable(row["metric"]), " in slice ", _printable(row["slice"]))
        flips = row["flips"]
        for direction, label in (
            ("right_to_wrong", "right->wrong"),
            ("wrong_to_right", "wrong->right"),
        ):
            if flips and flips[f"{direction}_ids"]:
                shown = ", ".join(flips[f"{direction}_ids"])
                console.print(
                    Text.assemble(
                        f"flipped {label} ({flips[direction]}): ", where, ": ", _printable(shown)
                    )
                )
        if row["more_pairs"] is not None:
            console.print(
                Text.assemble(
                    f"insufficient evidence: about {row['more_pairs']:,} more paired cases "
                    "in slice ",
                    _printable(row["slice"]),
                    " (",
                    _printable(row["metric"]),
                    ")",
                )
            )
    style = "bold green" if document["decision"] == "pass" else "bold red"
    console.print(Text.assemble("extended decision: ", Text(document["decision"], style=style)))


def _unevaluated_values(
    report: ComparisonReport, sides: _Sides, policy: ComparisonPolicy
) -> tuple[ScopeValues, ...] | None:
    """Per-pair values for the means of unevaluated entries (``None`` if none or unscorable)."""
    if all(entry.baseline_mean is not None for entry in report.metrics):
        return None
    try:
        return sides.values(policy)
    except SealevalError:
        return None


@click.command("compare", context_settings=CONTEXT_SETTINGS)
@click.argument("baseline", type=click.Path(path_type=Path, dir_okay=True, file_okay=True))
@click.argument("subject", type=click.Path(path_type=Path, dir_okay=True, file_okay=True))
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
    metavar="FILE",
    help="The approved comparison policy (invarlock/comparison-policy-v1 JSON).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report's canonical bytes instead of the table.",
)
@click.option(
    "--decision-order",
    default="reference",
    show_default=True,
    metavar="reference|width_first",
    help="width_first checks interval width before the regression bounds (not invarlock).",
)
@click.option(
    "--max-bootstrap-draws",
    "max_draws",
    metavar="N",
    help=f"Local work budget in bootstrap draws (a cap for this host) [default: "
    f"{DEFAULT_WORK_BUDGET}, enough for 1,000,000 records].",
)
@click.option(
    "--unlimited-draws",
    is_flag=True,
    help="No work budget (instead of --max-bootstrap-draws).",
)
@click.option(
    "--uncapped",
    is_flag=True,
    help="Read run files beyond invarlock's 128 MiB / 50,000-record envelope (large "
    "canonical runs are streamed).",
)
@click.option(
    "--extension",
    "extension_path",
    type=click.Path(path_type=Path, dir_okay=True, file_okay=True),
    metavar="FILE",
    help="Opt-in sealeval/comparison-policy-extension-v1: p-values, multiplicity, flips, "
    "method 10 (the decision and --json become the extended report's).",
)
def compare_command(
    *,
    baseline: Path,
    subject: Path,
    policy_path: Path,
    as_json: bool,
    extension_path: Path | None,
    decision_order: str,
    max_draws: str | None,
    unlimited_draws: bool,
    uncapped: bool,
) -> None:
    """Compare SUBJECT with BASELINE under an approved policy (exit 0 pass, 7 not passed).

    Before any scoring the planned bootstrap draws and the work budget are
    printed on standard error (not with --json); on a terminal a progress
    bar follows the reading, pairing, scoring and intervals.
    """
    try:
        with terminal_progress(announce=not as_json) as progress:
            report, extended, sides, policy = _compare(
                baseline,
                subject,
                policy_path,
                extension_path,
                budget=_budget(max_draws, unlimited_draws),
                decision_order=decision_order,
                uncapped=uncapped,
                progress=progress,
            )
    except _RefusalError as refusal:
        for line in refusal_lines(refusal.field, refusal.code):
            click.echo(line, err=True)
        hint = limit_remedy("compare", refusal.code, refusal.field, uncapped=uncapped)
        if hint is not None:
            click.echo(f"sealeval: {hint}", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    if extended is not None:
        if as_json:
            click.echo(encode_invarlock(extended), nl=False)
        else:
            _print_table(report, policy, _unevaluated_values(report, sides, policy))
            _print_extended(extended)
        passed = extended["decision"] == "pass"
        raise click.exceptions.Exit(EXIT_OK if passed else EXIT_POLICY_NOT_PASSED)
    if as_json:
        click.echo(report.canonical_bytes, nl=False)
    else:
        _print_table(report, policy, _unevaluated_values(report, sides, policy))
    raise click.exceptions.Exit(EXIT_OK if report.passed else EXIT_POLICY_NOT_PASSED)
