"""The commands that need the model: chat (the coding agent, `memctl.chat`) and
consolidate (merge and drop memories, in one undoable run)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memctl.commands.files import reexport_after
from memctl.context import State, err, fail, no_database_yet, open_store
from memctl.render import count, plan_lines
from memstore.settings import CONTEXT_TOKENS_VARIABLE, DEFAULT_CONTEXT_TOKENS
from memstore.storage.workspace import find_workspace

if TYPE_CHECKING:
    from memstore.storage.store import MemoryStore

# `memctl consolidate` when another consolidation of the store is running: sysexits'
# EX_TEMPFAIL, "try again later" (not 1: nothing failed, and a script may retry).
CONSOLIDATION_SKIPPED_EXIT = 75


NO_MODEL_HELP = (
    "set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for an Anthropic-compatible local server); "
    "list, show, search, recall --offline, history, export and import work without it"
)


def chat(
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            "-w",
            help="The folder the agent works in (default: the workspace, as `memctl path`).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="The model (default: $MEMSTORE_MODEL or Sonnet)."),
    ] = None,
    no_memory: Annotated[
        bool, typer.Option("--no-memory", help="No recall, no learning, no memory index.")
    ] = False,
    context_tokens: Annotated[
        int,
        typer.Option(
            "--context-tokens",
            envvar=CONTEXT_TOKENS_VARIABLE,
            min=1_000,
            help="Summarise earlier turns when the conversation grows past this (estimated).",
        ),
    ] = DEFAULT_CONTEXT_TOKENS,
    resume: Annotated[
        bool, typer.Option("--resume", help="Go on with the last saved session.")
    ] = False,
    session: Annotated[
        str | None, typer.Option("--session", help="Go on with this saved session (id or prefix).")
    ] = None,
    dangerously_skip_approvals: Annotated[
        bool,
        typer.Option(
            "--dangerously-skip-approvals",
            help="Run every command, write and edit the model asks for without asking you "
            "(for unattended runs in a sandbox).",
        ),
    ] = False,
) -> None:
    """Talk to a coding agent that remembers across sessions."""
    from memctl.chat_input import keys_kept_for_the_prompt

    # From the start: what a person types while memctl starts (the agent's modules take a
    # moment to load) reaches the first prompt as typed.
    on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
    with keys_kept_for_the_prompt() if on_terminal else contextlib.nullcontext():
        _chat(
            workspace, model, no_memory, context_tokens, session, resume, dangerously_skip_approvals
        )


def _chat(
    workspace: Path | None,
    model: str | None,
    no_memory: bool,
    context_tokens: int,
    session: str | None,
    resume: bool,
    skip_approvals: bool,
) -> None:
    from memctl.chat import run_chat
    from memstore.llm.client import make_client

    # The memory of the folder's workspace (found upward from it), unless --db says otherwise.
    ceilings = State.settings.ceiling_directories
    found = State.workspace if workspace is None else find_workspace(workspace, ceilings=ceilings)
    workspace = found.root if workspace is None else workspace.resolve()
    if not workspace.is_dir():
        fail(f"no folder {workspace}")
    client = make_client(max_retries=4)
    if client is None:
        fail(f"memctl chat needs a model: {NO_MODEL_HELP}")
    db = State.db if State.db_given else found.database
    run_chat(
        db=db,
        workspace=workspace,
        model=model or State.settings.model,
        use_memory=not no_memory,
        client=client,
        context_tokens=context_tokens,
        resume=session or ("last" if resume else None),
        skip_approvals=skip_approvals,
        settings_file=State.settings.settings_file,
    )


def consolidate(
    run: Annotated[
        str | None, typer.Argument(help="With --undo: the run to undo (default: the last).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the model's plan; change nothing.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Apply a plan that needs confirmation.")
    ] = False,
    undo: Annotated[
        bool, typer.Option("--undo", help="Restore the state before a consolidation run.")
    ] = False,
    max_memories: Annotated[
        int, typer.Option("--max", min=1, help="Keep at most this many memories.")
    ] = 30,
    directory: Annotated[
        Path | None,
        typer.Option("--export-dir", help="Re-export here afterwards (default: .memory/)."),
    ] = None,
) -> None:
    """Merge duplicates and drop outdated memories with the model, in one undoable run.
    Exits 75 when another consolidation of the store is running (docs/memctl.md)."""
    from memstore.errors import ConsolidationRefused, ConsolidationSkipped
    from memstore.learning import consolidate as consolidation
    from memstore.llm.client import make_client

    if run is not None and not undo:
        fail("a run id is only taken with --undo")
    directory = directory or State.workspace.memory_folder
    if undo:
        if no_database_yet():
            fail("no consolidation run to undo")
        with open_store(actor="cli") as store:
            _undo(store, run, directory)
        return
    client = make_client()
    if client is None:  # said before a database is created for nothing
        fail(f"consolidation needs the model: {NO_MODEL_HELP}")
    with open_store(actor="cli") as store:
        # One consolidation of a store at a time, from reading it to applying the plan; a
        # dry run changes nothing and takes no turn.
        alone = contextlib.nullcontext() if dry_run else consolidation.consolidation_lock(store)
        try:
            with alone:
                plan = consolidation.plan_consolidation(
                    store=store, client=client, max_memories=max_memories
                )
                for line in plan_lines(plan):
                    print(line)
                if dry_run:
                    err("dry run: nothing changed")
                    return
                if plan.empty:
                    consolidation.apply_plan(store, plan)  # recorded: the trigger waits
                    err("nothing to consolidate")
                    return
                warnings = plan.warnings()
                confirmed = yes
                if warnings and not yes:
                    if not sys.stdin.isatty():
                        raise ConsolidationRefused(
                            f"not applied: {'; '.join(warnings)}; run again with --yes to apply"
                        )
                    confirmed = typer.confirm(f"This plan {'; '.join(warnings)}. Apply it?")
                    if not confirmed:
                        fail("not applied")
                outcome = consolidation.apply_plan(store, plan, confirmed=confirmed)
        except ConsolidationSkipped as skipped:
            err(f"memctl: {skipped}; try again when it ends")
            raise SystemExit(CONSOLIDATION_SKIPPED_EXIT) from None
        err(
            f"consolidated {plan.before} → {count(plan.after, 'memory', 'memories')} "
            f"in run {outcome.run_id}; "
            f"undo with: memctl consolidate --undo {(outcome.run_id or '')[:8]}"
        )
        reexport_after(store, directory, "the consolidation")


def _undo(store: MemoryStore, run: str | None, directory: Path) -> None:
    from memctl.commands.audit import undo_and_report
    from memstore.learning.consolidate import ACTOR
    from memstore.storage.undo import last_undoable_run

    if run is None:
        run = last_undoable_run(store, ACTOR)
    if run is None:
        fail("no consolidation run to undo")
    undo_and_report(store, run, directory)
