"""A real PostgreSQL server for the test suite: one throwaway cluster per session.

The session fixture ``postgres_dsn`` is registered once, in ``tests/conftest.py``
(it yields from :func:`session_dsn`); a test module asks for it by name::

    from support.postgres import fresh_database

    @pytest.fixture(scope="module")
    def my_dsn(postgres_dsn: str) -> Iterator[str]:
        with fresh_database(postgres_dsn, "mymodule") as dsn:
            yield dsn

* If ``SEALEVAL_TEST_POSTGRES_DSN`` is set, :func:`session_dsn` yields it
  unchanged and manages nothing (the role needs ``CREATEDB`` for
  :func:`fresh_database`).
* Otherwise it starts a cluster: the newest ``/usr/lib/postgresql/*/bin``
  (or ``SEALEVAL_TEST_POSTGRES_BIN``, a directory holding ``initdb``,
  ``pg_ctl`` and ``postgres``) initialises a fresh data directory in a new
  temporary directory (owned by the ``postgres`` OS user when the tests run
  as root, since the server refuses to run as root), listening only on
  ``127.0.0.1`` on a free port and on a unix socket inside that directory,
  with ``fsync``, ``synchronous_commit`` and ``full_page_writes`` off. TCP
  connections need the superuser's random per-session password
  (``scram-sha-256``); the socket directory is private to the cluster owner.
  At session end the server is stopped (``-m immediate``) and the directory
  removed.
* Missing binaries, a missing ``postgres`` OS user (as root) or a server that
  does not start make the fixture **fail** with a message, never skip.

The cluster is shared process-wide: every user gets the same server, stopped
when the last user is finished (or at interpreter exit as a safety net).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

__all__ = [
    "ENV_BIN",
    "ENV_DSN",
    "create_database",
    "drop_database",
    "find_postgres_bindir",
    "fresh_database",
    "restart_server",
    "session_dsn",
]

ENV_DSN = "SEALEVAL_TEST_POSTGRES_DSN"
ENV_BIN = "SEALEVAL_TEST_POSTGRES_BIN"
SESSION_DATABASE = "sealeval_test"
_BINARIES = ("initdb", "pg_ctl", "postgres")
_PREFIX = re.compile(r"[a-z][a-z0-9_]{0,30}")
_START_ATTEMPTS = 3
_TIMEOUT_S = 30


class PostgresUnavailableError(RuntimeError):
    """The throwaway cluster could not be set up (the message says why)."""


def _version_key(path: Path) -> tuple[int, ...]:
    version = path.parent.parent.name
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def find_postgres_bindir() -> Path:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Raises:
        PostgresUnavailableError: none found (the message says how to fix it).
    """
    configured = os.environ.get(ENV_BIN)
    if configured:
        candidates = [Path(configured)]
    else:
        found = sorted(
            Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=_version_key, reverse=True
        )
        candidates = [path.parent for path in found]
        which = shutil.which("initdb")
        if which:
            candidates.append(Path(which).resolve().parent)
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in _BINARIES):
            return directory
    raise PostgresUnavailableError(
        "PostgreSQL server binaries not found: install PostgreSQL (e.g. `apt-get install "
        f"postgresql`), set {ENV_BIN} to a directory holding initdb, pg_ctl and postgres, "
        f"or set {ENV_DSN} to an existing server's DSN"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class _Cluster:
    root: Path
    data: Path
    bindir: Path
    owner: pwd.struct_passwd | None
    port: int = 0
    password: str = ""
    running: bool = False

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def dsn(self, dbname: str) -> str:
        return psycopg.conninfo.make_conninfo(
            host="127.0.0.1",
            port=self.port,
            user="postgres",
            password=self.password,
            dbname=dbname,
            connect_timeout=10,
        )

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a server binary as the cluster owner, appending its output to ``command.log``."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        if self.owner is not None:
            env["HOME"] = str(self.root)
        with (self.root / "command.log").open("a", encoding="utf-8") as output:
            return subprocess.run(  # noqa: PLW1510 - the caller checks returncode
                [str(self.bindir / args[0]), *args[1:]],
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=_TIMEOUT_S,
                user=None if self.owner is None else self.owner.pw_uid,
                group=None if self.owner is None else self.owner.pw_gid,
                extra_groups=None if self.owner is None else [],
            )

    def tail(self) -> str:
        parts = []
        for name in ("command.log", "server.log"):
            path = self.root / name
            if path.exists():
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                parts.append(f"--- {name} ---\n" + "\n".join(lines[-20:]))
        return "\n".join(parts)


def _owner() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailableError(
            "running as root but there is no `postgres` OS user to own the throwaway "
            "cluster (the server refuses to run as root); create one or run as non-root"
        ) from None


def _initdb(cluster: _Cluster) -> None:
    cluster.password = secrets.token_hex(16)
    password_file = cluster.root / "pwfile"
    password_file.write_text(cluster.password + "\n", encoding="utf-8")
    password_file.chmod(0o600)
    if cluster.owner is not None:
        os.chown(password_file, cluster.owner.pw_uid, cluster.owner.pw_gid)
    result = cluster.run(
        "initdb",
        "--pgdata",
        str(cluster.data),
        "--username",
        "postgres",
        "--pwfile",
        str(password_file),
        "--auth-host",
        "scram-sha-256",
        "--auth-local",
        "trust",
        "--encoding",
        "UTF8",
        "--locale",
        "C",
        "--no-sync",
        "--no-instructions",
    )
    password_file.unlink()
    if result.returncode != 0:
        raise PostgresUnavailableError("initdb failed\n" + cluster.tail())


def _configure(cluster: _Cluster) -> None:
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(cluster.port),
        "unix_socket_directories": f"'{cluster.root}'",
        "fsync": "off",
        "synchronous_commit": "off",
        "full_page_writes": "off",
        "max_connections": "50",
        "shared_buffers": "16MB",
        "timezone": "'UTC'",
    }
    auto = cluster.data / "postgresql.auto.conf"
    with auto.open("a", encoding="utf-8") as config:
        config.write("".join(f"{name} = {value}\n" for name, value in settings.items()))


def _start(cluster: _Cluster) -> None:
    for _attempt in range(_START_ATTEMPTS):
        cluster.port = _free_port()
        _configure(cluster)
        result = cluster.run(
            "pg_ctl", "--pgdata", str(cluster.data), "--log", str(cluster.log),
            "--wait", "--timeout", str(_TIMEOUT_S), "start",
        )  # fmt: skip
        if result.returncode == 0:
            cluster.running = True
            return
    raise PostgresUnavailableError(
        "the throwaway PostgreSQL server did not start\n" + cluster.tail()
    )


def _stop(cluster: _Cluster) -> None:
    try:
        if cluster.running:
            cluster.run(
                "pg_ctl", "--pgdata", str(cluster.data), "--mode", "immediate", "--wait", "stop"
            )
            cluster.running = False
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)


def _start_cluster() -> _Cluster:
    bindir = find_postgres_bindir()
    owner = _owner()
    root = Path(tempfile.mkdtemp(prefix="sealeval-pg-"))
    cluster = _Cluster(root=root, data=root / "data", bindir=bindir, owner=owner)
    try:
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
        _initdb(cluster)
        _start(cluster)
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                    sql.Identifier(SESSION_DATABASE)
                )
            )
    except BaseException:
        _stop(cluster)
        raise
    return cluster


_LOCK = threading.Lock()
_ACTIVE: list[_Cluster] = []
_USERS = [0]


def _acquire() -> _Cluster:
    with _LOCK:
        if not _ACTIVE:
            _ACTIVE.append(_start_cluster())
        _USERS[0] += 1
        return _ACTIVE[0]


def _release() -> None:
    with _LOCK:
        _USERS[0] -= 1
        if _USERS[0] == 0 and _ACTIVE:
            _stop(_ACTIVE.pop())


@atexit.register
def _stop_leftover() -> None:
    with _LOCK:
        while _ACTIVE:
            _stop(_ACTIVE.pop())


def session_dsn() -> Iterator[str]:
    """Yield a libpq DSN of a database on a real PostgreSQL server (see the module doc)."""
    external = os.environ.get(ENV_DSN)
    if external:
        yield external
        return
    problem = ""
    try:
        cluster = _acquire()
    except PostgresUnavailableError as error:
        problem = str(error)
    if problem:
        pytest.fail(f"PostgreSQL test server unavailable: {problem}", pytrace=False)
    try:
        yield cluster.dsn(SESSION_DATABASE)
    finally:
        _release()


def restart_server(mode: str = "immediate", *, down_for: float = 0.0) -> None:
    """Restart the managed throwaway server in place (same port, same data, same password).

    ``mode`` is ``pg_ctl``'s shutdown mode: ``immediate`` (a crash: no
    checkpoint, WAL recovery on start), ``fast`` or ``smart``. Every client
    connection is cut. With ``down_for`` > 0 the server stays stopped that
    many seconds before it starts again (``pg_ctl stop`` + ``start``), else
    ``pg_ctl restart``. Returns when the server accepts connections again.

    Raises:
        PostgresUnavailableError: no cluster is managed here (the suite runs
            against ``SEALEVAL_TEST_POSTGRES_DSN``) or the restart failed.
    """
    if mode not in ("immediate", "fast", "smart"):
        raise ValueError("mode must be immediate, fast or smart")
    with _LOCK:
        if not _ACTIVE:
            raise PostgresUnavailableError("no managed PostgreSQL cluster to restart")
        cluster = _ACTIVE[0]
        data = ("--pgdata", str(cluster.data), "--log", str(cluster.log))
        wait = ("--wait", "--timeout", str(_TIMEOUT_S))
        if down_for > 0:
            stopped = cluster.run("pg_ctl", *data, "--mode", mode, *wait, "stop")
            time.sleep(down_for)
            result = cluster.run("pg_ctl", *data, *wait, "start")
            ok = stopped.returncode == 0 and result.returncode == 0
        else:
            result = cluster.run("pg_ctl", *data, "--mode", mode, *wait, "restart")
            ok = result.returncode == 0
        if not ok:
            cluster.running = False
            raise PostgresUnavailableError(
                "the PostgreSQL server did not restart\n" + cluster.tail()
            )


def create_database(dsn: str, prefix: str) -> str:
    """Create a fresh, empty database ``<prefix>_<random>`` and return its DSN.

    The database is created from ``template0`` with UTF-8 encoding, by the
    role of ``dsn`` (which needs ``CREATEDB``).
    """
    if _PREFIX.fullmatch(prefix) is None:
        raise ValueError("prefix must match [a-z][a-z0-9_]{0,30}")
    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(
                sql.Identifier(name)
            )
        )
    return psycopg.conninfo.make_conninfo(dsn, dbname=name)


def drop_database(dsn: str, database_dsn: str) -> None:
    """Drop the database named by ``database_dsn`` (created by :func:`create_database`)."""
    name = psycopg.conninfo.conninfo_to_dict(database_dsn)["dbname"]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
        )


@contextlib.contextmanager
def fresh_database(dsn: str, prefix: str) -> Iterator[str]:
    """Create a fresh database for one test module, yield its DSN, drop it afterwards."""
    database_dsn = create_database(dsn, prefix)
    try:
        yield database_dsn
    finally:
        drop_database(dsn, database_dsn)
