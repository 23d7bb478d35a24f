"""``sealeval view DIR``: serve a local, read-only viewer of the evidence in DIR.

Thin over :mod:`sealeval.view`: scan the folder, bind ``127.0.0.1`` (a free
port unless ``--port``), print the address, serve until interrupted. Exit 0
after Ctrl-C, 2 on a refusal (``sealeval: error: <field>: <code>``). Never
prints a path or content.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import click

from sealeval.cli._common import CONTEXT_SETTINGS, refusals_exit
from sealeval.view import ViewError, ViewerServer

__all__ = ["view_command"]


_PORT: Final = re.compile(r"[0-9]{1,5}")


def _port(value: str) -> int:
    """``--port N`` (0-65535); refused with a code, never echoed."""
    if _PORT.fullmatch(value) is None or int(value) > 65_535:
        raise ViewError("invalid_port", "port")
    return int(value)


@click.command("view", context_settings=CONTEXT_SETTINGS)
@click.argument("directory", type=click.Path(path_type=Path, file_okay=True, dir_okay=True))
@click.option(
    "--port",
    "port_text",
    default="0",
    show_default=True,
    metavar="N",
    help="Port on 127.0.0.1 (0: a free port).",
)
@refusals_exit
def view_command(directory: Path, port_text: str) -> None:
    """Serve a read-only viewer of the runs, comparisons, packs and receipts in DIRECTORY."""
    server = ViewerServer(directory, port=_port(port_text))
    found = len(server.catalog().items)
    try:  # Ctrl-C right after the line below still stops cleanly (exit 0)
        click.echo(f"sealeval view: {found} items; open {server.url} (Ctrl-C stops)")
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
