"""Typed errors. The library raises them; the CLI renders each as one line on stderr."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class MemstoreError(Exception):
    """Base of every error a user can cause; str(error) is the one line to show."""


class InvalidMemory(MemstoreError):
    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"invalid {field}: {rule}")


class SecretRefused(InvalidMemory):
    """A memory holds what looks like a credential: nothing was written. Memories are
    exported to files a team commits and go into prompts, so secrets stay out unless a
    person explicitly allows one (the model-facing doors never do)."""

    def __init__(self, field: str, kind: str, name: str | None = None) -> None:
        article = "an" if kind[:1].lower() in "aeio" or kind.startswith("npm") else "a"
        super().__init__(field, f"holds what looks like {article} {kind}")
        self.kind = kind
        self.name = name
        where = f"memory {name!r}: " if name else ""
        self.args = (
            f"{where}{field} holds what looks like {article} {kind}; secrets are not saved",
        )


class TooLongToCheck(SecretRefused):
    """A memory with more text than the secret check reads: refused as a secret is, since
    what the check has not read it cannot clear."""

    def __init__(self, field: str, length: int, limit: int, name: str | None = None) -> None:
        InvalidMemory.__init__(
            self,
            field,
            f"is too long to check for secrets ({length:,} characters with the rest of the "
            f"memory; the check reads {limit:,})",
        )
        self.kind = "text too long to check"
        self.name = name
        where = f"memory {name!r}: " if name else ""
        self.args = (f"{where}{field} {self.rule}; not saved",)


class MemoryNotFound(MemstoreError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no memory named {name!r}")


class AlreadyPurged(MemstoreError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"{name!r} was purged already: its history holds nothing of it to erase")


class MemoryExists(MemstoreError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"a memory named {name!r} already exists")


class NothingToRestore(MemstoreError):
    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        super().__init__(f"cannot restore {name!r}: {reason}")


class SchemaTooNew(MemstoreError):
    def __init__(self, path: str, revision: str) -> None:
        self.revision = revision
        super().__init__(
            f"{path} was written by a newer memstore (schema revision {revision!r}); "
            "upgrade memstore to open it"
        )


class StoreUnavailable(MemstoreError):
    """The database file cannot be opened or is busy beyond the timeout."""


class ConnectionLost(StoreUnavailable):
    """The server cut the connection while a statement ran (a restart, a shutdown, a network
    cut). A read is run once more when the server is back (MemoryStore); a write is not: its
    transaction was rolled back unless the cut came while it committed."""


@dataclass(frozen=True)
class FileProblem:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ExportConflict(MemstoreError):
    """Files that export would overwrite or remove hold text the database does not have.

    `reasons` says, per file, which side is newer: "file" (edited by hand, its memory
    unchanged in the database since), "both" (edited by hand and changed in the database),
    "deleted" (edited by hand, its memory deleted since) or "unknown" (a file memstore did
    not write, whose text is no version of its memory)."""

    def __init__(
        self,
        directory: str,
        paths: Sequence[str],
        reasons: Mapping[str, str] | None = None,
        *,
        import_command: str | None = None,
        export_command: str = "memctl export",
    ) -> None:
        # The commands the advice names are the folder's: Claude Code's is `memctl claude`'s.
        import_command = import_command or f"memctl import {directory}"
        self.directory = directory
        self.paths = list(paths)
        self.reasons = dict(reasons or {})
        kinds = {self.reasons.get(path, "unknown") for path in self.paths}
        shown = ", ".join(
            f"{path} ({_CONFLICT_WORDS[self.reasons.get(path, 'unknown')]})"
            for path in self.paths[:5]
        ) + (f" and {len(self.paths) - 5} more" if len(self.paths) > 5 else "")
        advice = []
        if "file" in kinds:
            advice.append(
                f"'{import_command}' brings in the edits of files whose memory did "
                "not change since (and nothing older than the database)"
            )
        if kinds & {"both", "deleted"}:
            advice.append(
                f"where both changed, '{import_command} --force' takes the file's text (history"
                " keeps the database's), or redo the file's edit with 'memctl edit' (or restore)"
            )
        if "unknown" in kinds:
            advice.append(
                f"'{import_command}' would take an unknown file's text over the database's"
            )
        advice.append(
            f"'{export_command} --force' overwrites them all with the database's, keeping a"
            " copy of each beside it"
        )
        super().__init__(
            f"refusing to overwrite {len(self.paths)} file(s) in {directory} that hold text the "
            f"database does not have: {shown}; {'; '.join(advice)}"
        )


_CONFLICT_WORDS = {
    "file": "edited by hand; the file is newer: its memory has not changed since",
    "both": "edited by hand, and its memory changed in the database since: both are newer",
    "deleted": "edited by hand, and its memory was deleted since",
    "unknown": "not written by memstore, and no version of its memory",
}


class ImportRejected(MemstoreError):
    def __init__(self, problems: Sequence[FileProblem]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"import aborted, nothing changed: {len(self.problems)} file(s) cannot be imported"
            " as memories (use --skip-invalid to import the rest)"
        )


class QueryFailed(MemstoreError):
    """A read-only SQL query from the user failed (syntax, unknown table, attempted write)."""


class ExportFailed(MemstoreError):
    """The export folder could not be written (a file in the way, no permission, …)."""


class ImportFailed(MemstoreError):
    """The import could not start (e.g. the folder does not exist); nothing changed."""


class CopyRefused(MemstoreError):
    """The copy cannot be made as asked; nothing was written."""


class RunNotFound(MemstoreError):
    """No run has the given id (or id prefix), or several do."""


class CannotUndo(MemstoreError):
    """Undoing a run would not restore the state before it exactly, so nothing was changed."""


class ConsolidationRefused(MemstoreError):
    """The model's consolidation was not applied; the message says why."""


class ConsolidationSkipped(MemstoreError):
    """Another consolidation of the store is running (another agent, machine or memctl):
    this one did not start, asked the model nothing and changed nothing; it is due again
    later."""


class HistoryTampered(MemstoreError):
    """The history does not verify (its hash chain, or the rows its events replay to):
    the database was edited outside memstore. `problems`: every difference, a line each."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


class MemoryAltered(MemstoreError):
    """A memory was changed outside memstore (its row does not match its last event in
    history). Asked for by an agent: it is not shown (storage/unaltered.py). About to be
    changed (`writing`): nothing is written, since the write would record the altered row as
    memstore's own (storage/transaction.py)."""

    def __init__(self, name: str, *, writing: bool = False) -> None:
        self.name = name
        self.writing = writing
        outcome = "nothing was written" if writing else "it is not shown"
        super().__init__(
            f"memory {name!r} was changed outside memstore (its row does not match its last"
            f" event in history); {outcome}; run `memctl history --verify`"
        )


class SemanticUnavailable(MemstoreError):
    """Semantic recall cannot run: its model's files do not match their pinned SHA-256 or
    do not load."""


class NoDatabase(MemstoreError):
    """A command that only reads found no database: it creates none."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"no database at {path}")


class InvalidHookInput(MemstoreError):
    """What `memctl hook` read on stdin is not a Claude Code hook's JSON it answers."""


class DatabaseCorrupt(StoreUnavailable):
    """SQLite reports the database file as damaged (corrupted pages)."""


class UnreadableFile(ValueError):
    """The text is not a memory file; the message says why. A ValueError, not a
    MemstoreError: the importer turns it into a FileProblem of that file, never a failure."""


class NotAMemory(UnreadableFile):
    """A Markdown file with no frontmatter: a person's own note (`.memory/TODO.md`), not a
    memory. Import skips it, saying so, and imports the rest; export never touches it."""


class InvalidSettings(MemstoreError):
    """The settings file cannot be read, or holds a rule that is not understood; or a
    database location (--db, MEMSTORE_DB) is no path nor a URL memstore can open."""


class SessionNotFound(MemstoreError):
    """No saved chat session has the given id (or id prefix), or several do."""


class ModelUnavailable(MemstoreError):
    """The model could not be asked, or did not answer usably; the reason is the message.
    `transient`: asking again may work (a dropped connection, an overload mid-stream)."""

    def __init__(self, reason: str, *, transient: bool = False) -> None:
        super().__init__(reason)
        self.transient = transient


class PromptTooLong(ModelUnavailable):
    """The API refused the prompt as too long: only a shorter one can be answered."""


class UnparseableReply(ModelUnavailable):
    """A tool call's input in the streamed reply is not JSON: nothing of the reply can run."""


class AgentFailed(MemstoreError):
    """The model call failed after retries; the session and its history are intact."""


class NoClaudeFolder(MemstoreError):
    """The workspace's project has no Claude Code memory folder (Claude Code makes it when it
    first saves a memory there)."""

    def __init__(self, project: str, path: str) -> None:
        self.project = project
        self.path = path
        super().__init__(
            f"no Claude Code memory folder for {project}: {path} does not exist (Claude Code "
            "makes it when it first saves a memory in this project; to export to it first: "
            'mkdir -p "$(memctl claude path)")'
        )


class ClaudeSettingsRefused(MemstoreError):
    """`memctl claude install` or `uninstall` left Claude Code's settings as they were: a file
    that is not JSON, a setting of another shape, a file it cannot write."""
