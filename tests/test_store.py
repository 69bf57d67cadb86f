"""MemoryStore: validation, audited writes, soft delete and restore, SQL views; on SQLite
and on PostgreSQL (tests/conftest.py's `engine`)."""

from __future__ import annotations

import getpass
import socket
import sqlite3

import pytest

from memstore.errors import (
    HistoryTampered,
    InvalidMemory,
    MemoryExists,
    MemoryNotFound,
    MemstoreError,
    NothingToRestore,
)
from memstore.storage.live_names import NAMES_ONE_BY_ONE
from memstore.storage.store import MemoryStore
from tests.conftest import database_errors, raw_sql

pytestmark = pytest.mark.both_engines


def add_tabs(store: MemoryStore) -> None:
    store.create(
        "user-preference-tabs",
        "user",
        "User wants 4-space indentation, never tabs",
        "The user asked that all Python code use 4 spaces and never tab characters.",
    )


def events(store: MemoryStore) -> list[tuple[str, str, str]]:
    return [(e.operation, e.memory_name, e.actor) for e in store.history.events()]


def test_create_and_read_back(store: MemoryStore) -> None:
    add_tabs(store)
    memory = store.get("user-preference-tabs")
    assert memory.type == "user"
    assert memory.description == "User wants 4-space indentation, never tabs"
    assert memory.created_at.endswith("Z") and "T" in memory.created_at
    assert [m.name for m in store.memories()] == ["user-preference-tabs"]
    assert events(store) == [("create", "user-preference-tabs", "test")]


@pytest.mark.parametrize(
    ("fields", "field", "rule"),
    [
        ({"name": "Bad Name"}, "name", "kebab-case"),
        ({"name": "a" * 65}, "name", "at most 64"),
        ({"name": "trailing-"}, "name", "kebab-case"),
        ({"name": "../../etc/passwd"}, "name", "kebab-case"),
        ({"name": "con"}, "name", "reserved"),
        ({"name": ""}, "name", "empty"),
        ({"type": "opinion"}, "type", "one of user, feedback, project, reference"),
        ({"description": "   "}, "description", "empty"),
        ({"description": "two\nlines"}, "description", "single line"),
        ({"body": "\n  \n"}, "body", "empty"),
    ],
)
def test_invalid_input_names_field_and_rule(
    store: MemoryStore, fields: dict[str, str], field: str, rule: str
) -> None:
    values = {"name": "ok-name", "type": "user", "description": "d", "body": "b"} | fields
    with pytest.raises(InvalidMemory) as raised:
        store.create(**values)
    assert raised.value.field == field
    assert rule in str(raised.value)
    assert store.memories() == [] and store.history.events() == []


def test_names_are_unique_among_live_memories(store: MemoryStore) -> None:
    add_tabs(store)
    with pytest.raises(MemoryExists):
        add_tabs(store)
    store.delete("user-preference-tabs")
    add_tabs(store)  # the name is free again once the first is deleted
    assert len(store.memories()) == 1


def test_update_records_old_and_new_values(store: MemoryStore) -> None:
    add_tabs(store)
    store.update("user-preference-tabs", description="Four spaces, always")
    event = store.history.events()[-1]
    assert event.operation == "update"
    assert event.old_value is not None and event.new_value is not None
    assert event.old_value["description"] == "User wants 4-space indentation, never tabs"
    assert event.new_value["description"] == "Four spaces, always"
    assert store.get("user-preference-tabs").version == 2


def test_update_with_no_change_records_nothing(store: MemoryStore) -> None:
    add_tabs(store)
    store.update("user-preference-tabs", type="user")
    assert len(store.history.events()) == 1


def test_rename_keeps_history_together(store: MemoryStore) -> None:
    add_tabs(store)
    store.update("user-preference-tabs", new_name="indentation")
    with pytest.raises(MemoryNotFound):
        store.get("user-preference-tabs")
    assert [e.operation for e in store.history.events("user-preference-tabs")] == [
        "create",
        "update",
    ]
    assert [e.operation for e in store.history.events("indentation")] == ["create", "update"]


def test_delete_and_restore(store: MemoryStore) -> None:
    add_tabs(store)
    store.delete("user-preference-tabs")
    assert store.memories() == []
    assert store.search("tabs") == []
    with pytest.raises(MemoryNotFound):
        store.delete("user-preference-tabs")
    restored = store.restore("user-preference-tabs")
    assert restored.body.startswith("The user asked")
    assert [h.memory.name for h in store.search("tabs")] == ["user-preference-tabs"]
    assert [e.operation for e in store.history.events()] == ["create", "delete", "restore"]


def test_restore_refuses_when_name_is_live_or_never_deleted(store: MemoryStore) -> None:
    with pytest.raises(NothingToRestore):
        store.restore("never-existed")
    add_tabs(store)
    store.delete("user-preference-tabs")
    add_tabs(store)
    with pytest.raises(NothingToRestore):
        store.restore("user-preference-tabs")


def test_failed_transaction_leaves_store_unchanged(store: MemoryStore) -> None:
    add_tabs(store)
    with pytest.raises(InvalidMemory), store.transaction() as tx:
        tx.create("first-of-two", "project", "written, then rolled back", "body")
        tx.delete(tx.get("user-preference-tabs"))
        tx.create("second", "nonsense-type", "d", "b")
    assert [m.name for m in store.memories()] == ["user-preference-tabs"]
    assert len(store.history.events()) == 1
    assert store.search("rolled") == []


def test_events_of_one_transaction_share_a_run(store: MemoryStore) -> None:
    with store.transaction(actor="import", command="memctl import x") as tx:
        tx.create("one", "user", "first", "b")
        tx.create("two", "user", "second", "b")
    history = store.history.events()
    assert {e.run_id for e in history} == {history[0].run_id}
    run = store.history.run(history[0].run_id)
    assert run is not None and run.actor == "import" and run.command == "memctl import x"


def test_a_run_records_who_made_it(store: MemoryStore) -> None:
    add_tabs(store)
    with raw_sql(store) as connection:
        # PostgreSQL's connecting role; SQLite has none: the OS user memstore runs as.
        expected = (
            getpass.getuser()
            if store.url is None
            else connection.execute("SELECT current_user").fetchone()[0]
        )
        views = [
            connection.execute(f"SELECT identity, host FROM {view}").fetchall()
            for view in ("run_summary", "memory_history")
        ]
    run = store.history.run(store.history.events()[0].run_id)
    assert run is not None and (run.identity, run.host) == (expected, socket.gethostname())
    assert views == [[(expected, socket.gethostname())]] * 2
    assert store.history.verify().events == 1


def test_who_made_a_run_is_append_only_and_in_the_chain(store: MemoryStore) -> None:
    add_tabs(store)
    with raw_sql(store) as connection:
        for statement in ("UPDATE run SET identity = 'mallory'", "UPDATE run SET host = NULL"):
            with pytest.raises(database_errors(), match="append-only"):
                connection.execute(statement)
        # With the triggers out of the way (as only an owner can), the chain still tells.
        if store.url is None:
            connection.execute("DROP TRIGGER run_who_no_update")
        else:
            connection.execute("ALTER TABLE run DISABLE TRIGGER USER")
        connection.execute("UPDATE run SET identity = 'mallory'")
    with pytest.raises(HistoryTampered, match=r"event 1\W"):
        store.history.verify()


def test_history_is_append_only_in_sql(store: MemoryStore) -> None:
    add_tabs(store)
    with raw_sql(store) as connection:
        with pytest.raises(database_errors(), match="append-only"):
            connection.execute("UPDATE memory_event SET actor = 'someone-else'")
        with pytest.raises(database_errors(), match="append-only"):
            connection.execute("DELETE FROM memory_event")
    assert events(store) == [("create", "user-preference-tabs", "test")]


def test_audit_views_answer_common_questions(store: MemoryStore) -> None:
    add_tabs(store)
    store.update("user-preference-tabs", description="Four spaces")
    store.delete("user-preference-tabs")
    with raw_sql(store) as connection:
        check_audit_views(connection)


def check_audit_views(connection: sqlite3.Connection) -> None:
    history = connection.execute(
        "SELECT operation, old_description, new_description FROM memory_history "
        "WHERE memory_name = 'user-preference-tabs' ORDER BY event_id"
    ).fetchall()
    assert history == [
        ("create", None, "User wants 4-space indentation, never tabs"),
        ("update", "User wants 4-space indentation, never tabs", "Four spaces"),
        ("delete", "Four spaces", None),
    ]
    deleted = connection.execute("SELECT name, deleted_by FROM deleted_memory").fetchall()
    assert deleted == [("user-preference-tabs", "test")]
    runs = connection.execute("SELECT created, updated, deleted FROM run_summary").fetchall()
    assert sorted(runs) == [(0, 0, 1), (0, 1, 0), (1, 0, 0)]


def test_connection_pragmas(store: MemoryStore) -> None:
    if store.url is not None:
        pytest.skip("PRAGMAs are SQLite's (PostgreSQL's connections: tests/test_postgres.py)")
    with store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000


def test_json_values_are_readable_in_sql(store: MemoryStore) -> None:
    store.create("chinese-note", "project", "部署用 Docker 镜像", "在 C盘 之外部署")
    with raw_sql(store) as connection:
        raw = connection.execute("SELECT CAST(new_value AS TEXT) FROM memory_event").fetchone()[0]
    assert "部署用 Docker 镜像" in raw  # not \\u escapes: plain SQL users can read it


def test_names_can_be_swapped_freed_and_reused_in_one_transaction(store: MemoryStore) -> None:
    with store.transaction() as tx:
        tx.create("a", "user", "first", "body a")
        tx.create("b", "user", "second", "body b")
    with store.transaction() as tx:
        tx.update(tx.get("a"), name="tmp")
        tx.update(tx.get("b"), name="a")
        tx.update(tx.get("tmp"), name="b")
    assert store.get("a").body == "body b" and store.get("b").body == "body a"
    with store.transaction() as tx:
        tx.update(tx.get("b"), body="changed")
        tx.delete(tx.get("a"))
        tx.update(tx.get("b"), name="a")
        tx.create("b", "project", "a new b", "new")
    assert store.get("a").body == "changed" and store.get("b").description == "a new b"
    assert [h.memory.name for h in store.search("changed")] == ["a"]


def test_stale_records_are_not_trusted(store: MemoryStore) -> None:
    original = store.create("note", "user", "one", "body")
    with store.transaction() as tx:
        tx.update(original, description="two")
        tx.update(original, body="new body")  # stale: still says description "one"
        gone = tx.delete(tx.get("note"))
        with pytest.raises(MemoryNotFound):
            tx.delete(original)
        with pytest.raises(MemoryNotFound):
            tx.update(gone, body="x")
        tx.restore("note")
    memory = store.get("note")
    assert (memory.description, memory.body) == ("two", "new body")
    assert [e.operation for e in store.history.events()] == [
        "create",
        "update",
        "update",
        "delete",
        "restore",
    ]


# A trigger refusing a memory named 'poison', in each engine's SQL.
POISON = {
    "sqlite": [
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON memory WHEN new.name = 'poison' "
        "BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION poisoned() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'poisoned'; END $$",
        "CREATE TRIGGER refuse_poison BEFORE INSERT ON memory FOR EACH ROW "
        "WHEN (new.name = 'poison') EXECUTE FUNCTION poisoned()",
    ],
}


def test_failure_while_writing_rolls_everything_back(store: MemoryStore) -> None:
    add_tabs(store)
    with raw_sql(store) as connection:
        for statement in POISON[store.engine.dialect.name]:
            connection.execute(statement)
    with pytest.raises(MemstoreError, match="poisoned"), store.transaction() as tx:
        tx.update(tx.get("user-preference-tabs"), description="changed first")
        tx.create("poison", "user", "written last, fails", "body")
    assert (
        store.get("user-preference-tabs").description
        == "User wants 4-space indentation, never tabs"
    )
    assert len(store.history.events()) == 1 and store.count() == 1


def test_the_old_history_names_still_work_for_one_release(store: MemoryStore) -> None:
    add_tabs(store)
    events = [event.id for event in store.history.events("user-preference-tabs")]
    with pytest.warns(DeprecationWarning, match=r"store\.history\.events"):
        assert [event.id for event in store.history("user-preference-tabs")] == events
    with pytest.warns(DeprecationWarning, match=r"store\.history\.verify"):
        assert store.verify_history() == store.history.verify()


def test_find_identical_sees_live_memories_and_the_transactions_own(store: MemoryStore) -> None:
    store.create("tabs", "user", "Tabs", "Indent with tabs.")
    store.create("gone", "user", "Gone", "Deleted.")
    store.delete("gone")
    with store.transaction() as tx:
        assert tx.find_identical("user", "Tabs", "Indent with tabs.") == tx.get("tabs")
        assert tx.find_identical("project", "Tabs", "Indent with tabs.") is None
        assert tx.find_identical("user", "Gone", "Deleted.") is None
        fresh = tx.create("spaces", "user", "Spaces", "Indent with spaces.")
        assert tx.find_identical("user", "Spaces", "Indent with spaces.") == fresh
        tx.update(tx.get("tabs"), body="Indent with tabs, width 4.")
        assert tx.find_identical("user", "Tabs", "Indent with tabs.") is None


def test_a_transaction_reading_all_names_keeps_its_own_changes(store: MemoryStore) -> None:
    store.create("kept", "project", "d", "the first")
    with store.transaction() as tx:
        tx.delete(tx.get("kept"))
        for i in range(NAMES_ONE_BY_ONE + 8):  # past the names read one by one: all are read
            tx.create(f"n-{i}", "project", "d", f"note {i}")
        assert tx.find("kept") is None
        tx.create("kept", "project", "d", "the second")
    assert store.get("kept").body == "the second"
    assert store.count() == NAMES_ONE_BY_ONE + 9
