"""The bash tool: one command run in the workspace, its output and its time bounded, nothing it
started left running.

The output goes to an unnamed temporary file of which only the head and tail are read, so the
memory a call uses is bounded however much the command prints; a command that prints without
end is stopped at BASH_OUTPUT_MAX_BYTES, one that runs too long at its timeout. Background jobs
are stopped when the command ends: those of its process group, and on Linux those that left it
(setsid, a daemon), which are reparented to this process as their subreaper.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memstore.agent.tool_calls import OUTPUT_MAX_CHARS, ToolRefused, whole_number
from memstore.text import cut_middle

BASH_TIMEOUT_S = 120
BASH_TIMEOUT_MAX_S = 600
# A command that prints more than this is stopped: the output goes to a temporary file, and
# `yes` would fill the disk (or the RAM, where /tmp is tmpfs) in a minute.
BASH_OUTPUT_MAX_BYTES = 100_000_000


def run_bash(root: Path, command: str, timeout: Any = None) -> str:
    """Run `command` with bash in `root`; its output (cut in the middle past the cap), and
    why it was stopped or its exit code when not 0."""
    if not isinstance(command, str) or not command.strip():
        raise ToolRefused("command must be a non-empty string")
    given = BASH_TIMEOUT_S if timeout is None else whole_number(timeout, "timeout", minimum=1)
    limit = min(given, BASH_TIMEOUT_MAX_S)
    # The output goes to an unnamed file, not a pipe: memory stays bounded however much
    # the command prints, and a background job that keeps the file open does not keep us
    # waiting, as it would keep a pipe open: we wait for bash itself, not for end of file.
    reaping = become_subreaper()
    ours = set(child_processes()) if reaping else set()
    with tempfile.TemporaryFile() as output:
        process: subprocess.Popen[bytes] | None = None
        try:
            # Started inside the try: a Ctrl-C as Popen returns (bash running, `process`
            # not yet set) still leaves nothing running, bash being one of the children
            # kill_leftovers finds.
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # so a timeout kills the whole process group
            )
            stopped = wait_for(process, output, limit)
        except BaseException:  # Ctrl-C in the agent: leave nothing running
            if process is not None:
                kill_group(process)
            if reaping:
                kill_leftovers(ours)
            raise
        # Background jobs still in the group would go on writing to a file nobody reads;
        # those that left it (setsid) were reparented to us, and are stopped too.
        kill_group(process)
        if reaping:
            kill_leftovers(ours)
        text = head_and_tail(output)
    if stopped:
        return f"{text}\n[{stopped}; the command was killed]"
    if process.returncode:
        text += f"\n[exit code {process.returncode}]"
    return text or "(no output)"


def wait_for(process: subprocess.Popen[bytes], output: Any, limit: float) -> str:
    """Wait for bash to exit; why it had to be stopped ("" when it exited by itself)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            process.wait(timeout=0.2)
            return ""
        except subprocess.TimeoutExpired:
            pass
        if os.fstat(output.fileno()).st_size > BASH_OUTPUT_MAX_BYTES:
            kill_group(process)
            return f"it printed more than {BASH_OUTPUT_MAX_BYTES // 1_000_000} MB"
        if time.monotonic() > deadline:
            kill_group(process)
            return f"timed out after {limit:g} s"


PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def become_subreaper() -> bool:
    """On Linux, make this process the reaper of its orphaned descendants: a job a command
    started in a session of its own (setsid, a daemon) is then reparented here when bash
    ends, where kill_leftovers finds it. Elsewhere, False: such jobs outlive the command."""
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def process_tree() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat_line = handle.read()
            # The name, in parentheses, may hold spaces and ")": the fields follow the last.
            parent = int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # it ended meanwhile
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def child_processes() -> list[int]:
    return process_tree().get(os.getpid(), [])


def kill_leftovers(ours: set[int]) -> None:
    """Kill every process reparented to us since the command started (those not in `ours`,
    our children before it), with all their descendants, and reap them; again until none
    is left, as a dying process's own children are reparented to us in turn."""
    for _ in range(50):
        tree = process_tree()
        new = [pid for pid in tree.get(os.getpid(), []) if pid not in ours]
        if not new:
            return
        doomed, pending = [], list(new)
        while pending:
            pid = pending.pop()
            doomed.append(pid)
            pending += tree.get(pid, [])
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 2
        for pid in new:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
                    time.sleep(0.01)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group, then reap bash; a job that left the group
    (setsid) is left to kill_leftovers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)


def head_and_tail(output: Any) -> str:
    """The command's output: whole if short, else its first and last OUTPUT_MAX_CHARS/2
    characters, reading only those from the file, and how many bytes were cut between."""
    limit = OUTPUT_MAX_CHARS
    half = limit // 2
    size = output.seek(0, os.SEEK_END)
    output.seek(0)
    if size <= 4 * limit:  # at most 4 bytes a character: cut by characters, as usual
        return cut_middle(output.read().decode("utf-8", "replace"), limit)
    # surrogateescape keeps invalid bytes one "character" each, so that the bytes cut can
    # be counted exactly; they are shown as U+FFFD.
    head = (
        output.read(4 * half)
        .decode("utf-8", "surrogateescape")[:half]
        .encode("utf-8", "surrogateescape")
    )
    output.seek(size - 4 * half)
    tail_bytes = output.read(4 * half)
    skip = 0  # the read may start inside a character: skip its continuation bytes
    while skip < 3 and tail_bytes[skip] & 0xC0 == 0x80:
        skip += 1
    tail = (
        tail_bytes[skip:]
        .decode("utf-8", "surrogateescape")[-half:]
        .encode("utf-8", "surrogateescape")
    )
    cut = size - len(head) - len(tail)
    return (
        f"{head.decode('utf-8', 'replace')}\n[… {cut:,} bytes of output cut …]\n"
        f"{tail.decode('utf-8', 'replace')}"
    )
