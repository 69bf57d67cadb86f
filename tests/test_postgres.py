"""PostgreSQL as memstore's second engine: selecting it, migrating it with the same Alembic
history, memctl against a server, a server that is down, and history that the database keeps
append-only (triggers, and a role that cannot change events). The store's own tests run on
both engines (the modules and tests marked `both_engines`: tests/test_store.py, and the
schema's match with the models in tests/test_migrations.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy.exc import DBAPIError

from memstore.errors import (
    ConnectionLost,
    HistoryTampered,
    NothingToRestore,
    SchemaTooNew,
    StoreUnavailable,
)
from memstore.settings import Settings
from memstore.storage.migrate import alembic_config
from memstore.storage.postgres.engine import create_postgres_engine, grant_application_role
from memstore.storage.reader import StoreReader
from memstore.storage.schema_version import VERSION_TABLE
from memstore.storage.search_terms import query_terms
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner, database_errors, raw_sql
from tests.postgres_cluster import Cluster
from tests.test_concurrency import WRITER

# A server nobody listens at: the connection is refused at once.
NO_SERVER = "postgresql://memstore@127.0.0.1:1/memstore"


def test_a_url_selects_postgresql_and_a_path_sqlite(postgres_url: str, tmp_path: Path) -> None:
    assert Settings.from_environment({"MEMSTORE_DB": postgres_url}).db == postgres_url
    assert Settings.from_environment({"MEMSTORE_DB": "x/m.db"}).db == Path("x/m.db")
    with MemoryStore(postgres_url) as store:
        assert store.engine.dialect.name == "postgresql"
        assert store.path is None and store.url == postgres_url
    with MemoryStore(tmp_path / "m.db") as store:
        assert store.engine.dialect.name == "sqlite" and store.url is None


def test_downgrade_to_base_and_up_again(postgres_url: str) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("kept", "user", "survives nothing", "a downgrade to base drops all")
        config = alembic_config()
        with store.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "base")
    with MemoryStore(postgres_url) as store:  # opening migrates the empty database back up
        store.create("revived", "user", "d", "body words")
        assert [h.memory.name for h in store.search("words")] == ["revived"]


def test_a_newer_schema_is_refused(postgres_url: str, postgres_cluster: Cluster) -> None:
    MemoryStore(postgres_url).close()
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute(f"UPDATE {VERSION_TABLE} SET version_num = '9999'", database=name)
    with pytest.raises(SchemaTooNew, match="newer memstore"):
        MemoryStore(postgres_url)


def test_memctl_works_against_a_server(postgres_url: str, memctl: MemctlRunner) -> None:
    added = memctl(
        "--db", postgres_url, "add", "deploy-docker", "-t", "project",
        "-d", "Deploy with docker compose", "-b", "We run docker compose up on the server.",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = memctl("list", env={"MEMSTORE_DB": postgres_url})
    assert "deploy-docker" in listed.stdout
    found = memctl("--db", postgres_url, "search", "composing")  # stemmed, as on SQLite
    assert "deploy-docker" in found.stdout
    shown = memctl("--db", postgres_url, "show", "deploy-docker")
    assert "We run docker compose up on the server." in shown.stdout
    assert memctl("--db", postgres_url, "rm", "deploy-docker").returncode == 0
    history = memctl("--db", postgres_url, "history", "deploy-docker")
    assert [line.split()[1] for line in history.stdout.splitlines()[1:]] == ["create", "delete"]
    assert memctl("--db", postgres_url, "path").stdout.strip() == postgres_url


@pytest.mark.parametrize(
    "url", [NO_SERVER, "postgresql://memstore@/memstore?host=/nonexistent-folder"]
)
def test_a_server_that_is_down_is_one_line_and_exit_1(url: str, memctl: MemctlRunner) -> None:
    for args in (["list"], ["add", "n", "-t", "user", "-d", "d", "-b", "b"], ["search", "docker"]):
        done = memctl("--db", url, *args)
        assert done.returncode == 1, done
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memctl: error: cannot use the PostgreSQL")


def test_the_password_never_reaches_a_message(memctl: MemctlRunner) -> None:
    url = "postgresql://memstore:hunter2@127.0.0.1:1/memstore"
    with pytest.raises(StoreUnavailable) as raised:
        MemoryStore(url)
    assert "hunter2" not in str(raised.value) and "memstore:***@127.0.0.1:1" in str(raised.value)
    for args in (["list"], ["path"]):
        done = memctl("--db", url, *args)
        assert "hunter2" not in done.stdout + done.stderr
        assert "memstore:***@127.0.0.1:1" in done.stdout + done.stderr


def test_store_reader_reads_a_server_without_sqlalchemy(postgres_url: str) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("tabs", "user", "Indent with tabs", "Tabs, width four.")
        store.create("deploy", "project", "部署用 Docker", "在 CI 里构建镜像")
    with StoreReader(postgres_url) as reader:
        assert [s.name for s in reader.summaries()] == ["deploy", "tabs"]
        ids = reader.rank_ids(query_terms("构建 the tabs"), 10)
        assert set(ids) == {1, 2} and all(score > 0 for score in ids.values())
        assert {r.name for r in reader.by_ids(list(ids)).values()} == {"deploy", "tabs"}


# -- history, append-only by the database ---------------------------------------------------


def test_triggers_refuse_even_the_owner(postgres_url: str) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("note", "user", "d", "b")
        with raw_sql(store) as connection:
            for statement in (
                "UPDATE memory_event SET actor = 'someone-else'",
                "DELETE FROM memory_event",
                "TRUNCATE memory_event CASCADE",
                "UPDATE run SET command = 'rewritten'",
                "DELETE FROM run",
            ):
                with pytest.raises(database_errors(), match="append-only"):
                    connection.execute(statement)
        assert [e.actor for e in store.history.events()] == ["api"]
        assert store.history.verify().events == 1


def test_the_application_role_cannot_change_history(
    postgres_cluster: Cluster, postgres_url: str, memctl: MemctlRunner
) -> None:
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute("CREATE ROLE memstore_app_test LOGIN")
    with MemoryStore(postgres_url) as owner:  # the owner migrates, then grants
        # A team memory: a `user` one would be the owner's own, which the app role never sees.
        owner.create("before", "project", "d", "written by the owner")
        grant_application_role(owner.engine, "memstore_app_test")
    app_url = postgres_cluster.url(name, user="memstore_app_test")
    with MemoryStore(app_url, actor="app") as app:
        app.create("tabs", "user", "Tabs", "Indent with tabs.")
        app.update("tabs", body="Indent with tabs, width four.")
        app.delete("before")
        assert [h.memory.name for h in app.search("width")] == ["tabs"]
        engine = create_postgres_engine(app_url)
        try:
            with engine.begin() as connection:
                # Triggers dropped by someone who could would not help this role either.
                for statement in (
                    "UPDATE memory_event SET actor = 'x'",
                    "DELETE FROM memory_event",
                    "DROP TRIGGER memory_event_append_only ON memory_event",
                ):
                    with (
                        pytest.raises(DBAPIError, match=r"permission denied|must be owner"),
                        connection.begin_nested(),
                    ):
                        connection.exec_driver_sql(statement)
        finally:
            engine.dispose()
        assert app.history.verify().events == 4
        # Erasing content from the team's history is the owner's to do.
        with pytest.raises(StoreUnavailable, match="permission denied"):
            app.purge("tabs")
        assert app.get("tabs").body == "Indent with tabs, width four."
    refused = memctl("--db", app_url, "purge", "tabs", "--yes")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "only the tables' owner role may erase history" in refused.stderr


def test_a_run_records_the_connecting_role_whatever_the_client_claims(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute("CREATE ROLE memstore_who_a LOGIN")
    with MemoryStore(postgres_url) as owner:
        grant_application_role(owner.engine, "memstore_who_a")
    role_a = postgres_cluster.url(name, user="memstore_who_a")
    with MemoryStore(role_a, actor="app") as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
        # A client that names someone else (or no one) for its run is overruled. (A run
        # without events must be a consolidation's that changed nothing, since 0011.)
        engine = create_postgres_engine(role_a)
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql(
                    "INSERT INTO run (id, actor, command, started_at, identity, host) VALUES"
                    " ('forged', 'consolidation', 'x', '2026', 'memstore_owner', 'elsewhere'),"
                    " ('silent', 'consolidation', 'x', '2026', NULL, NULL)"
                )
        finally:
            engine.dispose()
        made = store.history.run(store.history.events()[0].run_id)
        forged, silent = store.history.run("forged"), store.history.run("silent")
        assert made is not None and forged is not None and silent is not None
        assert [made.identity, forged.identity, silent.identity] == ["memstore_who_a"] * 3
        # The host is the client's word, recorded as such.
        assert forged.host == "elsewhere" and made.host is not None
        # Runs written without their place on the runs' chain are named by verify.
        with pytest.raises(HistoryTampered) as raised:
            store.history.verify()
        assert [problem.split(" (")[0] for problem in raised.value.problems] == [
            "run forged",
            "run silent",
        ]


def test_upgrading_to_0007_keeps_old_runs_unknown_and_the_views_granted(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute("CREATE ROLE memstore_who_b LOGIN")
    with MemoryStore(postgres_url) as owner:
        config = alembic_config()
        with owner.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0006")
        postgres_cluster.execute(
            "INSERT INTO run (id, actor, command, started_at) VALUES ('old', 'cli', 'x', '2026')",
            database=name,
        )
        grant_application_role(owner.engine, "memstore_who_b")  # granted before 0007
    MemoryStore(postgres_url).close()  # the owner's next run upgrades
    with MemoryStore(postgres_cluster.url(name, user="memstore_who_b"), actor="app") as app:
        app.create("tabs", "user", "Tabs", "Indent with tabs.")
        who = {r["run_id"]: (r["identity"], r["host"]) for r in app.history.runs()}
        assert who.pop("old") == (None, None)
        assert [identity for identity, _ in who.values()] == ["memstore_who_b"]
        assert app.history.verify().events == 1


# -- search ----------------------------------------------------------------------------------

MEMORIES = [
    ("deploy-docker", "project", "Deploy with docker compose", "We deploy: docker compose up -d."),
    ("tabs", "user", "Indent with tabs, never spaces", "Tabs everywhere; spaces only in YAML."),
    ("ci-images", "project", "镜像在 CI 里构建", "本地不要推送镜像，CI 构建后推送到 registry"),
    (
        "port",
        "reference",
        "The API listens on port 8080",
        "Port 8080 in dev, 443 behind the proxy.",
    ),
    ("deploying", "feedback", "Deployments wait for review", "Never deploy on Fridays."),
]


@pytest.mark.parametrize(
    "query",
    [
        "deploy docker",
        "deploying",
        "镜像 推送",
        "port 8080",
        '"port 8080"',
        "tab* spaces",
        "behind_the proxy",  # a phrase of two words (FTS5 splits at `_`)
        "behind_th* dev",  # a phrase whose last word is a prefix
    ],
)
def test_postgresql_ranks_as_fts5_does(postgres_url: str, tmp_path: Path, query: str) -> None:
    scores = []
    for where in (tmp_path / "m.db", postgres_url):
        with MemoryStore(where) as store:
            for memory in MEMORIES:
                store.create(*memory)
            terms = query_terms(query)
            scores.append(store.rank_ids(terms, 10))
            hits = store.search(query)
            scores.append({hit.memory.id: hit.score for hit in hits})
    sqlite_ids, sqlite_search, postgres_ids, postgres_search = scores
    assert sqlite_ids and sqlite_search
    for sqlite, postgres in ((sqlite_ids, postgres_ids), (sqlite_search, postgres_search)):
        assert list(postgres) == list(sqlite)  # the same memories, in the same order
        assert list(postgres.values()) == pytest.approx(list(sqlite.values()), rel=1e-6)


def test_search_by_type_and_after_changes(postgres_url: str) -> None:
    with MemoryStore(postgres_url) as store:
        for memory in MEMORIES:
            store.create(*memory)
        assert [h.memory.name for h in store.search("deploy", type="feedback")] == ["deploying"]
        store.update("deploying", body="Releases wait for a review.")
        store.delete("deploy-docker")
        assert [h.memory.name for h in store.search("deploy")] == ["deploying"]  # description
        assert store.search("fridays") == []
        store.restore("deploy-docker")
        assert {h.memory.name for h in store.search("deploy")} == {"deploy-docker", "deploying"}


def term_statistics(store: MemoryStore) -> list[object]:
    """memory_fts_term, memory_fts_stats and memory_fts_lexeme as they are, and as the index
    (and the terms) say they should be."""
    with store.engine.connect() as connection:
        return [
            connection.exec_driver_sql(query).fetchall()
            for query in (
                "SELECT lexeme, memory_id, frequency, words FROM memory_fts_term ORDER BY 1, 2",
                "SELECT u.lexeme, f.memory_id, (SELECT sum(CASE w WHEN 'A' THEN 5 WHEN 'B'"
                " THEN 3 ELSE 1 END) FROM unnest(u.weights) AS w), f.words"
                " FROM memory_fts AS f, unnest(f.document) AS u ORDER BY 1, 2",
                "SELECT documents, words FROM memory_fts_stats",
                "SELECT count(*), coalesce(sum(words), 0) FROM memory_fts",
                "SELECT lexeme, private_to, documents FROM memory_fts_lexeme"
                " WHERE documents <> 0 ORDER BY 1, 2",
                "SELECT lexeme, coalesce(private_to, ''), count(*) FROM memory_fts_term"
                " GROUP BY 1, 2 ORDER BY 1, 2",
            )
        ]


def test_term_statistics_follow_every_write_and_an_upgrade(postgres_url: str) -> None:
    with MemoryStore(postgres_url) as store:
        for memory in MEMORIES:
            store.create(*memory)
        store.update("deploying", body="Releases wait for a review.")
        store.delete("deploy-docker")
        store.restore("deploy-docker")
        store.delete("tabs")
        terms, expected, stats, counted, lexemes, holding = term_statistics(store)
        assert terms == expected and len(terms) > 20
        assert stats == counted == [(len(MEMORIES) - 1, counted[0][1])]
        assert lexemes == holding and len(lexemes) > 20
        before = store.rank_ids(query_terms("deploy review port"), 10)
        config = alembic_config()
        with store.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0005")
    with MemoryStore(postgres_url) as store:  # the upgrade counts the memories already there
        terms, expected, stats, counted, lexemes, holding = term_statistics(store)
        assert terms == expected and stats == counted and lexemes == holding
        assert store.rank_ids(query_terms("deploy review port"), 10) == before


def test_verify_finds_tampering_that_bypasses_the_triggers(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("note", "user", "d", "first body")
        store.update("note", body="second body")
        assert store.history.verify().events == 2
        # The owner (here the superuser) can switch the triggers off: the chain still tells.
        postgres_cluster.execute(
            "ALTER TABLE memory_event DISABLE TRIGGER USER",
            "UPDATE memory_event SET actor = 'someone-else' WHERE id = 1",
            "ALTER TABLE memory_event ENABLE TRIGGER USER",
            database=Cluster.name_of(postgres_url),
        )
        with pytest.raises(HistoryTampered, match="at event 1"):
            store.history.verify()


def test_a_server_restart_between_writes_loses_nothing(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("before", "user", "d", "written before the restart")
        assert store.count() == 1  # the pool holds a connection the restart will cut
        postgres_cluster.restart()
        store.create("after", "user", "d", "written after the restart")
        assert [m.name for m in store.memories()] == ["after", "before"]
        assert store.history.verify().events == 2


def _cut_by_a_restart(cluster: Cluster, url: str, operation: Callable[[], Any]) -> Any:
    """Run `operation` in a thread while another session locks the memory table, so that
    it is waiting on the server when the server restarts (`pg_ctl restart -m fast` ends
    every session); what it returned, or the exception it raised."""
    import psycopg

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = operation()
        except Exception as error:
            outcome["value"] = error

    locker = psycopg.connect(url)
    try:
        locker.execute("LOCK TABLE memory IN ACCESS EXCLUSIVE MODE")
        thread = threading.Thread(target=run)
        thread.start()
        with psycopg.connect(url, autocommit=True) as watcher:
            deadline = time.monotonic() + 30
            while not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database()"
            ).fetchone()[0]:
                assert time.monotonic() < deadline, "the operation never waited"
                time.sleep(0.02)
        cluster.restart()
        thread.join(60)
    finally:
        locker.close()
    return outcome["value"]


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        (lambda store: [m.name for m in store.memories()], ["deploy-notes"]),  # SQLAlchemy
        (lambda store: store.count(), 1),  # the DBAPI connection
        (lambda store: [hit.memory.name for hit in store.search("deploys")], ["deploy-notes"]),
    ],
)
def test_a_read_cut_by_a_restart_runs_again_once_the_server_is_back(
    postgres_cluster: Cluster, postgres_url: str, read: Callable[[Any], Any], expected: Any
) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("deploy-notes", "project", "Deploys go through CI", "Tag a release.")
        assert _cut_by_a_restart(postgres_cluster, postgres_url, lambda: read(store)) == expected


def test_a_write_cut_by_a_restart_is_not_run_again(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    """A write's transaction cut before it committed was rolled back: one typed error, and
    memstore does not run it again (a cut during COMMIT would leave its outcome unknown)."""
    with MemoryStore(postgres_url) as store:
        store.create("before", "project", "d", "b")
        cut = _cut_by_a_restart(
            postgres_cluster, postgres_url, lambda: store.create("cut", "project", "d", "b")
        )
        assert isinstance(cut, ConnectionLost), cut
        assert str(cut).startswith("database postgresql://") and "\n" not in str(cut)
        assert [m.name for m in store.memories()] == ["before"]
        assert len(store.history.events()) == 1
        store.create("after", "project", "d", "b")  # the pool has reconnected


# -- memctl sql ------------------------------------------------------------------------------

AUDIT_DOC = Path(__file__).resolve().parents[1] / "docs" / "audit.md"
# A recipe using one of these is SQLite's SQL (PostgreSQL says now() - interval '7 days').
SQLITE_ONLY = ("strftime(", "json_extract(", "datetime(")


@pytest.mark.both_engines
def test_the_audit_recipes_run_on_both_engines(store: MemoryStore) -> None:
    store.create("user-preference-tabs", "user", "Tabs", "Indent with tabs.")
    store.update("user-preference-tabs", body="Indent with tabs, width four.")
    store.delete("user-preference-tabs")
    recipes = re.findall(r"```sql\n(.*?)```", AUDIT_DOC.read_text(encoding="utf-8"), re.S)
    ran = 0
    for recipe in recipes:
        if store.url is not None and any(f in recipe for f in SQLITE_ONLY):
            continue
        with store.read_only_query(recipe.strip().rstrip(";")) as query:
            columns = query.start()
            rows = list(query.rows())
        assert columns and all(len(row) == len(columns) for row in rows)
        ran += 1
    assert ran >= (6 if store.url is not None else 7)


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        ("DELETE FROM memory", "the store is read-only here: memctl sql runs one read-only"),
        ("SELECT 1; DELETE FROM memory", "multiple commands"),
        ("SELECT nextval('memory_purge_id_seq')", "read-only transaction"),
        ("SELECT pg_sleep(5)", "stopped after 1 s, the time limit"),
    ],
)
def test_memctl_sql_on_a_server_only_reads(
    postgres_url: str, memctl: MemctlRunner, statement: str, refusal: str
) -> None:
    MemoryStore(postgres_url).close()
    done = memctl("--db", postgres_url, "sql", statement, "--timeout", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("memctl: error: sql: ") and refusal in done.stderr
    counted = memctl("--db", postgres_url, "sql", "SELECT count(*) AS n FROM memory_event")
    assert counted.returncode == 0 and counted.stdout.split() == ["n", "0"]


def test_ctrl_c_stops_a_query_on_the_server(postgres_url: str, tmp_path: Path) -> None:
    import psycopg

    process = subprocess.Popen(
        [sys.executable, "-m", "memctl", "--db", postgres_url, "sql", "SELECT pg_sleep(60)"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # Ctrl-C once the server runs the query, which it does at the first FETCH from memctl's
    # cursor (a fixed pause could end, on a busy machine, while memctl was still starting,
    # and test start-up instead; or after the query's 30 s limit).
    with psycopg.connect(postgres_url, autocommit=True) as watcher:
        deadline = time.monotonic() + 60
        while not watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active'"
            " AND query LIKE 'FETCH%memctl_sql%' AND pid <> pg_backend_pid()"
        ).fetchone():
            assert time.monotonic() < deadline and process.poll() is None, "no query ran"
            time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("Ctrl-C did not stop the query")
    assert process.returncode == 130
    assert b"interrupted" in stderr and b"Traceback" not in stderr


def test_two_library_writers_on_a_fresh_server_database(postgres_cluster: Cluster) -> None:
    url = postgres_cluster.database()  # empty: both processes race to migrate it
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, prefix, "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("alpha", "beta")
    ]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    with MemoryStore(url) as store:
        assert store.count() == 300
        events = store.history.events()
        assert store.history.verify().events == 300 + 2 * 30
    assert len(events) == 300 + 2 * 30
    assert {e.actor for e in events} == {"alpha", "beta"}


def test_purge_erases_content_on_a_server(postgres_url: str) -> None:
    with MemoryStore(postgres_url, command="memctl edit secret-note -b 'my secret'") as store:
        store.create("secret-note", "user", "Holds the secret", "the first secret body")
        store.update("secret-note", body="the second secret body")
        store.command = "memctl add other"
        store.create("other", "user", "Kept", "kept body")
        store.command = "memctl purge secret-note"
        report = store.purge("secret-note")
        assert (report.memories, report.events) == (1, 3)
        with raw_sql(store) as connection:
            stored = connection.execute(
                "SELECT string_agg(concat(old_value::text, new_value::text, r.command), ' ')"
                " FROM memory_event AS e JOIN run AS r ON r.id = e.run_id"
            ).fetchone()[0]
            text = connection.execute("SELECT description || body FROM memory").fetchall()
        for erased in ("secret body", "Holds the secret", "my secret"):
            assert erased not in stored and erased not in str(text)
        assert "kept body" in stored and "memctl purge secret-note" in stored
        assert store.history.verify().events == 4
        assert store.search("secret") == []
        with pytest.raises(NothingToRestore, match="purged"):
            store.restore("secret-note")


@pytest.mark.both_engines
def test_vectors_are_stored_and_read_alike(store: MemoryStore) -> None:
    first = store.create("one", "user", "d", "b")
    second = store.create("two", "user", "d", "b")
    vector = bytes(range(16))
    store.save_vectors("model-a", [(first.id, first.version, vector)], wait_ms=1000)
    assert store.vector_counts("model-a") == (1, 2)
    assert store.live_vectors("model-a") == [(first.id, 1, vector), (second.id, 1, None)]
    store.update("one", body="changed")  # the vector is of version 1: stale now
    store.save_vectors("model-a", [(second.id, 1, vector[::-1])], wait_ms=1000)
    assert store.live_vectors("model-a") == [(first.id, 2, None), (second.id, 1, vector[::-1])]
    assert store.vector_counts("model-b") == (0, 2)


def test_the_hook_reads_a_server_without_the_orm(postgres_url: str, tmp_path: Path) -> None:
    with MemoryStore(postgres_url) as store:
        store.create("deploy-docker", "project", "Deploy with docker compose", "Run compose up.")
    heavy = ("sqlalchemy", "sqlmodel", "typer", "alembic", "anthropic", "numpy")
    script = (
        "import json, sys\n"
        f"sys.argv = ['memctl', '--db', {postgres_url!r}, 'hook']\n"
        "from memctl.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    event = {"hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path)}
    event["prompt"] = "how do we deploy with docker compose?"
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(event).encode(),
        capture_output=True,
        check=True,
        cwd=tmp_path,
    )
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "deploy-docker" in context
    assert {m.split(".")[0] for m in json.loads(done.stderr)} & set(heavy) == set()


def test_the_hook_says_a_server_is_down_in_one_line(memctl: MemctlRunner, tmp_path: Path) -> None:
    event = {"hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path), "prompt": "docker"}
    done = memctl("--db", NO_SERVER, "hook", input=json.dumps(event))
    assert done.returncode == 0 and done.stdout == ""  # a hook never stops the prompt
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot use the PostgreSQL database" in lines[0]


DOCS = Path(__file__).resolve().parent.parent / "docs" / "postgresql.md"


def _blocks(section: str, language: str) -> list[str]:
    """The ```language blocks of one `## ` section of docs/postgresql.md."""
    text = DOCS.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, re.DOTALL)


def test_a_fresh_server_set_up_as_docs_postgresql_md_says_works(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    """docs/postgresql.md from the top: its roles and database made by the superuser, the
    owner's first commands, then a person's, each command as written (but for the names,
    made unique on the session's cluster, and the server's address)."""
    names = {"memstore_owner": "doc_owner", "memstore_app": "doc_app", "alice": "doc_alice"}

    def ours(text: str) -> str:
        for name, unique in names.items():
            text = re.sub(rf"\b{name}\b", unique, text)
        text = re.sub(r"\bDATABASE memstore\b", "DATABASE doc_memstore", text)
        return text.replace(
            "@db.example.org/memstore", f"@/doc_memstore?host={postgres_cluster.folder}"
        )

    (setup,) = _blocks("Setting up a server", "sql")
    sql = re.sub(r"--[^\n]*", "", ours(setup))  # CREATE DATABASE: a statement alone
    for statement in filter(str.strip, sql.split(";")):
        postgres_cluster.execute(statement)
    workspace = tmp_path / "app"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    remote = ["git", "remote", "add", "origin", "git@github.com:acme/doc-app.git"]
    subprocess.run(remote, cwd=workspace, check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTORE_", "PG"))}
    env["NO_COLOR"] = "1"
    done = None
    for block in [
        *_blocks("Setting up a server", "sh"),
        *_blocks("Pointing memctl at a server", "sh"),
    ]:
        for line in ours(block).splitlines():
            words = shlex.split(line, comments=True)
            if not words or words[:2] == ["pip", "install"]:
                continue  # memstore and psycopg are installed for the tests
            if words[0] == "export":
                variable, _, value = words[1].partition("=")
                env[variable] = value
                continue
            assert words[0] == "memctl", line
            done = subprocess.run(
                [sys.executable, "-m", "memctl", *words[1:]],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, (line, done.stderr)
    assert done is not None and "deploy" in done.stdout  # the person's `memctl list`
    # The application role is no login role, wherever the page makes or names it.
    text = DOCS.read_text(encoding="utf-8")
    assert not re.search(r"memstore_app[^\n]*\bLOGIN\b", text.replace("NOLOGIN", ""))
