"""A throwaway PostgreSQL server on loopback, for tests and benchmarks of shared optuna studies.

It uses the PostgreSQL programs of the system (Debian's ``postgresql`` package puts them in
``/usr/lib/postgresql/<version>/bin``; ``make test`` installs it with apt when run as root), makes a fresh
cluster in a temporary folder with trust authentication on 127.0.0.1 and a free port, and removes everything
on :meth:`stop`. Run as root, the server runs as the ``postgres`` user (PostgreSQL refuses root).
``MASFORGE_TEST_POSTGRES_URL`` points tests at an existing server instead::

    with PostgresServer() as pg:
        optuna.create_study(storage=pg.url, ...)
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from masforge.ports import free_port

INSTALL_HINT = "install it with `apt-get install postgresql` (make test does, as root)"


def postgres_bin() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest version first), or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def unavailable() -> str | None:
    """Why a test server cannot be started here (None: it can)."""
    if os.environ.get("MASFORGE_TEST_POSTGRES_URL"):
        return None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the PostgreSQL driver is missing: pip install 'masforge[postgres]'"
    if postgres_bin() is None:
        return f"PostgreSQL is not installed: {INSTALL_HINT}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root without a 'postgres' user to run the server as"
    return None


class PostgresServer:
    """A private PostgreSQL cluster (database ``masforge``, user ``masforge``) for as long as it is needed."""

    def __init__(self) -> None:
        self.url = os.environ.get("MASFORGE_TEST_POSTGRES_URL", "")
        self._external = bool(self.url)
        self._root: Path | None = None
        self._bin: Path | None = None

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self._bin is not None
        cmd = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            text = (out.stderr or out.stdout).strip().splitlines()
            raise RuntimeError(f"{args[0]} failed: {text[-1] if text else out.returncode}")
        return out

    def start(self) -> str:
        """Start the server and return its SQLAlchemy URL."""
        if self._external:
            return self.url
        why = unavailable()
        if why:
            raise RuntimeError(why)
        self._bin = postgres_bin()
        self._root = Path(tempfile.mkdtemp(prefix="masforge-pg-"))
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self._root, entry.pw_uid, entry.pw_gid)
        data = self._root / "data"
        port = free_port()
        self._run("initdb", "-D", str(data), "-U", "masforge", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-k {self._root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(data), "-l", str(self._root / "server.log"), "-w", "-t", "60", "-o", options,
                  "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "masforge", "masforge")
        self.url = f"postgresql://masforge@127.0.0.1:{port}/masforge"
        return self.url

    def stop(self) -> None:
        """Stop the server and delete its files."""
        if self._external or self._root is None:
            return
        try:
            self._run("pg_ctl", "-D", str(self._root / "data"), "-m", "immediate", "-w", "stop")
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self._root, ignore_errors=True)
        self._root = None

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
