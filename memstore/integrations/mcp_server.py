"""`memctl mcp`: the workspace's memory as a Model Context Protocol server over stdio, for
Claude Code, Claude Desktop and other MCP clients (the official `mcp` SDK, the optional extra
`agent-memstore[mcp]`).

Tools: recall, search, show, list (read), remember, update, forget (write), history.
Resources: the MEMORY.md index, and each memory's canonical file by name. Every change goes
through the Door, as one run of actor `mcp` whose command names the tool and the client
(from the MCP initialize handshake). Every string argument has a size cap, published in the
tool's input schema and checked before any work; every failure is a tool error in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError

from memstore.errors import MemstoreError, NoDatabase
from memstore.files.format import (
    INDEX_FILE_NAME,
    INDEX_MAX_LINES,
    render_index,
    render_memory_file,
)
from memstore.integrations.door import Door, LazyDoor
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
from memstore.storage.models import MemoryRecord, MemoryType
from memstore.storage.search import search_terms
from memstore.storage.store import MemoryStore
from memstore.storage.validation import (
    BODY_MAX_BYTES,
    NAME_MAX_LENGTH,
    check_body,
    check_description,
    check_name,
    name_from_text,
)

ACTOR = "mcp"
# Caps on the arguments a client sends, checked before any work. A field of a memory is
# capped as the store caps it; the texts that are only searched are capped at what helps.
RECALL_TEXT_MAX_CHARS = 10_000
QUERY_MAX_CHARS = 1_000
RECALL_MAX_MEMORIES = 20
SEARCH_MAX_HITS = 50
HISTORY_MAX_ENTRIES = 200
# A listing as long as a client's context can take; by default the index's length.
LIST_MAX_MEMORIES = 1_000
# A client's name and version go into each run's command: untrusted text, kept short.
CLIENT_LABEL_MAX_CHARS = 80
# An unnamed memory is named after this many first words of its description.
NAME_WORDS = 6
INDEX_URI = "memstore://index"
# What a read finds before the first `remember` created the database: nothing, said so.
NOTHING_YET = "no memory here yet: nothing was remembered in this workspace (`remember` saves one)"
MEMORY_URI = "memstore://memory/{name}"

Name = Annotated[
    str,
    Field(
        description="A memory's name: kebab-case (a-z, 0-9, hyphens), as list, search and "
        "recall show it.",
        max_length=NAME_MAX_LENGTH,
    ),
]
Description = Annotated[
    str,
    Field(
        description="One line saying what the memory is about; it is what the MEMORY.md index "
        "shows, so make it specific.",
        max_length=DESCRIPTION_MAX_CHARS,
    ),
]
Body = Annotated[
    str,
    Field(
        description="What to remember, in Markdown: the fact, preference or guidance, and why.",
        max_length=BODY_MAX_BYTES,
    ),
]
Kind = Annotated[
    MemoryType,
    Field(
        description="user (the person's preferences and profile), feedback (how they want "
        "you to work), project (facts about this project), reference (pointers to outside "
        "material)."
    ),
]


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
        hits = store.search(query, limit, type)
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
        return ShownMemory.of_record(self.store.get(check_name(name)))

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
        summaries = store.summaries(type) if store is not None else []
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
        store = self.existing_store()
        return render_index(store.summaries() if store is not None else [])

    async def memory_file(self, name: str) -> str:
        """A memory's canonical file text (.memory/<name>.md)."""
        try:
            return render_memory_file(self.store.get(check_name(name)))
        except MemstoreError as error:
            raise ResourceNotFoundError(str(error)) from None


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


class _Server(MCPServer):
    """The SDK's server, with every tool failure said in one line: an argument that does not
    fit its schema (pydantic's report spans lines and echoes the value), and a store error
    (the SDK hides any exception it did not expect behind a generic message)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name == "update":
            arguments = _version_by_its_former_name(arguments)
        _refuse_unknown_arguments(self._tool_manager.get_tool(name), arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"{name}: invalid arguments: {_problems(cause)}") from None
            if isinstance(cause, NoDatabase):
                raise ToolError(
                    f"{name}: no memory here yet ({cause}); `remember` creates it"
                ) from None
            if isinstance(cause, MemstoreError | ToolError):  # the SDK's prefix said twice
                raise ToolError(f"{name}: {cause}") from None
            raise


def _version_by_its_former_name(arguments: dict[str, Any]) -> dict[str, Any]:
    """`update`'s arguments with `expected_version`, as `version` was called before it took
    the name `show` gives it, read as `version`: clients written then keep working."""
    if "expected_version" not in arguments:
        return arguments
    rest = {key: value for key, value in arguments.items() if key != "expected_version"}
    former = arguments["expected_version"]
    if rest.setdefault("version", former) != former:
        raise ToolError("update: version and expected_version (its former name) differ")
    return rest


def _refuse_unknown_arguments(tool: Tool | None, arguments: dict[str, Any]) -> None:
    """An argument the tool does not take is refused, not dropped (as pydantic would): a
    model that wrote `version_seen` for `version` would think its update was checked."""
    if tool is None:
        return
    known = tool.parameters.get("properties", {})
    unknown = sorted(key for key in arguments if key not in known)
    if unknown:
        raise ToolError(
            f"{tool.name}: unknown argument {', '.join(repr(key[:40]) for key in unknown[:5])}"
            f" (it takes {', '.join(known)})"
        )


def _problems(error: ValidationError) -> str:
    """Each argument's problem, without its value (which may be huge, or a secret)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
        for problem in error.errors(include_url=False, include_input=False)
    )


READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(tools: MemoryTools, version: str = "") -> MCPServer:
    """The MCP server of these tools and resources; `version` is what it tells clients it
    is (memstore's, which this layer may not import)."""
    server = _Server(
        "memstore",
        version=version,
        instructions="Long-term memory of this workspace, kept by memstore: call `recall` "
        "with the user's request at the start of a task; `remember` what they ask you to "
        "keep, and `update` or `forget` what turns out wrong. Every change is audited.",
        log_level="WARNING",
    )
    for tool in (tools.recall, tools.search, tools.show, tools.history):
        server.add_tool(tool, annotations=READ)
    server.add_tool(tools.list_memories, name="list", annotations=READ)
    server.add_tool(tools.remember, annotations=ToolAnnotations(destructive_hint=False))
    server.add_tool(tools.update, annotations=ToolAnnotations(idempotent_hint=True))
    server.add_tool(tools.forget, annotations=ToolAnnotations(idempotent_hint=False))
    server.resource(INDEX_URI, name=INDEX_FILE_NAME, mime_type="text/markdown")(tools.index)
    server.resource(MEMORY_URI, name="memory", mime_type="text/markdown")(tools.memory_file)
    return server


def serve(db: Path | str | None = None, version: str = "") -> None:
    """Serve the store memctl would use here (or `db`) over stdio until the client leaves."""
    tools = MemoryTools(db)
    try:
        tools.open_existing()
        build_server(tools, version).run("stdio")
    finally:
        tools.close()
