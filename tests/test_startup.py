"""memctl's start-up: the commands that only read (list, show, search, recall --offline,
index, path, history) and --version and --help import neither SQLAlchemy nor the model's SDK,
nor pydantic (cli/memctl/coercion.py), on either engine; what they read without SQLAlchemy
(storage/reads.py) is what MemoryStore reads; and a value Typer must coerce still is."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memstore.storage.reads import ReadOnlyStore
from memstore.storage.store import MemoryStore

pytestmark = pytest.mark.both_engines

# The ui extra's libraries too: only `memctl ui` imports them.
HEAVY = {
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "anthropic",
    "pydantic",
    "starlette",
    "uvicorn",
    "jinja2",
}
# memctl's entry point, then the modules it loaded, on stderr's last line.
SCRIPT = (
    "import json, sys\n"
    "sys.argv = ['memctl', *sys.argv[1:]]\n"
    "from memctl.entry import main\n"
    "code = 0\n"
    "try:\n    main()\nexcept SystemExit as exit_:\n    code = exit_.code or 0\n"
    "sys.stderr.write('\\n' + json.dumps(sorted(sys.modules)) + '\\n')\n"
    "raise SystemExit(code)\n"
)


def run_memctl(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, str, str, set[str]]:
    """memctl ARGS run in a process of its own: its exit status, stdout, stderr, and the
    heavy modules it loaded."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MEMSTORE_DB", "MEMCTL_DB")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**environment, "COLUMNS": "200", **env},
        timeout=120,
    )
    said, _, modules = done.stderr.rstrip("\n").rpartition("\n")
    loaded = {module.split(".")[0] for module in json.loads(modules)}
    return done.returncode, done.stdout, said, loaded & HEAVY


def heavy_modules(cwd: Path, env: dict[str, str], *args: str) -> tuple[str, set[str]]:
    """memctl ARGS, which must succeed: its stdout, and the heavy modules it loaded."""
    code, stdout, said, heavy = run_memctl(cwd, env, *args)
    assert code == 0, (args, said)
    return stdout, heavy


@pytest.fixture
def three_memories(workspace_database: Path | str) -> str:
    """A store of three memories, one edited and one deleted; the id of its first run."""
    with MemoryStore(workspace_database, actor="test") as store:
        store.create("deploy-notes", "project", "How we deploy to staging", "make deploy")
        store.create("style", "user", "Code style", "ruff format, always")
        store.create("old", "reference", "An old link", "https://example.org")
        store.update("style", description="Code style rules")
        store.delete("old")
        return store.history.events()[0].run_id


def test_read_commands_import_neither_the_orm_nor_the_sdk(
    three_memories: str, tmp_path: Path, database_env: dict[str, str]
) -> None:
    for args, shown in (
        (("list",), "deploy-notes"),
        (("list", "--json", "-t", "user"), "Code style rules"),
        (("show", "style"), "ruff format, always"),
        (("show", "style", "--json"), "ruff format, always"),
        (("search", "deploy", "-n", "3"), "deploy-notes"),
        (("recall", "--offline", "how do we deploy to staging?"), "deploy-notes"),
        (("recall", "--offline", "deploy to staging", "--json"), "deploy-notes"),
        (("index",), "[style](style.md)"),
        (("path",), ""),
        (("history",), "description: Code style → Code style rules"),
        (("history", "old", "--json"), "An old link"),
        (("history", "--runs", "--limit", "5"), "STARTED"),
        (("history", "--run", three_memories[:8]), three_memories),
        (("history", "--run", three_memories, "--json"), "deploy-notes"),
    ):
        stdout, heavy = heavy_modules(tmp_path, database_env, *args)
        assert shown in stdout, args
        assert heavy == set(), args


def test_version_and_help_import_neither(tmp_path: Path) -> None:
    for args in (("--version",), ("-h",), ("list", "--help")):
        assert heavy_modules(tmp_path, {}, *args)[1] == set(), args


def test_a_database_the_reader_does_not_take_is_opened_by_the_store(tmp_path: Path) -> None:
    """The light reader takes only a database at the schema this code expects; any other
    is opened by MemoryStore, SQLAlchemy and all, which says what it says today (here: a
    newer memstore's)."""
    import sqlite3

    database = tmp_path / ".memory" / "memstore.db"
    with MemoryStore(database) as store:
        store.create("style", "user", "Code style", "ruff")
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE memstore_alembic_version SET version_num = '9999'")
    connection.close()
    code, stdout, said, heavy = run_memctl(tmp_path, {}, "list")
    assert (code, stdout) == (1, "")
    assert said.startswith("memctl: error: ") and "newer" in said
    assert "sqlalchemy" in heavy


def _fields(value: Any) -> dict[str, Any]:
    """An event or a run (the ORM's or a record) as its fields."""
    if dataclasses.is_dataclass(value):
        return dataclasses.asdict(value)  # type: ignore[arg-type]
    return dict(value.model_dump())


def test_the_light_reader_reads_what_the_store_reads(
    three_memories: str, workspace_database: Path | str
) -> None:
    with MemoryStore(workspace_database) as store, ReadOnlyStore(workspace_database) as light:
        assert light.count() == store.count() == 2
        assert light.memories() == store.memories()
        assert light.memories("user") == store.memories("user")
        assert light.summaries("project") == store.summaries("project")
        assert light.find("style") == store.find("style")
        assert light.find("old") is None and store.find("old") is None
        assert light.search("deploy staging") == store.search("deploy staging")
        assert light.search("style", type="user") == store.search("style", type="user")
        for name, limit in ((None, None), ("style", None), (None, 2), ("old", 1)):
            assert [_fields(e) for e in light.history.events(name, limit)] == [
                _fields(e) for e in store.history.events(name, limit)
            ]
        run = light.history.find_run(three_memories[:8])
        assert _fields(run) == _fields(store.history.find_run(three_memories[:8]))
        assert [_fields(e) for e in light.history.run_events(run.id)] == [
            _fields(e) for e in store.history.run_events(run.id)
        ]
        assert light.history.runs() == store.history.runs()
        assert light.history.runs(2) == store.history.runs(2)
        ids = {e.run_id for e in store.history.events()}
        assert {k: _fields(v) for k, v in light.history.runs_by_id(ids).items()} == {
            k: _fields(v) for k, v in store.history.runs_by_id(ids).items()
        }


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "Input should be greater than or equal to 1"),
        ("-2", "Input should be greater than or equal to 1"),
        ("two", "Input should be a valid integer, unable to parse string as an integer"),
        ("1.5", "Input should be a valid integer, unable to parse string as an integer"),
    ],
)
def test_a_value_typer_must_coerce_still_is(
    memctl: Any, three_memories: str, database_env: dict[str, str], value: str, said: str
) -> None:
    """Values with nothing to coerce skip pydantic; any other goes to Typer's coercion."""
    done = memctl("search", "deploy", "--limit", value, env=database_env)
    assert done.returncode == 2
    assert f"Invalid value for '--limit' / '-n': {said}" in done.stderr
    found = memctl("search", "deploy", "-n", "01", env=database_env)
    assert found.stdout.count("deploy-notes") == 1


def test_a_command_line_runs_as_with_every_command_built(memctl: Any, tmp_path: Path) -> None:
    """memctl builds only the command a command line names (app._app_for); what it says is
    what the whole app says: help lists every command, a misspelt name gets its suggestion."""
    listed = memctl("-h").stdout
    assert all(f"  {name} " in listed for name in ("list", "history", "semantic", "claude"))
    assert "Did you mean 'list'?" in memctl("lst").stderr
    database = tmp_path / "elsewhere.db"
    with MemoryStore(database) as store:
        store.create("style", "user", "Code style", "ruff")
    assert "style" in memctl("--db", str(database), "list").stdout
    assert "style" in memctl(f"--db={database}", "list", "-t", "user").stdout
    assert "Usage: memctl list [OPTIONS]" in memctl("list", "--bogus").stderr
