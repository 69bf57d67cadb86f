"""Schema management: Alembic revisions applied on open, newer databases refused, lazy imports."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

from memstore.errors import SchemaTooNew
from memstore.storage.engine import create_sqlite_engine
from memstore.storage.migrate import alembic_config, script_head
from memstore.storage.schema_version import SCHEMA_HEAD, VERSION_TABLE
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner


def test_schema_head_constant_matches_the_revisions() -> None:
    assert script_head() == SCHEMA_HEAD


# PostgreSQL's row-level security (revision 0008) is the database's alone, never written
# by memstore, so not in the models: memory.owner, the derived tables' private_to, and
# event_chain (docs/postgresql.md).
ROW_SECURITY_COLUMNS = {"owner", "private_to"}


def _in_models(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", "")
    if table and (table.startswith("memory_fts") or table == "event_chain"):
        return False
    return not (type_ == "column" and name in ROW_SECURITY_COLUMNS and compare_to is None)


@pytest.mark.both_engines
def test_migrated_schema_matches_the_models(store: MemoryStore) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={"version_table": VERSION_TABLE, "include_object": _in_models},
        )
        assert compare_metadata(context, SQLModel.metadata) == []


def test_version_table_is_ours_and_a_hosts_alembic_is_untouched(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    connection = sqlite3.connect(db)
    connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
    connection.execute("INSERT INTO alembic_version VALUES ('host-app-rev')")
    connection.commit()
    MemoryStore(db).close()
    assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [
        ("host-app-rev",)
    ]
    assert connection.execute(f"SELECT version_num FROM {VERSION_TABLE}").fetchall() == [
        (SCHEMA_HEAD,)
    ]
    connection.close()


def test_database_from_a_newer_memstore_is_refused(tmp_path: Path, memctl: MemctlRunner) -> None:
    db = tmp_path / "newer.db"
    MemoryStore(db).close()
    connection = sqlite3.connect(db)
    connection.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    connection.commit()
    connection.close()
    with pytest.raises(SchemaTooNew, match="newer memstore"):
        MemoryStore(db)
    done = memctl("--db", str(db), "list")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"memctl: error: {db} was written by a newer memstore (schema revision '9999'); "
        "upgrade memstore to open it"
    ]


def downgrade(db: Path, revision: str) -> None:
    engine = create_sqlite_engine(db)
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
    engine.dispose()


def test_downgrade_and_upgrade_again(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        store.create("kept", "user", "survives nothing", "a downgrade to base drops everything")
    downgrade(db, "base")
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert "memory" not in tables and "memory_fts" not in tables
    with MemoryStore(db) as store:  # opening migrates the empty database back up
        store.create("revived", "user", "d", "b")
        assert [h.memory.name for h in store.search("revived")] == ["revived"]


def imported_modules_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_up_to_date_database_opens_without_alembic_or_anthropic(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    MemoryStore(db).close()
    modules = imported_modules_after(
        "import sys\n"
        f"sys.argv = ['memctl', '--db', {str(db)!r}, 'list']\n"
        "from memctl.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert "memctl.app" in modules
    assert "alembic" not in modules
    assert "anthropic" not in modules


def test_upgrade_from_0001_segments_existing_chinese_memories(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with MemoryStore(db) as store:
        store.create("docker-build", "project", "镜像在 CI 里构建", "本地不要推送镜像")
    downgrade(db, "0001")
    with MemoryStore(db) as store:  # opening upgrades to head and rebuilds the index
        assert [h.memory.name for h in store.search("推送")] == ["docker-build"]


def test_plain_sqlite3_can_search_the_index(store: MemoryStore) -> None:
    store.create("deploy", "project", "How we deploy", "Run the release workflow.")
    connection = sqlite3.connect(store.path)
    rows = connection.execute(
        "SELECT memory.name FROM memory_fts JOIN memory ON memory.id = memory_fts.rowid "
        "WHERE memory_fts MATCH 'workflow'"
    ).fetchall()
    connection.close()
    assert rows == [("deploy",)]


def test_runs_from_before_0007_record_no_one(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    MemoryStore(db).close()
    downgrade(db, "0006")
    connection = sqlite3.connect(db)
    connection.execute(
        "INSERT INTO run (id, actor, command, started_at) VALUES ('old', 'cli', 'x', '2026')"
    )
    connection.commit()
    connection.close()
    with MemoryStore(db) as store:  # opening upgrades: who made the old run is unknown
        old = store.history.run("old")
        assert old is not None and (old.identity, old.host) == (None, None)
        store.create("new", "user", "d", "b")
        new = store.history.run(store.history.events()[0].run_id)
        assert new is not None and new.identity is not None and new.host is not None
