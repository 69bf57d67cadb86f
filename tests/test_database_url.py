"""A --db or MEMSTORE_DB value as memstore reads it (settings.database_location): a file's
path, a postgresql:// URL, or refused in one line. A password in the URL, the user's or a
`password=` parameter's, never reaches a message; a URL memstore cannot open is one line on
stderr, not a traceback; and a URL of another scheme is no file's path. No server is needed:
the URLs name one that is not there (docs/postgresql.md, "Pointing memctl at a server")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstore.errors import InvalidSettings, StoreUnavailable
from memstore.integrations.claude_hook import respond
from memstore.settings import Settings, checked_url, database_location, shown_url
from memstore.storage.postgres.server import scrubbed
from memstore.storage.reader import StoreReader
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner

SECRET = "s3cretpw"
# A socket folder nobody listens in: libpq fails at once.
NO_SOCKET = "/nonexistent-memstore-socket"
WITH_PARAMETER = f"postgresql://alice@/memstore?host={NO_SOCKET}&port=5499&password={SECRET}"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (WITH_PARAMETER, f"postgresql://alice@/memstore?host={NO_SOCKET}&port=5499&password=***"),
        (
            "postgresql://a@h/db?PassWord=x1&sslpassword=x2",
            "postgresql://a@h/db?PassWord=***&sslpassword=***",
        ),
        (
            "postgresql://a@h/db?p%61ssword=x1&passfile=/p",
            "postgresql://a@h/db?p%61ssword=***&passfile=/p",
        ),
        ("postgresql://a@h/db?port=1?password=x1", "postgresql://a@h/db?port=1?password=***"),
        ("postgresql://a:x1@h/db?password=x2", "postgresql://a:***@h/db?password=***"),
        # A password with an unescaped ? or #: all of it, as libpq reads it.
        ("postgresql://a:x?1#2@h/db", "postgresql://a:***@h/db"),
        ("postgresql://a@h/db?sslmode=require", "postgresql://a@h/db?sslmode=require"),
        ("mysql://a:x1@h/db", "mysql://a:***@h/db"),
    ],
)
def test_shown_url_masks_every_password(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_a_drivers_message_is_scrubbed_of_the_password() -> None:
    # libpq quotes the token it cannot decode, and the whole URI it cannot parse.
    url = "postgresql://a@h/db?password=se%zzcret"
    said = scrubbed('invalid percent-encoded token: "se%zzcret"', url)
    assert "cret" not in said and "***" in said
    assert scrubbed(f'in URI: "{WITH_PARAMETER}"', WITH_PARAMETER) == (
        f'in URI: "{shown_url(WITH_PARAMETER)}"'
    )


def test_a_password_parameter_never_reaches_memctls_output(memctl: MemctlRunner) -> None:
    path = memctl("--db", WITH_PARAMETER, "path")
    assert path.returncode == 0 and path.stdout.strip() == shown_url(WITH_PARAMETER)
    for args in (["list"], ["add", "n", "-t", "user", "-d", "d", "-b", "b"]):
        done = memctl("--db", WITH_PARAMETER, *args)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith("memctl: error: cannot use the PostgreSQL database")
        assert "password=***" in line
    for done in (path, memctl("path", env={"MEMSTORE_DB": WITH_PARAMETER})):
        assert SECRET not in done.stdout + done.stderr


def test_libpqs_echo_of_a_password_is_masked(memctl: MemctlRunner, tmp_path: Path) -> None:
    # libpq refuses the %zz and quotes the token: the hook's connection (psycopg's own) and
    # the library's (SQLAlchemy's) both say so without it.
    url = f"postgresql://alice@/memstore?host={NO_SOCKET}&password=se%zzcret"
    event = {"hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path), "prompt": "docker"}
    hook = memctl("--db", url, "hook", input=json.dumps(event))
    assert hook.returncode == 0 and hook.stdout == ""
    (line,) = hook.stderr.splitlines()
    assert "percent-encoded" in line and "zzcret" not in line
    with pytest.raises(StoreUnavailable) as raised:
        StoreReader(url)
    assert "zzcret" not in str(raised.value)
    with pytest.raises(StoreUnavailable) as raised:
        MemoryStore(url)
    assert "zzcret" not in str(raised.value)


MALFORMED = [
    ("postgresql://alice@localhost:abc/memstore", "the port 'abc'"),
    (f"postgresql://alice@/memstore?host={NO_SOCKET}&port=abc", "the port 'abc'"),
    ("postgres://alice:pw@localhost:99999/memstore", "the port '99999'"),
    ("postgresql://alice@localhost:/memstore", "the port ''"),
    (f"postgresql://alice@/memstore?host={NO_SOCKET}&port=5499?namespace=acme-x", "joined by '&'"),
    ("postgresql://alice@h1:5432,h2:5433/memstore", "host=HOST1:PORT1&host=HOST2:PORT2"),
    ("postgresql://alice@[::1/memstore", "no host"),
]


@pytest.mark.parametrize(("url", "said"), MALFORMED)
def test_a_malformed_url_is_one_line_and_exit_1(
    url: str, said: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    with_password = url + ("&" if "?" in url else "?") + f"password={SECRET}"
    for done in (
        memctl("--db", with_password, "list"),
        memctl("copy", "--to", with_password),  # said before the source is looked for
        memctl("list", env={"MEMSTORE_DB": with_password}),
    ):
        assert done.returncode == 1 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith("memctl: error: ") and said in line, line
        assert SECRET not in line and "password=***" in line
    assert list(tmp_path.iterdir()) == []


def test_what_sqlalchemy_refuses_beyond_those_is_one_line_too(memctl: MemctlRunner) -> None:
    url = f"postgresql://alice@/memstore?host=h1,h2&port=1,2,3&password={SECRET}"
    done = memctl("--db", url, "list")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("memctl: error: the database URL") and "cannot be read" in line
    assert SECRET not in line


def test_a_second_question_mark_says_to_use_an_ampersand(memctl: MemctlRunner) -> None:
    base = f"postgresql://alice@/memstore?host={NO_SOCKET}&port=5499"
    done = memctl("--db", base, "copy", "--to", f"{base}?namespace=acme-x")
    (line,) = done.stderr.splitlines()
    assert done.returncode == 1 and "second '?'" in line and "'&'" in line


OTHER_SCHEMES = [
    "postgresq://alice@db.example.org/memstore",
    "mysql://u@h/db",
    "sqlite:///tmp/x.db",
    "file:///tmp/x.db",
]


@pytest.mark.parametrize("url", OTHER_SCHEMES)
def test_another_scheme_is_refused_not_taken_for_a_path(
    url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    for done in (
        memctl("--db", url, "add", "q", "-t", "user", "-d", "q", "-b", "q"),
        memctl("add", "q", "-t", "user", "-d", "q", "-b", "q", env={"MEMSTORE_DB": url}),
        memctl("--db", str(tmp_path / "x.db"), "copy", "--to", url),
    ):
        assert done.returncode == 1 and done.stdout == "", done
        (line,) = done.stderr.splitlines()
        assert line.startswith("memctl: error: ") and "postgresql://" in line, line
        assert "neither a file's path nor a PostgreSQL URL" in line
    assert list(tmp_path.iterdir()) == []  # no postgresq:/ folder
    event = {"hook_event_name": "SessionStart", "cwd": str(tmp_path)}
    for hook in (
        memctl("--db", url, "hook", input=json.dumps(event)),
        memctl("hook", input=json.dumps(event), env={"MEMSTORE_DB": url}),
    ):
        assert hook.returncode == 0 and hook.stdout == ""  # a hook never stops the prompt
        (line,) = hook.stderr.splitlines()
        assert line.startswith("memctl: hook: ") and "neither a file's path" in line


@pytest.mark.parametrize("url", ["postgresql://u@h:notaport/db", "mysql://x/y"])
def test_a_bad_memstore_db_stops_only_what_opens_the_database(
    url: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    env = {"MEMSTORE_DB": url}
    for args in (
        ["--help"],
        ["list", "--help"],
        ["add", "-h"],
        ["semantic", "status", "--help"],
        ["--db", url, "search", "--help"],
    ):
        shown = memctl(*args, env=env)
        assert shown.returncode == 0 and shown.stdout.startswith("Usage: memctl"), (args, shown)
        assert shown.stderr == ""
    version = memctl("--version", env=env)
    assert version.returncode == 0 and version.stdout.startswith("memctl ")
    for args in (["list"], ["add", "q", "-t", "user", "-d", "q", "-b", "q"], ["path"]):
        done = memctl(*args, env=env)
        assert done.returncode == 1 and done.stdout == "", (args, done)
        (line,) = done.stderr.splitlines()
        assert line.startswith("memctl: error: MEMSTORE_DB: the database"), line
    # A --db given wins over it, before or after the command name.
    given = memctl("add", "q", "-t", "user", "-d", "q", "-b", "q", "--db", "m.db", env=env)
    assert given.returncode == 0, given.stderr
    assert memctl("--db", "m.db", "list", env=env).stdout.startswith("NAME")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]


def test_a_sqlite_url_is_refused_with_a_hint(memctl: MemctlRunner) -> None:
    done = memctl("--db", "sqlite:///tmp/x.db", "list")
    assert "give the file's path, not a sqlite:// URL" in done.stderr


def test_the_python_api_reads_a_location_as_memctl_does(tmp_path: Path) -> None:
    for url in ("postgresq://alice@db.example.org/memstore", "postgresql://a@h:abc/db"):
        with pytest.raises(InvalidSettings):
            MemoryStore(url)
        with pytest.raises(InvalidSettings):
            StoreReader(url)
        with pytest.raises(InvalidSettings):
            database_location(url)
        settings = Settings.from_environment({"MEMSTORE_DB": url})  # read when wanted
        with pytest.raises(InvalidSettings, match=r"^MEMSTORE_DB: "):
            _ = settings.db
        event = {"hook_event_name": "SessionStart", "cwd": str(tmp_path)}
        assert respond(json.dumps(event), db=url) == ""
    assert list(tmp_path.iterdir()) == []
    # A str that is a path is a path, as before.
    with MemoryStore(str(tmp_path / "m.db")) as store:
        assert store.path == tmp_path / "m.db" and store.url is None


@pytest.mark.parametrize("path", ["a:b/m.db", "x:/m.db", "C://m.db", "odd:name.db"])
def test_a_path_with_a_colon_is_still_a_path(
    path: str, memctl: MemctlRunner, tmp_path: Path
) -> None:
    assert database_location(path) == Path(path)
    done = memctl("--db", path, "add", "q", "-t", "user", "-d", "q", "-b", "q")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / path).is_file()


def test_a_good_url_is_kept_as_typed() -> None:
    for url in (
        "postgresql://alice@db.example.org/memstore",
        "POSTGRES://alice:pw@[::1]:5432/memstore?sslmode=require",
        "postgresql+psycopg://alice@/memstore?host=/run/postgresql&port=5433",
        "postgresql://alice@/memstore?host=h1:5432&host=h2:5433&namespace=github.com/acme/app",
        "postgresql:///memstore?port=5432,",
    ):
        assert database_location(url) == url == checked_url(url)
