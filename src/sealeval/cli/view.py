"""``sealeval view DIR``: serve a local, read-only viewer of the evidence in DIR.

Thin over :mod:`sealeval.view`: scan the folder, bind ``127.0.0.1`` (a free
port unless ``--port``), print the address, serve until interrupted. Exit 0
after Ctrl-C, 2 on a refusal (``sealeval: error: <field>: <code>``). Never
prints a path or content.
"""

from __future__ import annotations

from pathlib import Path

import click

from sealeval.cli._common import CONTEXT_SETTINGS, refusals_exit
from sealeval.view import ViewerServer

__all__ = ["view_command"]


@click.command("view", context_settings=CONTEXT_SETTINGS)
@click.argument("directory", type=click.Path(path_type=Path, file_okay=True, dir_okay=True))
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=0,
    show_default=True,
    help="Port on 127.0.0.1 (0: a free port).",
)
@refusals_exit
def view_command(directory: Path, port: int) -> None:
    """Serve a read-only viewer of the runs, comparisons, packs and receipts in DIRECTORY."""
    server = ViewerServer(directory, port=port)
    found = len(server.catalog().items)
    click.echo(f"sealeval view: {found} items; open {server.url} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
