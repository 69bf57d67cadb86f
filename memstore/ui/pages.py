"""What each page shows, gathered from the read layer: the memories (a type, a search with
its matched words marked, counts per type, each one's age and last actor), one memory (its
canonical file and timeline), the runs and one run, what recall would show for a prompt, and
the store's health. Each handler takes the Site (app.py) and the request, and renders one
template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from memstore.errors import InvalidMemory, RunNotFound
from memstore.storage.search_terms import search_terms
from memstore.storage.validation import MemoryType
from memstore.ui.highlight import Query, excerpt, marked
from memstore.ui.reads import LastChange, Listed, UiReads
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
        sources = reads.merged_sources(list({e.memory_id for e in events}))
    entries = timeline(events, runs, names, undone)
    entries.reverse()  # newest first
    return site.page(
        "memory.html",
        name=name,
        live=live,
        file=render_memory_file(live) if live is not None else None,
        entries=entries,
        sources=sources,
        several=len({e.memory_id for e in events}) > 1,
    )


def runs(site: Site, request: Request) -> Response:
    raise HTTPException(404, "not yet")


def run(site: Site, request: Request) -> Response:
    try:
        raise RunNotFound("not yet")
    except (RunNotFound, InvalidMemory) as error:
        raise HTTPException(404, str(error)) from None


def recall(site: Site, request: Request) -> Response:
    raise HTTPException(404, "not yet")


def health(site: Site, request: Request) -> Response:
    raise HTTPException(404, "not yet")
