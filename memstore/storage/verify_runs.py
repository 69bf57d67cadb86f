"""The runs' chain verified (revision 0010): each run against the hash stored before it, so
that each run changed (its actor, command, session, start time, undo target, who made it, or
the memories it purged), and each run inserted or removed, is named on its own; and each
purge recorded in memory_purge made by a run on the chain.

On PostgreSQL a person verifies the runs they may see, linked through run_chain's hashes of
those they may not (another person's runs that wrote only that person's own memories).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstore.storage import chain
from memstore.storage.backend import backend_of

if TYPE_CHECKING:
    from memstore.storage.dbapi import Connection

_RUN_COLUMNS = ", ".join(f"r.{name}" for name in chain.ChainedRun._fields)
# (place, hash on the chain, the run's hash, its columns), in the chain's order; a run not
# on it last.
SQLITE_RUNS = f"""
SELECT r.seq, r.hash, r.hash, {_RUN_COLUMNS} FROM run AS r
ORDER BY r.seq IS NULL, r.seq, r.started_at
"""
SERVER_RUNS = f"""
SELECT coalesce(c.seq, r.seq), c.hash, r.hash, {_RUN_COLUMNS}
FROM run_chain AS c FULL JOIN run AS r ON r.id = c.run_id
ORDER BY c.seq IS NULL, coalesce(c.seq, r.seq), r.started_at
"""


# What a run's hash covers, and how much of it the events' chain covers too.
_ANY = (
    "its actor, command, session, start time, undo target, identity, host or the memories"
    " it purged were changed outside memstore"
)
_NOT_IN_EVENTS = (
    "its session, start time, undo target or the memories it purged were changed outside"
    " memstore (its command, identity and host are as its events' hashes have them)"
)
_IN_EVENTS = (
    "its command, identity or host were changed outside memstore (its events' hashes,"
    " which cover them too, break)"
)


def _what_changed(
    line: str, run: chain.ChainedRun, actors: dict[str, set[str]], broken: set[str] | None
) -> str:
    """A hash's line narrowed by the events' chain, where the run wrote events."""
    if not line.endswith(_ANY) or broken is None or run.id not in actors:
        return line
    if run.id in broken:
        return line.removesuffix(_ANY) + _IN_EVENTS
    if actors[run.id] == {run.actor}:
        return line.removesuffix(_ANY) + _NOT_IN_EVENTS
    return line


def _described(run: chain.ChainedRun) -> str:
    return f"run {run.id[:8]} ({run.actor}, started {run.started_at})"


def verify_runs(
    connection: Connection, problems: list[str], broken_runs: set[str] | None = None
) -> tuple[int, int, str]:
    """How many runs were verified, how many were seen by their hash only, and the runs'
    chain head (the last run's hash, which can be kept elsewhere as the events' head); each
    problem found appended to `problems`, a line each. `broken_runs`: the runs of events
    that do not match the events' chain, which covers a run's command, identity and host
    too (None: not known)."""
    server = backend_of(connection).server
    purges: dict[str, list[int]] = {}
    for run_id, memory_id in connection.execute("SELECT run_id, memory_id FROM memory_purge"):
        purges.setdefault(run_id, []).append(memory_id)
    actors: dict[str, set[str]] = {}
    for run_id, actor in connection.execute("SELECT DISTINCT run_id, actor FROM memory_event"):
        actors.setdefault(run_id, set()).add(actor)
    count, unseen, previous, place = 0, 0, chain.GENESIS, 0
    seen: set[str] = set()
    for row in connection.execute(SERVER_RUNS if server else SQLITE_RUNS):
        seq, on_chain, stored, columns = row[0], row[1], row[2], row[3:]
        if columns[0] is None:  # a run this role may not see: linked by its hash
            unseen, previous, place = unseen + 1, on_chain, seq
            continue
        run = chain.ChainedRun(*columns)
        seen.add(run.id)
        count += 1
        found = _run_problems(run, seq, on_chain, stored, previous, place, purges, actors)
        problems += [_what_changed(line, run, actors, broken_runs) for line in found]
        if seq is not None:
            previous, place = stored or "", seq
    for run_id in sorted(purges.keys() - seen):
        if not server:  # on a server, the purging run may be one this role cannot see
            problems.append(
                f"memory_purge names run {run_id[:8]}, which is not in history: a purge"
                " recorded outside memstore"
            )
    return count, unseen, previous


def _run_problems(
    run: chain.ChainedRun,
    seq: int | None,
    on_chain: str | None,
    stored: str | None,
    previous: str,
    place: int,
    purges: dict[str, list[int]],
    actors: dict[str, set[str]],
) -> list[str]:
    if seq is None or stored is None:
        return [f"{_described(run)} is not on the runs' chain: it was inserted outside memstore"]
    found = []
    if seq != place + 1:
        found.append(
            f"{_described(run)} is run {seq} on the runs' chain, after run {place}: the runs"
            " between were removed outside memstore"
        )
    expected = chain.run_hash(previous, run, purges.get(run.id, []))
    if stored != expected or on_chain != stored:
        found.append(f"{_described(run)} does not match its hash on the runs' chain: {_ANY}")
    others = actors.get(run.id, {run.actor}) - {run.actor}
    if others:
        found.append(
            f"{_described(run)}: its actor is {run.actor!r} but its events say"
            f" {sorted(others)[0]!r}"
        )
    return found
