"""``sealeval view``: a local, read-only web viewer of the evaluation evidence in a folder.

It lists the runs, comparison reports, evidence packs and verification
receipts found in a folder (a confined, bounded walk that never follows a
link), and shows for each: decisions, the report's forest plots and
per-scope tables (packs), and the per-record paired outcomes — which cases
went from right to wrong and back, with input, expected answer and both
outputs side by side, searchable and filtered by metric, slice and change.

The server listens on ``127.0.0.1`` only, answers ``GET`` only, serves only
what the walk listed, loads nothing from outside the page (strict
Content-Security-Policy, no scripts at all) and logs nothing: the pages show
record content to the local user on purpose, and no log ever holds it.

Example::

    from sealeval.view import start_viewer

    server, _ = start_viewer("evidence-folder")
    print(server.url)          # http://127.0.0.1:<port>/
    ...
    server.shutdown()

Faces: :func:`scan` (the catalog), :func:`paired_outcomes` (per-record
outcomes of two runs under a policy), :func:`iter_pack_outcomes` (the same
outcomes streamed from a pack's run files, no run held), :class:`ViewerServer` /
:func:`start_viewer` (the server).
"""

from __future__ import annotations

from sealeval.view.catalog import CATALOG_LIMITS, Catalog, CatalogLimits, Item, ViewError, scan
from sealeval.view.outcomes import CHANGES, PairedOutcome, iter_pack_outcomes, paired_outcomes
from sealeval.view.server import CONTENT_SECURITY_POLICY, ViewerServer, start_viewer

__all__ = [
    "CATALOG_LIMITS",
    "CHANGES",
    "CONTENT_SECURITY_POLICY",
    "Catalog",
    "CatalogLimits",
    "Item",
    "PairedOutcome",
    "ViewError",
    "ViewerServer",
    "iter_pack_outcomes",
    "paired_outcomes",
    "scan",
    "start_viewer",
]
