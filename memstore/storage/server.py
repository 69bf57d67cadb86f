"""Reaching a PostgreSQL server, without SQLAlchemy: the URL as messages show it, a driver's
failure as one line, and StoreReader's read-only psycopg connection (`memctl hook` reads with
it before every prompt). The SQLAlchemy engine is postgres.py's."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from memstore.errors import InvalidSettings, MemstoreError, StoreUnavailable

# A server that does not answer is reported after this long, not after TCP's minutes.
CONNECT_TIMEOUT_S = 5
# memstore's queries are short: compiling one (JIT) or starting workers for it costs more
# than it saves, which the planner's estimates on a large store may not see.
SESSION_SETTINGS = ("SET jit = off", "SET max_parallel_workers_per_gather = 0")
MISSING_DRIVER = (
    "memstore on PostgreSQL needs psycopg 3: pip install 'agent-memstore[postgres]'"
    " (or pip install '.[postgres]' in a clone)"
)


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


def scrubbed(text: str, url: str) -> str:
    """`text` (a driver's message) with the URL `url` shown as shown_url shows it, and its
    passwords masked wherever else they appear: libpq quotes the token it cannot read
    (`invalid percent-encoded token: "..."`), or the whole URL."""
    text = text.replace(url, shown_url(url))
    for secret in passwords(url):
        text = text.replace(secret, "***")
    return text


def driver_message(url: str, error: BaseException | None) -> str:
    """A driver's message about the server at `url`, in one line, its passwords masked."""
    return scrubbed(first_line(error), url)


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


def server_error(url: str, error: BaseException) -> BaseException:
    """The one-line error for a failure to reach or use the server at `url`; `error` itself
    when it is no database error (a bug, or already a MemstoreError)."""
    if isinstance(error, MemstoreError):
        return error
    reason = getattr(error, "orig", None) or error
    module = type(reason).__module__
    if module.startswith("psycopg"):
        return StoreUnavailable(
            f"cannot use the PostgreSQL database {shown_url(url)}: {driver_message(url, reason)}"
        )
    return error


def first_line(error: BaseException | None) -> str:
    """A driver's message in one line (psycopg's have a DETAIL and a CONTEXT below it)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def server_target(url: str) -> tuple[str, str | None]:
    """What libpq connects to for the memstore URL `url`: the URL without memstore's own
    `namespace` parameter, and the schema of that project namespace (None: the server's
    default store)."""
    from memstore.storage.namespace import schema_of, split_url

    bare, name = split_url(url)
    return bare, schema_of(name) if name else None


def session_settings(schema: str | None) -> tuple[str, ...]:
    """What memstore sets on each of its connections: SESSION_SETTINGS and, in a project
    namespace, a search_path of its schema alone (a table missing there is an error, never
    another project's, nor the default store's)."""
    return (
        SESSION_SETTINGS if schema is None else (*SESSION_SETTINGS, f"SET search_path = {schema}")
    )


def connect_reader(url: str) -> Any:
    """A psycopg connection that cannot write, without SQLAlchemy (StoreReader's, for
    `memctl hook`): each statement its own read-only transaction."""
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailable(MISSING_DRIVER) from None
    # libpq reads postgresql:// URLs itself; SQLAlchemy's driver suffix is no part of them.
    bare, schema = server_target(url)
    conninfo = re.sub(r"^postgresql\+psycopg://", "postgresql://", bare, flags=re.IGNORECASE)
    try:
        connection = psycopg.connect(
            conninfo,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=True,
            application_name="memstore",
        )
    except psycopg.Error as error:
        raise server_error(url, error) from None
    connection.execute("SET default_transaction_read_only = on")
    for setting in session_settings(schema):
        connection.execute(setting)
    return connection
