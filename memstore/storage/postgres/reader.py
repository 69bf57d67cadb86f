"""Reading a server without SQLAlchemy: StoreReader's read-only psycopg connection (`memctl
hook` reads with it before every prompt), and whether a table exists. psycopg is imported
only when a connection is made."""

from __future__ import annotations

import re
from typing import Any

from memstore.errors import StoreUnavailable
from memstore.storage.dbapi import Connection
from memstore.storage.postgres.server import (
    CONNECT_TIMEOUT_S,
    MISSING_DRIVER,
    server_error,
    server_target,
    session_settings,
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


def has_table(connection: Connection, table: str) -> bool:
    query = "SELECT 1 WHERE to_regclass(%s) IS NOT NULL"
    return connection.execute(query, (table,)).fetchone() is not None
