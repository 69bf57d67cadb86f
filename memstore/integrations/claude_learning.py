"""Learning from Claude Code's sessions: the worker `memctl claude learn` runs, detached, after
`memctl hook` recorded a session (integrations/claude_sessions.py).

One worker at a time per store (run_lock's lock of kind LEARNING_RUN; a second one stops at
once). For each recorded session it reads the transcript's lines written since its saved
offset (integrations/claude_transcript.py), in stretches that fit what extraction shows the
model, and gives each stretch to chat's extraction (learning/extract.py: its prompt, checks,
secrets refusal and handling of names that exist), as the actor `claude-code`, in a run whose
command names the session and the bytes read: `memctl history --runs` says which session
taught what. The offset is saved only after that run committed, so a worker killed before
reads the stretch again; one killed after the commit and before the save finds its run in
the history and moves on without asking the model again. No new whole line: no model call.
After learning, still alone, it consolidates the store when that is due
(integrations/claude_consolidation.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

from memstore.integrations.claude_consolidation import (
    ScheduledConsolidation,
    consolidate_when_due,
)
from memstore.integrations.claude_sessions import (
    LEARNING_RUN,
    RecordedSession,
    failed_attempt,
    save_offset,
    unread,
)
from memstore.integrations.claude_transcript import TranscriptEntry, read_transcript
from memstore.learning.consolidate import Consolidation
from memstore.learning.extract import (
    MESSAGE_MAX_CHARS,
    NOTHING_TO_LEARN,
    TRANSCRIPT_MAX_CHARS,
    extract_memories,
)
from memstore.llm.client import ModelClient
from memstore.llm.messages import Message
from memstore.storage.run_lock import run_alone
from memstore.storage.store import MemoryStore

log = logging.getLogger(__name__)

ACTOR = "claude-code"
# What one extraction is given: under what it shows the model, which keeps the end.
STRETCH_MAX_CHARS = TRANSCRIPT_MAX_CHARS * 5 // 6
# A stretch whose answers were unusable this many times in a row is left out.
MAX_ATTEMPTS = 3
# What became of a stretch.
LEARNED, UNAVAILABLE, UNUSABLE = "learned", "unavailable", "unusable"
# The runs looked through for one a killed worker committed.
RECENT_RUNS = 500


@dataclass
class LearningReport:
    """What one worker did."""

    # The sessions read from.
    sessions: set[str] = field(default_factory=set)
    model_calls: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    # Sessions left for the next worker: the model failed, or the transcript is unreadable.
    failed: list[str] = field(default_factory=list)
    # Another worker holds the lock: this one did nothing.
    busy: bool = False
    # The size of each transcript read to its last whole line: one that ends in a line still
    # being written is not read again until it grows.
    read_to: dict[str, int] = field(default_factory=dict)
    # Whether consolidation was due after learning, and what it did.
    consolidation: ScheduledConsolidation | None = None

    @property
    def consolidated(self) -> Consolidation | None:
        return self.consolidation.ran if self.consolidation is not None else None


def run_command(session_id: str, start: int, end: int) -> str:
    """The command a session's run records: `memctl history --runs` shows it."""
    return f"claude-code session {session_id} (transcript bytes {start}-{end})"


def learn_sessions(
    store: MemoryStore, client: ModelClient, folder: Path, model: str | None = None
) -> LearningReport:
    """Learn from every recorded session's new lines, until none is left (sessions recorded
    while it runs included). Never raises for a model failure."""
    report = LearningReport()
    while True:
        with run_alone(store, LEARNING_RUN) as held:
            if not held:
                report.busy = True
                log.info("another worker is learning from this store's sessions")
                return report
            while pending := _pending(folder, report):
                for session in pending:
                    report.sessions.add(session.session_id)
                    if not _learn_session(store, client, folder, session, report, model):
                        report.failed.append(session.session_id)
            # Checked only after a session taught something: nothing new, nothing to tidy,
            # and a plan the model got wrong is not asked for again at every Stop.
            if (report.created or report.updated) and report.consolidation is None:
                report.consolidation = consolidate_when_due(store, client, ACTOR, model=model)
        # A session the hook recorded while the lock was held found a worker running: it
        # is this one's, now that it has let go.
        if not _pending(folder, report):
            return report


def _pending(folder: Path, report: LearningReport) -> list[RecordedSession]:
    pending = []
    for session in unread(folder):
        if session.session_id in report.failed:
            continue
        if report.read_to.get(session.session_id) == _size(session.transcript):
            continue  # no new whole line since it was read
        pending.append(session)
    return pending


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _learn_session(
    store: MemoryStore,
    client: ModelClient,
    folder: Path,
    session: RecordedSession,
    report: LearningReport,
    model: str | None,
) -> bool:
    """Learn from the session's new lines; False when it stopped before their end."""
    offset = session.offset
    while True:
        report.read_to[session.session_id] = _size(session.transcript) or 0
        try:
            chunk = read_transcript(session.transcript, offset)
        except OSError as error:
            log.warning("session %s: cannot read its transcript: %s", session.session_id, error)
            return False
        if chunk.shrunk:
            # Replaced or cut: what it says now was not what was read. Its new lines are
            # learned from when it grows again.
            log.warning("session %s: its transcript is shorter than was read", session.session_id)
            save_offset(folder, session, report.read_to[session.session_id])
            return True
        if chunk.skipped:
            log.warning("session %s: %d lines unreadable", session.session_id, chunk.skipped)
        if chunk.end == offset:
            return True  # nothing whole is new
        start = offset
        for stretch, end in _stretches(chunk.entries):
            outcome = _learn_stretch(store, client, session, stretch, start, end, report, model)
            if outcome == UNAVAILABLE:
                return False
            if outcome == UNUSABLE:
                if failed_attempt(folder, session, start) < MAX_ATTEMPTS:
                    return False
                # Asked again at every Stop, it would hold back all the session's later lines.
                log.warning(
                    "session %s: bytes %d-%d left out after %d unusable answers",
                    session.session_id,
                    start,
                    end,
                    MAX_ATTEMPTS,
                )
            save_offset(folder, session, end)
            start = end
        if start != chunk.end:  # lines after the last message: no conversation
            save_offset(folder, session, chunk.end)
        offset = chunk.end


def _learn_stretch(
    store: MemoryStore,
    client: ModelClient,
    session: RecordedSession,
    messages: list[Message],
    start: int,
    end: int,
    report: LearningReport,
    model: str | None,
) -> str:
    """Give one stretch to extraction: LEARNED, or why not (UNAVAILABLE, UNUSABLE)."""
    learned = _committed_end(store, session.session_id, start)
    if learned is not None:
        # A worker committed this stretch's run and was stopped before saving its offset.
        log.info("session %s: bytes %d-%d were learned already", session.session_id, start, end)
        return LEARNED
    report.model_calls += 1
    extraction = extract_memories(
        messages,
        store=store,
        client=client,
        session_id=session.session_id,
        model=model,
        actor=ACTOR,
        command=run_command(session.session_id, start, end),
        all_new=True,
    )
    if extraction.failure and extraction.failure != NOTHING_TO_LEARN:
        log.warning("session %s: nothing learned (%s)", session.session_id, extraction.failure)
        return UNAVAILABLE if extraction.unavailable else UNUSABLE
    report.created += extraction.created
    report.updated += extraction.updated
    if extraction.changed:
        log.info(
            "session %s: %d created, %d updated",
            session.session_id,
            len(extraction.created),
            len(extraction.updated),
        )
    return LEARNED


def _committed_end(store: MemoryStore, session_id: str, start: int) -> int | None:
    """The end of a run of this session that learned from byte `start` on, if one committed."""
    pattern = re.compile(re.escape(run_command(session_id, start, 0)[:-2]) + r"(\d+)\)")
    for run in reversed(store.history.runs(RECENT_RUNS)):
        command = run.get("command")
        if run.get("actor") == ACTOR and isinstance(command, str):
            found = pattern.fullmatch(command)
            if found:
                return int(found.group(1))
    return None


def _stretches(entries: list[TranscriptEntry]) -> list[tuple[list[Message], int]]:
    """The messages in stretches of about STRETCH_MAX_CHARS, each with the offset after its
    last line; consecutive messages of one role are one message (Claude Code writes each
    block of a reply on a line of its own)."""
    stretches: list[tuple[list[Message], int]] = []
    messages: list[Message] = []
    size = previous_end = 0
    for entry in entries:
        length = _rendered_size(entry.message)
        if messages and size + length > STRETCH_MAX_CHARS:
            stretches.append((messages, previous_end))
            messages, size = [], 0
        if messages and messages[-1]["role"] == entry.message["role"]:
            messages[-1] = {
                "role": entry.message["role"],
                "content": [*messages[-1]["content"], *entry.message["content"]],
            }
        else:
            messages.append(_as_blocks(entry.message))
        size += length
        previous_end = entry.end
    if messages:
        stretches.append((messages, previous_end))
    return stretches


def _as_blocks(message: Message) -> Message:
    content = message["content"]
    if isinstance(content, str):
        return {"role": message["role"], "content": [{"type": "text", "text": content}]}
    return {"role": message["role"], "content": list(content)}


def _rendered_size(message: Message) -> int:
    """About how many characters extraction renders of the message (each part is cut)."""
    content = message["content"]
    parts = [content] if isinstance(content, str) else [b["text"] for b in content]
    return sum(min(len(part), MESSAGE_MAX_CHARS) + 16 for part in parts)
