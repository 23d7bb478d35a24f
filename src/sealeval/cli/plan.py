"""``sealeval plan``: how many paired cases each metric and slice of a policy needs.

A thin layer over :mod:`sealeval.captured.planning`::

    sealeval plan --policy POLICY (--baseline RUN | --rate METRIC=VALUE ...)
                  [--power P] [--assurance A] [--assumed-difference D]
                  [--discordance PSI] [--method reference|newcombe_1998_method10] [--json]

From a baseline run (rates and slice shares measured scope by scope) or from
stated rates (``--rate``: a binary metric's baseline pass rate, or a
bootstrap metric's standard deviation of paired differences), prints for
every metric x scope the pairs needed for the policy's maximum interval
width, the pairs needed to clear its maximum regression with the stated
power, and — with a baseline — how many more pairs and how many cases in
total that means. ``--json`` prints the canonical ``sealeval/sample-size-plan-v1``
document (``contracts/sealeval.sample-size-plan-v1.schema.json``).

Exit status 0 when planned (entries that cannot be planned are shown with
their reason), 2 on an input error, reported as ``sealeval: error: <field>:
<code>`` (option and field names only, never values or paths).
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any, Final

import click
from rich.console import Console
from rich.table import Table

from sealeval.canonical import encode_invarlock
from sealeval.captured.inference import METHOD10
from sealeval.captured.planning import PLAN_FORMAT, EntryPlan, plan_from_run, plan_pairs
from sealeval.captured.policy import MAX_CANONICAL_BYTES, load_comparison_policy
from sealeval.captured.run import read_file_bytes, read_run
from sealeval.cli._common import CONTEXT_SETTINGS, EXIT_ERROR, EXIT_OK
from sealeval.errors import SealevalError

__all__ = ["plan_command", "plan_document"]

_RATE: Final = re.compile(r"(?P<name>[^=]{1,128})=(?P<value>[0-9]{1,12}(?:\.[0-9]{1,12})?)")


class _RefusalError(Exception):
    def __init__(self, field: str, code: str) -> None:
        super().__init__(code)
        self.field = field
        self.code = code


def plan_document(
    plans: tuple[EntryPlan, ...], policy_digest: str, assumptions: dict[str, Any]
) -> dict[str, Any]:
    """Return the ``sealeval/sample-size-plan-v1`` document of a plan."""
    return {
        "format": PLAN_FORMAT,
        "policy_digest": policy_digest,
        "assumptions": assumptions,
        "entries": [plan.to_dict() for plan in plans],
    }


def _rates(values: tuple[str, ...], names: set[str]) -> dict[str, float]:
    rates: dict[str, float] = {}
    for position, text in enumerate(values):
        match = _RATE.fullmatch(text)
        if match is None:
            raise _RefusalError(f"rate[{position}]", "invalid_rate")
        name = match["name"]
        if name not in names:
            raise _RefusalError(f"rate[{position}]", "unknown_metric")
        if name in rates:
            raise _RefusalError(f"rate[{position}]", "duplicate_metric")
        rates[name] = float(match["value"])
    return rates


def _text(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _print(plans: tuple[EntryPlan, ...], with_run: bool) -> None:
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    table = Table(title="paired cases needed")
    for column in ("metric", "slice", "width", "power", "required"):
        table.add_column(column, justify="left" if column in ("metric", "slice") else "right")
    if with_run:
        table.add_column("have", justify="right")
        table.add_column("more", justify="right")
        table.add_column("total cases", justify="right")
    table.add_column("note")
    for plan in plans:
        row = [
            plan.metric,
            plan.scope,
            _text(plan.width_pairs),
            _text(plan.power_pairs),
            _text(plan.required_pairs),
        ]
        if with_run:
            row += [_text(plan.current_pairs), _text(plan.more_pairs), _text(plan.total_cases)]
        row.append(plan.reason or "")
        table.add_row(*row)
    console.print(table)
    totals = [plan.total_cases for plan in plans if plan.total_cases is not None]
    if totals:
        console.print(
            f"next: collect at least {max(totals):,} paired cases in total "
            "(run `sealeval compare` again on the larger runs)"
        )


def _plan(
    policy_path: Path,
    baseline_path: Path | None,
    rates: tuple[str, ...],
    options: dict[str, Any],
) -> tuple[str, tuple[EntryPlan, ...]]:
    if (baseline_path is None) == (not rates):
        raise _RefusalError("baseline", "conflicting_options" if rates else "missing_option")
    for name in ("power", "assurance", "assumed_difference"):
        if not math.isfinite(options[name]):
            raise _RefusalError(name, "invalid_value")
    try:
        policy = load_comparison_policy(read_file_bytes(policy_path, MAX_CANONICAL_BYTES, "policy"))
    except SealevalError as error:
        raise _RefusalError("policy", error.code) from None
    if baseline_path is not None:
        try:
            run = read_run(baseline_path)
        except SealevalError as error:
            raise _RefusalError("baseline", error.code) from None
    try:
        if baseline_path is not None:
            return policy.digest, plan_from_run(run, policy, **options)
        stated = _rates(rates, {metric.name for metric in policy.metrics})
        return policy.digest, plan_pairs(policy, stated, **options)
    except SealevalError as error:
        raise _RefusalError(error.field or "plan", error.code) from None


@click.command("plan", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--policy",
    "policy_path",
    required=True,
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="The comparison policy (invarlock/comparison-policy-v1 JSON).",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    metavar="RUN",
    help="A baseline run to measure rates and slice shares from.",
)
@click.option(
    "--rate",
    "rates",
    multiple=True,
    metavar="METRIC=VALUE",
    help="Stated rate per metric (pass rate, or SD of paired differences).",
)
@click.option(
    "--power",
    default=0.8,
    show_default=True,
    type=float,
    help="Probability of clearing the maximum regression when nothing changed.",
)
@click.option(
    "--assurance",
    default=0.95,
    show_default=True,
    type=float,
    help="Probability that the interval is within the maximum width.",
)
@click.option(
    "--assumed-difference",
    default=0.0,
    show_default=True,
    type=float,
    help="True subject-minus-baseline change to plan for (in the better direction).",
)
@click.option(
    "--discordance",
    type=float,
    default=None,
    help="Share of pairs whose binary outcome differs [default: 2p(1-p)].",
)
@click.option(
    "--method",
    default="reference",
    show_default=True,
    metavar=f"reference|{METHOD10}",
    help="The binary interval to plan for.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the canonical plan document.")
def plan_command(
    *,
    policy_path: Path,
    baseline_path: Path | None,
    rates: tuple[str, ...],
    power: float,
    assurance: float,
    assumed_difference: float,
    discordance: float | None,
    method: str,
    as_json: bool,
) -> None:
    """Plan how many paired cases every metric and slice of a policy needs."""
    options: dict[str, Any] = {
        "power": power,
        "assurance": assurance,
        "assumed_difference": assumed_difference,
        "discordance": discordance,
        "method": method,
    }
    try:
        policy_digest, plans = _plan(policy_path, baseline_path, rates, options)
    except _RefusalError as refusal:
        click.echo(f"sealeval: error: {refusal.field}: {refusal.code}", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    if as_json:
        document = plan_document(plans, policy_digest, options)
        click.echo(encode_invarlock(document), nl=False)
    else:
        _print(plans, baseline_path is not None)
    raise click.exceptions.Exit(EXIT_OK)
