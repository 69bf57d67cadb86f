"""Where memctl chat keeps its sessions: one folder per session under the database's
`sessions/`, named by an id that sorts by time, with the session's token counts beside its
transcript (so that /cost goes on after --resume). Transcripts hold the conversation
verbatim, secrets included: the folder is kept out of git even where `.memory/` is committed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

from memstore.agent.compact import finite, json_line, open_private
from memstore.errors import SessionNotFound
from memstore.llm.client import Usage
from memstore.llm.messages import Message
from memstore.storage.memory_folder import SESSIONS_FOLDER

USAGE_FILE = "usage.json"
USAGE_FIELDS = {f.name for f in fields(Usage)}


@dataclass
class SessionFiles:
    """Where one chat session keeps its transcript, saved tool outputs and compactions."""

    directory: Path

    @property
    def transcript(self) -> Path:
        return self.directory / "transcript.jsonl"

    @property
    def tool_results(self) -> Path:
        return self.directory / "tool-results"

    def compaction_transcript(self) -> Path:
        existing = len(list(self.directory.glob("before-compaction-*.jsonl")))
        return self.directory / f"before-compaction-{existing + 1}.jsonl"

    def load(self) -> tuple[list[Message], int]:
        """The saved conversation, and how many lines could not be read (a crash in the
        middle of a write can leave the last one partial)."""
        messages: list[Message] = []
        skipped = 0
        text = self.transcript.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            # End the partial line, so that what is appended next starts a line of its own.
            with self.transcript.open("a", encoding="utf-8") as handle:
                handle.write("\n")
        for line in filter(None, text.split("\n")):
            try:
                # Infinity or NaN, which older transcripts can hold, are read as null.
                message = json.loads(line, parse_constant=lambda _: None)
            except json.JSONDecodeError:
                skipped += 1
                continue
            if isinstance(message, dict) and message.get("role") in ("user", "assistant"):
                messages.append(finite(message)[0])  # 1e999 reads as inf too
            else:
                skipped += 1
        return messages, skipped

    def append(self, message: Message) -> None:
        # ASCII JSON: one message is one line whatever it holds (U+2028, lone surrogates).
        line = json_line(message)
        with open_private(self.transcript, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def sessions_folder(database: Path) -> Path:
    return database.parent / SESSIONS_FOLDER


def new_session_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + os.urandom(3).hex()


def find_session(sessions: Path, wanted: str) -> Path:
    """The session folder `wanted` names (an id or its prefix), or the latest for "last"."""
    found = sorted(p for p in sessions.glob("*") if (p / "transcript.jsonl").is_file())
    if wanted != "last":
        found = [p for p in found if p.name.startswith(wanted)]
    if not found:
        raise SessionNotFound(f"no saved session {wanted!r} in {sessions}")
    if wanted != "last" and len(found) > 1:
        raise SessionNotFound(f"several sessions start with {wanted!r}; give more of the id")
    return found[-1]


def keep_out_of_git(sessions: Path) -> None:
    sessions.mkdir(parents=True, exist_ok=True)
    if not (sessions / ".gitignore").exists():
        (sessions / ".gitignore").write_text("# memctl chat transcripts: local only\n*\n")


def session_folder(sessions: Path, resumed: Path | None = None) -> tuple[Path, str]:
    """The folder a session is saved in, and a line for the user ("" when there is nothing to
    say): a new one under `sessions`, kept out of git, or the `resumed` one. Where `sessions`
    cannot be written (a read-only `.memory/`), the chat still starts: a new private folder
    in the system's temporary folder holds the session (a copy of the resumed one)."""
    try:
        keep_out_of_git(sessions)
    except OSError as error:
        elsewhere = Path(tempfile.mkdtemp(prefix="memctl-chat-"))  # the user's alone (0700)
        folder = elsewhere / (resumed.name if resumed is not None else new_session_id())
        if resumed is not None:
            shutil.copytree(resumed, folder)
        reason = error.strerror or error
        return folder, f"cannot write {sessions} ({reason}): this session is saved in {folder}"
    return (resumed if resumed is not None else sessions / new_session_id()), ""


def save_usage(directory: Path, agent: Usage, side: Usage) -> None:
    """The session's token counts, written whole (through a temporary file) or not at all."""
    counts = {"agent": asdict(agent), "side": asdict(side)}
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / f".{USAGE_FILE}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(counts) + "\n", encoding="utf-8")
        temporary.replace(directory / USAGE_FILE)


def load_usage(directory: Path, agent: Usage, side: Usage) -> None:
    """Add the saved token counts to `agent` and `side`; nothing from a session saved before
    usage was kept, or an unreadable file (its counts start from zero)."""
    try:
        counts = json.loads((directory / USAGE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(counts, dict):
        return
    for key, usage in (("agent", agent), ("side", side)):
        saved = counts.get(key)
        if isinstance(saved, dict):
            usage.merge(
                Usage(
                    **{
                        name: value
                        for name, value in saved.items()
                        if name in USAGE_FIELDS and type(value) is int and value >= 0
                    }
                )
            )
