"""Remedy lines for size and budget refusals: the option that lifts each limit.

A refusal keeps its closed ``<field>: <code>`` line; the line printed under it
(``sealeval: ...`` on standard error, human mode) names what the user can
type to get past it -- option names only, never a value or a path:

* ``too_many_records`` / ``too_many_cases`` / ``too_large`` of a run, a
  case set or a pack: runs beyond invarlock's envelope need ``--uncapped``
  (``compare``, ``evaluate``, ``verify``, ``report``); ``import`` has no cap
  unless ``--compat-invarlock`` asks for one;
* ``too_large`` of anything else (a policy, a request, a receipt, one
  record or line): a fixed limit that no option lifts (said so, so the user
  does not look for one);
* ``work_budget_exceeded`` / ``local_work_budget_exceeded``:
  ``--max-bootstrap-draws N`` or ``--unlimited-draws``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CAP_CODES",
    "ENVELOPE_REMEDY",
    "FIXED_LIMIT",
    "limit_remedy",
]

#: Codes that a size cap produces.
CAP_CODES: Final = frozenset({"too_large", "too_many_records", "too_many_cases"})
#: The remedy when invarlock's envelope is the cap that refused.
ENVELOPE_REMEDY: Final = (
    "runs beyond invarlock's envelope (50,000 records, 128 MiB) need --uncapped "
    "(on compare, evaluate, verify and report)"
)
#: The remedy when the limit is fixed.
FIXED_LIMIT: Final = "this size limit is fixed (docs/cli.md, limits); no option lifts it"
_IMPORT_REMEDY: Final = (
    "--compat-invarlock applies invarlock's envelope (50,000 records, 128 MiB); "
    "without it the import has no record cap"
)
_BUDGET_REMEDY: Final = {
    "compare": "raise the work budget with --max-bootstrap-draws N, or --unlimited-draws",
    "evaluate": "raise the work budget with --max-bootstrap-draws N",
    "verify": "raise the work budget with --max-bootstrap-draws N",
}
_BUDGET_CODES: Final = frozenset({"work_budget_exceeded", "local_work_budget_exceeded"})
#: Field prefixes of each command that name a run, a case set or a pack.
_CAPPED_FIELDS: Final = {
    "compare": ("baseline", "subject"),
    "evaluate": ("comparison.",),
    "verify": ("",),
    "report": ("",),
}
#: Fields whose limit is fixed even in a capped command (its own option files).
_FIXED_FIELDS: Final = ("policy", "extension", "request", "receipt", "trust", "case_set")


def _capped(command: str, field: str) -> bool:
    if field.startswith(_FIXED_FIELDS) and not field.startswith("comparison."):
        return False
    if field.startswith("comparison.") and field.endswith(".policy"):
        return False
    return field.startswith(_CAPPED_FIELDS.get(command, ()))


def limit_remedy(
    command: str,
    code: str,
    field: str | None,
    *,
    uncapped: bool = False,
    compat_invarlock: bool = False,
) -> str | None:
    """Return the remedy line for a size or budget refusal of ``command``, else ``None``.

    Args:
        command: ``compare``, ``evaluate``, ``verify``, ``report`` or ``import``.
        code: the refusal's closed code.
        field: the refusal's library-chosen field (rooted as the command prints it).
        uncapped: ``--uncapped`` was given already (the envelope is not the cap).
        compat_invarlock: ``import --compat-invarlock`` was given.
    """
    if code in _BUDGET_CODES:
        return _BUDGET_REMEDY.get(command)
    if code not in CAP_CODES:
        return None
    if command == "import":
        return _IMPORT_REMEDY if compat_invarlock else _fixed(code)
    if not uncapped and _capped(command, field or ""):
        return ENVELOPE_REMEDY
    return _fixed(code)


def _fixed(code: str) -> str | None:
    """Answer ``too_large`` only: a record count cap is always the envelope's."""
    return FIXED_LIMIT if code == "too_large" else None
