"""The workspace tools against bad input, big files and output, and real processes: every
failure is a tool result, never an exception; memory stays bounded; Ctrl-C and timeouts
leave no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from memstore.agent import file_tools, glob_patterns, shell, tool_calls
from memstore.agent.tools import Workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "work"
    root.mkdir()
    return Workspace(root)


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_for(condition: Any, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def run_python(code: str, cwd: Path, **kwargs: Any) -> subprocess.Popen[str]:
    """`code` in a fresh interpreter that imports the memstore under test (the installed one)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


# -- bad input from the model is an error result, never an exception --------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("bash", {"command": "echo hi", "timeout": "30s"}, "timeout must be a whole number"),
        ("bash", {"command": "echo hi", "timeout": 1.5}, "timeout must be a whole number"),
        ("bash", {"command": "echo hi", "timeout": True}, "timeout must be a whole number"),
        ("bash", {"command": "echo hi", "timeout": 0}, "timeout must be at least 1"),
        ("bash", {"command": "echo hi", "timeout": "9" * 5000}, "timeout must be a whole"),
        ("read_file", {"path": "a.txt", "limit": "ten"}, "limit must be a whole number"),
        ("read_file", {"path": "a.txt", "limit": float("inf")}, "limit must be a whole"),
        ("read_file", {"path": "a.txt", "limit": -3}, "limit must be at least 1"),
        ("read_file", {"path": "a.txt", "offset": "x"}, "offset must be a whole number"),
        ("read_file", {"path": "a.txt", "offset": -1}, "offset must be at least 1"),
        ("glob", {"pattern": "***"}, "invalid glob pattern '***'"),
        ("glob", {"pattern": "a/***/b"}, "invalid glob pattern"),
        (
            "edit_file",
            {"path": "a.txt", "old_text": "a", "new_text": "b", "replace_all": "false"},
            "replace_all must be true or false",
        ),
        ("write_file", {"path": "b.txt", "content": "\ud800"}, "UTF-8 (surrogates not allowed)"),
    ],
)
def test_bad_arguments_are_error_results(
    workspace: Workspace, name: str, arguments: dict[str, Any], expected: str
) -> None:
    (workspace.root / "a.txt").write_text("a\na\n")
    result = workspace.run(name, arguments)
    assert result.is_error and expected in result.text, result
    assert (workspace.root / "a.txt").read_text() == "a\na\n"
    assert not (workspace.root / "b.txt").exists()


def test_numbers_given_as_strings_are_accepted(workspace: Workspace) -> None:
    (workspace.root / "a.txt").write_text("one\ntwo\nthree\n")
    shown = workspace.run("read_file", {"path": "a.txt", "limit": "1", "offset": " 2 "})
    assert not shown.is_error and "two" in shown.text and "three" not in shown.text
    assert workspace.run("bash", {"command": "echo hi", "timeout": "5"}).text == "hi\n"
    assert workspace.run("bash", {"command": "echo hi", "timeout": 5.0}).text == "hi\n"


def test_an_unexpected_exception_names_its_type(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str) -> str:
        raise LookupError("something odd")

    monkeypatch.setitem(workspace._handlers, "read_file", broken)
    result = workspace.run("read_file", {"path": "a.txt"})
    assert result.is_error and result.text == "read_file failed: LookupError: something odd"


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_exit_still_propagate(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch, stop: type[BaseException]
) -> None:
    def interrupted(path: str) -> str:
        raise stop()

    monkeypatch.setitem(workspace._handlers, "read_file", interrupted)
    with pytest.raises(stop):
        workspace.run("read_file", {"path": "a.txt"})


def test_missing_or_unexpected_arguments(workspace: Workspace) -> None:
    missing = workspace.run("write_file", {"path": "a.txt"})
    assert missing.is_error and missing.text.startswith("bad arguments for write_file:")
    extra = workspace.run("bash", {"command": "true", "shell": "zsh"})
    assert extra.is_error and "unexpected keyword argument 'shell'" in extra.text


# -- "~" is not expanded: a path is always workspace-relative ----------------------------------


@pytest.mark.parametrize("path", ["~", "~/x", "~nosuchuser/x", "~root/.bashrc"])
def test_a_leading_tilde_is_refused_for_every_file_tool(workspace: Workspace, path: str) -> None:
    for name, arguments in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "x"}),
        ("edit_file", {"path": path, "old_text": "a", "new_text": "b"}),
    ]:
        result = workspace.run(name, arguments)
        assert result.is_error, (name, result)
        assert "outside the workspace" in result.text and "'./~" in result.text, result
    assert not (workspace.root / "~").exists()


def test_a_folder_named_tilde_is_reachable_as_dot_slash_tilde(workspace: Workspace) -> None:
    written = workspace.run("write_file", {"path": "./~/x", "content": "tilde\n"})
    assert not written.is_error, written
    assert (workspace.root / "~" / "x").read_text() == "tilde\n"
    assert "tilde" in workspace.run("read_file", {"path": "./~/x"}).text
    assert "tilde" in workspace.run("read_file", {"path": "sub/../~/x"}).text
    assert not workspace.run(
        "edit_file", {"path": "./~/x", "old_text": "t", "new_text": "T"}
    ).is_error


def test_a_symlink_loop_is_an_error_result(workspace: Workspace) -> None:
    (workspace.root / "loop").symlink_to("loop")
    result = workspace.run("read_file", {"path": "loop"})
    assert result.is_error and "loop" in result.text
    (workspace.root / "real.py").write_text("")
    assert workspace.run("glob", {"pattern": "*"}).text == "real.py"


# -- files that are not UTF-8 ------------------------------------------------------------------


def test_read_file_shows_latin1_with_replacement_characters(workspace: Workspace) -> None:
    (workspace.root / "latin1.txt").write_bytes("café\nnaïve\n".encode("latin-1"))
    result = workspace.run("read_file", {"path": "latin1.txt"})
    assert not result.is_error
    assert "caf\ufffd" in result.text and "na\ufffdve" in result.text


def test_edit_file_refuses_a_file_that_is_not_utf8(workspace: Workspace) -> None:
    original = "café = 1\n".encode("latin-1")
    (workspace.root / "latin1.py").write_bytes(original)
    result = workspace.run("edit_file", {"path": "latin1.py", "old_text": "1", "new_text": "2"})
    assert result.is_error
    assert result.text == "latin1.py is not UTF-8 text; nothing changed"
    assert (workspace.root / "latin1.py").read_bytes() == original


# -- read_file reads lazily --------------------------------------------------------------------


def test_read_file_with_a_limit_does_not_read_a_huge_file_whole(tmp_path: Path) -> None:
    # A 4 GB (sparse) file, read with a line limit by a process that may not use more than
    # 1 GB of memory: reading it whole fails, reading three lines does not.
    root = tmp_path / "work"
    root.mkdir()
    with (root / "huge.log").open("wb") as huge:
        huge.write(b"".join(b"line %d\n" % i for i in range(1, 6)))
        huge.truncate(4 * 2**30)
    child = run_python(
        """
        import resource
        from pathlib import Path
        from memstore.agent.tools import Workspace
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))
        result = Workspace(Path(".")).run("read_file", {"path": "huge.log", "limit": 3})
        print(result.is_error, result.text)
        """,
        cwd=root,
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.startswith("False ") and "line 3" in out and "line 4" not in out, out
    assert "more lines follow; read on with offset=4" in out


def test_read_file_counts_the_lines_left_of_a_small_file(workspace: Workspace) -> None:
    (workspace.root / "crlf.txt").write_bytes(b"a\r\nb\r\nc\r\nd")
    text = workspace.run("read_file", {"path": "crlf.txt", "limit": 2}).text
    assert text == "     1\ta\n     2\tb\n[2 more lines; read on with offset=3]"
    assert workspace.run("read_file", {"path": "crlf.txt", "offset": 4}).text == "     4\td"
    assert workspace.run("read_file", {"path": "crlf.txt", "offset": 9}).text == (
        "(no lines from offset 9; the file has 4 lines)"
    )
    (workspace.root / "empty.txt").write_text("")
    assert workspace.run("read_file", {"path": "empty.txt"}).text == "(empty file)"


def test_read_file_stops_at_the_output_cap(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_tools, "OUTPUT_MAX_CHARS", 1_000)
    (workspace.root / "many.txt").write_text("".join(f"line {i:04}\n" for i in range(1, 1001)))
    text = workspace.run("read_file", {"path": "many.txt"}).text
    assert text.startswith("     1\tline 0001\n")
    assert len(text) < 1_200 and "[output cap reached" in text
    last = int(text.split("offset=")[1].rstrip("]"))
    assert f"line {last - 1:04}" in text and f"line {last:04}" not in text
    # One line longer than the cap is cut rather than read whole.
    (workspace.root / "one-line.txt").write_text("x" * 100_000 + "\nsecond\n")
    text = workspace.run("read_file", {"path": "one-line.txt", "limit": 2}).text
    assert len(text) < 1_200 and "[line cut]" in text and "second" in text


# -- bash --------------------------------------------------------------------------------------


def test_a_background_job_does_not_hold_the_command(workspace: Workspace) -> None:
    started = time.monotonic()
    result = workspace.run("bash", {"command": "sleep 30 & echo started $!", "timeout": 20})
    elapsed = time.monotonic() - started
    assert result.text.startswith("started ") and not result.is_error, result
    sleeper = int(result.text.split()[1])
    # Well under the job's 30 s and the 20 s timeout: a busy machine may take seconds.
    assert elapsed < 15, elapsed
    # Stopped with the command: left running, it would write to a file nobody reads.
    wait_for(lambda: not alive(sleeper), seconds=20)


def test_a_command_that_prints_without_end_is_stopped(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "BASH_OUTPUT_MAX_BYTES", 5_000_000)
    started = time.monotonic()
    result = workspace.run("bash", {"command": "yes 0123456789", "timeout": 60})
    assert time.monotonic() - started < 30
    assert "printed more than 5 MB; the command was killed" in result.text


def test_a_timeout_kills_the_group_even_with_a_daemon_holding_the_output(
    workspace: Workspace,
) -> None:
    # `setsid` puts the daemon outside the command's process group: it keeps the output
    # file open, must not make the tool wait for it, and is killed once it is reparented.
    command = "setsid sleep 30 & echo daemon $!; echo $$ > group.pid; sleep 30"
    started = time.monotonic()
    result = workspace.run("bash", {"command": command, "timeout": 1})
    elapsed = time.monotonic() - started
    daemon = int(result.text.split()[1])
    try:
        assert "[timed out after 1 s; the command was killed]" in result.text
        assert elapsed < 15, elapsed  # not the daemon's 30 s (a busy machine may take seconds)
        group = int((workspace.root / "group.pid").read_text())
        wait_for(lambda: not alive(group))
        assert not alive(daemon)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


def test_ctrl_c_in_the_agent_kills_the_command(tmp_path: Path) -> None:
    child = run_python(
        """
        from pathlib import Path
        from memstore.agent.tools import Workspace
        command = "sleep 60 & echo $! > sleeper.pid; echo $$ > shell.pid; wait"
        Workspace(Path(".")).run("bash", {"command": command})
        print("returned normally")
        """,
        cwd=tmp_path,
    )

    def written(name: str) -> bool:
        # A file the shell has created but not yet written to is empty: whole once it ends
        # in the newline `echo` writes with the number.
        path = tmp_path / name
        return path.exists() and path.read_text().endswith("\n")

    try:
        wait_for(lambda: written("shell.pid") and written("sleeper.pid"), seconds=60)
        shell = int((tmp_path / "shell.pid").read_text())
        sleeper = int((tmp_path / "sleeper.pid").read_text())
        child.send_signal(signal.SIGINT)  # what Ctrl-C does to the agent
        out, err = child.communicate(timeout=20)
        assert "KeyboardInterrupt" in err and "returned normally" not in out
        wait_for(lambda: not alive(shell) and not alive(sleeper))
    finally:
        child.kill()
        for name in ("shell.pid", "sleeper.pid"):
            if (tmp_path / name).exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int((tmp_path / name).read_text()), signal.SIGKILL)


def test_ctrl_c_as_the_command_starts_leaves_nothing_running(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C as Popen returns, bash already running: it was raised before the try that
    kills what the command started, and bash and its job went on."""
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen
    sleeper_pid = workspace.root / "sleeper.pid"

    def popen_then_ctrl_c(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kwargs))
        wait_for(lambda: sleeper_pid.exists() and sleeper_pid.read_text().endswith("\n"), 60)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "Popen", popen_then_ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            workspace.run("bash", {"command": "sleep 60 & echo $! > sleeper.pid; wait"})
        monkeypatch.undo()
        (shell,) = started
        sleeper = int(sleeper_pid.read_text())
        wait_for(lambda: not alive(shell.pid) and not alive(sleeper))
    finally:
        for process in started:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_huge_output_is_not_kept_in_memory(tmp_path: Path) -> None:
    # ~79 MB of output: kept whole, it costs several times that in memory; only its head and
    # tail should ever be read.
    child = run_python(
        """
        import resource
        from pathlib import Path
        from memstore.agent.tools import Workspace
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = Workspace(Path(".")).run("bash", {"command": "seq 1 10000000"})
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print((after - before) // 1024)
        print(result.text, end="")
        """,
        cwd=tmp_path,
    )
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    growth_mb, _, text = out.partition("\n")
    assert int(growth_mb) < 50, f"peak memory grew by {growth_mb} MB"
    head, _marker, tail = text.partition("\n[… ")
    assert head.startswith("1\n2\n3\n") and tail.endswith("\n9999999\n10000000\n")
    assert len(head) <= tool_calls.OUTPUT_MAX_CHARS // 2
    assert len(tail) <= tool_calls.OUTPUT_MAX_CHARS // 2 + 100
    # The bytes `seq 1 10000000` prints: each number's digits and a newline.
    total = sum((min(10**d, 10_000_001) - 10 ** (d - 1)) * (d + 1) for d in range(1, 9))
    cut = int(tail.split(" bytes of output cut")[0].replace(",", ""))
    assert cut == total - len(head.encode()) - len(tail.split("…]\n", 1)[1].encode())


def test_output_cut_in_the_middle_of_a_character(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "OUTPUT_MAX_CHARS", 20)
    command = "printf 'é%.0s' $(seq 1 1000); echo; echo end"
    text = workspace.run("bash", {"command": command}).text
    head, _, rest = text.partition("\n[… ")
    tail = rest.split("…]\n", 1)[1]
    assert head == "é" * 10 and tail == "ééééé\nend\n"
    assert "\ufffd" not in text
    small = workspace.run("bash", {"command": "printf 'ab%.0s' $(seq 1 20); exit 4"}).text
    assert small == "ababababab\n[… 20 characters cut …]\nababababab\n[exit code 4]"


# -- glob --------------------------------------------------------------------------------------


def test_glob_stops_after_the_first_matches(tmp_path: Path) -> None:
    root = tmp_path / "work"
    for i in range(30):
        (root / f"d{i:02}").mkdir(parents=True)
        for j in range(30):
            (root / f"d{i:02}" / f"f{j:02}.txt").write_text("")
    found, _, note = Workspace(root).run("glob", {"pattern": "**/*.txt"}).text.rpartition("\n")
    assert len(found.splitlines()) == glob_patterns.GLOB_MAX_RESULTS
    assert note == f"[stopped after {glob_patterns.GLOB_MAX_RESULTS} matches; narrow the pattern]"


def test_glob_does_not_follow_links_out_or_around(tmp_path: Path) -> None:
    # Links back to the root would multiply the paths (10**7 here) and a link to / would
    # walk the whole disk: folders that are links are not walked into.
    root = tmp_path / "work"
    root.mkdir()
    (root / "f.txt").write_text("")
    for i in range(10):
        (root / f"l{i}").symlink_to(".")
    (root / "disk").symlink_to("/")
    started = time.monotonic()
    assert Workspace(root).run("glob", {"pattern": "**/*.txt"}).text == "f.txt"
    assert time.monotonic() - started < 5


def test_glob_skips_matches_outside_the_workspace(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "outside.py").write_text("")
    (root / "inside.py").write_text("")
    (root / "out").symlink_to(tmp_path)
    (root / "alias.py").symlink_to(tmp_path / "outside.py")
    workspace = Workspace(root)
    assert workspace.run("glob", {"pattern": "*.py"}).text == "inside.py"
    refused = workspace.run("glob", {"pattern": "out/*.py"})
    assert refused.is_error and "outside the workspace" in refused.text
