"""What each page shows, gathered from the read layer: the memories (a type, a search with
its matched words marked, counts per type, each one's age and last actor), one memory (its
canonical file and timeline), the runs and one run, what recall would show for a prompt, and
the store's health. Each handler takes the Site (app.py) and the request, and renders one
template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from memstore.errors import RunNotFound
from memstore.storage.history_reader import EventView
from memstore.storage.search_terms import search_terms
from memstore.storage.validation import MemoryType
from memstore.ui.health import Health
from memstore.ui.health import health as store_health
from memstore.ui.highlight import Query, excerpt, marked
from memstore.ui.reads import LastChange, Listed, UiReads
from memstore.ui.runs import RunLine, kind, run_changes, undo_command
from memstore.ui.shown import shown
from memstore.ui.timeline import timeline

if TYPE_CHECKING:
    from memstore.ui.site import Site

PAGE_SIZE = 100
SEARCH_LIMIT = 100
TYPES = tuple(t.value for t in MemoryType)


@dataclass(frozen=True)
class Row:
    """A memory in the listing: its fields as safe HTML (marked when searched)."""

    memory: Listed
    name: Markup
    description: Markup
    excerpt: Markup | None
    last: LastChange | None
    score: float | None = None


def _type(request: Request) -> str | None:
    given = request.query_params.get("type") or None
    if given is not None and given not in TYPES:
        raise HTTPException(400, f"no memory type {given!r}: {', '.join(TYPES)}")
    return given


def _page_number(request: Request) -> int:
    try:
        return max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        raise HTTPException(400, "page is a number") from None


def memories(site: Site, request: Request) -> Response:
    type = _type(request)
    text = request.query_params.get("q", "").strip()
    number = _page_number(request)
    with site.reads() as reads:
        counts = reads.type_counts()
        if text:
            rows, note = _searched(reads, text, type)
            pages = 1
        else:
            listed = reads.listing(type, (number - 1) * PAGE_SIZE, PAGE_SIZE)
            last = reads.last_changes([m.id for m in listed])
            rows = [
                Row(m, shown(m.name), shown(m.description), None, last.get(m.id)) for m in listed
            ]
            total = counts.get(type, 0) if type else sum(counts.values())
            pages = max(1, -(-total // PAGE_SIZE))
            note = ""
    return site.page(
        "memories.html",
        rows=rows,
        counts=counts,
        total=sum(counts.values()),
        types=TYPES,
        type=type,
        query=text,
        note=note,
        page=number,
        pages=pages,
    )


def _searched(reads: UiReads, text: str, type: str | None) -> tuple[list[Row], str]:
    """The memories matching `text`, best first, their matched words marked; a note when
    there is nothing to search for or nothing matched."""
    if not search_terms(text):
        return [], "no searchable words: common words like 'the' or 'how' are not searched"
    hits = reads.search(text, SEARCH_LIMIT, type)
    query = Query.of(text)
    last = reads.last_changes([hit.memory.id for hit in hits])
    rows = []
    for hit in hits:
        m = hit.memory
        listed = Listed(m.id, m.name, m.type, m.description, m.created_at, m.updated_at)
        rows.append(
            Row(
                listed,
                marked(m.name, query),
                marked(m.description, query),
                excerpt(m.body, query),
                last.get(m.id),
                hit.score,
            )
        )
    return rows, "" if rows else "no memory matches"


def memory(site: Site, request: Request) -> Response:
    name = request.path_params["name"]
    from memstore.files.format import render_memory_file

    with site.reads() as reads:
        live = reads.find(name)
        history = reads.history
        events = history.events(name)
        if live is None and not events:
            raise HTTPException(404, f"no memory {name!r}, live or in history")
        runs = history.runs_by_id({e.run_id for e in events})
        merged_ids = [m for e in events if (m := getattr(e, "merged_into", None)) is not None]
        names = reads.names(merged_ids)
        undone = reads.undone_by(list({e.run_id for e in events}))
        refusals = reads.undo_refusals([e.run_id for e in events])
        sources = reads.merged_sources(list({e.memory_id for e in events}))
        renamed = _renamed_to(reads, name, events) if live is None else None
        restore_refusal = reads.restore_refusal(name) if live is None and not renamed else None
    entries = timeline(events, runs, names, undone, refusals)
    entries.reverse()  # newest first
    return site.page(
        "memory.html",
        name=name,
        live=live,
        renamed=renamed,
        restore_refusal=restore_refusal,
        file=render_memory_file(live) if live is not None else None,
        entries=entries,
        sources=sources,
        several=len({e.memory_id for e in events}) > 1,
    )


RUNS_SHOWN = 200
RUN_EVENTS_SHOWN = 100
RECALL_LIMIT = 5


def _renamed_to(reads: UiReads, name: str, events: Sequence[EventView]) -> str | None:
    """The live memory's name that one which had `name` goes by now, if it was renamed."""
    for event in reversed(events):
        new = event.new_value or {}
        if event.operation != "delete" and new.get("name") not in (None, name):
            return str(new["name"]) if reads.find(str(new["name"])) is not None else None
    return None


def runs(site: Site, request: Request) -> Response:
    with site.reads() as reads:
        rows = reads.history.runs(RUNS_SHOWN)
        rows.reverse()  # newest first
        ids = [str(row["run_id"]) for row in rows]
        undone = reads.undone_by(ids)
        changed = [run_id for run_id, row in zip(ids, rows, strict=True) if row["events"]]
        refusals = reads.undo_refusals(changed)
    lines = [RunLine(row, undone.get(i), refusals.get(i)) for i, row in zip(ids, rows, strict=True)]
    return site.page("runs.html", runs=lines, limit=RUNS_SHOWN)


def run(site: Site, request: Request) -> Response:
    with site.reads() as reads:
        history = reads.history
        try:
            found = history.find_run(request.path_params["run_id"])
        except RunNotFound as error:
            raise HTTPException(404, str(error)) from None
        events, total = reads.run_events(found.id, RUN_EVENTS_SHOWN)
        merged_ids = [m for e in events if (m := getattr(e, "merged_into", None)) is not None]
        names = reads.names(merged_ids)
        undone = reads.undone_by([found.id])
        refusals = reads.undo_refusals([found.id])
    entries = timeline(events, {found.id: found}, names, undone, refusals)
    return site.page(
        "run.html",
        run=found,
        kind=kind(found.actor),
        changes=run_changes(found, events, entries),
        undone_by=undone.get(found.id),
        undo_refusal=refusals.get(found.id),
        undo_command=undo_command(found.id),
        show_name=True,
        total=total,
        shown_events=len(events),
    )


def recall(site: Site, request: Request) -> Response:
    """What offline recall chooses for the prompt (the model is never asked from here), as
    `memctl recall --offline --json` says it; what the Claude Code hook adds to the prompt,
    its own text; and the block `memctl chat` adds to the turn when no model chooses."""
    from memstore.recall.block import memories_block
    from memstore.recall.turn import recall as recall_memories

    text = request.query_params.get("q", "").strip()
    if not text:
        return site.page("recall.html", query="", result=None)
    with site.reads() as reads:
        result = recall_memories([{"role": "user", "content": text}], RECALL_LIMIT, store=reads)
        found = {name: reads.find(name) for name in result.names}
        # As chat's turn (agent/memory.py): a memory changed outside memstore is left out.
        block = memories_block(reads.unaltered(m for m in found.values() if m is not None))
    query = Query.of(text)
    chosen = [
        Chosen(
            name,
            result.scores.get(name),
            result.matched.get(name, ()),
            result.similarity.get(name),
            marked(memory.description, query) if memory is not None else Markup(""),
        )
        for name, memory in found.items()
    ]
    return site.page(
        "recall.html",
        query=text,
        result=result,
        chosen=chosen,
        block=block,
        hook=hook_context(site.location, text),
    )


def hook_context(location: Path | str, prompt: str) -> str:
    """What the Claude Code hook adds to `prompt`: the additionalContext of its own answer
    to a UserPromptSubmit (integrations/claude_hook.py), the same text; "" when it adds
    nothing (nothing recalled, or the store unreadable: the hook then says why on stderr)."""
    from memstore.integrations.claude_hook import USER_PROMPT_SUBMIT, respond

    event = {"hook_event_name": USER_PROMPT_SUBMIT, "prompt": prompt}
    answer = respond(json.dumps(event), db=location)
    return str(json.loads(answer)["hookSpecificOutput"]["additionalContext"]) if answer else ""


@dataclass(frozen=True)
class Chosen:
    """A memory recall chose, as `memctl recall --json` lists it."""

    name: str
    score: float | None
    matched: tuple[str, ...]
    similarity: float | None
    description: Markup


def health(site: Site, request: Request) -> Response:
    """The chain verified and every memory scanned: kept while the store's mark (reads.py)
    stays the same, and done again when asked (`?again=1`); the page says when."""
    found = health_findings(site, again=bool(request.query_params.get("again")))
    return site.page("health.html", health=found)


def health_findings(site: Site, *, again: bool = False) -> Health:
    """The health page's findings, made at most once at a time (a second visit meanwhile
    waits for them: the server starts making them as it starts, see app.py)."""
    with site.health_lock, site.reads() as reads:
        mark = reads.health_mark()
        kept = site.health
        if again or kept is None or kept[0] != mark:
            kept = site.health = (mark, store_health(reads, site.secret_scan))
    return kept[1]
