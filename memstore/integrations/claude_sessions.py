"""The Claude Code sessions a store learns from: what `memctl hook` records at Stop, SessionEnd
and PreCompact, and what the worker (`memctl claude learn`, integrations/claude_learning.py)
reads from, with how far it has read each transcript.

A JSON file beside the database, in the `sessions/` folder chat keeps there (git ignores it):
{"sessions": {session id: {"transcript", "offset", "cwd", "event", "recorded"}}}. A file, not
a table: the hook never writes the database (a write would wait behind another writer, a
consolidation, while Claude Code waits), no migration is needed, and a transcript's path and
offset are of this machine, not of a store a team shares on a server. Every change is made
under a lock on a file of its own and written by an atomic rename, so the hook and the worker
never lose each other's writes; the hook's part is a read and a write of a small file.

The hook then starts the worker, detached (a session of its own, its output in a log file
beside the queue), unless it sees one running: the worker holds the store's run lock of kind
LEARNING_RUN while it learns, and looks for new work after it lets go, so that a session the
hook recorded meanwhile is not left waiting for the next Stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstore.errors import InvalidHookInput
from memstore.storage.memory_folder import SESSIONS_FOLDER
from memstore.storage.run_lock import lock_file
from memstore.storage.workspace import Workspace

try:
    import fcntl
except ImportError:  # Windows: the queue's writes are not kept apart there
    fcntl = None  # type: ignore[assignment]

STOP = "Stop"
SESSION_END = "SessionEnd"
PRE_COMPACT = "PreCompact"
LEARNING_EVENTS = (STOP, SESSION_END, PRE_COMPACT)
QUEUE_FILE = "claude-code-sessions.json"
LOG_FILE = "claude-code-learning.log"
# The kind of run_lock.run_alone's lock the worker holds: one worker per store.
LEARNING_RUN = "claude-learning"
# The worker's command line: this Python's memctl.
WORKER_COMMAND = (sys.executable, "-m", "memctl", "claude", "learn")
# Sessions kept in the queue: the oldest recorded go first.
MAX_SESSIONS = 200
LOG_MAX_BYTES = 1_048_576
NO_MODEL = (
    "no model (set ANTHROPIC_API_KEY, or ANTHROPIC_BASE_URL): the sessions recorded wait, unread,"
    " and nothing is consolidated"
)
# Claude Code's session ids are UUIDs; anything else is refused.
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class RecordedSession:
    session_id: str
    transcript: Path
    offset: int
    event: str


def learning_folder(database: Path | str, workspace: Workspace) -> Path:
    """Where the queue and the worker's log are: beside the database, or, for a server's,
    in the workspace's .memory/, as chat keeps its sessions."""
    local = database.parent if isinstance(database, Path) else workspace.memory_folder
    return local / SESSIONS_FOLDER


def record_session(folder: Path, event: dict[str, Any]) -> RecordedSession:
    """Record the session of a Stop, SessionEnd or PreCompact hook `event` (its offset kept
    when it is known). InvalidHookInput when the event does not name one."""
    session_id = event.get("session_id")
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise InvalidHookInput("session_id is not a Claude Code session's id")
    path = event.get("transcript_path")
    if not isinstance(path, str) or "\0" in path or not path.endswith(".jsonl"):
        raise InvalidHookInput("transcript_path is not a Claude Code transcript's path")
    transcript = Path(path)
    if not transcript.is_absolute():
        raise InvalidHookInput("transcript_path is not an absolute path")
    cwd = event.get("cwd")
    with _queue(folder, create=True) as sessions:
        old = sessions.get(session_id)
        same = isinstance(old, dict) and old.get("transcript") == path
        saved = old.get("offset") if same and isinstance(old, dict) else 0
        offset = saved if isinstance(saved, int) and saved >= 0 else 0
        name = str(event.get("hook_event_name"))
        entry = {
            "transcript": path,
            "offset": offset,
            "cwd": cwd if isinstance(cwd, str) else None,
            "event": name,
            "recorded": time.time(),
        }
        sessions.pop(session_id, None)  # the latest last: the oldest are dropped first
        recorded = RecordedSession(session_id, transcript, offset, name)
        if name != SESSION_END or has_unread(recorded):
            sessions[session_id] = entry  # an ended session read to its end is forgotten
        for stale in list(sessions)[: max(0, len(sessions) - MAX_SESSIONS)]:
            del sessions[stale]
    return recorded


def recorded_sessions(folder: Path) -> list[RecordedSession]:
    """The sessions recorded, the oldest first (the queue's entries that are not sessions
    are left out)."""
    found: list[RecordedSession] = []
    with _queue(folder, create=False) as sessions:
        for session_id, entry in sessions.items():
            if not isinstance(entry, dict) or not SESSION_ID.fullmatch(session_id):
                continue
            path, offset = entry.get("transcript"), entry.get("offset")
            if isinstance(path, str) and isinstance(offset, int) and offset >= 0:
                event = str(entry.get("event"))
                found.append(RecordedSession(session_id, Path(path), offset, event))
    return found


def unread(folder: Path) -> list[RecordedSession]:
    """The sessions whose transcript has grown past what was read of it."""
    return [session for session in recorded_sessions(folder) if has_unread(session)]


def has_unread(session: RecordedSession) -> bool:
    """Whether the session's transcript has bytes past what was read of it."""
    try:
        return session.transcript.stat().st_size != session.offset
    except OSError:
        return False


def failed_attempt(folder: Path, session: RecordedSession, offset: int) -> int:
    """Count one more unusable answer for the stretch of the session at `offset`: how many
    there have been in a row."""
    with _queue(folder, create=True) as sessions:
        entry = sessions.get(session.session_id)
        if not isinstance(entry, dict) or entry.get("transcript") != str(session.transcript):
            return 0
        failures = entry.get("failures")
        count = 1
        if isinstance(failures, dict) and failures.get("offset") == offset:
            previous = failures.get("count")
            count += previous if isinstance(previous, int) else 0
        entry["failures"] = {"offset": offset, "count": count}
        return count


def save_offset(folder: Path, session: RecordedSession, offset: int) -> None:
    """Save how far the session's transcript has been learned from; a session that ended is
    forgotten once its transcript is read to the end."""
    with _queue(folder, create=True) as sessions:
        entry = sessions.get(session.session_id)
        if not isinstance(entry, dict) or entry.get("transcript") != str(session.transcript):
            return  # forgotten meanwhile, or another transcript now
        entry["offset"] = offset
        entry.pop("failures", None)
        ended = entry.get("event") == SESSION_END
        with contextlib.suppress(OSError):
            if ended and session.transcript.stat().st_size == offset:
                del sessions[session.session_id]


def worker_running(database: Path | str) -> bool:
    """Whether a worker holds the store's learning lock. A server's lock is not looked at
    (it takes a connection): a second worker finds it held and stops at once."""
    if fcntl is None or not isinstance(database, Path):
        return False
    try:
        descriptor = os.open(lock_file(database, LEARNING_RUN), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # no lock file: nobody holds it
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing lets go of a lock taken here
    return False


def note_once(folder: Path, note: str, *, source: str = "claude learn") -> None:
    """Append `note` to the worker's log, timestamped, unless it is the log's last line
    already (a Stop without a model key would otherwise add one at every answer)."""
    log_path = folder / LOG_FILE
    try:
        with log_path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - len(note.encode()) - 1))
            if file.read().decode("utf-8", "replace").endswith(note + "\n"):
                return
    except OSError:
        pass
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(descriptor, f"{stamp} {source}: {note}\n".encode())
    finally:
        os.close(descriptor)


def start_worker(
    folder: Path, cwd: Path, db: str | None, *, command: tuple[str, ...] = WORKER_COMMAND
) -> int:
    """Start `command` (`memctl claude learn`, or `sync`) detached: a session of its own, no
    terminal, its output appended to the log beside the queue. The process id."""
    log_path = folder / LOG_FILE
    with contextlib.suppress(OSError):
        if log_path.stat().st_size > LOG_MAX_BYTES:
            os.replace(log_path, log_path.with_name(LOG_FILE + ".1"))
    environment = dict(os.environ)
    if db is not None:
        environment["MEMSTORE_DB"] = db
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        worker = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=descriptor,
            stderr=descriptor,
            cwd=cwd,
            env=environment,
            start_new_session=True,
        )
    finally:
        os.close(descriptor)
    return worker.pid


@contextlib.contextmanager
def _queue(folder: Path, *, create: bool) -> Iterator[dict[str, Any]]:
    """The queue's sessions, locked; written back (atomically) when the block changed them."""
    path = folder / QUEUE_FILE
    if create:
        folder.mkdir(mode=0o700, exist_ok=True)
    elif not folder.is_dir():
        yield {}
        return
    descriptor = os.open(
        folder / (QUEUE_FILE + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600
    )
    try:
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        sessions = _read(path)
        before = json.dumps(sessions)
        yield sessions
        if json.dumps(sessions) != before:
            _write(path, {"sessions": sessions})
    finally:
        os.close(descriptor)


def _read(path: Path) -> dict[str, Any]:
    """The queue's sessions; none when the file is missing or unreadable (it is rebuilt:
    the worst lost is a transcript read again from its start)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    sessions = data.get("sessions") if isinstance(data, dict) else None
    return sessions if isinstance(sessions, dict) else {}


def _write(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    descriptor = os.open(temporary, flags, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(json.dumps(data, indent=1) + "\n")
    os.replace(temporary, path)
