"""memstore.integrations.door: the store as other tools reach it. A change is one run under the
door's actor and writes `.memory/` again; a change that fails leaves store and folder as they
were."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memstore.errors import NoDatabase, SecretRefused
from memstore.integrations.door import Door, LazyDoor
from memstore.settings import Settings


def _settings(**environ: str) -> Settings:
    return Settings.from_environment(environ)


def test_a_door_finds_the_workspace_as_memctl_does(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    with Door.open("mcp", start=project / "src", settings=_settings()) as door:
        assert door.workspace.root == project
        assert door.store.path == project / ".memory" / "memstore.db"


def test_a_given_database_wins_over_the_workspace(tmp_path: Path) -> None:
    database = tmp_path / "elsewhere" / ".memory" / "memstore.db"
    database.parent.mkdir(parents=True)
    settings = _settings(MEMSTORE_DB=str(database))
    with Door.open("mcp", start=tmp_path, settings=settings) as door:
        assert door.store.path == database
        assert door.workspace.root == tmp_path / "elsewhere"


def test_a_change_is_a_run_of_the_door_and_is_exported(tmp_path: Path) -> None:
    with Door.open("mcp", start=tmp_path, settings=_settings()) as door:
        with door.change("mcp remember (claude-code)") as tx:
            tx.create("tabs", "user", "Prefers tabs", "Indent with tabs.")
        runs = door.store.history.runs()
        assert [(run["actor"], run["command"]) for run in runs] == [
            ("mcp", "mcp remember (claude-code)")
        ]
        assert (tmp_path / ".memory" / "tabs.md").is_file()
        assert "tabs" in (tmp_path / ".memory" / "MEMORY.md").read_text()
        assert door.export_failure is None


def test_a_refused_change_leaves_store_and_files_as_they_were(tmp_path: Path) -> None:
    with Door.open("memory_tool", start=tmp_path, settings=_settings()) as door:
        with pytest.raises(SecretRefused), door.change("create") as tx:
            tx.create("key", "reference", "The key", "AKIA" + "Z" * 16)
        assert door.store.summaries() == []
        assert door.store.history.runs() == []
        assert not (tmp_path / ".memory" / "key.md").exists()


def test_a_lazy_door_creates_the_database_only_for_a_change(tmp_path: Path) -> None:
    doors = LazyDoor("mcp", start=tmp_path, settings=_settings())
    assert doors.existing_store() is None
    with pytest.raises(NoDatabase):
        doors.open(create=False)
    assert not (tmp_path / ".memory").exists()
    with doors.open(create=True).change("remember") as tx:
        tx.create("tabs", "user", "Prefers tabs", "Indent with tabs.")
    store = doors.existing_store()
    assert store is not None and [m.name for m in store.summaries()] == ["tabs"]
    doors.close()
