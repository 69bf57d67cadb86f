"""memctl export and import as a person uses them: a conflict settled either way, nothing lost;
a folder that is not there."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import MemctlRunner
from tests.test_cli import assert_one_line_error


def _a_conflict(memctl: MemctlRunner, tmp_path: Path) -> Path:
    """project-deploy.md edited by hand after an export, and its memory edited in the store."""
    done = memctl("add", "project-deploy", "-t", "project", "-d", "How we deploy", "-b", "Monday")
    assert done.returncode == 0, done.stderr
    assert memctl("export").returncode == 0
    file = tmp_path / ".memory" / "project-deploy.md"
    file.write_text(file.read_text() + "Hand edit: and never on a Friday.\n")
    assert memctl("edit", "project-deploy", "-d", "How we deploy, step by step").returncode == 0
    return file


def test_export_names_both_ways_out_of_a_conflict(memctl: MemctlRunner, tmp_path: Path) -> None:
    file = _a_conflict(memctl, tmp_path)
    refused = memctl("export")
    assert_one_line_error(refused, "project-deploy.md")
    assert "import" in refused.stderr and "--force' takes the file's text" in refused.stderr
    assert "'memctl export --force' overwrites them all" in refused.stderr
    assert "Hand edit" in file.read_text()
    imported = memctl("import")
    assert imported.returncode == 1
    assert "the file's with 'memctl import --force'" in imported.stderr


def test_export_force_keeps_the_hand_edit_in_a_copy(memctl: MemctlRunner, tmp_path: Path) -> None:
    file = _a_conflict(memctl, tmp_path)
    index = tmp_path / ".memory" / "MEMORY.md"
    index.write_text("My own index, by hand.\n")
    forced = memctl("export", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "Hand edit" not in file.read_text() and "step by step" in file.read_text()
    copies = sorted((tmp_path / ".memory").glob(".*.overwritten-*"))
    assert [c.name.split(".overwritten-")[0] for c in copies] == [
        ".MEMORY.md",
        ".project-deploy.md",
    ]
    assert "Hand edit: and never on a Friday." in copies[1].read_text()
    assert copies[0].read_text() == "My own index, by hand.\n"
    for copy in copies:
        assert f"kept as it was in {copy}" in forced.stderr
    # The copies are no memory to import, and no file an export writes or removes.
    again = memctl("import")
    assert again.returncode == 0 and "0 created, 0 updated" in again.stderr, again.stderr
    assert memctl("export").returncode == 0
    assert sorted((tmp_path / ".memory").glob(".*.overwritten-*")) == copies


def test_import_force_takes_the_file_s_side(memctl: MemctlRunner, tmp_path: Path) -> None:
    _a_conflict(memctl, tmp_path)
    done = memctl("import", "--force")
    assert done.returncode == 0, done.stderr
    assert "the file's text is imported (history keeps the other)" in done.stderr
    memory = json.loads(memctl("show", "project-deploy", "--json").stdout)
    assert "never on a Friday" in memory["body"] and memory["description"] == "How we deploy"
    history = json.loads(memctl("history", "project-deploy", "--json").stdout)
    assert "How we deploy, step by step" in json.dumps(history)  # the database's, kept
    exported = memctl("export")
    assert exported.returncode == 0, exported.stderr


def test_export_refuses_a_folder_whose_parent_is_not_there(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    assert memctl("add", "keep", "-t", "user", "-d", "kept", "-b", "body").returncode == 0
    typo = tmp_path / "nonexistent" / "dir"
    assert_one_line_error(memctl("export", str(typo)), f"{tmp_path / 'nonexistent'} does not exist")
    assert not (tmp_path / "nonexistent").exists()
    done = memctl("export", str(tmp_path / "out"))  # the last folder is created
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "keep.md").is_file()
