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
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

SUPERUSER = "postgres"

# Run beside each cluster, in a session of its own (a Ctrl-C to the tests' process group
# leaves it be): it waits for the end of its standard input, which comes when the process
# that started the cluster ends however it ends (SIGTERM and SIGKILL included), then stops
# the server and removes its folder, unless Cluster.stop() already did.
_REAPER = """
import os, shutil, subprocess, sys
sys.stdin.buffer.read()
folder, data, command = sys.argv[1], sys.argv[2], sys.argv[3:]
if os.path.exists(data):
    subprocess.run(command, capture_output=True, timeout=120)
shutil.rmtree(folder, ignore_errors=True)
"""
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
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(self.folder), str(self.data),
             *self._command("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
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
            assert self._reaper.stdin is not None
            self._reaper.stdin.close()
            self._reaper.wait(timeout=120)

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.binaries / program), *args]
        if self._as_root:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        return command

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            self._command(program, *args),
            check=True,
            capture_output=True,
            text=True,
            cwd=self.folder,
            timeout=120,
        )
