"""A person's `user` memories are their own on PostgreSQL, enforced by row-level security keyed
on the connecting role (revision 0008, docs/postgresql.md "People and their memories").

The cluster has an owner role that migrates and owns the tables (not a superuser: a superuser
bypasses row-level security), an application role, and two people, alice and bob, who log in
as themselves and are members of the application role. Each test gets a fresh database the
owner role owns."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from memstore.errors import (
    CannotUndo,
    ConsolidationRefused,
    ExportConflict,
    InvalidMemory,
    MemoryExists,
    MemoryNotFound,
    NothingToRestore,
)
from memstore.files.exporter import export_memories
from memstore.files.importer import import_memories
from memstore.learning.consolidate import ConsolidationPlan, Merge, apply_plan
from memstore.learning.proposal import ProposedMemory
from memstore.recall.keyword import keyword_recall
from memstore.storage.postgres.engine import grant_application_role
from memstore.storage.store import MemoryStore
from memstore.storage.undo import undo_run
from tests.conftest import MemctlRunner, database_errors
from tests.postgres_cluster import Cluster

OWNER, APP = "memstore_rls_owner", "memstore_rls_app"


class Team(NamedTuple):
    """The URLs of one database, one per role."""

    owner: str
    alice: str
    bob: str
    superuser: str


@pytest.fixture(scope="module")
def roles(postgres_cluster: Cluster) -> None:
    postgres_cluster.execute(
        f"""DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{OWNER}') THEN
            CREATE ROLE {OWNER} LOGIN;
            CREATE ROLE {APP} NOLOGIN;
            CREATE ROLE alice LOGIN IN ROLE {APP};
            CREATE ROLE bob LOGIN IN ROLE {APP};
        END IF;
        END $$"""
    )


@pytest.fixture
def team(postgres_cluster: Cluster, roles: None) -> Team:
    """A fresh database of the owner role's, migrated by it, the application role granted."""
    name = Cluster.name_of(postgres_cluster.database())
    postgres_cluster.execute(f"ALTER DATABASE {name} OWNER TO {OWNER}")
    postgres_cluster.execute(f"ALTER SCHEMA public OWNER TO {OWNER}", database=name)
    owner = postgres_cluster.url(name, user=OWNER)
    with MemoryStore(owner) as store:
        grant_application_role(store.engine, APP)
    return Team(
        owner,
        postgres_cluster.url(name, user="alice"),
        postgres_cluster.url(name, user="bob"),
        postgres_cluster.url(name),
    )


@pytest.fixture
def alice(team: Team) -> Iterator[MemoryStore]:
    with MemoryStore(team.alice, actor="alice-agent") as store:
        yield store


@pytest.fixture
def bob(team: Team) -> Iterator[MemoryStore]:
    with MemoryStore(team.bob, actor="bob-agent") as store:
        yield store


def names(store: MemoryStore) -> list[str]:
    return [m.name for m in store.memories()]


def sql(memctl: MemctlRunner, url: str, query: str) -> list[dict[str, object]]:
    done = memctl("--db", url, "sql", "--json", query)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows


def test_a_persons_user_memories_are_invisible_to_another(
    alice: MemoryStore, bob: MemoryStore, tmp_path: Path
) -> None:
    alice.create("tabs", "user", "Alice indents with tabs", "Tabs, width four, never spaces.")
    alice.create("deploy", "project", "Deploy with docker compose", "docker compose up -d")
    bob.create("vim", "user", "Bob edits in vim", "Vim keys everywhere, tabs too.")
    alice.update("tabs", body="Tabs, width eight.")
    assert names(alice) == ["deploy", "tabs"]
    assert names(bob) == ["deploy", "vim"]
    assert bob.find("tabs") is None and bob.count() == 2
    with pytest.raises(MemoryNotFound):
        bob.get("tabs")
    assert [h.memory.name for h in bob.search("tabs")] == ["vim"]
    assert [h.memory.name for h in alice.search("tabs")] == ["tabs"]
    assert [h.memory.name for h in keyword_recall(bob, "how wide are tabs?")] == ["vim"]
    assert [s.name for s in bob.summaries()] == ["deploy", "vim"]
    # History: bob sees the team's events and his own, never alice's own, nor her runs on them.
    assert [e.memory_name for e in bob.history.events()] == ["deploy", "vim"]
    assert bob.history.events("tabs") == []
    assert [e.memory_name for e in alice.history.events()] == ["tabs", "deploy", "tabs"]
    assert [r["actor"] for r in bob.history.runs()] == ["alice-agent", "bob-agent"]
    assert len(alice.history.runs()) == 3  # bob's run on vim is his alone
    # Export to a folder of one's own (Claude Code's): the team's memories and the person's.
    assert sorted(export_memories(alice, tmp_path / "alice", personal=True).written) == [
        "MEMORY.md",
        "deploy.md",
        "tabs.md",
    ]
    assert sorted(export_memories(bob, tmp_path / "bob", personal=True).written) == [
        "MEMORY.md",
        "deploy.md",
        "vim.md",
    ]
    assert "tabs" not in (tmp_path / "bob" / "MEMORY.md").read_text()
    # Any other folder may be committed (the workspace's .memory/ is): the team's memories
    # only, the same folder whoever exports it.
    shared = tmp_path / "shared"
    for person in (alice, bob, alice):
        export_memories(person, shared)
        assert sorted(path.name for path in shared.iterdir() if path.suffix == ".md") == [
            "MEMORY.md",
            "deploy.md",
        ]
    assert "Alice" not in (shared / "MEMORY.md").read_text()


def test_a_persons_own_files_leave_a_shared_folder(
    alice: MemoryStore, bob: MemoryStore, tmp_path: Path
) -> None:
    """Files an export wrote for a person's `user` memories (before this rule, or where no
    record of the folder knows them: a copy, another clone) are removed; text the database
    does not have is never removed."""
    alice.create("tabs", "user", "Alice indents with tabs", "Tabs, width four.")
    alice.create("theme", "user", "Alice likes a dark theme", "Dark theme everywhere.")
    alice.create("deploy", "project", "Deploy with docker compose", "docker compose up -d")
    shared, own = tmp_path / "shared", tmp_path / "own"
    export_memories(alice, shared, personal=True)  # what an export wrote before the rule
    export_memories(alice, own, personal=True)
    (shared / "theme.md").write_text((own / "theme.md").read_text() + "\nAnd in the terminal.\n")
    with pytest.raises(ExportConflict) as refused:
        export_memories(alice, shared)
    assert refused.value.reasons == {"theme.md": "file"}  # `memctl import` brings it in first
    assert (shared / "tabs.md").exists()  # a refused export changes nothing
    import_memories(alice, shared)
    assert "terminal" in alice.get("theme").body
    done = export_memories(alice, shared)
    assert sorted(done.removed) == ["tabs.md", "theme.md"]
    assert sorted(path.name for path in shared.glob("*.md")) == ["MEMORY.md", "deploy.md"]

    # No record of this folder knows them: one that says what its memory said is removed,
    # a file of the same name with other text stays.
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "tabs.md").write_bytes((own / "tabs.md").read_bytes())
    (clone / "theme.md").write_text("---\nname: theme\ntype: user\n---\nLight, in fact.\n")
    done = export_memories(alice, clone)
    assert done.removed == ["tabs.md"]
    assert sorted(path.name for path in clone.glob("*.md")) == [
        "MEMORY.md",
        "deploy.md",
        "theme.md",
    ]
    # bob's export of the same folder knows nothing of alice's own: it removes nothing.
    (clone / "tabs.md").write_bytes((own / "tabs.md").read_bytes())
    assert export_memories(bob, clone).removed == []


def test_memctl_sql_reads_no_other_persons_rows(
    team: Team, alice: MemoryStore, bob: MemoryStore, memctl: MemctlRunner, tmp_path: Path
) -> None:
    alice.create("tabs", "user", "Alice indents with tabs", "Tabs, width four, never spaces.")
    alice.create("gone", "user", "Alice's old preference", "Spaces, once.")
    alice.delete("gone")
    deploy = alice.create("deploy", "project", "Deploy with docker compose", "docker compose up")
    alice.save_vectors("m", [(m.id, m.version, b"\0" * 8) for m in alice.memories()], wait_ms=1000)
    export_memories(alice, tmp_path / "export", personal=True)
    with MemoryStore(team.superuser) as superuser:
        superuser.purge("gone")  # a superuser bypasses row-level security (and may purge)
    private_words = ("tab", "gone", "width", "space", "alice's")
    queries = {
        "memory": "SELECT * FROM memory",
        "memory_event": "SELECT * FROM memory_event",
        "run": "SELECT * FROM run",
        "live_memory": "SELECT * FROM live_memory",
        "memory_history": "SELECT * FROM memory_history",
        "deleted_memory": "SELECT * FROM deleted_memory",
        "run_summary": "SELECT * FROM run_summary",
        "memory_fts": "SELECT memory_id, document::text AS words FROM memory_fts",
        "memory_fts_term": "SELECT * FROM memory_fts_term",
        "memory_fts_lexeme": "SELECT * FROM memory_fts_lexeme",
        "memory_vector": "SELECT memory_id FROM memory_vector",
        "memory_purge": "SELECT * FROM memory_purge",
        "exported_file": "SELECT * FROM exported_file",
    }
    for table, query in queries.items():
        by_bob, by_alice = sql(memctl, team.bob, query), sql(memctl, team.alice, query)
        assert not any(word in json.dumps(by_bob).lower() for word in private_words), table
        assert len(by_alice) > len(by_bob), table  # she sees her own rows there
    assert sql(memctl, team.bob, queries["memory_vector"]) == [{"memory_id": deploy.id}]
    # What bob can learn without seeing them: how many memories and words the search index
    # holds (bm25's statistics), and how many events the chain has (event_chain).
    assert sql(memctl, team.bob, "SELECT documents FROM memory_fts_stats") == [{"documents": 2}]
    assert sql(memctl, team.bob, "SELECT count(*) AS n FROM event_chain") == [{"n": 4}]
    # The superuser sees everything, alice's own memories included.
    assert len(sql(memctl, team.superuser, "SELECT * FROM memory")) == 3


def test_another_persons_memory_cannot_be_changed_nor_its_name_taken(
    team: Team, alice: MemoryStore, bob: MemoryStore
) -> None:
    alice.create("tabs", "user", "Alice indents with tabs", "Tabs, width four.")
    alice.create("old", "user", "An old preference", "Old.")
    alice.delete("old")
    bob.create("notes", "project", "Team notes", "Notes.")
    with pytest.raises(MemoryNotFound):
        bob.update("tabs", body="Spaces.")
    with pytest.raises(MemoryNotFound):
        bob.delete("tabs")
    with pytest.raises(NothingToRestore, match="no deleted memory has that name"):
        bob.restore("old")
    # Its name is taken, memstore's own error says so, and nothing more.
    for attempt in (
        lambda: bob.create("tabs", "project", "d", "b"),
        lambda: bob.update("notes", new_name="tabs"),
    ):
        with pytest.raises(MemoryExists) as taken:
            attempt()
        assert str(taken.value) == "a memory named 'tabs' already exists"
    with bob.transaction() as tx:
        assert tx.free_name("tabs") == "tabs-2"
    # An import past the names looked up one by one learns it as it writes.
    folder = Path(team_folder(bob, "tabs"))
    with pytest.raises(MemoryExists, match="'tabs'"):
        import_memories(bob, folder)
    assert names(bob) == ["notes"]
    # Raw SQL as bob: alice's rows are not there to change, and the owner is the database's.
    import psycopg

    with psycopg.connect(team.bob) as raw:
        assert raw.execute("UPDATE memory SET body = 'x' WHERE name = 'tabs'").rowcount == 0
        assert raw.execute("DELETE FROM memory WHERE name = 'tabs'").rowcount == 0
        raw.rollback()
        for statement in (
            "UPDATE memory SET owner = 'alice' WHERE name = 'notes'",
            "UPDATE memory SET type = 'user' WHERE name = 'notes'",
            "INSERT INTO event_chain VALUES (99, 'x', 'y')",
            "ALTER TABLE memory DISABLE ROW LEVEL SECURITY",
            "DROP POLICY memstore_private ON memory",
        ):
            with pytest.raises(database_errors()):
                raw.execute(statement)
            raw.rollback()
    assert alice.get("tabs").body == "Tabs, width four."
    report = bob.history.verify()
    assert (report.events, report.unseen) == (1, 3)  # alice's three events by hash only
    report = alice.history.verify()
    assert (report.events, report.unseen) == (4, 0)  # bob's team memory too


def team_folder(store: MemoryStore, taken: str) -> str:
    """A folder of 40 memory files (past LiveNames' one-by-one names), one named `taken`."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="rls-import-"))
    for number in range(40):
        name = taken if number == 39 else f"note-{number}"
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: Note {number}\ntype: project\n---\n\nBody {number}.\n"
        )
    return str(folder)


def test_a_memory_stays_private_or_shared(alice: MemoryStore) -> None:
    alice.create("tabs", "user", "Alice indents with tabs", "Tabs.")
    alice.create("deploy", "project", "Deploy", "docker compose up")
    for name, type_ in (("tabs", "project"), ("deploy", "user")):
        with pytest.raises(InvalidMemory, match="cannot change to or from `user`"):
            alice.update(name, type=type_)
    alice.update("deploy", type="reference")  # among the team's types, as before
    assert {m.name: m.type for m in alice.memories()} == {"deploy": "reference", "tabs": "user"}


def test_undo_and_consolidation_keep_the_two_apart(alice: MemoryStore, bob: MemoryStore) -> None:
    with alice.transaction(command="one run, both kinds") as tx:
        tx.create("tabs", "user", "Alice indents with tabs", "Tabs.")
        tx.create("deploy", "project", "Deploy", "docker compose up")
        mixed = tx.run_id
    with pytest.raises(CannotUndo, match="another person's own; only they can undo it"):
        undo_run(bob, mixed)
    assert names(bob) == ["deploy"]
    assert sorted(undo_run(alice, mixed).deleted) == ["deploy", "tabs"]
    # A team memory never absorbs a person's own, nor the other way round.
    bob.create("vim", "user", "Bob edits in vim", "Vim.")
    bob.create("editor", "project", "The team's editor settings", "EditorConfig.")
    for result_type in ("project", "user"):
        plan = ConsolidationPlan(
            merges=[
                Merge(("vim", "editor"), ProposedMemory("editor", result_type, "Editors", "Vim."))
            ],
            versions={m.name: (m.id, m.version) for m in bob.memories()},
        )
        with pytest.raises(ConsolidationRefused, match="mixing a person's own"):
            apply_plan(bob, plan, confirmed=True)
    assert names(bob) == ["editor", "vim"]


def test_two_people_writing_at_once_keep_ids_and_the_chain_whole(team: Team) -> None:
    errors: list[BaseException] = []

    def write(url: str, person: str) -> None:
        try:
            with MemoryStore(url, actor=person) as store:
                for number in range(40):
                    kind = "user" if number % 2 else "project"
                    store.create(f"{person}-{number}", kind, f"{person} {number}", "Body.")
                    if number % 5 == 4:
                        store.update(f"{person}-{number}", body="Changed.")
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [
        threading.Thread(target=write, args=(url, p))
        for url, p in ((team.alice, "alice"), (team.bob, "bob"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with MemoryStore(team.superuser) as superuser:  # sees everything
        report = superuser.history.verify()
        assert (report.events, report.unseen) == (96, 0)
        ids = [m.id for m in superuser.memories()]
        assert len(ids) == len(set(ids)) == 80
        owners = superuser_rows(team, "SELECT owner, type, count(*) FROM memory GROUP BY 1, 2")
        assert sorted(owners) == [
            (person, kind, 20) for person in ("alice", "bob") for kind in ("project", "user")
        ]
    for url in (team.alice, team.bob):
        with MemoryStore(url) as person:
            mine = person.history.verify()
            # Their own events and the team's, the other's own linked by their hash only.
            assert (mine.events, mine.unseen, mine.head) == (96 - 24, 24, report.head)
            assert len(person.memories()) == 60


def superuser_rows(team: Team, query: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(team.superuser) as connection:
        return [tuple(row) for row in connection.execute(query.encode())]


def test_one_role_for_everyone_shares_everything_as_before(team: Team) -> None:
    """A team whose people all connect as one role (here the owner role, bound by FORCE ROW
    LEVEL SECURITY like any other): every memory is that role's, so all see all."""
    with MemoryStore(team.owner, actor="one") as one, MemoryStore(team.owner, actor="two") as two:
        one.create("tabs", "user", "Tabs", "Tabs.")
        two.update("tabs", body="Tabs, width four.")
        assert names(two) == ["tabs"] and two.history.verify().unseen == 0
    with MemoryStore(team.alice) as alice:
        assert names(alice) == []  # the owner role's own memory is its own


def test_the_name_probe_leaves_nothing_behind(
    team: Team, alice: MemoryStore, bob: MemoryStore
) -> None:
    alice.create("tabs", "user", "Tabs", "Tabs.")
    with bob.transaction() as tx:
        assert "tabs" in tx._live_names() and tx.find("tabs") is None
        assert "free" not in tx._live_names()
        tx.create("free", "project", "d", "b")
    assert superuser_rows(team, "SELECT name FROM memory ORDER BY id") == [("tabs",), ("free",)]


def test_a_copy_into_the_server_as_its_owner_role(team: Team, tmp_path: Path) -> None:
    """memctl copy writes with COPY, which PostgreSQL refuses on a table whose row-level
    security binds the writer: it lifts FORCE in its own transaction and sets it again."""
    from memstore.storage.copy import copy_store

    with MemoryStore(tmp_path / "alone.db") as alone:
        alone.create("tabs", "user", "Tabs", "Tabs, width four.")
        alone.create("deploy", "project", "Deploy", "docker compose up")
        report = copy_store(alone, team.owner, command="memctl copy --to ...")
    with MemoryStore(team.owner) as owner:
        assert names(owner) == ["deploy", "tabs"]  # copied memories are the copier's
        assert owner.history.verify().head == report.head
    with MemoryStore(team.alice) as alice:
        assert names(alice) == ["deploy"]
        assert alice.history.verify().unseen == 1
    forced = superuser_rows(
        team, "SELECT count(*) FROM pg_class WHERE relrowsecurity AND relforcerowsecurity"
    )
    assert forced == [(9,)]  # 0008's eight tables and memory_fts_lexeme (0009)
