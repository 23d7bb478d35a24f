"""The viewer's HTTP server: loopback only, ``GET`` only, listed items only, nothing logged.

:class:`ViewerServer` is a :class:`http.server.ThreadingHTTPServer` bound to
``127.0.0.1`` (a random free port unless one is given). Routes::

    GET /                              everything found (the folder is re-scanned)
    GET /pack|/run|/comparison|/receipt?path=P   one listed item
    GET /cases?path=P[&q=&metric=&slice=&change=] a pack's per-record paired outcomes

A ``path`` is served only when the latest scan listed an item of that kind
at exactly that path, so nothing outside the folder (or not found by the
confined walk) can be named. Other methods get 405; a ``Host`` header other
than the loopback address and port gets 403 (DNS rebinding); unknown routes
404. Every response carries a Content-Security-Policy that forbids scripts,
fonts, images, frames, connections and form targets other than the viewer
itself, plus ``nosniff``, ``no-referrer`` and ``no-store``. The server
writes no log line at all: requests carry record content in their queries
(search terms) and pages show it, so nothing of either is ever logged.
"""

from __future__ import annotations

import os
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from sealeval.view.catalog import CATALOG_LIMITS, Catalog, CatalogLimits, ViewError, scan
from sealeval.view.load import Loader
from sealeval.view.pages import case_page, error_page, index_page, item_page

__all__ = ["CONTENT_SECURITY_POLICY", "LOOPBACK", "ViewerServer", "start_viewer"]

LOOPBACK: Final = "127.0.0.1"
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; font-src 'none'; "
    "script-src 'none'; connect-src 'none'; frame-src 'none'; frame-ancestors 'none'; "
    "form-action 'self'; base-uri 'none'"
)
_ITEM_ROUTES: Final = frozenset({"pack", "run", "comparison", "receipt"})
_MAX_QUERY: Final = 8_192


class ViewerServer(ThreadingHTTPServer):
    """Serve one folder read-only on loopback (see the module docstring)."""

    daemon_threads = True

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        port: int = 0,
        limits: CatalogLimits = CATALOG_LIMITS,
    ) -> None:
        """Scan ``directory`` once and bind ``127.0.0.1:port`` (``0``: a free port).

        Raises:
            ViewError: ``not_a_directory``, ``invalid_port``, ``port_unavailable``.
        """
        if type(port) is not int or not 0 <= port <= 65_535:
            raise ViewError("invalid_port", "port")
        self.directory = os.fspath(directory)
        self.limits = limits
        self._lock = threading.Lock()
        self._catalog = scan(self.directory, limits=limits)
        self.loader = Loader(self.directory, limits)
        try:
            super().__init__((LOOPBACK, port), _Handler)
        except OSError:
            raise ViewError("port_unavailable", "port") from None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Print nothing: a traceback could quote record content."""
        del request, client_address

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """The viewer's address."""
        return f"http://{LOOPBACK}:{self.port}/"

    def catalog(self, *, rescan: bool = False) -> Catalog:
        """Return the latest scan (re-scanned on request, as the index page does)."""
        with self._lock:
            if rescan:
                self._catalog = scan(self.directory, limits=self.limits)
            return self._catalog


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "sealeval-view"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing (requests and pages carry record content)."""

    def _send(self, status: int, body: str) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _refuse_method(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, error_page(405, "method_not_allowed"))

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method  # noqa: N815

    def do_HEAD(self) -> None:
        """Answer like GET without a body."""
        self.do_GET()

    def do_GET(self) -> None:
        """Route a read-only request."""
        allowed = {f"{LOOPBACK}:{self.server.port}", f"localhost:{self.server.port}"}
        if self.headers.get("Host") not in allowed:
            self._send(HTTPStatus.FORBIDDEN, error_page(403, "host_not_allowed"))
            return
        target = urlsplit(self.path)
        if len(target.query) > _MAX_QUERY:
            self._send(HTTPStatus.REQUEST_URI_TOO_LONG, error_page(414, "query_too_long"))
            return
        query = {
            key: values[0] for key, values in parse_qs(target.query, keep_blank_values=True).items()
        }
        route = target.path.strip("/")
        if route == "":
            self._send(HTTPStatus.OK, index_page(self.server.catalog(rescan=True)))
            return
        kind = "pack" if route == "cases" else route
        if kind not in _ITEM_ROUTES:
            self._send(HTTPStatus.NOT_FOUND, error_page(404, "unknown_page"))
            return
        item = self.server.catalog().find(kind, query.get("path", ""))
        if item is None:
            self._send(HTTPStatus.NOT_FOUND, error_page(404, "not_listed"))
            return
        loaded = self.server.loader.load(item)
        try:
            body = case_page(loaded, query) if route == "cases" else item_page(loaded)
        except Exception:  # noqa: BLE001 - a rendering failure must not quote content
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, error_page(500, "render_failed"))
            return
        self._send(HTTPStatus.OK, body)


def start_viewer(
    directory: str | os.PathLike[str], *, port: int = 0, limits: CatalogLimits = CATALOG_LIMITS
) -> tuple[ViewerServer, threading.Thread]:
    """Start a viewer in a background thread; stop it with ``server.shutdown()``."""
    server = ViewerServer(directory, port=port, limits=limits)
    thread = threading.Thread(target=server.serve_forever, name="sealeval-view", daemon=True)
    thread.start()
    return server, thread
