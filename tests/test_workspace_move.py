"""A project moved (`mv`), copied (`cp -r`) or cloned (`git clone`, the database git-ignored)
still exports, imports and consolidates normally: export state is kept relative to the
database, and a file that says what a version of its memory said is never a hand edit.

Real folders, real git, `memctl` as a subprocess, consolidation against the loopback server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner

MEMORIES = [
    ("user-tabs", "user", "User wants 4 spaces, never tabs", "Indent with 4 spaces."),
    ("user-indent", "user", "Indentation is 4 spaces", "No tab characters, ever."),
    ("project-db", "project", "The database is MySQL 5.7", "Upgraded to 8.0 in March."),
    ("project-ci", "project", "CI runs on Jenkins", "The Jenkinsfile is at the root."),
]
PLAN = {
    "merge": [
        {
            "sources": ["user-tabs", "user-indent"],
            "name": "user-indentation",
            "type": "user",
            "description": "4 spaces",
            "body": "Never tabs.",
        }
    ],
    "drop": [{"name": "project-ci", "reason": "moved to GitHub Actions"}],
}


def model_env(server: AnthropicServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": server.url}


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.md"))}


@pytest.fixture
def project(tmp_path: Path, memctl: MemctlRunner) -> Path:
    """A project whose .memory/ holds the database and its exported files."""
    root = tmp_path / "project"
    with (
        MemoryStore(root / ".memory" / "memstore.db") as store,
        store.transaction() as tx,
    ):
        for name, kind, description, body in MEMORIES:
            tx.create(name, kind, description, body)
    exported = memctl("export", cwd=root)
    assert exported.returncode == 0, exported.stderr
    return root


def test_a_moved_project_exports_and_imports_normally(
    tmp_path: Path, project: Path, memctl: MemctlRunner
) -> None:
    moved = tmp_path / "moved"
    project.rename(moved)  # mv
    before = files(moved / ".memory")
    assert memctl("edit", "project-db", "-b", "Now on 8.0.", cwd=moved).returncode == 0

    # The stale file is no hand edit to import: the database's newer body stays.
    imported = memctl("import", cwd=moved)
    assert imported.returncode == 0, imported.stderr
    assert "0 updated" in imported.stderr
    assert "Now on 8.0." in memctl("show", "project-db", cwd=moved).stdout

    exported = memctl("export", cwd=moved)
    assert exported.returncode == 0, exported.stderr
    assert "1 written, 0 removed" in exported.stderr
    after = files(moved / ".memory")
    assert {n for n in after if after[n] != before[n]} == {"project-db.md"}


def test_consolidate_in_a_copied_project_re_exports(
    tmp_path: Path, project: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(project), str(copy)], check=True)  # new mtimes, new inodes
    anthropic_server.script(text_reply(json.dumps(PLAN)))
    done = memctl("consolidate", "--yes", env=model_env(anthropic_server), cwd=copy)
    assert done.returncode == 0, done.stderr
    assert "3 removed" in done.stderr
    names = set(files(copy / ".memory"))
    assert names == {"MEMORY.md", "user-indentation.md", "project-db.md"}
    assert set(files(project / ".memory")) != names  # the original is untouched


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_cloned_project_imports_exports_and_consolidates(
    tmp_path: Path, project: Path, memctl: MemctlRunner, anthropic_server: AnthropicServer
) -> None:
    (project / ".gitignore").write_text(".memory/memstore.db*\n")
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "memories", cwd=project)
    clone = tmp_path / "clone"
    git("clone", "-q", str(project), str(clone), cwd=tmp_path)
    assert not (clone / ".memory" / "memstore.db").exists()
    before = files(clone / ".memory")

    imported = memctl("import", cwd=clone)
    assert imported.returncode == 0, imported.stderr
    assert "4 created" in imported.stderr
    exported = memctl("export", cwd=clone)
    assert exported.returncode == 0, exported.stderr
    assert "0 written, 0 removed" in exported.stderr
    assert files(clone / ".memory") == before

    anthropic_server.script(text_reply(json.dumps(PLAN)))
    done = memctl("consolidate", "--yes", env=model_env(anthropic_server), cwd=clone)
    assert done.returncode == 0, done.stderr
    assert set(files(clone / ".memory")) == {"MEMORY.md", "user-indentation.md", "project-db.md"}
