"""The memories themselves: list, show, add, edit, rm, restore, search, recall."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memctl.context import (
    TYPE_HELP,
    AllowSecretOption,
    JsonOption,
    State,
    err,
    fail,
    memory_to_change,
    no_database_yet,
    open_store,
    quoted,
    reading,
    secret_hint,
)
from memctl.render import (
    memory_as_dict,
    print_json,
    print_table,
    recall_summary,
    shown_score,
    visible_controls,
)
from memstore.errors import MemoryNotFound, MemstoreError, NothingToRestore, SecretRefused
from memstore.text import show_hidden

if TYPE_CHECKING:
    from memstore.storage.models import MemoryRecord
    from memstore.storage.store import MemoryStore


def list_memories(
    type: Annotated[str | None, typer.Option("--type", "-t", help=TYPE_HELP)] = None,
    json: JsonOption = False,
) -> None:
    """List the memories."""
    with reading() as store:
        if json:
            print_json([memory_as_dict(m) for m in store.memories(type)])
            return
        summaries = store.summaries(type)
    if summaries:
        print_table(["NAME", "TYPE", "DESCRIPTION"], summaries)
    else:
        err("no memories yet: add one with 'memctl add' or bring a folder in with 'memctl import'")


def show(name: str, json: JsonOption = False) -> None:
    """Show one memory in its canonical file form."""
    from memstore.files.format import render_memory_file

    with reading() as store:
        memory = store.get(name)
    if json:
        print_json(memory_as_dict(memory))
    else:
        text = render_memory_file(memory)
        # A memory is untrusted text: on a terminal its escape sequences are shown, not run;
        # anywhere, what would not be seen is shown (a pipe is often read by a model).
        sys.stdout.write(visible_controls(text) if sys.stdout.isatty() else show_hidden(text))


def add(
    name: str,
    type: Annotated[str, typer.Option("--type", "-t", help=TYPE_HELP)],
    description: Annotated[
        str, typer.Option("--description", "-d", help="One line, shown in the index.")
    ],
    body: Annotated[
        str | None, typer.Option("--body", "-b", help="Markdown body (default: read stdin).")
    ] = None,
    allow_secret: AllowSecretOption = False,
) -> None:
    """Add a memory; the body comes from --body or stdin."""
    if body is None:
        if sys.stdin.isatty():
            fail("give the body with --body, or pipe it on stdin")
        body = sys.stdin.read()
    try:
        if no_database_yet():
            from memstore.storage.validation import check_new_memory

            check_new_memory(name, type, description, body, allow_secrets=allow_secret)
        with open_store() as store:
            memory = store.create(name, type, description, body, allow_secrets=allow_secret)
    except SecretRefused as error:
        secret_hint(error)
    err(f"added {memory.name}")


def edit(
    name: str,
    new_name: Annotated[str | None, typer.Option("--name", help="Rename the memory.")] = None,
    type: Annotated[str | None, typer.Option("--type", "-t", help=TYPE_HELP)] = None,
    description: Annotated[
        str | None, typer.Option("--description", "-d", help="A new one-line description.")
    ] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="A new Markdown body.")] = None,
    allow_secret: AllowSecretOption = False,
) -> None:
    """Change a memory: with options, or in $EDITOR on its canonical text."""
    memory_to_change(name)
    with open_store() as store:
        if any(v is not None for v in (new_name, type, description, body)):
            fields: dict[str, Any] = {
                "name": new_name,
                "type": type,
                "description": description,
                "body": body,
            }
            try:
                with store.transaction(allow_secrets=allow_secret) as tx:
                    memory = tx.get(name)
                    updated = tx.update(memory, **fields)
            except SecretRefused as error:
                secret_hint(error)
        else:
            memory, updated = _edit_in_editor(store, name, allow_secret)
    if updated is memory:
        err(f"no changes to {name}")
    elif updated.name != memory.name:
        err(f"renamed {memory.name} to {updated.name}" + _also_changed(memory, updated))
    else:
        err(f"updated {updated.name}")


def _also_changed(memory: MemoryRecord, updated: MemoryRecord) -> str:
    """`, and updated its description` for a rename that changed other fields too."""
    fields = [
        f for f in ("type", "description", "body") if getattr(memory, f) != getattr(updated, f)
    ]
    return f", and updated its {' and '.join(fields)}" if fields else ""


def _edit_in_editor(
    store: MemoryStore, name: str, allow_secret: bool
) -> tuple[MemoryRecord, MemoryRecord]:
    """Edit the canonical text in $VISUAL/$EDITOR and apply it. The edited text is kept
    (and its path printed) whenever it cannot be applied, so no typing is lost."""
    import subprocess
    import tempfile

    from memstore.errors import UnreadableFile
    from memstore.files.format import memory_fields, render_memory_file

    opened = store.get(name)
    # With none set, a person at a terminal gets vi, as git gives it; without a terminal vi
    # would hang or garble the output, so the command refuses.
    editor = State.settings.editor or ("vi" if sys.stdin.isatty() and sys.stdout.isatty() else "")
    if not editor:
        fail(
            "no editor: set $EDITOR (or $VISUAL), or give the new text with --name, --type,"
            " --description or --body (memctl edit --help)"
        )
    folder = Path(tempfile.mkdtemp(prefix="memctl-edit-"))
    path = folder / f"{name}.md"
    path.write_text(render_memory_file(opened), encoding="utf-8")
    try:
        completed = subprocess.run([*shlex.split(editor), str(path)], check=False)
    except (OSError, ValueError) as error:
        fail(f"cannot run editor {editor!r}: {getattr(error, 'strerror', None) or error}")
    if completed.returncode != 0:
        fail(f"editor {editor!r} exited with status {completed.returncode}; nothing changed")
    try:
        fields = memory_fields(path.read_text(encoding="utf-8"))
        with store.transaction(allow_secrets=allow_secret) as tx:
            memory = tx.get(name)
            if memory.version != opened.version:
                fail(f"{name} changed while you were editing; your text is kept in {path}")
            updated = tx.update(memory, **fields)
    except SecretRefused as error:
        fail(
            f"{error}; your text is kept in {path} (if it is not a secret, run again with "
            "--allow-secret)"
        )
    except (UnreadableFile, UnicodeDecodeError, MemstoreError) as error:
        fail(f"{error}; nothing changed, your text is kept in {path}")
    path.unlink()
    folder.rmdir()
    return memory, updated


def remove(name: str) -> None:
    """Delete a memory (it stays in history; 'memctl restore' brings it back)."""
    memory_to_change(name)
    with open_store() as store:
        try:
            store.delete(name)
        except MemoryNotFound:
            # A second `rm`: say so, not that it never was.
            if (deleted := _deleted(store, name)) is not None:
                fail(
                    f"{name} is already deleted, and its content purged: it cannot be restored"
                    if deleted
                    else f"{name} is already deleted (restore with: memctl restore {name})"
                )
            raise
    err(f"deleted {name} (restore with: memctl restore {name})")


def _deleted(store: MemoryStore, name: str) -> bool | None:
    """Whether the deleted memory of this name `memctl restore` would bring back was purged;
    None when no deleted memory has this name."""
    from sqlalchemy import select

    from memstore.storage.models import LIVE, memory_table
    from memstore.storage.purge import is_purged

    memories = memory_table.c
    with store.engine.connect() as connection:
        last = connection.execute(
            select(memories.id)
            .where(memories.name == name, ~LIVE)
            .order_by(memories.deleted_at.desc(), memories.id.desc())
            .limit(1)
        ).scalar()
        return None if last is None else is_purged(connection, last)


def restore(name: str, allow_secret: AllowSecretOption = False) -> None:
    """Bring back the most recently deleted memory of this name."""
    if no_database_yet():
        raise NothingToRestore(name, "no deleted memory has that name")
    try:
        with open_store() as store:
            store.restore(name, allow_secrets=allow_secret)
    except SecretRefused as error:
        secret_hint(error)
    err(f"restored {name}")


def search(
    query: str,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="At most this many results.")
    ] = 10,
    json: JsonOption = False,
) -> None:
    """Full-text search over name, description and body, best first."""
    from memstore.storage.search_terms import search_terms

    if not search_terms(query):
        err(
            f"no searchable words in {quoted(query)}: common words like 'the' or 'how' are"
            " not searched"
        )
        if json:
            print_json([])
        return
    with reading() as store:
        hits = store.search(query, limit)
    if json:
        print_json([{**memory_as_dict(h.memory), "score": h.score} for h in hits])
    elif hits:
        print_table(
            ["NAME", "TYPE", "SCORE", "DESCRIPTION"],
            [
                (h.memory.name, h.memory.type, shown_score(h.score), h.memory.description)
                for h in hits
            ],
        )
    else:
        err(f"no memory matches {quoted(query)}")


def _semantic_recall_on() -> bool:
    """Whether recall compares in meaning; the switch is read first, which imports nothing."""
    if not State.settings.semantic:
        return False
    from memstore.recall.vectors import unavailable_reason

    return unavailable_reason() is None


def recall_command(
    text: str,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Do not ask the model: keywords, and meaning when semantic recall is on.",
        ),
    ] = False,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most N memories.")] = 5,
    json: JsonOption = False,
) -> None:
    """Which memories the agent would be shown for TEXT, by which path, and why."""
    from memstore.llm.client import make_client
    from memstore.recall.turn import recall

    client = None if offline else make_client()
    messages = [{"role": "user", "content": text}]
    if _semantic_recall_on():
        from memstore.recall.vectors import SemanticIndex

        # Semantic recall computes and saves the vectors it lacks: it takes the whole store.
        with open_store(read_only=True) as store:
            result = recall(
                messages, limit, store=store, client=client, semantic=SemanticIndex(store)
            )
            memories = {name: store.find(name) for name in result.names}
    else:  # without it recall only reads (a SemanticIndex would recall by keywords alone)
        with reading() as reads:
            result = recall(messages, limit, store=reads, client=client)
            memories = {name: reads.find(name) for name in result.names}
    if client is None and not offline and result.path.offline:
        result.reason = "no ANTHROPIC_API_KEY set"
    if json:
        print_json(
            {
                "path": result.path,
                "reason": result.reason,
                "memories": [
                    {
                        "name": n,
                        "score": result.scores.get(n),
                        "matched": list(result.matched.get(n, ())),
                        "similarity": result.similarity.get(n),
                        "description": m.description if m else "",
                    }
                    for n, m in memories.items()
                ],
            }
        )
        return
    err(recall_summary(result))
    if result.names:
        headers = ["NAME", "SCORE", "DESCRIPTION"]
        rows = [
            [
                n,
                shown_score(result.scores[n]) if n in result.scores else "",
                m.description if m else "",
            ]
            for n, m in memories.items()
        ]
        if result.matched:  # the keyword path says which words each memory has
            headers.insert(2, "MATCHED")
            for row, name in zip(rows, memories, strict=True):
                row.insert(2, ", ".join(result.matched.get(name, ())))
        if result.similarity:  # and semantic recall, how near in meaning
            headers.insert(2, "SIMILAR")
            for row, name in zip(rows, memories, strict=True):
                near = result.similarity.get(name)
                row.insert(2, f"{near:.2f}" if near is not None else "")
        print_table(headers, rows)
