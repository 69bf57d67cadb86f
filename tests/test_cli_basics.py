"""What a command-line user expects of memctl: its version, -h, help on every option, shell
completion, plain wording and tables that line up in terminal cells."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import unicodedata
from importlib import metadata
from pathlib import Path

import pytest
import typer.main
from memctl import entry
from memctl.app import app

import memstore
from memstore.storage.store import MemoryStore
from tests.conftest import DISTRIBUTION, MemctlRunner


def test_version_and_its_short_flag(memctl: MemctlRunner) -> None:
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # a checkout on PYTHONPATH
        version = memstore.__version__
    assert version == memstore.__version__
    for flag in ("--version", "-V"):
        done = memctl(flag)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"memctl {version}\n"


def test_h_is_help_everywhere(memctl: MemctlRunner) -> None:
    for command in ([], ["list"], ["edit"], ["semantic"], ["semantic", "index"]):
        short, long = memctl(*command, "-h"), memctl(*command, "--help")
        assert short.returncode == long.returncode == 0, short.stderr
        assert short.stdout == long.stdout and "-h, --help" in short.stdout


def test_every_option_of_every_command_has_help() -> None:
    missing = []

    def walk(command: typer.main.TyperGroup | typer.main.TyperCommand, path: str) -> None:
        for param in command.params:
            if param.param_type_name == "option" and not getattr(param, "help", None):
                missing.append(f"{path} {'/'.join(param.opts)}")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    walk(root, "memctl")
    assert missing == []


def test_shell_completion(memctl: MemctlRunner) -> None:
    # --show-completion detects the shell from the parent processes (a test run with no shell
    # above it has none), so the script is asked for by name, as the installed script does.
    script = memctl(env={"_MEMCTL_COMPLETE": "source_bash"})
    assert script.returncode == 0 and "_MEMCTL_COMPLETE=complete_bash" in script.stdout
    assert "--show-completion" in memctl("--help").stdout
    completed = memctl(
        env={"_MEMCTL_COMPLETE": "complete_bash", "COMP_WORDS": "memctl sem", "COMP_CWORD": "1"}
    )
    assert completed.stdout.split() == ["semantic"]


def test_counts_are_said_in_the_singular_and_plural(memctl: MemctlRunner) -> None:
    memctl("add", "deploy-notes", "-t", "project", "-d", "How we deploy", "-b", "Deploy on Monday")
    one = memctl("recall", "--offline", "how do we deploy")
    assert one.stderr == "keyword recall (offline): 1 memory\n"
    memctl("add", "deploy-more", "-t", "project", "-d", "Deploy steps", "-b", "Deploy with care")
    two = memctl("recall", "--offline", "how do we deploy")
    assert two.stderr == "keyword recall (offline): 2 memories\n"


def test_rm_twice_and_a_rename_say_what_happened(memctl: MemctlRunner) -> None:
    memctl("add", "deploy-db", "-t", "project", "-d", "The deploy database", "-b", "Postgres")
    renamed = memctl("edit", "deploy-db", "--name", "renamed-db")
    assert renamed.stderr == "renamed deploy-db to renamed-db\n"
    both = memctl("edit", "renamed-db", "--name", "deploy-db", "-d", "Where deploys go")
    assert both.stderr == "renamed renamed-db to deploy-db, and updated its description\n"
    assert memctl("rm", "deploy-db").returncode == 0
    again = memctl("rm", "deploy-db")
    assert again.returncode == 1
    assert again.stderr == (
        "memctl: error: deploy-db is already deleted (restore with: memctl restore deploy-db)\n"
    )
    assert memctl("rm", "never-was").stderr == "memctl: error: no memory named 'never-was'\n"
    memctl("restore", "deploy-db")
    assert memctl("purge", "deploy-db", "--yes").returncode == 0
    assert "its content purged: it cannot be restored" in memctl("rm", "deploy-db").stderr


def test_a_connection_error_reads_as_one_sentence(memctl: MemctlRunner) -> None:
    memctl("add", "deploy-notes", "-t", "project", "-d", "How we deploy", "-b", "Deploy on Monday")
    nobody = {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    done = memctl("recall", "deploy", env=nobody)
    assert done.returncode == 0
    assert "cannot reach the model API: Connection error)" in done.stderr
    assert ".)" not in done.stderr and ".;" not in done.stderr


def _cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def test_tables_line_up_in_terminal_cells(memctl: MemctlRunner) -> None:
    rows = [("deploy-zh", "部署流程：先跑测试"), ("plain", "Deploy steps"), ("mixed", "Docker镜像")]
    for name, description in rows:
        added = memctl("add", name, "-t", "project", "-d", description, "-b", "body text")
        assert added.returncode == 0, added.stderr
    done = memctl("sql", "select description, name from memory order by id")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4
    # The second column starts at the same cell on every line, the header's included.
    starts = {_cells(line[: line.rindex(" ") + 1]) for line in lines}
    assert len(starts) == 1, lines
    as_json = json.loads(memctl("sql", "select name from memory", "--json").stdout)
    assert len(as_json) == 3


def test_main_runs_many_command_lines_in_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() starts each command line from nothing found: each uses its own database, even
    after one that named another with --db (as the tests will run memctl, in-process)."""
    for variable in ("MEMSTORE_DB", "MEMSTORE_NAMESPACE", "MEMCTL_DB"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    first, second = tmp_path / "first.db", tmp_path / "second.db"

    def memctl(*args: str) -> object:
        monkeypatch.setattr(sys, "argv", ["memctl", *args])
        with pytest.raises(SystemExit) as exit_:
            entry.main()
        return exit_.value.code

    add = ("-t", "project", "-d", "A note", "-b", "Body")
    assert memctl("--db", str(first), "add", "one", *add) == 0
    assert memctl("add", "two", *add, "--db", str(second)) == 0
    assert memctl("add", "three", *add) == 0  # no --db: the workspace's own
    for db, name in ((first, "one"), (second, "two"), (tmp_path / ".memory/memstore.db", "three")):
        with MemoryStore(db) as store:
            assert [m.name for m in store.memories()] == [name]
            (run,) = store.history.runs(None)
            assert name in run["command"]


@pytest.mark.parametrize("command", [["list"], ["hook"]])
def test_ctrl_c_while_memctl_is_still_starting_says_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    # Python's import-time log tells where start-up is: the interrupt is sent once memctl's
    # entry is imported and N more modules after it, so inside its imports of Typer and the
    # ORM whatever the machine's speed (a fixed pause could land before the entry, in
    # Python's own start-up, or after the command is done).
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop("MEMSTORE_DB", None)
    interrupted = 0
    for after in (1, 20, 60, 150, 300):
        process = subprocess.Popen(
            [sys.executable, "-m", "memctl", *command],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stderr is not None
        lines, seen, deadline = b"", -1, time.monotonic() + 60
        while seen < after and process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1)
            if ready:
                chunk = os.read(process.stderr.fileno(), 65536)
                lines += chunk
                log = lines.decode().splitlines()
                entry = [i for i, line in enumerate(log) if line.endswith(" memctl.entry")]
                seen = len(log) - entry[0] - 1 if entry else -1
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
        said = [
            line
            for line in (lines + rest).decode().splitlines()
            if not line.startswith("import time:")
        ]
        if process.returncode == 0:  # it was done before the interrupt
            continue
        interrupted += 1
        assert "Traceback" not in "\n".join(said), (after, said)
        assert process.returncode == 130, (after, said)
        if command == ["hook"]:  # it answers its program first (here: no input), then stops
            assert said[-1] == "memctl: interrupted", (after, said)
        else:
            assert said == ["memctl: interrupted"], (after, said)
    assert interrupted, "no run was interrupted"
