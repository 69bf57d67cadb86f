"""A program on a pseudo-terminal, driven the way a person at a terminal drives it.

The program gets the pty as its controlling terminal, so the kernel's line discipline turns
a typed Ctrl-C into SIGINT and a window size is there to read. What it writes goes through a
terminal emulator (pyte), so a test reads the screen a person would see; cursor position
requests are answered as a terminal answers them (prompt_toolkit asks).
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte

CURSOR_REQUEST = b"\x1b[6n"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"


class Terminal:
    def __init__(
        self,
        args: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        columns: int = 80,
        rows: int = 40,
    ) -> None:
        controller, program_side = os.openpty()
        fcntl.ioctl(program_side, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        environment = {**os.environ, "TERM": "xterm-256color", **env}
        environment.pop("MEMSTORE_DB", None)
        environment.pop("NO_COLOR", None)
        # The size is the window's, as a terminal gives it: LINES and COLUMNS would override
        # it (rich reads them first). A pytest-xdist worker has LINES=24 COLUMNS=80: pytest
        # imports readline early, GNU readline exports the size it finds (24x80 with no
        # terminal), and the workers inherit it. Told 24 rows on a 15-row window, the chat
        # drew its live area past the bottom, and its top lines stayed in the scrollback.
        for variable in ("LINES", "COLUMNS"):
            environment.pop(variable, None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memctl", *args],
            stdin=program_side,
            stdout=program_side,
            stderr=program_side,
            cwd=cwd,
            env=environment,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(program_side)
        self.fd = controller
        self.output = b""
        self._screen = pyte.HistoryScreen(columns, rows, history=10_000)
        self._stream = pyte.ByteStream(self._screen)

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def paste(self, text: str) -> None:
        """What a terminal sends for a paste once the program asked for bracketed paste."""
        self.type(PASTE_START + text + PASTE_END)

    def wait_for(self, text: str, timeout: float = 90, times: int = 1) -> str:
        """Read until the screen text (escapes removed) holds `text` (`times` times: a
        question asked again); return it all."""
        deadline = time.monotonic() + timeout
        while self.screen().count(text) < times:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear; the screen:\n{self.screen()}")
            if not self._read(deadline - time.monotonic()):
                raise AssertionError(f"the program ended before {text!r}:\n{self.screen()}")
        return self.screen()

    def finish(self, timeout: float = 90) -> int:
        """Read until the program exits; its exit code."""
        deadline = time.monotonic() + timeout
        while self._read(deadline - time.monotonic()):
            if time.monotonic() > deadline:
                self.process.kill()
                raise AssertionError(f"the program did not end:\n{self.screen()}")
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1))

    def screen(self) -> str:
        """The text a person sees, scrolling back included; trailing blanks removed."""
        columns = self._screen.columns
        scrolled = [
            "".join(line[x].data for x in range(columns)) for line in self._screen.history.top
        ]
        lines = [line.rstrip() for line in [*scrolled, *self._screen.display]]
        return "\n".join(lines).rstrip("\n")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.fd)

    def _read(self, timeout: float) -> bool:
        """Read what is there (waiting up to `timeout`); False at the end of the program."""
        ready, _, _ = select.select([self.fd], [], [], max(timeout, 0))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every copy of the program's side is closed
            return False
        if not chunk:
            return False
        self.output += chunk
        # Feed up to each cursor request and answer it where the cursor is then.
        *before, last = chunk.split(CURSOR_REQUEST)
        for part in before:
            self._stream.feed(part)
            cursor = self._screen.cursor
            self.type(f"\x1b[{cursor.y + 1};{cursor.x + 1}R")
        self._stream.feed(last)
        return True


def _take_terminal() -> None:
    """In the child, after setsid: the pty becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
