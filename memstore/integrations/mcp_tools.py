"""MemoryTools: what `memctl mcp`'s tools and resources do, over one Door onto the
workspace's store (mcp_server makes them a server; mcp_arguments caps their arguments,
mcp_results shapes what they return).

Reading creates no database; every change is one run of actor `mcp` whose command names the
tool and the client (from the MCP initialize handshake).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from pydantic import Field

from memstore.errors import MemoryAltered, MemstoreError
from memstore.files.format import INDEX_MAX_LINES, render_index, render_memory_file
from memstore.integrations.door import Door, LazyDoor
from memstore.integrations.mcp_arguments import (
    HISTORY_MAX_ENTRIES,
    LIST_MAX_MEMORIES,
    QUERY_MAX_CHARS,
    RECALL_MAX_MEMORIES,
    RECALL_TEXT_MAX_CHARS,
    SEARCH_MAX_HITS,
    Body,
    Description,
    Kind,
    Name,
)
from memstore.integrations.mcp_results import (
    ChangeResult,
    EventResult,
    HistoryResult,
    ListResult,
    MemoryListing,
    RecalledMemory,
    RecallResult,
    RunResult,
    SearchHitResult,
    SearchResult,
    ShownMemory,
)
from memstore.limits import DESCRIPTION_MAX_CHARS
from memstore.llm.messages import recent_user_text
from memstore.recall.fusion import offline_recall
from memstore.recall.turn import RecallPath
from memstore.recall.vectors import SemanticIndex
from memstore.storage.models import MemoryRecord, MemorySummary, MemoryType
from memstore.storage.search_terms import search_terms
from memstore.storage.store import MemoryStore
from memstore.storage.validation import (
    BODY_MAX_BYTES,
    NAME_MAX_LENGTH,
    check_body,
    check_description,
    check_name,
    check_type,
    name_from_text,
)
from memstore.text import show_hidden

ACTOR = "mcp"
# A client's name and version go into each run's command: untrusted text, kept short.
CLIENT_LABEL_MAX_CHARS = 80
# An unnamed memory is named after this many first words of its description.
NAME_WORDS = 6
# What a read finds before the first `remember` created the database: nothing, said so.
NOTHING_YET = "no memory here yet: nothing was remembered in this workspace (`remember` saves one)"


class MemoryTools:
    """The tools and resources of one server, over one Door onto the workspace's store (or
    `db`). Reading creates no database, as memctl's reading commands do not: a server added
    for every project leaves no `.memory/` where nothing was remembered."""

    def __init__(self, db: Path | str | None = None) -> None:
        self._doors = LazyDoor(ACTOR, db=db)
        # Kept for the server's life: it holds the vectors of semantic recall in memory.
        self._semantic: SemanticIndex | None = None

    def open(self, *, create: bool) -> Door:
        """The door, opened on first use; NoDatabase when there is none and not `create`."""
        return self._doors.open(create=create)

    def open_existing(self) -> None:
        """Open the database now if there is one, so that one which cannot be opened fails
        at start-up, in one line."""
        self._doors.existing_store()

    def close(self) -> None:
        if self._semantic is not None:
            self._semantic.close()
        self._doors.close()

    @property
    def store(self) -> MemoryStore:
        return self.open(create=False).store

    def existing_store(self) -> MemoryStore | None:
        """The store, or None before anything was remembered here: reading an empty
        workspace finds nothing, which is no error (the server asks for `recall` first)."""
        return self._doors.existing_store()

    # -- reading ---------------------------------------------------------------------------

    async def recall(
        self,
        text: Annotated[
            str,
            Field(
                description="What you are about to work on: the user's request or the task, "
                "in their words.",
                max_length=RECALL_TEXT_MAX_CHARS,
            ),
        ],
        limit: Annotated[
            int, Field(description="At most this many memories.", ge=1, le=RECALL_MAX_MEMORIES)
        ] = 5,
    ) -> RecallResult:
        """Recall the long-term memories relevant to a request: the user's preferences, how
        they want you to work, and facts about this project, saved in earlier sessions. Call
        it at the start of a task, with the user's request as `text`, before you act. It
        returns the few memories worth knowing (in full, best first), each with why it was
        chosen (the words it shares with the text, and its similarity in meaning when
        semantic recall is on); none when nothing is relevant."""
        # Offline recall, as `memctl recall --offline` (the client has a model of its own),
        # on the text as recall reads a message (its end when long); its hits carry the
        # memories, which recall() would leave to be read again by name.
        text = recent_user_text([{"role": "user", "content": text}])
        if not text:
            return RecallResult(path=RecallPath.NONE.value, reason="no text", memories=[])
        store = self.existing_store()
        if store is None:
            return RecallResult(path=RecallPath.NONE.value, reason=NOTHING_YET, memories=[])
        if self._semantic is None:
            self._semantic = SemanticIndex(store, background=True)
        hits, semantic_used = offline_recall(store, text, limit, semantic=self._semantic)
        sound = {memory.id for memory in store.unaltered(hit.memory for hit in hits)}
        hits = [hit for hit in hits if hit.memory.id in sound]
        path = RecallPath.KEYWORD_AND_SEMANTIC if semantic_used else RecallPath.KEYWORD
        return RecallResult(
            path=path.value,
            reason="" if hits else "no memory is relevant enough",
            memories=[
                RecalledMemory(
                    name=hit.memory.name,
                    type=hit.memory.type,
                    description=hit.memory.description,
                    body=hit.memory.body,
                    score=hit.score,
                    matched=list(hit.matched),
                    similarity=hit.similarity,
                )
                for hit in hits
            ],
        )

    async def search(
        self,
        query: Annotated[
            str,
            Field(description="Words to look for (any language).", max_length=QUERY_MAX_CHARS),
        ],
        limit: Annotated[
            int, Field(description="At most this many hits.", ge=1, le=SEARCH_MAX_HITS)
        ] = 10,
        type: Annotated[MemoryType | None, Field(description="Only memories of this type.")] = None,
    ) -> SearchResult:
        """Full-text search of the memories' names, descriptions and bodies, best first.
        Use it to find a memory you know of (to read, update or forget it), or to check
        whether something is already remembered before `remember`. All words must match
        when any memory has them all; else any word may. Returns name, type, description
        and score of each hit; `show` gives a memory in full."""
        if not search_terms(query):
            return SearchResult(
                hits=[], note=f"no searchable words in {query!r}: common words are not searched"
            )
        store = self.existing_store()
        if store is None:
            return SearchResult(hits=[], note=NOTHING_YET)
        found = store.search(query, limit, type)
        sound = {memory.id for memory in store.unaltered(hit.memory for hit in found)}
        hits = [hit for hit in found if hit.memory.id in sound]
        return SearchResult(
            hits=[
                SearchHitResult(
                    name=hit.memory.name,
                    type=hit.memory.type,
                    description=hit.memory.description,
                    score=hit.score,
                )
                for hit in hits
            ],
            note="" if hits else f"no memory matches {query!r}",
        )

    async def show(self, name: Name) -> ShownMemory:
        """One memory in full: its fields, its version (give it to `update` to make sure
        nobody changed it meanwhile) and its canonical file text (.memory/<name>.md)."""
        return ShownMemory.of_record(self._unaltered(self.store.get(check_name(name))))

    async def list_memories(
        self,
        type: Annotated[MemoryType | None, Field(description="Only memories of this type.")] = None,
        limit: Annotated[
            int,
            Field(description="At most this many, the first by name.", ge=1, le=LIST_MAX_MEMORIES),
        ] = INDEX_MAX_LINES,
    ) -> ListResult:
        """The memories' names, types and one-line descriptions, by name (the MEMORY.md index
        as data), and how many there are. Use it to see what is remembered; `search` finds
        one among many, `show` reads one in full."""
        store = self.existing_store()
        summaries = _summaries(store, type)
        return ListResult(
            memories=[MemoryListing.of(summary) for summary in summaries[:limit]],
            count=len(summaries),
        )

    async def history(
        self,
        name: Annotated[
            str | None,
            Field(
                description="A memory's name: its changes. Leave it out for the recent runs.",
                max_length=NAME_MAX_LENGTH,
            ),
        ] = None,
        limit: Annotated[
            int, Field(description="At most this many, the latest.", ge=1, le=HISTORY_MAX_ENTRIES)
        ] = 20,
    ) -> HistoryResult:
        """The audit history. With a name: every change of any memory that had it (who made
        it, when, in which run, which fields changed), oldest first. Without: the latest
        runs (commands, chat turns, MCP calls) with what each changed. Use it when asked who
        changed a memory or what changed recently."""
        store = self.existing_store()
        if name is None:
            runs = store.history.runs(limit) if store is not None else []
            return HistoryResult(events=[], runs=[RunResult.of(run) for run in runs])
        events = self.store.history.events(check_name(name), limit)
        if not events:
            raise ToolError(f"no history for {name!r}")
        return HistoryResult(events=[EventResult.of(event) for event in events], runs=[])

    # -- changing --------------------------------------------------------------------------

    async def remember(
        self,
        ctx: Context,
        type: Kind,
        description: Description,
        body: Body,
        name: Annotated[
            str | None,
            Field(
                description="A kebab-case name for it; by default one is made from the "
                "description. A name already taken gets a suffix (-2, -3, ...).",
                max_length=NAME_MAX_LENGTH,
            ),
        ] = None,
    ) -> ChangeResult:
        """Save a new long-term memory, for this and future sessions: something the user
        told you to remember, a preference or correction of how to work, or a durable fact
        about the project that is not in the code. One memory per fact; do not save
        secrets (keys, tokens, passwords: they are refused), nor what the code or git
        already says. Never overwrites: a name already taken gets a free one (the result
        says which name was used), and a memory identical to one already saved is reported,
        not saved twice. To change a memory, use `update`."""
        description, body = check_description(description), check_body(body)
        base = check_name(name) if name is not None else _name_for(description)
        with self.open(create=True).change(_command("remember", ctx)) as tx:
            twin = tx.find_identical(type, description, body)
            if twin is not None:
                return _unchanged(twin, f"already remembered as {twin.name}; nothing saved")
            used = tx.free_name(base)
            memory = tx.create(used, type, description, body)
            run_id = tx.run_id
        note = f"remembered as {used}"
        if used != base:
            note += f" ({base!r} is taken by another memory)"
        return self._changed(memory, run_id, note)

    async def update(
        self,
        ctx: Context,
        name: Name,
        new_name: Annotated[
            str | None,
            Field(description="Rename it to this (kebab-case).", max_length=NAME_MAX_LENGTH),
        ] = None,
        type: Annotated[MemoryType | None, Field(description="Its new type.")] = None,
        description: Annotated[
            str | None,
            Field(description="Its new one-line description.", max_length=DESCRIPTION_MAX_CHARS),
        ] = None,
        body: Annotated[
            str | None,
            Field(description="Its new body, in full (Markdown).", max_length=BODY_MAX_BYTES),
        ] = None,
        version: Annotated[
            int | None,
            Field(
                description="The version `show` gave you: the update is refused if the memory "
                "changed since.",
                ge=1,
            ),
        ] = None,
    ) -> ChangeResult:
        """Change a memory that is wrong or out of date: give its name and only the fields
        to change (a body replaces the whole body: `show` it first). Prefer this to
        `remember` when a memory on the subject exists. Returns its name and new version."""
        fields: dict[str, Any] = {
            "name": new_name,
            "type": type,
            "description": description,
            "body": body,
        }
        if all(value is None for value in fields.values()):
            raise ToolError("nothing to change: give new_name, type, description or body")
        with self.open(create=False).change(_command("update", ctx)) as tx:
            memory = tx.get(check_name(name))
            if version is not None and memory.version != version:
                raise ToolError(
                    f"{name} changed since version {version} (it is at version "
                    f"{memory.version}): show it again, then update"
                )
            updated = tx.update(memory, **fields)
            run_id = tx.run_id
        if updated is memory:
            return _unchanged(memory, f"{name} already says that; nothing changed")
        return self._changed(updated, run_id, f"updated {updated.name}")

    async def forget(self, ctx: Context, name: Name) -> ChangeResult:
        """Forget a memory that is wrong or that the user wants gone. It leaves the index
        and recall at once; it stays in the history, and a person can bring it back with
        `memctl restore <name>`."""
        with self.open(create=False).change(_command("forget", ctx)) as tx:
            memory = tx.delete(tx.get(check_name(name)))
            run_id = tx.run_id
        result = self._changed(memory, run_id, f"forgot {name} (memctl restore {name})")
        result.version = None
        return result

    def _unaltered(self, memory: MemoryRecord) -> MemoryRecord:
        """`memory`, unless it was changed outside memstore (MemoryAltered)."""
        if not self.store.unaltered([memory]):
            raise MemoryAltered(memory.name)
        return memory

    def _changed(self, memory: MemoryRecord, run_id: str, note: str) -> ChangeResult:
        failure = self.open(create=False).export_failure
        if failure is not None:
            note += f"; .memory/ was not rewritten: {failure}"
        return ChangeResult(
            name=memory.name, changed=True, version=memory.version, run_id=run_id, note=note
        )

    # -- resources -------------------------------------------------------------------------

    async def index(self) -> str:
        """The MEMORY.md index: one line per memory, name and description."""
        return show_hidden(render_index(_summaries(self.existing_store())))

    async def memory_file(self, name: str) -> str:
        """A memory's canonical file text (.memory/<name>.md)."""
        try:
            memory = self._unaltered(self.store.get(check_name(name)))
            return show_hidden(render_memory_file(memory))
        except MemstoreError as error:
            raise ResourceNotFoundError(str(error)) from None


def _summaries(store: MemoryStore | None, type: str | None = None) -> list[MemorySummary]:
    """The listing of the live memories (of `type`) an agent is shown: those changed outside
    memstore left out."""
    if store is None:
        return []
    checked = None if type is None else check_type(type)
    return [
        MemorySummary(m.name, m.type, m.description)
        for m in store.unaltered_all()
        if checked is None or m.type == checked
    ]


def _name_for(description: str) -> str:
    return name_from_text(" ".join(description.split()[:NAME_WORDS]))


def _unchanged(memory: MemoryRecord, note: str) -> ChangeResult:
    return ChangeResult(
        name=memory.name, changed=False, version=memory.version, run_id=None, note=note
    )


def _command(tool: str, ctx: Context) -> str:
    """The run's command: the tool and the client, as its initialize handshake named it."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    label = " ".join(filter(None, [info.name, info.version])) if info is not None else ""
    label = "".join(c if c.isprintable() else "?" for c in " ".join(label.split()))
    return f"mcp {tool} ({label[:CLIENT_LABEL_MAX_CHARS] or 'unnamed client'})"
