"""The audit trail: history (events, runs, the hash chain), undo, purge, and read-only sql."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memctl.context import (
    JsonOption,
    State,
    err,
    fail,
    no_database_yet,
    open_store,
    reading,
)
from memctl.render import (
    change_summary,
    count,
    event_as_dict,
    print_json,
    print_json_rows,
    print_table,
    run_as_dict,
    visible_controls,
)
from memstore.errors import HistoryTampered, StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from memstore.storage.history_reader import EventView, RunView
    from memstore.storage.store import MemoryStore

# What `memctl sql` prints at most by default, in bytes of values: far more than a store's
# memories, and a table's first rows (held to measure its columns) stay within it.
SQL_MAX_BYTES = 16_000_000


def history(
    name: Annotated[
        str | None, typer.Argument(help="Only this memory (any memory that had this name).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the last N events.")
    ] = None,
    runs: Annotated[
        bool, typer.Option("--runs", help="One line per run (command, consolidation, undo).")
    ] = False,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="RUN",
            help="One run in detail: who made it, on which host, its command and its events.",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Check the history's hash chain; exit 1 naming the first event that fails.",
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """The audit log: every change, oldest first."""
    _refuse_conflicting(name, limit, runs, run_id, verify)
    if verify:
        _verify(json)
        return
    if run_id is not None:
        with reading() as store:
            run = store.history.find_run(run_id)
            _show_run(run, store.history.run_events(run.id), json)
        return
    if runs:
        with reading() as store:
            rows = store.history.runs(limit)
        if json:
            print_json(rows)
        elif rows:
            print_table(
                [
                    "STARTED",
                    "RUN",
                    "ACTOR",
                    "CREATED",
                    "UPDATED",
                    "DELETED",
                    "RESTORED",
                    "NOTE",
                    "COMMAND",
                ],
                [
                    (
                        r["started_at"],
                        r["run_id"][:8],
                        r["actor"],
                        r["created"],
                        r["updated"],
                        r["deleted"],
                        r["restored"],
                        _run_note(r),
                        r["command"],
                    )
                    for r in rows
                ],
            )
        else:
            err("no runs yet")
        return
    with reading() as store:
        events = store.history.events(name, limit)
        made_by = store.history.runs_by_id({e.run_id for e in events}) if json else {}
    if json:
        print_json([event_as_dict(e, made_by.get(e.run_id)) for e in events])
    elif events:
        events_table(events)
    else:
        err("no history yet" if name is None else f"no history for {name!r}")


def _refuse_conflicting(
    name: str | None, limit: int | None, runs: bool, run_id: str | None, verify: bool
) -> None:
    """history's views are one at a time: an option another view would leave out is refused,
    never silently dropped."""
    views = [
        (flag, what)
        for flag, what, given in (
            ("--verify", "checks the whole history", verify),
            ("--run", "shows one run", run_id is not None),
            ("--runs", "lists every run", runs),
        )
        if given
    ]
    if len(views) > 1:
        fail(f"{views[0][0]} and {views[1][0]} cannot be combined: give one of them")
    if not views:
        return
    flag, what = views[0]
    left_out = [
        option
        for option, given in (("the name", name is not None), ("--limit", limit is not None))
        if given and not (flag == "--runs" and option == "--limit")
    ]
    if left_out:
        fail(f"{flag} {what}; leave out {' and '.join(left_out)}")


def undo(
    run: Annotated[
        str,
        typer.Argument(help="The run to undo: its id, or the start of it (memctl history --runs)."),
    ],
    directory: Annotated[
        Path | None,
        typer.Option("--export-dir", help="Re-export here afterwards (default: .memory/)."),
    ] = None,
) -> None:
    """Restore the state before a run: an import, a chat's learning, a consolidation, a
    command's change. Refused, changing nothing, when a memory it touched changed since."""
    if no_database_yet():
        fail(f"no run {run!r}")
    with open_store(actor="cli") as store:
        undo_and_report(store, run, directory or State.workspace.memory_folder)


def undo_and_report(store: MemoryStore, run: str, directory: Path) -> None:
    """Undo `run` in one new run, say what came back, and re-export `.memory/`."""
    from memctl.commands.files import reexport_after
    from memstore.storage.undo import undo_run

    result = undo_run(store, run)
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in [
            ("restored", result.restored),
            ("reverted", result.reverted),
            ("removed", result.deleted),
        ]
        if names
    ]
    err(f"undid run {result.undone.id[:8]}: {'; '.join(parts)} (run {result.run_id[:8]})")
    reexport_after(store, directory, "the undo")


def purge(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Erase a memory's content from history for good (a leaked key): its events stay,
    their content replaced by a marker and its SHA-256; recorded as its own run."""
    import getpass

    if no_database_yet():
        fail(f"no history for {name!r}")
    with open_store(actor="purge") as store:
        store.command += f" (by {getpass.getuser()})"
        events = store.history.events(name)
        if not events:
            fail(f"no history for {name!r}")
        if not yes:
            if not sys.stdin.isatty():
                fail("purge cannot be undone: run again with --yes to confirm")
            memories = len({event.memory_id for event in events})
            typer.confirm(
                f"Erase the content of {name!r} ({count(memories, 'memory', 'memories')},"
                f" {count(len(events), 'event')}) "
                "from history? The memory is deleted and cannot be restored",
                abort=True,
                err=True,
            )
        try:
            report = store.purge(name)
        except StoreUnavailable as error:
            if not store.is_server or "permission denied" not in str(error):
                raise
            fail(
                f"{error}: on a server only the tables' owner role may erase history; run"
                " memctl purge as that role (docs/postgresql.md)"
            )
        err(
            f"purged {name}: the content of {count(report.events, 'event')} erased"
            f" (run {report.run_id[:8]})"
        )
        _purge_files(store, {e.memory_id for e in events}, {e.memory_name for e in events})


def _purge_files(store: MemoryStore, memory_ids: set[int], names: set[str]) -> None:
    """The purged memory out of .memory/ too, at once: its file and its MEMORY.md line
    (docs/audit.md). The purge is committed whatever happens here; the files left say so."""
    from memstore.errors import ExportFailed
    from memstore.files.purged_files import remove_purged

    folder = State.workspace.memory_folder
    try:
        done = remove_purged(store, folder, memory_ids, names)
    except (OSError, ExportFailed) as error:
        fail(
            f"the purge is saved, but {folder} still holds its files: {error}; remove"
            f" {', '.join(sorted(f'{n}.md' for n in names))} and its MEMORY.md line by hand"
        )
    changed = [str(folder / file_name) for file_name in done.removed]
    if done.index_rewritten:
        changed.append(f"its line in {folder / 'MEMORY.md'}")
    err(f"removed {' and '.join(changed)}" if changed else f"{folder} held no file of it")


def sql(
    query: str,
    json: JsonOption = False,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Stop the query after this many seconds (0: never)."),
    ] = 30.0,
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=0, help="Print at most this many rows (0: all).")
    ] = 10_000,
    max_bytes: Annotated[
        int,
        typer.Option(
            "--max-bytes", min=0, help="Print at most about this many bytes of values (0: all)."
        ),
    ] = SQL_MAX_BYTES,
) -> None:
    """Run one read-only SQL query; docs/audit.md lists the tables and views. Ctrl-C stops it.
    The time limit covers printing too."""
    import signal

    if not query.strip():  # most often an unset variable ("$QUERY"): nothing would print
        fail('sql: the query is empty: give one, such as "SELECT name FROM live_memory"')
    # Opening it migrates the database first, where it can be written.
    with open_store(read_only=True) as store:
        running = store.read_only_query(query, timeout=timeout or None, max_rows=max_rows or None)
    with running:
        running.limit_bytes(max_bytes or None)
        # Python's own SIGINT handling waits for SQLite to return, which a runaway query
        # never does: the handler interrupts the connection instead.
        previous = signal.signal(signal.SIGINT, lambda *_: running.interrupt())
        try:
            columns = running.start()
            if json:
                print_json_rows(columns, running.rows())
            elif columns:
                print_table(columns, running.rows())
            else:  # a comment only, or a statement that returns nothing
                err("sql: the query returns no columns: nothing to show")
        except KeyboardInterrupt:
            sys.stdout.flush()
            err("memctl: sql interrupted")
            raise SystemExit(130) from None
        finally:
            signal.signal(signal.SIGINT, previous)
    if running.truncated:
        err(f"stopped after {max_rows} rows: --max-rows N for more, 0 for all")
    if running.cut_at_bytes:
        err(f"stopped before {max_bytes:,} bytes of output: --max-bytes N for more, 0 for all")


def events_table(events: Sequence[EventView]) -> None:
    print_table(
        ["AT", "OPERATION", "NAME", "ACTOR", "RUN", "CHANGE"],
        [
            (e.created_at, e.operation, e.memory_name, e.actor, e.run_id[:8], change_summary(e))
            for e in events
        ],
    )


def _verify(json: bool) -> None:
    """`history --verify`: every difference found a line on stderr (or, with --json, listed
    on stdout), exit 1; else what was verified, and the chain's head."""
    try:
        with open_store(read_only=True) as store:
            report = store.history.verify()
    except HistoryTampered as error:
        if json:
            print_json({"verified": False, "problems": error.problems})
            raise SystemExit(1) from None
        for problem in error.problems:
            err(f"history: {problem}")
        fail(
            f"history does not verify: {count(len(error.problems), 'difference')} above;"
            " the database was changed outside memstore"
        )
    if json:
        print_json({"verified": True, "events": report.events, "unseen": report.unseen,
                    "runs": report.runs, "unseen_runs": report.unseen_runs,
                    "memories": report.memories, "head": report.head,
                    "run_head": report.run_head})  # fmt: skip
        return
    unseen = (
        f" (and {report.unseen} of other people's own memories, by their hash only)"
        if report.unseen
        else ""
    )
    unseen_runs = f" (and {report.unseen_runs} by their hash only)" if report.unseen_runs else ""
    print(
        f"history verified: {count(report.events, 'event')}{unseen},"
        f" {count(report.runs, 'run')}{unseen_runs},"
        f" {count(report.memories, 'memory', 'memories')} as their events replay,"
        f" chain head {report.head}, runs' chain head {report.run_head}"
    )


def _show_run(run: RunView, events: Sequence[EventView], json: bool) -> None:
    """`memctl history --run`: the run's fields (who made it: unknown before revision 0007),
    then its events."""
    if json:
        print_json({**run_as_dict(run), "events": [event_as_dict(e, run) for e in events]})
        return
    for label, value in (
        ("run", run.id),
        ("started", run.started_at),
        ("actor", run.actor),
        ("identity", run.identity or "unknown"),
        ("host", run.host or "unknown"),
        ("command", run.command),
        ("session", run.session_id),
        ("undoes", run.undoes),
    ):
        if value is not None:
            # A command line may carry a memory's text: shown, not run nor hidden.
            print(f"{label + ':':<10}{visible_controls(value)}")
    if events:
        print()
        events_table(events)


def _run_note(row: dict[str, Any]) -> str:
    notes = []
    if row["undoes"]:
        notes.append(f"undoes {row['undoes'][:8]}")
    if row["undone_by"]:
        notes.append(f"undone by {row['undone_by'][:8]}")
    if row["session_id"]:
        notes.append(f"session {row['session_id'][:8]}")
    return ", ".join(notes)
