"""Project namespaces on one PostgreSQL server (storage/postgres/namespace.py, docs/postgresql.md
"Projects"): each project's store is a schema of its own, chosen by the URL's namespace=,
else MEMSTORE_NAMESPACE, else the workspace's git remote; a workspace sees its own only."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from memstore.errors import InvalidSettings, StoreUnavailable
from memstore.storage.postgres.engine import grant_application_role
from memstore.storage.postgres.namespace import (
    checked_name,
    git_remote,
    remote_name,
    resolve,
    schema_of,
    split_url,
    with_namespace,
)
from memstore.storage.run_lock import run_alone
from memstore.storage.store import MemoryStore
from memstore.storage.workspace import locate
from tests.conftest import TEST_NAMESPACE, MemctlRunner
from tests.postgres_cluster import Cluster
from tests.test_hook import prompt, run_hook

APP = "github.com/acme/app"
OTHER = "gitlab.example.org/team/other"


# -- naming, without a server ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("git@github.com:acme/app.git", APP),
        ("git@github.com:acme/app", APP),
        ("https://github.com/acme/app.git", APP),
        ("https://github.com/acme/app/", APP),
        ("https://user:secret@GitHub.com:8443/acme/app.git", APP),
        ("ssh://git@github.com:22/acme/app.git", APP),
        ("ssh://git@gitlab.example.org/team/other.git", OTHER),
        ("/srv/git/app.git", None),  # a local path: no host, nothing shared
        ("../app", None),
        ("file:///srv/git/app.git", None),
        ("https://github.com/", None),
    ],
)
def test_a_remote_names_the_repository_the_same_from_every_clone(
    url: str, name: str | None
) -> None:
    assert remote_name(url) == name


def test_a_schema_is_readable_short_and_unique() -> None:
    schema = schema_of(APP)
    assert schema.startswith("ms_app_") and len(schema) == len("ms_app_") + 8
    assert schema_of(APP) == schema  # stable: every machine finds the same one
    assert schema_of("github.com/acme/App") != schema  # case is kept apart
    assert schema_of("github.com/other/app") != schema
    long = schema_of("h/" + "x" * 190)
    assert len(long) <= 63 and long.replace("_", "").isalnum()
    assert schema_of("h/.-._").startswith("ms_ns_")


@pytest.mark.parametrize(
    "bad", ["", "../x", "a b", "x;drop schema public", "it's", "-x", "x" * 201, "名字", "a\nb"]
)
def test_a_bad_namespace_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(InvalidSettings, match="is no namespace name"):
        checked_name(bad)


def test_the_url_carries_the_namespace_and_libpq_never_sees_it() -> None:
    url = "postgresql://team@db.example.org/memstore?sslmode=require"
    named = with_namespace(url, APP)
    assert named == url + "&namespace=github.com/acme/app"
    assert split_url(named) == (url, APP)
    assert with_namespace(with_namespace(named, OTHER), APP) == named  # replaced, not added
    assert split_url(url) == (url, None)
    with pytest.raises(InvalidSettings, match="more than once"):
        split_url(named + "&namespace=x")
    with pytest.raises(InvalidSettings, match="no namespace name"):
        split_url(url + "&namespace=a%20b")


def git_repository(folder: Path, *remotes: tuple[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for name, url in remotes:
        subprocess.run(["git", "-C", str(folder), "remote", "add", name, url], check=True)
    return folder


def test_the_namespace_comes_from_origin_else_the_first_remote(tmp_path: Path) -> None:
    both = git_repository(
        tmp_path / "both", ("upstream", "https://github.com/up/app"), ("origin", f"git@{APP}")
    )
    assert git_remote(both) is None  # "git@github.com/acme/app": no scp ':' and no scheme
    origin = git_repository(
        tmp_path / "origin",
        ("upstream", "https://github.com/up/app"),
        ("origin", "git@github.com:acme/app.git"),
    )
    assert git_remote(origin) == APP
    only = git_repository(tmp_path / "only", ("upstream", "https://github.com/up/app"))
    assert git_remote(only) == "github.com/up/app"
    assert git_remote(git_repository(tmp_path / "none")) is None
    assert git_remote(tmp_path / "no-repository") is None


def test_a_worktree_reads_its_repository_s_remote(tmp_path: Path) -> None:
    main = git_repository(tmp_path / "main", ("origin", "git@github.com:acme/app.git"))
    subprocess.run(
        ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
         "--allow-empty", "-m", "first"], check=True,
    )  # fmt: skip
    subprocess.run(
        ["git", "-C", str(main), "worktree", "add", "-q", str(tmp_path / "wt")], check=True
    )
    assert (tmp_path / "wt" / ".git").is_file()
    assert git_remote(tmp_path / "wt") == APP


def test_the_url_s_namespace_wins_then_the_setting_then_the_remote(tmp_path: Path) -> None:
    root = git_repository(tmp_path / "w", ("origin", "git@github.com:acme/app.git"))
    url = "postgresql://db/memstore"
    assert resolve(url, None, root)[1].name == APP
    assert resolve(url, "mine", root)[1].name == "mine"
    assert resolve(with_namespace(url, "in-url"), "mine", root)[1].name == "in-url"
    assert resolve(url, None, tmp_path / "plain")[1].name is None
    # Every door finds it alike: the URL locate gives names the namespace.
    found, _ = locate(url, root / "src", namespace=None)
    assert found == with_namespace(url, APP)
    assert locate(tmp_path / "x.db", root)[0] == tmp_path / "x.db"  # a file has none


# -- on a server -------------------------------------------------------------------------------


def schemas(cluster: Cluster, url: str) -> list[str]:
    with MemoryStore(url) as store, store.engine.connect() as connection:
        return list(
            connection.exec_driver_sql(
                "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'ms_') ORDER BY 1"
            ).scalars()
        )


def add(store: MemoryStore, name: str, body: str, type: str = "project") -> None:
    with store.transaction(actor="test", command=f"add {name}") as tx:
        tx.create(name=name, type=type, description=f"about {name}", body=body)


def test_two_projects_on_one_server_see_only_their_own(
    postgres_url: str, postgres_cluster: Cluster
) -> None:
    with (
        MemoryStore(with_namespace(postgres_url, APP)) as app,
        MemoryStore(with_namespace(postgres_url, OTHER)) as other,
        MemoryStore(postgres_url) as default,
    ):
        add(app, "deploy", "deploy with make release on fridays")
        add(other, "deploy", "deploy by merging to main")  # the same name: another project
        add(default, "old", "a memory of the store from before namespaces")
        assert [m.body for m in app.memories()] == ["deploy with make release on fridays"]
        assert [m.body for m in other.memories()] == ["deploy by merging to main"]
        assert [m.name for m in default.memories()] == ["old"]
        assert [hit.memory.name for hit in app.search("fridays")] == ["deploy"]
        assert other.search("fridays") == []
        # Each has its own history, numbered and chained from its start.
        for store in (app, other):
            assert store.history.verify().events == 1  # raises HistoryTampered when broken
            assert [e.memory_id for e in store.history.events()] == [1]
    made = set(schemas(postgres_cluster, postgres_url)) - {schema_of(TEST_NAMESPACE)}
    assert made == {schema_of(APP), schema_of(OTHER)}  # beside the template's test namespace


def test_memctl_in_a_clone_uses_its_remote_s_namespace(
    postgres_url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    app = git_repository(tmp_path / "app", ("origin", "git@github.com:acme/app.git"))
    clone = git_repository(tmp_path / "clone", ("origin", "https://github.com/acme/app"))
    other = git_repository(tmp_path / "other", ("origin", f"https://{OTHER}.git"))
    env = {"MEMSTORE_DB": postgres_url}

    done = memctl(
        "add", "style", "-t", "feedback", "-d", "tabs", "-b", "use tabs", cwd=app, env=env
    )
    assert done.returncode == 0, done.stderr
    listed = memctl("list", "--json", cwd=clone, env=env)  # another clone, another machine
    assert [m["name"] for m in json.loads(listed.stdout)] == ["style"]
    assert json.loads(memctl("list", "--json", cwd=other, env=env).stdout) == []
    assert memctl("search", "tabs", cwd=other, env=env).stdout.strip() == ""

    where = memctl("path", cwd=app, env=env)
    assert where.stdout.strip() == with_namespace(postgres_url, APP)
    assert f"namespace: {APP} (the workspace's git remote); schema {schema_of(APP)}" in where.stderr

    # export writes the project's .memory/ from its namespace
    assert memctl("export", cwd=clone, env=env).returncode == 0
    assert (clone / ".memory" / "style.md").is_file()
    assert memctl("export", cwd=other, env=env).returncode == 0
    assert not (other / ".memory" / "style.md").exists()

    # memctl sql reads the namespace's tables
    rows = memctl("sql", "--json", "SELECT name FROM live_memory", cwd=clone, env=env)
    assert json.loads(rows.stdout) == [{"name": "style"}]
    assert json.loads(
        memctl("sql", "--json", "SELECT count(*) AS n FROM memory", cwd=other, env=env).stdout
    ) == [{"n": 0}]


def test_the_setting_and_the_url_choose_another_namespace(
    postgres_url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    app = git_repository(tmp_path / "app", ("origin", "git@github.com:acme/app.git"))
    plain = tmp_path / "plain"
    plain.mkdir()
    env = {"MEMSTORE_DB": postgres_url}
    chosen = {**env, "MEMSTORE_NAMESPACE": "acme-shared"}
    assert (
        memctl("add", "a", "-t", "project", "-d", "d", "-b", "b", cwd=plain, env=chosen).returncode
        == 0
    )
    # the setting wins over the remote
    assert [
        m["name"] for m in json.loads(memctl("list", "--json", cwd=app, env=chosen).stdout)
    ] == ["a"]
    assert json.loads(memctl("list", "--json", cwd=app, env=env).stdout) == []
    # the URL's own wins over the setting
    in_url = {"MEMSTORE_DB": with_namespace(postgres_url, APP), "MEMSTORE_NAMESPACE": "acme-shared"}
    assert json.loads(memctl("list", "--json", cwd=plain, env=in_url).stdout) == []
    # an empty one is the default store, from a clone whose remote names another
    assert (
        memctl("add", "old", "-t", "project", "-d", "d", "-b", "b", cwd=plain, env=env).returncode
        == 0
    )
    default = {"MEMSTORE_DB": postgres_url + "&namespace="}
    listed = memctl("list", "--json", cwd=app, env=default)
    assert [m["name"] for m in json.loads(listed.stdout)] == ["old"]
    assert (
        "namespace: (none) (given in the database URL); schema public"
        in memctl("path", cwd=app, env=default).stderr
    )
    where = memctl("path", cwd=plain, env=env)
    assert "namespace: (none) (the server's default store: no git remote" in where.stderr
    assert "schema public" in where.stderr

    bad = memctl("list", cwd=plain, env={**env, "MEMSTORE_NAMESPACE": "a b"})
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "is no namespace name" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_the_hook_recalls_from_the_prompt_s_project(postgres_url: str, tmp_path: Path) -> None:
    app = git_repository(tmp_path / "app", ("origin", "git@github.com:acme/app.git"))
    other = git_repository(tmp_path / "other", ("origin", f"https://{OTHER}"))
    with MemoryStore(with_namespace(postgres_url, APP)) as store:
        add(store, "release-steps", "release: bump the version, tag it, push the tag")
    env = {"MEMSTORE_DB": postgres_url}
    found = run_hook(prompt(app, "how do I release and tag the version?"), env=env, cwd=app)
    assert found.returncode == 0, found.stderr
    assert "release-steps" in found.stdout.decode()
    missed = run_hook(prompt(other, "how do I release and tag the version?"), env=env, cwd=other)
    assert missed.returncode == 0 and missed.stdout == b""


def test_copy_from_a_file_joins_the_workspace_s_namespace(
    postgres_url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    app = git_repository(tmp_path / "app", ("origin", "git@github.com:acme/app.git"))
    assert (
        memctl("add", "alone", "-t", "project", "-d", "d", "-b", "from my file", cwd=app).returncode
        == 0
    )
    copied = memctl("copy", "--to", postgres_url, cwd=app)
    assert copied.returncode == 0, copied.stderr
    assert f"namespace={APP}" in copied.stderr
    with MemoryStore(with_namespace(postgres_url, APP)) as store:
        assert [m.body for m in store.memories()] == ["from my file"]
        assert store.history.verify().events == 1
    with MemoryStore(postgres_url) as default:
        assert default.memories() == []
    # ... and back out of the namespace into a file
    back = memctl("--db", postgres_url, "copy", "--to", str(tmp_path / "back.db"), cwd=app)
    assert back.returncode == 0, back.stderr
    with MemoryStore(tmp_path / "back.db") as store:
        assert [m.name for m in store.memories()] == ["alone"]


def test_writers_of_two_projects_do_not_wait_for_each_other(postgres_url: str) -> None:
    with (
        MemoryStore(with_namespace(postgres_url, APP)) as app,
        MemoryStore(with_namespace(postgres_url, OTHER)) as other,
        MemoryStore(with_namespace(postgres_url, APP)) as app_again,
    ):
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with app.transaction(actor="test", command="slow") as tx:
                tx.create(name="slow", type="project", description="d", body="b")
                holding.set()
                release.wait(120)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            assert holding.wait(30)
            started = time.monotonic()
            add(other, "quick", "another project writes at once")
            # Not held up by the other project's writer, which holds on until released:
            # under the 15 s a writer waits for a lock (a busy machine may take seconds).
            assert time.monotonic() - started < 10
            blocked = threading.Thread(target=add, args=(app_again, "after", "waits its turn"))
            blocked.start()
            blocked.join(1.0)
            assert blocked.is_alive()  # the same project's writer waits for the first
        finally:
            release.set()
            thread.join()
        blocked.join(30)
        assert sorted(m.name for m in app.memories()) == ["after", "slow"]
        # and each project's consolidation is its own
        with run_alone(app, "consolidation") as first, run_alone(other, "consolidation") as second:
            assert first and second
            with run_alone(app_again, "consolidation") as third:
                assert not third


def test_an_application_role_reaches_only_the_namespaces_granted_to_it(
    postgres_cluster: Cluster, postgres_url: str
) -> None:
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ns_agent') THEN"
        " CREATE ROLE ns_agent LOGIN; END IF; END $$"
    )
    with MemoryStore(with_namespace(postgres_url, APP)) as app:
        add(app, "shared", "for the agents")
        grant_application_role(app.engine, "ns_agent")
    with MemoryStore(with_namespace(postgres_url, OTHER)) as other:
        add(other, "secret-plan", "not for the app's agents")
    agent = postgres_cluster.url(name, user="ns_agent")
    with MemoryStore(with_namespace(agent, APP)) as store:
        assert [m.name for m in store.memories()] == ["shared"]
        add(store, "learned", "the agent writes here")
    with pytest.raises(
        StoreUnavailable,
        match=re.escape(f"this role may not use the namespace {OTHER} on"),
    ) as refused:
        MemoryStore(with_namespace(agent, OTHER)).memories()
    assert "\n" not in str(refused.value)
    # A namespace no one has opened yet: the agent may not create it, and says so.
    with pytest.raises(StoreUnavailable, match=r"has no store on .* yet, and this role may not"):
        MemoryStore(with_namespace(agent, "github.com/acme/new"))


def test_memctl_grant_lets_an_application_role_use_the_project_s_store(
    postgres_cluster: Cluster, postgres_url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    """README's "join a team": the owner copies the store in, then grants the people's role
    with one memctl command; without it their memctl is refused in one line."""
    name = Cluster.name_of(postgres_url)
    postgres_cluster.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'grant_agent') THEN"
        " CREATE ROLE grant_agent LOGIN; END IF; END $$"
    )
    app = git_repository(tmp_path / "app", ("origin", "git@github.com:acme/app.git"))
    owner = {"MEMSTORE_DB": postgres_url}
    agent = {"MEMSTORE_DB": postgres_cluster.url(name, user="grant_agent")}
    added = memctl("add", "style", "-t", "feedback", "-d", "tabs", "-b", "tabs", cwd=app, env=owner)
    assert added.returncode == 0, added.stderr

    refused = memctl("list", cwd=app, env=agent)
    assert refused.returncode == 1 and "may not use the namespace" in refused.stderr
    granted = memctl("grant", "grant_agent", cwd=app, env=owner)
    assert granted.returncode == 0, granted.stderr
    assert "granted grant_agent" in granted.stderr
    listed = memctl("list", "--json", cwd=app, env=agent)
    assert [m["name"] for m in json.loads(listed.stdout)] == ["style"], listed.stderr

    # A role name memstore does not grant to, and a SQLite store: one line each.
    bad = memctl("grant", 'x"; DROP TABLE memory; --', cwd=app, env=owner)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "no role name" in bad.stderr
    local = memctl("grant", "grant_agent", cwd=app)
    assert local.returncode == 1 and "PostgreSQL" in local.stderr
