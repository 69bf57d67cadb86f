"""Running memctl on a store it cannot write: its `.memory/` bind-mounted read-only in a mount
namespace of its own (`unshare -m`). The tests run as root, whom file modes do not stop: only a
read-only mount refuses root's writes, as it refuses a person's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def read_only_mount_works() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount --bind -o ro / /mnt 2>/dev/null || exit 1"],
        capture_output=True,
    )
    return probe.returncode == 0


def skip_without_read_only_mounts() -> None:
    if not read_only_mount_works():
        pytest.skip("needs root and mount namespaces for a read-only bind mount")


def memctl_read_only(
    folder: Path,
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    input: str = "",
) -> subprocess.CompletedProcess[str]:
    """`memctl ARGS` in `cwd`, with `folder` mounted read-only for it alone."""
    script = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'
    mount = ["unshare", "-m", "sh", "-c", script, "sh", str(folder)]
    environment = {**os.environ, "NO_COLOR": "1", "MEMSTORE_CEILING_DIRECTORIES": str(cwd.parent)}
    environment.pop("MEMSTORE_DB", None)
    environment.update(env or {})
    return subprocess.run(
        [*mount, sys.executable, "-m", "memctl", *args],
        cwd=cwd,
        env=environment,
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
