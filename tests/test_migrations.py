"""Schema management: Alembic revisions applied on open, newer databases refused, lazy imports;
each revision standing alone, and a database built and taken down one revision at a time."""

from __future__ import annotations

import ast
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlmodel import SQLModel

from memstore.errors import HistoryTampered, SchemaTooNew
from memstore.storage import chain
from memstore.storage.migrate import alembic_config, migrations_path, script_head
from memstore.storage.postgres import search as pg_search
from memstore.storage.postgres.engine import create_postgres_engine
from memstore.storage.schema_version import SCHEMA_HEAD, VERSION_TABLE
from memstore.storage.sqlite.engine import create_sqlite_engine
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner, raw_sql


def test_schema_head_constant_matches_the_revisions() -> None:
    assert script_head() == SCHEMA_HEAD


# PostgreSQL's row-level security (revision 0008) is the database's alone, never written
# by memstore, so not in the models: memory.owner, the derived tables' private_to, and
# event_chain (docs/postgresql.md).
ROW_SECURITY_COLUMNS = {"owner", "private_to"}


def _in_models(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    table = name if type_ == "table" else getattr(getattr(obj, "table", None), "name", "")
    if table and (table.startswith("memory_fts") or table in ("event_chain", "run_chain")):
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


# -- a revision stands alone ----------------------------------------------------------------
# A revision must mean the same forever: one that imported memstore's code (its columns, its
# hash chain) ran today's code against the schema of its day, and a fresh database broke at
# 0002 once a column was added. What a revision needs of memstore is copied into it.

SCRIPTS = ScriptDirectory.from_config(alembic_config())
# Base first.
REVISIONS = [script.revision for script in reversed(list(SCRIPTS.walk_revisions()))]
ENGINES = ("sqlite", "postgresql")


def memstore_imports(source: str) -> list[str]:
    """What `source` imports of memstore, wherever the import is (in a function too), or of
    its own package (a relative import), or by name (importlib.import_module, __import__)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        elif isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Name) and node.func.id == "__import__")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
        ):
            names = [
                argument.value
                for argument in node.args[:1]
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str)
            ]
        else:
            continue
        found += [
            name for name in names if name.startswith(".") or name.split(".")[0] == "memstore"
        ]
    return found


def test_the_import_check_sees_every_kind_of_import() -> None:
    source = (
        "import memstore.storage.chain\n"
        "def upgrade():\n"
        "    from memstore.storage.postgres.search import COLUMN_WEIGHTS\n"
        "    from . import helper\n"
        "    importlib.import_module('memstore.storage.reader')\n"
        "import sqlalchemy, memstore_other\n"
    )
    assert memstore_imports(source) == [
        "memstore.storage.chain",
        "memstore.storage.postgres.search",
        ".",
        "memstore.storage.reader",
    ]


def test_revisions_import_nothing_of_memstore() -> None:
    versions = migrations_path() / "versions"
    assert len(list(versions.glob("0*.py"))) == len(REVISIONS)
    imports = {
        path.name: found
        for path in sorted(versions.glob("*.py"))
        if (found := memstore_imports(path.read_text(encoding="utf-8")))
    }
    assert imports == {}, "copy what a revision needs into it (docs/development.md)"


def revision_module(revision: str) -> Any:
    script = SCRIPTS.get_revision(revision)
    assert script is not None
    return script.module


# Events as 0005's backfill reads them: values as stored JSON text, purge markers, a command
# erased, no run (NULL command), a merge, text that is not ASCII.
MARKER = '{"purged": "sha256:' + "ab" * 32 + '"}'
EVENTS = [
    (1, 1, "deploy", "create", "cli", "r1", "2026-11-30T10:00:00", None, None,
     '{"body": "Run the release workflow.", "name": "deploy"}', "memctl create deploy"),
    (2, 1, "部署", "update", "chat", "r2", "2026-11-30T10:01:00", None,
     '{"name": "deploy"}', '{"name": "部署", "body": "自动部署流程 ✓"}', None),
    (3, 2, "secret", "delete", "cli", "r3", "2026-11-30T10:02:00", None, MARKER, MARKER,
     "[purged sha256:" + "cd" * 32 + "]"),
    (4, 3, "merged", "merge", "consolidate", "r4", "2026-11-30T10:03:00", 1,
     '{"extra": {"k": [1, 2.5, null]}}', None, "memctl consolidate"),
]  # fmt: skip


def test_the_chain_0005_backfills_is_the_one_memstore_verifies() -> None:
    frozen = revision_module("0005")
    for constant in ("GENESIS", "PURGED_VALUE_GLOB", "PURGED_COMMAND_GLOB"):
        assert getattr(frozen, constant) == getattr(chain, constant)
    assert frozen.PURGED_VALUE_PATTERN == chain.PURGED_VALUE_PATTERN
    assert frozen.PURGED_COMMAND_PATTERN == chain.PURGED_COMMAND_PATTERN
    # Events of runs without identity or host (all of them, before 0007) for good.
    live = chain.chain_hashes([(*event, None) for event in EVENTS])
    assert frozen.chain_hashes(EVENTS) == [{"id": id_, "hash": hash_} for id_, hash_, _ in live]


TEXTS = ["Deploy: `make it` on example.com", "自动部署流程", "镜像在 CI 里构建", "𠀀𠀁 x", ""]


def newest(constant: str) -> Any:
    """The newest revision that sets `constant`: the head's schema is as it has it."""
    modules = (revision_module(revision) for revision in reversed(REVISIONS))
    return getattr(next(module for module in modules if hasattr(module, constant)), constant)


def test_the_search_revisions_index_and_weigh_as_memstore_does() -> None:
    """The newest revision that indexes memories (0002 today) splits their text as memstore's
    writes do, and the newest that counts words by column (0009) counts them by the weights
    memstore's search scores by: a change to either comes with a revision of its own."""
    assert newest("CONFIGURATION") == pg_search.CONFIGURATION
    for text in TEXTS:
        assert newest("words")(text) == pg_search.words(text)
    assert list(newest("COLUMN_WEIGHTS").items()) == list(pg_search.COLUMN_WEIGHTS.items())


# -- building a database revision by revision ------------------------------------------------


@pytest.fixture(params=ENGINES)
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A new database with nothing in it: a file, or a server's database."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_cluster").database())
    return tmp_path / "stepped.db"


def open_engine(database: Path | str) -> Engine:
    if isinstance(database, str):
        return create_postgres_engine(database)
    return create_sqlite_engine(database)


def migrate(engine: Engine, step: Callable[[Config, str], None], target: str) -> str | None:
    """One `upgrade` or `downgrade` in its own transaction; the revision it leaves."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        step(config, target)
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def step_up(engine: Engine, start: str | None = None) -> None:
    for revision in REVISIONS[REVISIONS.index(start) + 1 if start else 0 :]:
        assert migrate(engine, command.upgrade, revision) == revision


def step_down(engine: Engine, stop: str | None = None) -> None:
    for revision in reversed(REVISIONS[REVISIONS.index(stop) + 1 if stop else 0 :]):
        previous = SCRIPTS.get_revision(revision).down_revision
        assert isinstance(previous, str | None)
        assert migrate(engine, command.downgrade, previous or "base") == previous


# Everything a revision makes on PostgreSQL, in the current schema, as text.
POSTGRES_SCHEMA = """
SELECT 'column', concat_ws(' ', table_name, column_name, data_type, is_nullable, column_default,
    collation_name) FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL SELECT 'index', indexdef FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL SELECT 'constraint', concat_ws(' ', c.conrelid::regclass, c.conname,
    pg_get_constraintdef(c.oid)) FROM pg_constraint AS c
    JOIN pg_namespace AS n ON n.oid = c.connamespace WHERE n.nspname = current_schema()
UNION ALL SELECT 'trigger', pg_get_triggerdef(t.oid) FROM pg_trigger AS t
    JOIN pg_class AS r ON r.oid = t.tgrelid JOIN pg_namespace AS n ON n.oid = r.relnamespace
    WHERE n.nspname = current_schema() AND NOT t.tgisinternal
UNION ALL SELECT 'function', pg_get_functiondef(p.oid) FROM pg_proc AS p
    JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()
UNION ALL SELECT 'view', concat_ws(' ', viewname, definition) FROM pg_views
    WHERE schemaname = current_schema()
UNION ALL SELECT 'policy', concat_ws(' ', tablename, policyname, qual, with_check)
    FROM pg_policies WHERE schemaname = current_schema()
UNION ALL SELECT 'relation', concat_ws(' ', c.relname, c.relkind, c.relrowsecurity,
    c.relforcerowsecurity, c.reloptions) FROM pg_class AS c
    JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()
UNION ALL SELECT 'text search', concat_ws(' ', c.cfgname, m.maptokentype, m.mapseqno,
    m.mapdict::regdictionary) FROM pg_ts_config AS c
    JOIN pg_namespace AS n ON n.oid = c.cfgnamespace
    LEFT JOIN pg_ts_config_map AS m ON m.mapcfg = c.oid WHERE n.nspname = current_schema()
UNION ALL SELECT 'dictionary', concat_ws(' ', d.dictname, d.dictinitoption) FROM pg_ts_dict AS d
    JOIN pg_namespace AS n ON n.oid = d.dictnamespace WHERE n.nspname = current_schema()
ORDER BY 1, 2
"""


def schema(engine: Engine) -> list[tuple[Any, ...]]:
    """The database's schema as text: every table, index, trigger, view and function."""
    query = (
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        if engine.dialect.name == "sqlite"
        else POSTGRES_SCHEMA
    )
    with engine.connect() as connection:
        return [tuple(row) for row in connection.exec_driver_sql(query)]


def test_a_new_database_is_built_and_taken_down_one_revision_at_a_time(
    empty_database: Path | str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    engine = open_engine(empty_database)
    try:
        step_up(engine)
        # What opening a store makes of a new database, all revisions in one transaction.
        opened = (
            request.getfixturevalue("postgres_url")
            if engine.dialect.name != "sqlite"
            else (tmp_path / "opened.db")
        )
        with MemoryStore(opened) as store:
            assert schema(engine) == schema(store.engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"version_table": VERSION_TABLE, "include_object": _in_models}
            )
            assert compare_metadata(context, SQLModel.metadata) == []
        with MemoryStore(empty_database) as store:
            store.create("docker-build", "project", "镜像在 CI 里构建", "本地不要推送镜像")
            assert [hit.memory.name for hit in store.search("推送")] == ["docker-build"]
        step_down(engine)
        assert [row for row in schema(engine) if VERSION_TABLE not in str(row)] == []
    finally:
        engine.dispose()


@pytest.fixture(params=ENGINES)
def opened_database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A store's database as opening it made it: a file, or the server's default store."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return tmp_path / "memstore.db"


def index_documents(store: MemoryStore) -> list[tuple[Any, ...]]:
    """What the full-text index holds (on PostgreSQL its documents, and each word's count
    weighted by column)."""
    queries = (
        ["SELECT rowid, name, description, body FROM memory_fts ORDER BY rowid"]
        if store.url is None
        else [
            "SELECT memory_id, document::text, words FROM memory_fts ORDER BY memory_id",
            "SELECT lexeme, memory_id, frequency, words FROM memory_fts_term ORDER BY 1, 2",
        ]
    )
    with store.engine.connect() as connection:
        return [tuple(row) for query in queries for row in connection.exec_driver_sql(query)]


def test_history_and_index_the_revisions_rebuild_are_memstores(
    opened_database: Path | str, memctl: MemctlRunner
) -> None:
    """From 0001 back to head with memories in: 0005 chains their events as memstore
    verifies them (a purge's markers too), 0002 indexes them as memstore writes its index."""
    with MemoryStore(opened_database) as store:
        store.create("docker-build", "project", "镜像在 CI 里构建", "本地不要推送镜像")
        store.update("docker-build", body="本地不要推送镜像; run `make release` on example.com")
        store.create("token", "user", "An old token", "it was pasted here")
        store.purge("token")
        store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
        store.delete("tabs")
        events = store.history.verify().events
        written = index_documents(store)
        step_down(store.engine, "0001")
    engine = open_engine(opened_database)
    try:
        step_up(engine, "0001")
    finally:
        engine.dispose()
    with MemoryStore(opened_database) as store:
        # Below 0005 there is no memory_purge: the record of the purge is lost on the way
        # down (its markers stay, chained), and verify says so, and nothing else.
        with pytest.raises(HistoryTampered) as raised:
            store.history.verify()
        assert [problem.split(":")[0] for problem in raised.value.problems] == [
            "memory 'token' (#2)"
        ]
        assert "no purge records it" in raised.value.problems[0]
        assert events == 6
        assert index_documents(store) == written
        assert [hit.memory.name for hit in store.search("推送")] == ["docker-build"]
    done = memctl("--db", str(opened_database), "history", "--verify")
    assert done.returncode == 1 and "memory 'token' (#2)" in done.stderr


def test_0012_leaves_history_verified_and_its_downgrade_loses_only_the_reasons(
    opened_database: Path | str,
) -> None:
    """Events from before 0012 verify as they were hashed, with no reason; a drop's reason
    is on the chain from 0012 on, and a downgrade (its column dropped) breaks that event's
    hash alone, as one below 0007 does its runs' events'."""
    with MemoryStore(opened_database) as store:
        store.create("kept", "project", "Kept", "Written before 0012.")
        store.create("stale", "project", "Stale", "Dropped with a reason.")
        step_down(store.engine, "0011")
    engine = open_engine(opened_database)
    try:
        step_up(engine, "0011")
    finally:
        engine.dispose()
    with MemoryStore(opened_database) as store:
        assert [e.reason for e in store.history.events()] == [None, None]
        assert store.history.verify().events == 2
        with store.transaction(actor="consolidation") as tx:
            tx.delete(tx.get("stale"), reason="Nobody builds with make any more")
        assert store.history.verify().events == 3
        step_down(store.engine, "0011")
    with MemoryStore(opened_database) as store:  # opening upgrades it again, the reason lost
        assert [e.reason for e in store.history.events()] == [None, None, None]
        with pytest.raises(HistoryTampered) as raised:
            store.history.verify()
        (problem,) = raised.value.problems
        assert "event 3" in problem


HISTORY_VIEW_OPTIONS = (
    "SELECT c.reloptions FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
    " WHERE c.relname = 'memory_history' AND n.nspname = current_schema()"
)
HISTORY_VIEW_GRANTEES = (
    "SELECT grantee FROM information_schema.table_privileges"
    " WHERE table_name = 'memory_history' AND table_schema = current_schema()"
    " AND grantee = 'history_reader'"
)


def test_memory_history_shows_a_reason_and_loses_it_alone_going_down(
    opened_database: Path | str,
) -> None:
    with MemoryStore(opened_database) as store:
        store.create("stale", "project", "Stale", "Dropped with a reason.")
        with store.transaction(actor="consolidation") as tx:
            tx.delete(tx.get("stale"), reason="Nobody builds with make any more")
        with raw_sql(store) as connection:
            rows = connection.execute(
                "SELECT operation, identity IS NOT NULL, reason FROM memory_history"
                " ORDER BY event_id"
            ).fetchall()
            assert [tuple(row) for row in rows] == [
                ("create", True, None),
                ("delete", True, "Nobody builds with make any more"),
            ]
            if store.url is not None:
                # The view runs with the caller's rights still (0008), and keeps its grants
                # when 0012 is taken down (the view made again without the column).
                assert connection.execute(HISTORY_VIEW_OPTIONS).fetchone()[0] == [
                    "security_invoker=true"
                ]
                connection.execute("CREATE ROLE history_reader")
                connection.execute("GRANT SELECT ON memory_history TO history_reader")
        step_down(store.engine, "0011")
        with raw_sql(store) as connection:
            columns = connection.execute("SELECT * FROM memory_history LIMIT 0").description
            assert [column[0] for column in columns][-2:] == ["identity", "host"]
            if store.url is not None:
                assert connection.execute(HISTORY_VIEW_OPTIONS).fetchone()[0] == [
                    "security_invoker=true"
                ]
                assert connection.execute(HISTORY_VIEW_GRANTEES).fetchone() == ("history_reader",)
                connection.execute("REVOKE ALL ON memory_history FROM history_reader")
                connection.execute("DROP ROLE history_reader")  # the cluster's, not the test's
