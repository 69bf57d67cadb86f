"""Tamper evidence for the history: a hash chain over memory_event, and purge markers.

Each event stores `hash` = SHA-256 of the previous event's hash and the event's canonical
content, so changing, removing or inserting an event, even with the triggers dropped, breaks
the chain from that event on, and `verify` names the first broken one. An event's values
enter the chain as the SHA-256 of their stored JSON text, and its run's command as its own
SHA-256: exactly what a purge keeps in its markers, so a purged history still verifies.
Its run's identity and host (revision 0007) enter it too, appended only when either is known:
runs from before 0007 have neither, and their events verify as they were hashed. Likewise an
event's reason (revision 0012), as its SHA-256 (a purge's marker keeps it), after the
identity and host, only when the event has one.

What a chain cannot do: notice that the newest events were cut off together with every trace
of them (the memory rows' versions catch most of that: see `verify`), or stop someone who
recomputes it. The head hash that `verify` reports can be kept elsewhere to catch both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from memstore.errors import HistoryTampered
from memstore.storage.backend import backend_of

if TYPE_CHECKING:
    from memstore.storage.dbapi import Connection

GENESIS = "0" * 64
_HEX64 = "[0-9a-f]" * 64
# What a purge leaves: the JSON text of an erased value, and a run's erased command.
PURGED_VALUE_GLOB = '{"purged": "sha256:' + _HEX64 + '"}'
PURGED_COMMAND_GLOB = "[[]purged sha256:" + _HEX64 + "]"
_PURGED_VALUE = re.compile(r'\{"purged": "sha256:([0-9a-f]{64})"\}')
_PURGED_COMMAND = re.compile(r"\[purged sha256:([0-9a-f]{64})\]")
# The same as regular expressions PostgreSQL's triggers also read (POSIX, no quote in them).
PURGED_VALUE_PATTERN = _PURGED_VALUE.pattern
PURGED_COMMAND_PATTERN = _PURGED_COMMAND.pattern


def sha256(text: str) -> str:
    import hashlib  # OpenSSL's start-up, which `memctl history` need not pay to show events

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def value_hash(text: str | None) -> str | None:
    """The hash of a stored JSON value, which a purge marker keeps."""
    if text is None:
        return None
    purged = _PURGED_VALUE.fullmatch(text)
    return purged.group(1) if purged else sha256(text)


def command_hash(command: str | None) -> str | None:
    if command is None:
        return None
    purged = _PURGED_COMMAND.fullmatch(command)
    return purged.group(1) if purged else sha256(command)


def purged_value(text: str) -> str:
    """The marker that replaces a value's JSON text: it keeps the value's hash."""
    return '{"purged": "sha256:' + str(value_hash(text)) + '"}'


def purged_command(command: str) -> str:
    """The marker that replaces a run's command, or an event's reason: it keeps its hash."""
    return f"[purged sha256:{command_hash(command)}]"


def is_purged(value: Any) -> bool:
    """Whether an event's old or new value (as read, a dict) is a purge marker."""
    return isinstance(value, dict) and list(value) == ["purged"]


class ChainedEvent(NamedTuple):
    """What the chain covers of an event: every column, values as their stored text."""

    id: int
    memory_id: int
    memory_name: str
    operation: str
    actor: str
    run_id: str
    created_at: str
    merged_into: int | None
    old_value: str | None
    new_value: str | None
    command: str | None
    # Who made the event's run (run.identity, run.host); None for runs from before 0007.
    identity: str | None = None
    host: str | None = None
    # Why it was made (revision 0012): a consolidation's drop; None for every other event.
    reason: str | None = None


def event_hash(previous: str, event: ChainedEvent) -> str:
    fields = [
        *event[:8],
        value_hash(event.old_value),
        value_hash(event.new_value),
        command_hash(event.command),
    ]
    if event.identity is not None or event.host is not None or event.reason is not None:
        fields += [event.identity, event.host]
    if event.reason is not None:
        fields.append(command_hash(event.reason))
    return sha256(previous + json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


class ChainedRun(NamedTuple):
    """What the runs' chain covers of a run (revision 0010): its columns, the command as its
    SHA-256 (which a purge keeps), and the ids of the memories it purged."""

    id: str
    actor: str
    command: str | None
    started_at: str
    session_id: str | None
    undoes: str | None
    identity: str | None
    host: str | None


def run_hash(previous: str, run: ChainedRun, purged: Iterable[int] = ()) -> str:
    fields = [*run[:2], command_hash(run.command), *run[3:], sorted(purged)]
    return sha256(previous + json.dumps(fields, ensure_ascii=False, separators=(",", ":")))


def chained_events(who: bool = True) -> str:
    """The events with their run's command (and, unless `who` is False, as before revision
    0007, the run's identity and host, then the event's reason), oldest first: what the
    chain is computed over."""
    return f"""
SELECT e.id, e.memory_id, e.memory_name, e.operation, e.actor, e.run_id, e.created_at,
       e.merged_into, CAST(e.old_value AS TEXT), CAST(e.new_value AS TEXT), r.command, e.hash
       {", r.identity, r.host, e.reason" if who else ""}
FROM memory_event AS e LEFT JOIN run AS r ON r.id = e.run_id
ORDER BY e.id
"""


CHAINED_EVENTS = chained_events()


def chain_hashes(rows: Iterable[tuple[Any, ...]]) -> Iterable[tuple[int, str, str | None]]:
    """(id, hash the event should have, hash it has) for rows of chained_events()."""
    previous = GENESIS
    for row in rows:
        expected = event_hash(previous, ChainedEvent(*row[:11], *row[12:15]))
        yield row[0], expected, row[11]
        previous = expected


# On PostgreSQL: every event's id and hash from event_chain (revision 0008), which row-level
# security does not filter, beside the event itself where this role may see it.
CHAIN_AND_EVENTS = f"""
SELECT c.id, c.hash, x.* FROM event_chain AS c FULL JOIN ({CHAINED_EVENTS}) AS x ON x.id = c.id
ORDER BY coalesce(c.id, x.id)
"""


class ChainReport(NamedTuple):
    events: int
    head: str
    # Events of other people's own memories (PostgreSQL's row-level security hides them):
    # chained by the hash event_chain holds, their content not checked.
    unseen: int = 0
    # Memories whose rows their events replayed gave (storage/verify.py).
    memories: int = 0
    # Runs verified on the runs' chain, and those seen by their hash only (as `unseen`).
    runs: int = 0
    unseen_runs: int = 0
    # The runs' chain head (storage/verify_runs.py): with `head`, what catches a history
    # rewritten whole, hashes recomputed, when both are kept elsewhere.
    run_head: str = GENESIS


def _tampered(event_id: int) -> HistoryTampered:
    return HistoryTampered(
        f"history does not verify at event {event_id}: it, or an event before it, "
        "was changed, removed or inserted outside memstore"
    )


def _verify_events(connection: Connection) -> ChainReport:
    count, head = 0, GENESIS
    for event_id, expected, stored in chain_hashes(connection.execute(CHAINED_EVENTS)):
        if stored != expected:
            raise _tampered(event_id)
        count, head = count + 1, expected
    return ChainReport(count, head)


def verify_through_hidden(connection: Connection) -> ChainReport:
    """The chain as a person on a server sees it: each event they may read is recomputed
    from its content and the hash before it; one they may not read is a link whose hash
    event_chain holds, trusted as such (its owner, or a superuser, verifies its content)."""
    count, unseen, previous = 0, 0, GENESIS
    for row in connection.execute(CHAIN_AND_EVENTS):
        chain_id, chain_hash, event = row[0], row[1], row[2:]
        if event[0] is None:
            unseen, previous = unseen + 1, chain_hash
            continue
        expected = event_hash(previous, ChainedEvent(*event[:11], *event[12:15]))
        if chain_id is None or event[11] != expected or chain_hash != expected:
            raise _tampered(event[0])
        count, previous = count + 1, expected
    return ChainReport(count, previous, unseen)


def verify(connection: Connection) -> ChainReport:
    """Recompute the chain; HistoryTampered names the first event that does not match.
    On PostgreSQL a person verifies what they may see, linked through event_chain's hashes
    of what they may not (`unseen`)."""
    server = backend_of(connection).server
    report = (verify_through_hidden if server else _verify_events)(connection)
    # Every change of a memory bumps its version and writes one event: a memory whose
    # version disagrees with its events lost (or gained) events at the end of the chain.
    mismatch = connection.execute(
        "SELECT m.name, m.version, count(e.id) FROM memory AS m"
        " LEFT JOIN memory_event AS e ON e.memory_id = m.id"
        " GROUP BY m.id HAVING m.version != count(e.id) ORDER BY m.id LIMIT 1"
    ).fetchone()
    if mismatch is not None:
        name, version, events = mismatch
        raise HistoryTampered(
            f"history does not verify: memory {name!r} is at version {version} but "
            f"history holds {events} of its events (events were removed or added)"
        )
    return report
