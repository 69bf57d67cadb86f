"""Reaching a PostgreSQL server, without SQLAlchemy: a driver's failure as one line, its
passwords masked (the URL as messages show it is settings.shown_url), the connection's
target and session settings. StoreReader's read-only psycopg connection is
postgres/reader.py's; the SQLAlchemy engine is postgres/engine.py's."""

from __future__ import annotations

from memstore.errors import MemstoreError, StoreUnavailable
from memstore.settings import passwords, shown_url
from memstore.storage.dbapi import first_line

# A server that does not answer is reported after this long, not after TCP's minutes.
CONNECT_TIMEOUT_S = 5
# memstore's queries are short: compiling one (JIT) or starting workers for it costs more
# than it saves, which the planner's estimates on a large store may not see.
SESSION_SETTINGS = ("SET jit = off", "SET max_parallel_workers_per_gather = 0")
# From a clone, as the README installs memctl (agent-memstore is not on PyPI).
MISSING_DRIVER = (
    "memstore on PostgreSQL needs psycopg 3, memctl's postgres extra: in memstore's clone, pip"
    " install '.[postgres]' (pipx: pipx inject agent-memstore 'psycopg[binary]>=3.2'; uv: uv"
    " tool install --force '.[postgres]', naming every extra you use)"
)


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


def server_target(url: str) -> tuple[str, str | None]:
    """What libpq connects to for the memstore URL `url`: the URL without memstore's own
    `namespace` parameter, and the schema of that project namespace (None: the server's
    default store)."""
    from memstore.storage.postgres.namespace import schema_of, split_url

    bare, name = split_url(url)
    return bare, schema_of(name) if name else None


def session_settings(schema: str | None) -> tuple[str, ...]:
    """What memstore sets on each of its connections: SESSION_SETTINGS and, in a project
    namespace, a search_path of its schema alone (a table missing there is an error, never
    another project's, nor the default store's)."""
    return (
        SESSION_SETTINGS if schema is None else (*SESSION_SETTINGS, f"SET search_path = {schema}")
    )
