"""memstore's settings: every environment variable it reads, and the user's settings file.

The variables are read here and nowhere else in memstore, all under one prefix, MEMSTORE_
(the model's credentials keep the anthropic SDK's own names, ANTHROPIC_*). memctl reads them
once, at its edge, and passes the values down; a library function called from Python without
a value reads its default here. docs/settings.md lists each with its default.

Two variables are also read by memctl's option parser, from the names below, so that --help
shows them: MEMSTORE_DB (--db; a bad value is reported, naming it, by the command that opens
the database, never by --help) and MEMSTORE_CONTEXT_TOKENS (--context-tokens; a bad value is
reported as the option's).

Old names (MEMCTL_DB, MEMCTL_CEILING_DIRECTORIES) still work for one release: one line on
stderr says so, once per process, and a new name that is also set wins without a word.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from memstore.errors import InvalidSettings

log = logging.getLogger(__name__)

DB_VARIABLE = "MEMSTORE_DB"
CEILINGS_VARIABLE = "MEMSTORE_CEILING_DIRECTORIES"
NAMESPACE_VARIABLE = "MEMSTORE_NAMESPACE"
MODEL_VARIABLE = "MEMSTORE_MODEL"
SMALL_MODEL_VARIABLE = "MEMSTORE_SMALL_MODEL"
MODEL_DIR_VARIABLE = "MEMSTORE_MODEL_DIR"
SEMANTIC_VARIABLE = "MEMSTORE_SEMANTIC"
SETTINGS_VARIABLE = "MEMSTORE_SETTINGS"
CONTEXT_TOKENS_VARIABLE = "MEMSTORE_CONTEXT_TOKENS"
# The names of one release before, still read: new name -> old name.
OLD_NAMES = {
    DB_VARIABLE: "MEMCTL_DB",
    CEILINGS_VARIABLE: "MEMCTL_CEILING_DIRECTORIES",
}

DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_SMALL_MODEL = "claude-haiku-4-5"
DEFAULT_CONTEXT_TOKENS = 120_000
SWITCHED_OFF = ("0", "off", "no", "false")

# The old names already noted in this process: the note is said once.
_noted: set[str] = set()


@dataclass(frozen=True)
class Settings:
    """The environment's settings, as values. An empty variable counts as not set."""

    # MEMSTORE_DB (or its old name) as typed, and the name it was read from; read as a
    # database's location only when asked for (db), so that a bad value stops only what
    # needs the database.
    db_typed: str | None
    db_variable: str
    ceiling_directories: frozenset[Path]
    # On a server, the project namespace (storage/postgres/namespace.py); None: the workspace's
    namespace: str | None
    model: str
    small_model: str
    model_dir: Path | None  # None: the semantic encoder package's own files
    semantic: bool
    settings_file: Path
    cache_folder: Path
    api_key: str | None
    auth_token: str | None
    base_url: str | None
    editor: str  # memctl edit's: $VISUAL, else $EDITOR; "" when neither is set
    # Claude Code's own folder ($CLAUDE_CONFIG_DIR, as Claude Code reads it, else ~/.claude).
    claude_config_dir: Path

    @property
    def db(self) -> Path | str | None:
        """The database MEMSTORE_DB names: a file (SQLite), or a PostgreSQL server's URL kept
        as typed (is_server_url); None when it is not set. InvalidSettings, naming the
        variable, for a value that is neither (database_location): raised here, when the
        database is wanted, not as the settings are read, so that a bad MEMSTORE_DB stops no
        `--help` and nothing that does not open the database."""
        if self.db_typed is None:
            return None
        try:
            return database_location(self.db_typed)
        except InvalidSettings as error:
            raise InvalidSettings(f"{self.db_variable}: {error}") from None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        db = _value(env, DB_VARIABLE)
        ceilings = (_value(env, CEILINGS_VARIABLE) or "").split(os.pathsep)
        model_dir = env.get(MODEL_DIR_VARIABLE)
        settings_file = env.get(SETTINGS_VARIABLE)
        config = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return cls(
            db_typed=db,
            db_variable=DB_VARIABLE if env.get(DB_VARIABLE) or not db else OLD_NAMES[DB_VARIABLE],
            ceiling_directories=frozenset(Path(os.path.abspath(c)) for c in ceilings if c),
            namespace=env.get(NAMESPACE_VARIABLE) or None,
            model=env.get(MODEL_VARIABLE) or DEFAULT_MODEL,
            small_model=env.get(SMALL_MODEL_VARIABLE) or DEFAULT_SMALL_MODEL,
            model_dir=Path(model_dir).expanduser() if model_dir else None,
            semantic=env.get(SEMANTIC_VARIABLE, "").strip().lower() not in SWITCHED_OFF,
            settings_file=(
                Path(settings_file)
                if settings_file
                else Path(config) / "memstore" / "settings.toml"
            ),
            cache_folder=Path(env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")),
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            auth_token=env.get("ANTHROPIC_AUTH_TOKEN") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            editor=env.get("VISUAL") or env.get("EDITOR") or "",
            claude_config_dir=Path(env.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")),
        )


# The URL schemes that name a PostgreSQL server; any other `scheme://` is refused (a path
# with a colon, `a:b/m.db`, is still a path: only letters, digits and + - . then `://`, two
# or more of them, make a URL; a drive letter, `C://`, does not).
SERVER_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")


def is_server_url(location: Path | str) -> bool:
    """Whether a --db or MEMSTORE_DB value names a PostgreSQL server rather than a file."""
    return isinstance(location, str) and location.lower().startswith(SERVER_SCHEMES)


def database_location(value: str) -> Path | str:
    """A --db or MEMSTORE_DB value: a server's URL as typed (a str), else a file's path.
    InvalidSettings, in one line and its password masked, for a server's URL memstore cannot
    open (checked_url) and for any other URL, which would otherwise be taken for a file's
    path: `postgresq://…` would create the folder `postgresq:`. Every door onto the store
    (memctl, its hook, the MCP server, MemoryStore, StoreReader, copy) reads a str here."""
    if is_server_url(value):
        return checked_url(value)
    if _URL.match(value):
        scheme = value.partition("://")[0].lower()
        hint = (
            "; for a SQLite file, give the file's path, not a sqlite:// URL"
            if scheme.startswith("sqlite")
            else ""
        )
        raise InvalidSettings(
            f"the database {shown_url(value)} is neither a file's path nor a PostgreSQL URL:"
            " memstore opens a SQLite file by its path, a PostgreSQL server by a"
            f" postgresql:// (or postgres://) URL{hint}"
        )
    return Path(value)


def shown_url(url: str) -> str:
    """The URL for messages: its passwords masked, the user's (`alice:***@`) and any
    `password=` parameter's (`password=***`; any parameter whose name holds "pass", as
    `sslpassword=`, but `passfile=`, a path). Never raises: a URL too malformed to open is
    shown in the message that says so."""
    scheme, userinfo, rest = _split(url)
    if userinfo is None:
        return url
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":***@"
    path, question, query = rest.partition("?")
    if question:
        fields = re.split(r"([&?])", query)  # a second "?" is a mistake: masked all the same
        for i in range(0, len(fields), 2):
            key, equals, _ = fields[i].partition("=")
            if equals and _secret_parameter(key):
                fields[i] = f"{key}=***"
        rest = path + question + "".join(fields)
    return f"{scheme}://{userinfo}{rest}"


def _split(url: str) -> tuple[str, str | None, str]:
    """A URL's scheme, user part with its "@" ("" when none; None when `url` is no URL) and
    the rest. The user part reaches the last "@" before the first "/", whether libpq's
    parser or Python's reads it: a password with an unescaped "?" or "#" is still one."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url, None, ""
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    return scheme, userinfo + at, rest[len(userinfo + at) :]


def _secret_parameter(key: str) -> bool:
    name = unquote(key).strip().lower()
    return "pass" in name and name != "passfile"


def passwords(url: str) -> list[str]:
    """The secrets in `url`, as typed and decoded (libpq decodes them): the user's password
    and every parameter shown_url masks. Longest first."""
    _, userinfo, rest = _split(url)
    found = []
    if userinfo and ":" in userinfo:
        found.append(userinfo.partition(":")[2].removesuffix("@"))
    for field in re.split(r"[&?]", rest.partition("?")[2]):
        key, equals, value = field.partition("=")
        if equals and _secret_parameter(key):
            found.append(value)
    secrets = {form for value in found for form in (value, unquote(value)) if form}
    return sorted(secrets, key=len, reverse=True)


def checked_url(url: str) -> str:
    """`url`, a postgresql:// URL, when memstore can open it; InvalidSettings, in one line
    with its password masked, for the mistakes that would otherwise surface as a traceback
    from SQLAlchemy's URL parser (a port that is no number, a second "?")."""
    shown = shown_url(url)
    _, _, rest = _split(url)
    hosts, _, query = rest.partition("?")
    hosts = hosts.partition("/")[0]
    if "?" in query:
        raise InvalidSettings(
            f"the database URL {shown} has a second '?': its parameters follow the first,"
            " joined by '&' (postgresql://HOST/DB?sslmode=require&namespace=NAME)"
        )
    if "," in hosts:
        raise InvalidSettings(
            f"the database URL {shown} names several hosts: memstore takes them as"
            " parameters (postgresql://USER@/DB?host=HOST1:PORT1&host=HOST2:PORT2)"
        )
    port = re.fullmatch(r"(?:\[[^\]]*\]|[^:\[\]]*)(?::(.*))?", hosts)
    if port is None:
        raise InvalidSettings(f"the database URL {shown} has no host memstore can read")
    if port.group(1) is not None:
        _check_port(shown, port.group(1))
    for field in query.split("&"):
        key, equals, value = field.partition("=")
        if equals and unquote(key).strip().lower() == "port":
            for each in unquote(value).split(","):
                if each:  # libpq's default for an empty one
                    _check_port(shown, each)
    return url


def _check_port(shown: str, port: str) -> None:
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise InvalidSettings(
            f"the database URL {shown} has the port {port!r}: a port is a number from 1 to 65535"
        )


def _value(env: Mapping[str, str], name: str) -> str | None:
    """The variable `name`, else its old name's value (noted once per process)."""
    if env.get(name):
        return env[name]
    old = OLD_NAMES.get(name)
    if old is None or not env.get(old):
        return None
    if old not in _noted:
        _noted.add(old)
        log.warning(
            "%s is deprecated: set %s instead (the old name goes in a later release)", old, name
        )
    return env[old]


def read_allow_rules(path: Path) -> list[Any]:
    """The allow rules of a settings file (`[chat] allow = [...]`) as written, not yet
    understood; none when there is no file. InvalidSettings for a file that cannot be read."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise InvalidSettings(f"cannot read the settings file {path}: {error}") from None
    chat = data.get("chat", {})
    rules = chat.get("allow", []) if isinstance(chat, dict) else None
    if not isinstance(rules, list):
        raise InvalidSettings(f"{path}: [chat] allow must be a list of rules")
    return rules
