"""A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl in a temporary folder,
listening on a Unix socket only, removed afterwards.

initdb refuses to run as root (CI runs as root): there, the server's programs run as the
`postgres` user, in a folder it owns. The server binaries are found in PATH, else under
/usr/lib/postgresql/<version>/bin (Debian's layout).
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

SUPERUSER = "postgres"
# Where Debian installs the server; `.ci/run` installs postgresql when it is missing.
DEBIAN_BINARIES = Path("/usr/lib/postgresql")


def server_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when there is no PostgreSQL server."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(DEBIAN_BINARIES.glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return versions[-1].parent if versions else None


def unavailable_reason() -> str | None:
    """Why the PostgreSQL tests cannot run here, or None."""
    if server_binaries() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl; apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed (pip install '.[postgres]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root and there is no `postgres` user to run initdb as"
    return None


class Cluster:
    """A running cluster; `database()` makes a fresh database on it and gives its URL."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.folder = Path(tempfile.mkdtemp(prefix="memstore-pg-"))
        self.data = self.folder / "data"
        self._as_root = os.geteuid() == 0
        self._numbers = itertools.count(1)
        if self._as_root:
            shutil.chown(self.folder, user=SUPERUSER)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale",
            "C.UTF-8",
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "start",
            "-o", f"-k {self.folder} -c listen_addresses='' -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
        )  # fmt: skip

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@/{database}?host={self.folder}"

    def execute(self, *statements: str, database: str = "postgres") -> None:
        """Run statements as the superuser, each in its own transaction."""
        import psycopg

        with psycopg.connect(
            f"host={self.folder} user={SUPERUSER} dbname={database}", autocommit=True
        ) as connection:
            for statement in statements:
                connection.execute(statement.encode())

    def database(self, template: str | None = None) -> str:
        """A new, empty database (or a copy of `template`), by URL."""
        name = f"test_{next(self._numbers)}"
        copy = f" TEMPLATE {template}" if template else ""
        self.execute(f"CREATE DATABASE {name}{copy}")
        return self.url(name)

    @staticmethod
    def name_of(url: str) -> str:
        """The database's name in one of `database()`'s URLs."""
        return urlsplit(url).path.lstrip("/")

    def restart(self) -> None:
        # With its log file: a server writing to our pipes would keep _run waiting.
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-m", "fast",
            "restart",
        )  # fmt: skip

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.binaries / program), *args]
        if self._as_root:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        subprocess.run(
            command, check=True, capture_output=True, text=True, cwd=self.folder, timeout=120
        )
