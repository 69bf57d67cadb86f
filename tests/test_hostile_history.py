"""History against every writer: plain sqlite3 with the triggers in place cannot rewrite it,
and whatever gets past them (DROP TRIGGER, a hex editor) is found by `memctl history
--verify`. `memctl purge` is the one way to erase content, and it keeps history verifiable."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memstore.errors import CannotUndo, HistoryTampered, NothingToRestore
from memstore.storage import chain
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.conftest import MemctlRunner
from tests.test_migrations import downgrade

LEAK = "AKIA2E0A8F3B244C9986 zebra-quartz-leak"


def filled(db: Path) -> None:
    with MemoryStore(db, actor="test", command="memctl add") as store:
        store.create("first", "project", "First", "one")
        store.create("second", "project", "Second", "two")
        store.update("first", body="one, changed")
        store.delete("second")


def plain(db: Path) -> sqlite3.Connection:
    """sqlite3 as a user opens it: no memstore functions, recursive_triggers off."""
    connection = sqlite3.connect(db, isolation_level=None)
    assert connection.execute("PRAGMA recursive_triggers").fetchone() == (0,)
    return connection


def verify(memctl: MemctlRunner, db: Path) -> tuple[int, str, str]:
    done = memctl("--db", str(db), "history", "--verify")
    return done.returncode, done.stdout, done.stderr


def test_insert_or_replace_cannot_rewrite_an_event_or_a_run(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    connection = plain(db)
    before = connection.execute("SELECT * FROM memory_event ORDER BY id").fetchall()
    run_id = before[0][5]
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(
            "INSERT OR REPLACE INTO memory_event (id, memory_id, memory_name, operation, actor,"
            " run_id, created_at) VALUES (1, 1, 'first', 'create', 'forged', ?, 'now')",
            (run_id,),
        )
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(
            "INSERT OR REPLACE INTO run (id, actor, command, started_at)"
            " VALUES (?, 'forged', 'nothing happened', 'now')",
            (run_id,),
        )
    assert connection.execute("SELECT * FROM memory_event ORDER BY id").fetchall() == before
    assert connection.execute("SELECT actor FROM run WHERE id = ?", (run_id,)).fetchone() == (
        "test",
    )


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE memory_event SET actor = 'forged' WHERE id = 1",
        "DELETE FROM memory_event WHERE id = 1",
        "UPDATE run SET command = 'nothing happened'",
        "DELETE FROM run",
        # The purge's marker form, but for a memory no purge recorded.
        'UPDATE memory_event SET new_value = \'{"purged": "sha256:' + "0" * 64 + "\"}'",
        "UPDATE run SET command = '[purged sha256:" + "0" * 64 + "]'",
    ],
)
def test_other_updates_and_deletes_are_refused(tmp_path: Path, statement: str) -> None:
    db = tmp_path / "m.db"
    filled(db)
    connection = plain(db)
    dump = list(connection.iterdump())
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        connection.execute(statement)
    assert list(connection.iterdump()) == dump


def _edit_value(connection: sqlite3.Connection) -> None:
    connection.execute("DROP TRIGGER memory_event_no_update")
    connection.execute(
        "UPDATE memory_event SET new_value = json_set(new_value, '$.body', 'forged') WHERE id = 2"
    )


def _edit_actor(connection: sqlite3.Connection) -> None:
    connection.execute("DROP TRIGGER memory_event_no_update")
    connection.execute("UPDATE memory_event SET actor = 'someone-else' WHERE id = 2")


def _delete_middle(connection: sqlite3.Connection) -> None:
    connection.execute("DROP TRIGGER memory_event_no_delete")
    connection.execute("DELETE FROM memory_event WHERE id = 2")


def _insert_forged(connection: sqlite3.Connection) -> None:
    run_id = connection.execute("SELECT run_id FROM memory_event WHERE id = 1").fetchone()[0]
    connection.execute(
        "INSERT INTO memory_event (id, memory_id, memory_name, operation, actor, run_id,"
        " created_at, hash) VALUES (5, 1, 'first', 'delete', 'forged', ?, 'now', ?)",
        (run_id, "f" * 64),
    )


def _edit_command(connection: sqlite3.Connection) -> None:
    connection.execute("DROP TRIGGER run_no_update")
    connection.execute("UPDATE run SET command = 'memctl list'")


def _fake_purge(connection: sqlite3.Connection) -> None:
    # The marker form with a made-up hash: the erased text cannot be made to disappear
    # without leaving the chain broken.
    connection.execute("DROP TRIGGER memory_event_no_update")
    connection.execute(
        'UPDATE memory_event SET new_value = \'{"purged": "sha256:' + "0" * 64 + "\"}' WHERE id = 3"
    )


def _delete_last(connection: sqlite3.Connection) -> None:
    connection.execute("DROP TRIGGER memory_event_no_delete")
    connection.execute("DELETE FROM memory_event WHERE id = 4")


@pytest.mark.parametrize(
    ("tamper", "where"),
    [
        (_edit_value, "event 2 (memory 'second', create) does not match its hash"),
        (_edit_actor, "event 2 (memory 'second', create) does not match its hash"),
        (_delete_middle, "event 3 (memory 'first', update) does not match its hash"),
        (_insert_forged, "event 5 (memory 'first', delete) does not match its hash"),
        (_edit_command, "event 1 (memory 'first', create) does not match its hash"),
        (_fake_purge, "event 3 (memory 'first', update) does not match its hash"),
        (_delete_last, "memory 'second' (#2): version is 2 in its row, 1 in its history"),
    ],
)
def test_verify_finds_tampering_that_bypasses_the_triggers(
    tmp_path: Path, memctl: MemctlRunner, tamper: Callable[[sqlite3.Connection], None], where: str
) -> None:
    db = tmp_path / "m.db"
    filled(db)
    code, out, err = verify(memctl, db)
    assert code == 0 and out.startswith("history verified: 4 events, 4 runs, 2 memories"), err
    as_json = json.loads(memctl("--db", str(db), "history", "--verify", "--json").stdout)
    assert as_json["verified"] is True and as_json["events"] == 4
    assert f"chain head {as_json['head']}," in out
    assert out.rstrip().endswith(f"runs' chain head {as_json['run_head']}")
    assert as_json["run_head"] != chain.GENESIS
    tamper(plain(db))
    code, out, err = verify(memctl, db)
    assert code == 1 and out == ""
    *found, last = err.splitlines()
    assert any(line.startswith(f"history: {where}") for line in found), found
    assert last.startswith("memctl: error: history does not verify: ")
    tampered = memctl("--db", str(db), "history", "--verify", "--json")
    problems = json.loads(tampered.stdout)["problems"]
    assert tampered.returncode == 1 and any(p.startswith(where) for p in problems)


def test_purge_erases_content_and_keeps_every_event(tmp_path: Path, memctl: MemctlRunner) -> None:
    added = memctl("add", "leak", "-t", "project", "-d", "Keys", "-b", LEAK, "--allow-secret")
    assert added.returncode == 0, added.stderr
    assert memctl("edit", "leak", "-b", "the key is in the vault").returncode == 0
    assert memctl("add", "other", "-t", "project", "-d", "Other", "-b", "kept").returncode == 0
    db = tmp_path / ".memory" / "memstore.db"
    connection = plain(db)
    before = connection.execute(
        "SELECT id, memory_name, operation, actor, run_id, created_at, old_value, new_value"
        " FROM memory_event ORDER BY id"
    ).fetchall()
    create_run = before[0][4]
    (create_command,) = connection.execute(
        "SELECT command FROM run WHERE id = ?", (create_run,)
    ).fetchone()
    connection.close()

    # Off a terminal it asks for --yes and changes nothing.
    refused = memctl("purge", "leak")
    assert refused.returncode == 1 and "--yes" in refused.stderr
    done = memctl("purge", "leak", "--yes")
    assert done.returncode == 0, done.stderr
    assert "purged leak: the content of 3 events erased" in done.stderr

    connection = plain(db)
    after = connection.execute(
        "SELECT id, memory_name, operation, actor, run_id, created_at, old_value, new_value"
        " FROM memory_event ORDER BY id"
    ).fetchall()
    # Every event keeps its row; the purge added the deletion of the live memory.
    assert [row[:6] for row in after[:3]] == [row[:6] for row in before]
    assert after[3][1:4] == ("leak", "delete", "purge")

    def marker(text: str | None) -> str | None:
        digest = hashlib.sha256(text.encode()).hexdigest() if text else None
        return None if digest is None else json.dumps({"purged": f"sha256:{digest}"})

    for old, new in zip(before[:2], after[:2], strict=True):
        assert new[6:] == (marker(old[6]), marker(old[7]))
    assert after[2][6:] == before[2][6:]  # the other memory is untouched
    # The memory row, the run commands that carried it, all in marker form.
    row = connection.execute("SELECT description, body FROM memory WHERE name = 'leak'").fetchone()
    assert row[0] == row[1] and row[1].startswith("[purged sha256:")
    (command,) = connection.execute(
        "SELECT command FROM run WHERE id = ?", (create_run,)
    ).fetchone()
    expected = hashlib.sha256(create_command.encode()).hexdigest()
    assert command == f"[purged sha256:{expected}]"
    # Its own run: actor, who, when, command.
    purge_run = connection.execute(
        "SELECT r.actor, r.command, p.memory_name, p.events FROM memory_purge AS p"
        " JOIN run AS r ON r.id = p.run_id"
    ).fetchall()
    assert len(purge_run) == 1
    assert purge_run[0][0] == "purge" and purge_run[0][1].startswith("memctl purge leak --yes (by ")
    assert purge_run[0][2:] == ("leak", 3)
    connection.close()
    # Nowhere in the database file any more, nor in its log; the history still verifies.
    for path in db.parent.glob("memstore.db*"):
        content = path.read_bytes()
        assert b"AKIA2E0A8F3B244C9986" not in content and b"zebra" not in content, path
    code, out, err = verify(memctl, db)
    assert code == 0 and out.startswith("history verified: 4 events"), err
    shown = memctl("history", "leak")
    assert shown.stdout.count("content purged") == 3


def test_purged_content_cannot_come_back(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        store.create("leak", "project", "Keys", LEAK, allow_secrets=True)
        created = store.history.events("leak")[0].run_id
        store.delete("leak")
        store.purge("leak")
        with pytest.raises(NothingToRestore, match="purged"):
            store.restore("leak")
        with pytest.raises(CannotUndo, match="purged"):
            undo_run(store, created)
        assert store.history.verify().events == 2


def test_migration_backfills_the_chain(tmp_path: Path, memctl: MemctlRunner) -> None:
    db = tmp_path / "m.db"
    filled(db)
    downgrade(db, "0004")
    connection = plain(db)
    assert "hash" not in [c[1] for c in connection.execute("PRAGMA table_info(memory_event)")]
    connection.close()
    with MemoryStore(db) as store:  # opening migrates and hashes the existing events
        assert store.history.verify().events == 4
        store.create("third", "project", "Third", "three")
        assert store.history.verify().events == 5
    code, out, _ = verify(memctl, db)
    assert code == 0 and "5 events" in out


def test_verify_raises_a_typed_error(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    _edit_actor(plain(db))
    with MemoryStore(db) as store, pytest.raises(HistoryTampered, match="event 2"):
        store.history.verify()
