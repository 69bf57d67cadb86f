"""Runs are chained like events, and each event records the hash of the memory row it left.

- run.seq, run.hash: runs numbered in the order they were written, each run's hash the
  SHA-256 of the hash of the run before it and the run's own columns (its command as its
  SHA-256, as the event chain has it, so a purge keeps it verifiable) and the ids of the
  memories it purged (memory_purge): a run's actor, command, session, start time or undo
  target changed, a run inserted, a purge recorded against a run that did not make it, each
  breaks the runs' chain (memstore/storage/chain.py: run_hash). Existing runs are numbered
  by their start (then id) and hashed here.
- memory_event.state: the SHA-256 of the memory's row as the event left it (its content
  fields, version, created_at, updated_at, deleted_at): a reader compares a row's hash with
  its last event's instead of replaying (memstore/storage/state.py). Existing events get
  theirs by replaying each memory's events here; a purged memory's stay NULL (its values are
  only hashes now).
- Triggers: neither a run's seq and hash nor an event's state can change.
- On PostgreSQL, run_chain(seq, run_id, hash): every run's number and hash, without
  row-level security (a run of another person's own memories is hidden from you, as
  event_chain, 0008, has events), written by a trigger on run, append-only: a writer takes
  the chain's head from it, and `verify` links the runs a person sees through it.

This revision's code is its own copy (a revision means the same forever).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from itertools import groupby
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

GENESIS = "0" * 64
_PURGED_COMMAND = re.compile(r"\[purged sha256:([0-9a-f]{64})\]")
_COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _command_hash(command: str | None) -> str | None:
    if command is None:
        return None
    purged = _PURGED_COMMAND.fullmatch(command)
    return purged.group(1) if purged else _sha256(command)


def run_hash(previous: str, run: Sequence[Any], purged: Sequence[int]) -> str:
    """A run's hash: (id, actor, command, started_at, session_id, undoes, identity, host)."""
    fields = [*run[:2], _command_hash(run[2]), *run[3:8], sorted(purged)]
    return _sha256(previous + json.dumps(fields, **_COMPACT))


def state_hash(
    values: dict[str, Any], version: int, created_at: str, updated_at: str, deleted_at: str | None
) -> str:
    """A memory row's hash: its content fields (as an event's snapshot has them) and the
    store's bookkeeping."""
    state = [values, version, created_at, updated_at, deleted_at]
    return _sha256(json.dumps(state, sort_keys=True, **_COMPACT))


RUNS = (
    "SELECT id, actor, command, started_at, session_id, undoes, identity, host FROM run"
    " ORDER BY started_at, id"
)
EVENTS = (
    "SELECT id, memory_id, operation, created_at, CAST(old_value AS TEXT),"
    " CAST(new_value AS TEXT) FROM memory_event ORDER BY memory_id, id"
)


def _run_rows(connection: sa.Connection) -> list[dict[str, Any]]:
    purges: dict[str, list[int]] = {}
    for run_id, memory_id in connection.exec_driver_sql(
        "SELECT run_id, memory_id FROM memory_purge"
    ):
        purges.setdefault(run_id, []).append(memory_id)
    rows, previous = [], GENESIS
    for seq, run in enumerate(connection.exec_driver_sql(RUNS).fetchall(), 1):
        previous = run_hash(previous, run, purges.get(run[0], []))
        rows.append({"b_id": run[0], "seq": seq, "hash": previous})
    return rows


def _event_states(connection: sa.Connection) -> list[dict[str, Any]]:
    states = []
    events = connection.exec_driver_sql(EVENTS).fetchall()
    for _, group in groupby(events, key=lambda event: event[1]):
        values: dict[str, Any] | None = None
        created_at = deleted_at = None
        for version, (event_id, _, operation, at, old, new) in enumerate(group, 1):
            old_value = None if old is None else json.loads(old)
            new_value = None if new is None else json.loads(new)
            created_at = created_at or at
            if operation == "delete":
                values, deleted_at = old_value, at
            else:
                values = new_value
                if operation == "restore":
                    deleted_at = None
            if not isinstance(values, dict) or list(values) == ["purged"]:
                break  # a purged memory: its values are hashes now, its states unknown
            state = state_hash(values, version, created_at, at, deleted_at)
            states.append({"b_id": event_id, "state": state})
    return states


SQLITE_TRIGGERS = [
    """
    CREATE TRIGGER run_chain_no_update BEFORE UPDATE OF seq, hash ON run
    WHEN new.seq IS NOT old.seq OR new.hash IS NOT old.hash BEGIN
        SELECT RAISE(ABORT, 'run is append-only: its place on the runs'' chain cannot change');
    END
    """,
    """
    CREATE TRIGGER memory_event_state_no_update BEFORE UPDATE OF state ON memory_event
    WHEN new.state IS NOT old.state BEGIN
        SELECT RAISE(ABORT, 'memory_event is append-only: its state cannot change');
    END
    """,
]
POSTGRES_TRIGGERS = [
    """
    CREATE FUNCTION memstore_run_chain_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF (new.seq, new.hash) IS NOT DISTINCT FROM (old.seq, old.hash) THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'run is append-only: its place on the runs'' chain cannot change'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    "CREATE TRIGGER run_chain_fixed BEFORE UPDATE ON run"
    " FOR EACH ROW EXECUTE FUNCTION memstore_run_chain_fixed()",
    """
    CREATE FUNCTION memstore_event_state_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF new.state IS NOT DISTINCT FROM old.state THEN
            RETURN new;
        END IF;
        RAISE EXCEPTION 'memory_event is append-only: its state cannot change'
            USING ERRCODE = 'restrict_violation';
    END
    $$
    """,
    "CREATE TRIGGER memory_event_state_fixed BEFORE UPDATE ON memory_event"
    " FOR EACH ROW EXECUTE FUNCTION memstore_event_state_fixed()",
    """
    CREATE FUNCTION memstore_run_chain_append() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- A run written without its place (not by memstore) is not on the chain: verify
        -- names it.
        IF new.seq IS NOT NULL THEN
            INSERT INTO run_chain (seq, run_id, hash) VALUES (new.seq, new.id, new.hash);
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE FUNCTION memstore_run_chain_from_runs_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF pg_trigger_depth() < 2 THEN
            RAISE EXCEPTION 'run_chain is written by the database, with each run'
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN new;
    END
    $$
    """,
    "CREATE TRIGGER run_chain_append AFTER INSERT ON run"
    " FOR EACH ROW EXECUTE FUNCTION memstore_run_chain_append()",
    "CREATE TRIGGER run_chain_from_runs BEFORE INSERT ON run_chain"
    " FOR EACH ROW EXECUTE FUNCTION memstore_run_chain_from_runs_only()",
    "CREATE TRIGGER run_chain_append_only BEFORE UPDATE ON run_chain"
    " FOR EACH ROW EXECUTE FUNCTION memstore_append_only()",
    "CREATE TRIGGER run_chain_no_delete BEFORE DELETE ON run_chain"
    " FOR EACH ROW EXECUTE FUNCTION memstore_append_only()",
    "CREATE TRIGGER run_chain_no_truncate BEFORE TRUNCATE ON run_chain"
    " FOR EACH STATEMENT EXECUTE FUNCTION memstore_append_only()",
]
# Whoever may write runs now appends to the runs' chain too (the trigger is theirs).
POSTGRES_GRANT = """
    DO $$ DECLARE grantee text; BEGIN
        FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.table_privileges AS p
            WHERE p.table_schema = current_schema() AND p.table_name = 'run'
            AND p.privilege_type = 'INSERT' AND p.grantee <> 'PUBLIC'
        LOOP
            EXECUTE format('GRANT SELECT, INSERT ON run_chain TO %I', grantee);
        END LOOP;
    END $$
"""


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def _backfill(table: str, guard: str, statement: str, rows: list[dict[str, Any]]) -> None:
    """Rows' new columns written past the append-only trigger `guard` that refuses any
    change (SQLite: dropped and created again as it was)."""
    if not rows:
        return
    connection = op.get_bind()
    if _postgres():
        op.execute(f"ALTER TABLE {table} DISABLE TRIGGER {guard}")
        connection.execute(sa.text(statement), rows)
        op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {guard}")
        return
    found = connection.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (guard,)
    ).first()
    if found is not None:
        op.execute(f"DROP TRIGGER {guard}")
    connection.execute(sa.text(statement), rows)
    if found is not None:
        op.execute(found[0])


def upgrade() -> None:
    connection = op.get_bind()
    postgres = _postgres()
    op.add_column("run", sa.Column("seq", sa.Integer(), nullable=True))
    op.add_column("run", sa.Column("hash", sa.String(), nullable=True))
    op.add_column("memory_event", sa.Column("state", sa.String(), nullable=True))
    _backfill(
        "run",
        "run_append_only" if postgres else "run_no_update",
        "UPDATE run SET seq = :seq, hash = :hash WHERE id = :b_id",
        _run_rows(connection),
    )
    _backfill(
        "memory_event",
        "memory_event_append_only" if postgres else "memory_event_no_update",
        "UPDATE memory_event SET state = :state WHERE id = :b_id",
        _event_states(connection),
    )
    op.create_index("ix_run_seq", "run", ["seq"], unique=True)
    if not postgres:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)
        return
    op.execute("CREATE TABLE run_chain (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, hash TEXT)")
    op.execute("INSERT INTO run_chain SELECT seq, id, hash FROM run")
    op.execute(POSTGRES_GRANT)
    for statement in POSTGRES_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if _postgres():
        for trigger, table in (
            ("run_chain_fixed", "run"),
            ("memory_event_state_fixed", "memory_event"),
            ("run_chain_append", "run"),
        ):
            op.execute(f"DROP TRIGGER {trigger} ON {table}")
        op.execute("DROP TABLE run_chain")
        for function in (
            "memstore_run_chain_fixed",
            "memstore_event_state_fixed",
            "memstore_run_chain_append",
            "memstore_run_chain_from_runs_only",
        ):
            op.execute(f"DROP FUNCTION {function}()")
    else:
        op.execute("DROP TRIGGER run_chain_no_update")
        op.execute("DROP TRIGGER memory_event_state_no_update")
    op.drop_index("ix_run_seq", "run")
    op.drop_column("memory_event", "state")
    op.drop_column("run", "hash")
    op.drop_column("run", "seq")
