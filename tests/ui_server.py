"""`memctl ui` run as a process of its own for a test: started in a folder (with --no-open,
unless the test gives it a browser), its URL read from what it prints, stopped with Ctrl-C
(SIGINT) as a person stops it."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import memctl_environment

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+)")
START_TIMEOUT_S = 30


@dataclass
class RunningUi:
    url: str
    port: int
    token: str
    process: subprocess.Popen[str]
    # From the process's start to its URL printed, the socket listening.
    started_in_s: float

    def at(self, path: str) -> str:
        """The URL of `path` with the token."""
        separator = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}{path}{separator}token={self.token}"


@contextmanager
def running_ui(
    cwd: Path, env: dict[str, str] | None = None, *args: str, open_browser: bool = False
) -> Iterator[RunningUi]:
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "memctl", "ui", *([] if open_browser else ["--no-open"]), *args],
        cwd=cwd,
        env=memctl_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        printed = ""
        while (found := URL.search(printed)) is None:
            line = process.stdout.readline()
            if not line:
                assert process.stderr is not None
                raise AssertionError(f"memctl ui stopped: {printed}{process.stderr.read()}")
            printed += line
            assert time.monotonic() - start < START_TIMEOUT_S, printed
        started = time.monotonic() - start
        yield RunningUi(found.group(0), int(found.group(1)), found.group(2), process, started)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
