"""The servers a test run starts do not outlive it, however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.postgres_cluster import server_binaries, unavailable_reason

ROOT = Path(__file__).resolve().parent.parent

# A process that starts a cluster as the tests' session fixture does, says where its server
# runs, and waits to be ended.
STARTS_A_CLUSTER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.postgres_cluster import Cluster, server_binaries
cluster = Cluster(server_binaries())
pid = (cluster.data / "postmaster.pid").read_text().split()[0]
print(cluster.folder, pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie does not (the tests' process may be a subreaper, as
    chat's bash tool makes it, and then the server, once ended, waits there as one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _gone_within(seconds: float, pid: int, folder: Path) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid) and not folder.exists():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    "ending", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name
)
def test_a_killed_test_run_leaves_no_postgresql_server(ending: signal.Signals) -> None:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("MEMSTORE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but unavailable: {reason}")
        pytest.skip(reason)
    assert server_binaries() is not None
    tests_run = subprocess.Popen(
        [sys.executable, "-c", STARTS_A_CLUSTER, str(ROOT)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert tests_run.stdout is not None
    folder, pid = tests_run.stdout.readline().split()
    server = int(pid)
    try:
        assert _alive(server)
        tests_run.send_signal(ending)
        tests_run.wait(timeout=60)
        assert _gone_within(60, server, Path(folder)), f"server {server} still runs"
    finally:
        tests_run.kill()
        tests_run.wait()
