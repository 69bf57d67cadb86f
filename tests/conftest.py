"""Shared fixtures: a real store in a temporary folder, and the real memctl, in this process
or in a process of its own."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import memstore
from memstore.storage.postgres.namespace import with_namespace
from memstore.storage.postgres.server import server_target
from memstore.storage.sqlite.reader import register_functions
from memstore.storage.store import MemoryStore
from tests.anthropic_server import AnthropicServer, serve
from tests.in_process import run_memctl_in_process
from tests.postgres_cluster import Cluster, server_binaries, unavailable_reason

if TYPE_CHECKING:
    from memstore.llm.client import ModelClient

MemctlRunner = Callable[..., subprocess.CompletedProcess[str]]

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTION = "agent-memstore"
# CI sets it: the suite must run against a wheel installed non-editable, as users get it.
INSTALLED_VARIABLE = "MEMSTORE_TEST_INSTALLED"


def installed_kind() -> str:
    """How this environment has the distribution: "wheel", "editable" or "absent"."""
    try:
        direct_url = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return "absent"
    editable = direct_url and json.loads(direct_url).get("dir_info", {}).get("editable")
    return "editable" if editable else "wheel"


def _tested_code_problem() -> str | None:
    """Why the memstore under test is not what this environment installed, or None."""
    imported = Path(memstore.__file__).resolve()
    # The source package, not the checkout: CI's venv (.venv) lies inside the checkout.
    from_checkout = imported.is_relative_to(ROOT / "memstore")
    kind = installed_kind()
    if os.environ.get(INSTALLED_VARIABLE) == "1" and (from_checkout or kind != "wheel"):
        return f"{INSTALLED_VARIABLE}=1 but memstore is imported from {imported} ({kind})"
    if from_checkout and kind == "wheel":
        # e.g. `python -m pytest`, which puts the checkout first on sys.path: a module
        # missing from the installed wheel would go unnoticed.
        return f"memstore is imported from the checkout ({imported}), not from the wheel"
    return None


def pytest_configure(config: pytest.Config) -> None:
    problem = _tested_code_problem()
    if problem is not None:
        raise pytest.UsageError(f"{problem}; run `pytest` from the venv (see README)")
    # Nor may a `python -c` or `python -m` subprocess started in the checkout import it.
    os.environ["PYTHONSAFEPATH"] = "1"


@pytest.fixture(autouse=True, scope="session")
def _workspaces_inside_the_test_folders(tmp_path_factory: pytest.TempPathFactory) -> None:
    """memctl finds its workspace upward from the current folder: a test's must never be a
    stray /tmp/.memory. Every memctl a test starts inherits the ceiling."""
    os.environ["MEMSTORE_CEILING_DIRECTORIES"] = str(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _semantic_recall_only_where_asked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memctl, in a subprocess or in-process, recalls without semantic recall unless a test
    is marked `semantic`: the keyword path's tests pin its exact choices, and a model in the
    user's cache must not change them. This is the user's switch; the library itself
    compares in meaning only when given a SemanticIndex."""
    if request.node.get_closest_marker("semantic") is None:
        monkeypatch.setenv("MEMSTORE_SEMANTIC", "off")


@pytest.fixture
def semantic_model() -> Path:
    """The semantic encoder's folder, for tests marked `semantic`. Without the `semantic`
    extra they are skipped, unless MEMSTORE_REQUIRE_SEMANTIC=1 (CI sets it; its dev extra
    installs the encoder): there a missing encoder fails them."""
    from memstore.recall.model_files import model_folder
    from memstore.recall.vectors import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("MEMSTORE_REQUIRE_SEMANTIC") == "1":
            pytest.fail(f"semantic recall is required but unavailable: {reason}")
        pytest.skip(f"semantic recall unavailable: {reason}")
    return model_folder()


# What `pytest -m "not slow"` leaves out, for a quick loop: the tests whose point is the
# costliest process boundary (SIGKILL at random moments, a wheel built and installed, many
# writers and a server restart, real terminals, a real browser). CI runs everything.
SLOW_MODULES = frozenset(
    {
        "test_crash.py",
        "test_postgres_stress.py",
        "test_packaging.py",
        "test_concurrency.py",
        "test_test_servers.py",
        "test_ui_browser.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        on_a_terminal = "terminal" in getattr(item, "fixturenames", ())
        if item.path.name in SLOW_MODULES or on_a_terminal:
            item.add_marker(pytest.mark.slow)


ENGINES = ("sqlite", "postgresql")
# CI sets it: there, the PostgreSQL tests must run, not skip (.ci/run installs the server).
REQUIRE_POSTGRES_VARIABLE = "MEMSTORE_REQUIRE_POSTGRES"
TEMPLATE_DATABASE = "memstore_template"
# The namespace of the `database` fixture's server stores.
TEST_NAMESPACE = "test.example.org/memstore/tests"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test module marked `both_engines` runs each of its tests that uses the `database`
    (or `store`) fixture once per engine."""
    if "database" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_engines"
    ):
        metafunc.parametrize("engine", ENGINES, indirect=True)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    """The engine under test: SQLite, unless the module runs on both (`both_engines`)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster for the session (tests/postgres_cluster.py), with a
    migrated template database that each test's database is copied from. Skipped where
    PostgreSQL cannot run, unless MEMSTORE_REQUIRE_POSTGRES=1: there it fails."""
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get(REQUIRE_POSTGRES_VARIABLE) == "1":
            pytest.fail(f"PostgreSQL is required but unavailable: {reason}")
        pytest.skip(f"PostgreSQL unavailable: {reason}")
    binaries = server_binaries()
    assert binaries is not None
    cluster = Cluster(binaries)
    try:
        cluster.execute(f"CREATE DATABASE {TEMPLATE_DATABASE}")
        # Migrated once, copied per test: the default store and the test namespace's.
        MemoryStore(cluster.url(TEMPLATE_DATABASE)).close()
        MemoryStore(with_namespace(cluster.url(TEMPLATE_DATABASE), TEST_NAMESPACE)).close()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> str:
    """A fresh, migrated database of its own on the session's cluster."""
    return postgres_cluster.database(template=TEMPLATE_DATABASE)


@pytest.fixture
def database(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """Where the test's store lives: a file for SQLite, a fresh database's URL for
    PostgreSQL."""
    if engine == "postgresql":
        # In a project namespace (a schema of its own), as a workspace with a git remote is;
        # tests/test_postgres.py's own tests use the default store.
        return with_namespace(str(request.getfixturevalue("postgres_url")), TEST_NAMESPACE)
    return tmp_path / "memstore.db"


@pytest.fixture
def workspace_database(database: Path | str, tmp_path: Path) -> Path | str:
    """The store of memctl run in tmp_path (the `memctl` fixture): the workspace's own
    .memory/memstore.db on SQLite, the test's server database on PostgreSQL."""
    return database if isinstance(database, str) else tmp_path / ".memory" / "memstore.db"


@pytest.fixture
def database_env(workspace_database: Path | str) -> dict[str, str]:
    """memctl's environment for that store: MEMSTORE_DB names the server; nothing on SQLite,
    where memctl finds the workspace's database itself."""
    if isinstance(workspace_database, str):
        return {"MEMSTORE_DB": workspace_database}
    return {}


@pytest.fixture
def store(database: Path | str) -> Iterator[MemoryStore]:
    with MemoryStore(database, actor="test") as opened:
        yield opened


@contextmanager
def raw_sql(store: MemoryStore) -> Iterator[Any]:
    """A DBAPI connection of the store's database outside memstore (autocommit), as a
    person with a SQL client has: sqlite3's, or psycopg's. Its statements take no
    parameters here (the two mark them differently)."""
    if store.url is None:
        assert store.path is not None
        connection = sqlite3.connect(store.path, isolation_level=None)
        register_functions(connection)  # the FTS triggers segment text with it
        try:
            yield connection
        finally:
            connection.close()
        return
    import psycopg

    assert store.url is not None
    bare, schema = server_target(store.url)
    with psycopg.connect(bare, autocommit=True) as connection:
        if schema is not None:
            connection.execute(f"SET search_path = {schema}")
        yield connection


def stored_text(store: MemoryStore) -> str:
    """Every row of every table of the store's database as text, on either engine: what a
    secret must never be found in (sqlite3's dump; on PostgreSQL each row of the current
    schema's tables, as the server prints a row)."""
    if store.url is None:
        assert store.path is not None
        return "\n".join(sqlite3.connect(store.path).iterdump())
    with raw_sql(store) as connection:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        ]
        return "\n".join(
            str(row)
            for table in tables
            for (row,) in connection.execute(f'SELECT t::text FROM "{table}" AS t')
        )


def database_errors() -> tuple[type[Exception], ...]:
    """What a refused statement raises on either engine's DBAPI."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


# Variables a test's memctl must not inherit from the person running the tests.
_MEMCTL_ENVIRONMENT_LEFT_OUT = (
    "MEMSTORE_DB",
    "MEMSTORE_NAMESPACE",
    "MEMCTL_DB",
    "MEMCTL_CEILING_DIRECTORIES",
)


def memctl_environment(env: dict[str, str] | None) -> dict[str, str]:
    """The environment a test's memctl runs in: the test's, plain output, wide tables."""
    environment = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    for variable in _MEMCTL_ENVIRONMENT_LEFT_OUT:
        environment.pop(variable, None)
    environment.update(env or {})
    return environment


@pytest.fixture
def memctl_process(tmp_path: Path) -> MemctlRunner:
    """Run `memctl ARGS` in tmp_path as a process of its own, as a user would: for tests of
    what only a process shows (start-up, imports, signals, the installed console script)."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memctl", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            cwd=cwd or tmp_path,
            env=memctl_environment(env),
            timeout=120,
        )

    return run


@pytest.fixture
def memctl(tmp_path: Path) -> MemctlRunner:
    """Run `memctl ARGS` in tmp_path (so .memory/ lands there), in this process: the same
    entry point, command line, environment, folder and standard streams a process would
    have (tests/in_process.py), without paying Python's and SQLAlchemy's start-up per call."""

    def run(
        *args: str,
        input: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return run_memctl_in_process(
            list(args), input=input or "", env=memctl_environment(env), cwd=cwd or tmp_path
        )

    return run


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    """A scripted Anthropic-compatible server on 127.0.0.1 (see tests/anthropic_server.py)."""
    yield from serve()


@pytest.fixture
def client(anthropic_server: AnthropicServer) -> ModelClient:
    """The real anthropic client, pointed at the scripted server."""
    from memstore.llm.client import make_client

    made = make_client(api_key="test-key", base_url=anthropic_server.url)
    assert made is not None
    return made
