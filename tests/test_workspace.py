"""Where memctl finds its database: upward from the current folder, as git finds a repository;
commands that only read create nothing; the database never reaches a commit (issue 11.4-5)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner

PREFERENCE = {
    "name": "user-indentation",
    "type": "user",
    "description": "Always 4 spaces, never tabs",
    "body": "The user wants Python indented with 4 spaces and never tab characters.",
}

NO_MEMORY = "no memory here"


def add(memctl: MemctlRunner, name: str, cwd: Path, *extra: str) -> None:
    done = memctl(
        "add", name, "-t", "project", "-d", f"about {name}", "-b", "text", *extra, cwd=cwd
    )
    assert done.returncode == 0, done.stderr


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_found_upward_from_a_subfolder(memctl: MemctlRunner, tmp_path: Path) -> None:
    """`cd src && memctl list` created src/.memory/memstore.db; the workspace is the repository."""
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    git(project, "init", "-q")
    add(memctl, "a-note", deep)
    assert (project / ".memory" / "memstore.db").is_file()
    assert not (project / "src" / ".memory").exists() and not (deep / ".memory").exists()
    listed = memctl("list", "--json", cwd=project / "src")
    assert [m["name"] for m in json.loads(listed.stdout)] == ["a-note"]
    where = memctl("path", cwd=deep)
    assert where.stdout.strip() == str(project / ".memory" / "memstore.db")
    assert f"workspace: {project} (has a .memory/ folder); database exists" in where.stderr
    # export and import default to the workspace's .memory/, not the current folder's.
    assert memctl("export", cwd=deep).returncode == 0
    assert (project / ".memory" / "a-note.md").is_file() and not (deep / ".memory").exists()
    imported = memctl("import", cwd=deep)
    assert imported.returncode == 0 and "1 unchanged" in imported.stderr


def test_nearest_memory_folder_wins_and_home_is_a_boundary(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    work = home / "code" / "tool"
    work.mkdir(parents=True)
    (tmp_path / ".memory").mkdir()  # above $HOME: never looked at
    git(home, "init", "-q")  # a dotfiles repository in $HOME is no workspace
    env = {"HOME": str(home)}
    where = memctl("path", cwd=work, env=env)
    assert where.stdout.strip() == str(work / ".memory" / "memstore.db")
    assert "no .memory/ or git repository above" in where.stderr
    (home / ".memory").mkdir()  # $HOME with its own memory is a workspace
    assert memctl("path", cwd=work, env=env).stdout.strip() == str(home / ".memory/memstore.db")
    (home / "code" / ".memory").mkdir()  # the nearest one wins, as in git
    nearest = memctl("path", cwd=work, env=env).stdout.strip()
    assert nearest == str(home / "code" / ".memory" / "memstore.db")


READ_ONLY_COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["show", "a-note"],
    ["search", "deploy"],
    ["recall", "--offline", "deploy"],
    ["history"],
    ["history", "--runs"],
    ["index"],
    ["sql", "SELECT 1"],
]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_read_only_commands_create_nothing(
    memctl: MemctlRunner, tmp_path: Path, command: list[str]
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    done = memctl(*command, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("[]\n" if "--json" in command else "")  # what an empty store gives
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(NO_MEMORY) and "memctl add" in lines[-1], done.stderr
    assert "Traceback" not in done.stderr
    assert list(folder.iterdir()) == []
    path = memctl("path", cwd=folder)
    assert "not created yet" in path.stderr and list(folder.iterdir()) == []


def test_semantic_status_tells_the_model_state_without_creating_a_database(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    done = memctl("semantic", "status", cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("semantic recall: ")
    assert "vectors: 0 of 0 memories" in done.stdout
    assert list(folder.iterdir()) == []


def test_db_option_before_or_after_the_command(memctl: MemctlRunner, tmp_path: Path) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    add(memctl, "in-first", tmp_path, "--db", str(first))
    added = memctl("--db", str(second), "add", "in-second", "-t", "user", "-d", "d", "-b", "b")
    assert added.returncode == 0, added.stderr
    assert not (tmp_path / ".memory").exists()

    def names(*args: str, env: dict[str, str] | None = None) -> list[str]:
        done = memctl(*args, env=env)
        assert done.returncode == 0, done.stderr
        return [m["name"] for m in json.loads(done.stdout)]

    assert names("list", "--json", "--db", str(first)) == ["in-first"]
    assert names("--db", str(first), "list", "--json") == ["in-first"]
    assert names("--db", str(first), "list", "--json", "--db", str(second)) == ["in-second"]
    # The command line wins over MEMSTORE_DB, before or after the command name.
    env = {"MEMSTORE_DB": str(first)}
    assert names("list", "--json", "--db", str(second), env=env) == ["in-second"]
    assert names("--db", str(second), "list", "--json", env=env) == ["in-second"]
    assert names("list", "--json", env=env) == ["in-first"]
    status = memctl("semantic", "status", "--db", str(first))
    assert "vectors: 0 of 1 memory" in status.stdout


def test_database_is_never_committed(memctl: MemctlRunner, tmp_path: Path) -> None:
    """Issue 11.4: `git init && memctl add … && memctl export && git add -A` staged the
    database (full history, deleted memories, every command line)."""
    git(tmp_path, "init", "-q")
    add(memctl, "a-note", tmp_path)
    assert memctl("export").returncode == 0
    memory = tmp_path / ".memory"
    # What memctl chat leaves there: transcripts, the typed-line history, export temporaries.
    (memory / "sessions" / "abc").mkdir(parents=True)
    (memory / "sessions" / "abc" / "transcript.jsonl").write_text("{}\n")
    (memory / "chat_history").write_text("my key is ...\n")
    (memory / "memstore.db-wal").write_bytes(b"wal")
    (memory / "memstore.db-journal").write_bytes(b"journal")
    (memory / "memstore.db-consolidation.lock").write_bytes(b"")  # a consolidation running
    (memory / ".MEMORY.md.123.tmp").write_text("partial")
    git(tmp_path, "add", "-A")
    staged = set(git(tmp_path, "diff", "--cached", "--name-only").split())
    assert staged == {".memory/.gitignore", ".memory/MEMORY.md", ".memory/a-note.md"}
    mode = stat.S_IMODE((memory / "memstore.db").stat().st_mode)
    assert mode == 0o600, oct(mode)


def test_wal_and_shm_are_private_too(memctl: MemctlRunner, tmp_path: Path) -> None:
    import sqlite3

    add(memctl, "a-note", tmp_path)
    database = tmp_path / ".memory" / "memstore.db"
    connection = sqlite3.connect(database)  # holds the WAL open, as a running chat does
    try:
        connection.execute("SELECT count(*) FROM memory").fetchone()
        for suffix in ("-wal", "-shm"):
            journal = database.with_name(database.name + suffix)
            assert stat.S_IMODE(journal.stat().st_mode) == 0o600, suffix
    finally:
        connection.close()


def test_a_users_gitignore_is_kept(memctl: MemctlRunner, tmp_path: Path) -> None:
    memory = tmp_path / ".memory"
    memory.mkdir()
    (memory / ".gitignore").write_text("drafts/\nchat_history")  # no final newline
    add(memctl, "a-note", tmp_path)
    lines = (memory / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["drafts/", "chat_history"]
    assert lines.count("chat_history") == 1 and "memstore.db" in lines and "sessions/" in lines
    # Once the database exists, the user's file is theirs: a line they remove stays removed.
    (memory / ".gitignore").write_text("memstore.db\n")
    add(memctl, "b-note", tmp_path)
    assert (memory / ".gitignore").read_text() == "memstore.db\n"


def test_chat_uses_the_found_workspace(
    memctl: MemctlRunner, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    """`memctl chat` from a subfolder works in the workspace and learns into its memory."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    git(project, "init", "-q")
    anthropic_server.script(
        text_reply("Noted."),
        text_reply(json.dumps([PREFERENCE])),
    )
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": anthropic_server.url,
        "MEMSTORE_SETTINGS": os.devnull,
    }
    done = memctl("chat", input="always use 4 spaces\n/exit\n", env=env, cwd=project / "src")
    assert done.returncode == 0, done.stderr
    assert (project / ".memory" / "user-indentation.md").is_file()
    assert not (project / "src" / ".memory").exists()
    listed = memctl("list", "--json", cwd=project)
    assert [m["name"] for m in json.loads(listed.stdout)] == ["user-indentation"]
