"""memctl end to end: the real console entry point in a subprocess, in a temporary workspace."""

from __future__ import annotations

import getpass
import json
import os
import socket
import sqlite3
import sys
from pathlib import Path

import pytest

from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner
from tests.terminal import Terminal


def add_tabs(memctl: MemctlRunner) -> None:
    done = memctl(
        "add", "user-preference-tabs", "--type", "user",
        "--description", "User wants 4-space indentation, never tabs",
        input="The user asked that all Python code use 4 spaces.\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def assert_one_line_error(done, text: str) -> None:  # type: ignore[no-untyped-def]
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("memctl: error: ") and text in lines[-1], done.stderr


def test_add_list_show_search(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    assert (tmp_path / ".memory" / "memstore.db").exists()  # the default database
    listed = memctl("list")
    assert "user-preference-tabs" in listed.stdout and "user" in listed.stdout
    shown = memctl("show", "user-preference-tabs")
    assert shown.stdout.startswith("---\nname: user-preference-tabs\n")
    as_json = json.loads(memctl("show", "user-preference-tabs", "--json").stdout)
    assert as_json["body"] == "The user asked that all Python code use 4 spaces."
    found = json.loads(memctl("search", "indentation", "--json").stdout)
    assert [f["name"] for f in found] == ["user-preference-tabs"]
    assert json.loads(memctl("list", "--type", "project", "--json").stdout) == []


def test_user_errors_are_one_line_without_traceback(memctl: MemctlRunner) -> None:
    assert_one_line_error(
        memctl("add", "Bad Name", "-t", "user", "-d", "x", "-b", "y"), "kebab-case"
    )
    assert_one_line_error(memctl("add", "ok", "-t", "user", "-d", "x", input=""), "body")
    assert_one_line_error(memctl("rm", "missing"), "no memory named")
    assert_one_line_error(memctl("restore", "missing"), "cannot restore")
    add_tabs(memctl)
    assert_one_line_error(memctl("show", "missing"), "no memory named 'missing'")
    assert_one_line_error(memctl("sql", "DELETE FROM memory"), "readonly")
    assert_one_line_error(memctl("sql", "SELEC nonsense"), "syntax error")
    assert_one_line_error(memctl("edit", "user-preference-tabs", "--name", "x y"), "kebab-case")
    assert_one_line_error(memctl("add", "x", "-t", "opinion", "-d", "x", "-b", "y"), "invalid type")
    assert_one_line_error(memctl("list", "-t", "opinion"), "invalid type")
    assert_one_line_error(memctl("add", "s", "-t", "user", "-d", "caf\udce9", "-b", "y"), "Unicode")
    assert_one_line_error(memctl("import", "no-such-folder"), "no such folder")
    assert_one_line_error(
        memctl("edit", "user-preference-tabs", env={"EDITOR": '"unclosed', "VISUAL": ""}), "editor"
    )


def test_a_refused_command_creates_no_database(memctl: MemctlRunner, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("in the way")
    secret = "sk-ant-api03-" + "A" * 80
    no_model = {"ANTHROPIC_API_KEY": "", "ANTHROPIC_AUTH_TOKEN": "", "ANTHROPIC_BASE_URL": ""}
    refused = [
        (["add", "Bad Name", "-t", "user", "-d", "x", "-b", "y"], "kebab-case"),
        (["add", "ok", "-t", "opinion", "-d", "x", "-b", "y"], "invalid type"),
        (["add", "ok", "-t", "user", "-d", "x", "-b", f"key {secret}"], "--allow-secret"),
        (["add", "ok", "-t", "user", "-d", "x", "-b", " "], "body"),
        (["--db", "new/m.db", "add", "ok", "-t", "user", "-d", "", "-b", "y"], "description"),
        (["rm", "missing"], "no memory named 'missing'"),
        (["edit", "missing", "-d", "x"], "no memory named 'missing'"),
        (["restore", "missing"], "cannot restore 'missing'"),
        (["purge", "missing", "--yes"], "no history for 'missing'"),
        (["export", ""], "empty string"),
        (["export", "a-file"], "cannot create"),
        (["consolidate"], "needs the model"),
        (["consolidate", "--undo"], "no consolidation run to undo"),
    ]
    for workspace in ("bare", "with-memory"):
        if workspace == "with-memory":  # a .memory/ of the user's own, with no database yet
            (tmp_path / ".memory").mkdir()
            (tmp_path / ".memory" / "notes.txt").write_text("mine")
        before = sorted(p for p in tmp_path.rglob("*"))
        for args, said in refused:
            assert_one_line_error(memctl(*args, env=no_model), said)
            assert sorted(p for p in tmp_path.rglob("*")) == before, (workspace, args)
    assert (tmp_path / ".memory" / "notes.txt").read_text() == "mine"


def test_unopenable_database_is_one_line(memctl: MemctlRunner, tmp_path: Path) -> None:
    (tmp_path / "folder.db").mkdir()
    assert_one_line_error(
        memctl("--db", str(tmp_path / "folder.db"), "list"), "cannot open database"
    )
    (tmp_path / "notes.txt").write_text("this is not a database, just text " * 100)
    done = memctl("--db", str(tmp_path / "notes.txt"), "list")
    assert_one_line_error(done, "not a database")


def test_export_problems_are_one_line(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    (tmp_path / "a-file").write_text("in the way")
    assert_one_line_error(memctl("export", "a-file"), "cannot create")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "user-preference-tabs.md").mkdir()  # a folder where a file goes
    assert_one_line_error(memctl("export", "out"), "cannot write")
    blob = memctl("sql", "SELECT randomblob(4) AS data", "--json")
    assert blob.returncode == 0 and len(json.loads(blob.stdout)[0]["data"]) == 8


def test_edit_with_options_and_in_editor(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    assert memctl("edit", "user-preference-tabs", "-d", "Four spaces").returncode == 0
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "text = p.read_text().replace('type: user', 'type: feedback')\n"
        "p.write_text(text + 'Added in the editor.\\n')\n"
    )
    done = memctl(
        "edit", "user-preference-tabs", env={"EDITOR": f"{sys.executable} {editor}", "VISUAL": ""}
    )
    assert done.returncode == 0, done.stderr
    memory = json.loads(memctl("show", "user-preference-tabs", "--json").stdout)
    assert memory["type"] == "feedback"
    assert memory["body"].endswith("Added in the editor.")
    assert memory["description"] == "Four spaces"


def test_failed_editor_changes_nothing(memctl: MemctlRunner) -> None:
    add_tabs(memctl)
    done = memctl("edit", "user-preference-tabs", env={"EDITOR": "false", "VISUAL": ""})
    assert_one_line_error(done, "nothing changed")
    assert len(json.loads(memctl("history", "--json").stdout)) == 1


def test_edit_with_no_editor_set_refuses_rather_than_start_vi(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    add_tabs(memctl)
    folder = tmp_path / "bin"
    folder.mkdir()
    ran = tmp_path / "vi-ran"
    vi = folder / "vi"
    vi.write_text(f"#!/bin/sh\ntouch '{ran}'\n")
    vi.chmod(0o755)
    path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    done = memctl("edit", "user-preference-tabs", env={"VISUAL": "", "EDITOR": "", "PATH": path})
    assert_one_line_error(done, "no editor: set $EDITOR")
    assert "--body" in done.stderr and not ran.exists()
    assert len(json.loads(memctl("history", "--json").stdout)) == 1


def test_edit_at_a_terminal_with_no_editor_set_runs_vi(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    """As git does: a person at a terminal who set no editor gets vi."""
    add_tabs(memctl)
    folder = tmp_path / "bin"
    folder.mkdir()
    vi = folder / "vi"  # a vi that changes the description and saves
    vi.write_text("#!/bin/sh\nsed -i 's/never tabs/tabs never/' \"$1\"\n")
    vi.chmod(0o755)
    path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    term = Terminal(
        ["edit", "user-preference-tabs"],
        cwd=tmp_path,
        env={"VISUAL": "", "EDITOR": "", "PATH": path},
    )
    try:
        assert term.finish() == 0, term.screen()
    finally:
        term.close()
    shown = json.loads(memctl("show", "user-preference-tabs", "--json").stdout)
    assert shown["description"] == "User wants 4-space indentation, tabs never"


def test_rm_restore_history(memctl: MemctlRunner) -> None:
    add_tabs(memctl)
    assert memctl("rm", "user-preference-tabs").returncode == 0
    assert json.loads(memctl("list", "--json").stdout) == []
    assert memctl("restore", "user-preference-tabs").returncode == 0
    events = json.loads(memctl("history", "user-preference-tabs", "--json").stdout)
    assert [e["operation"] for e in events] == ["create", "delete", "restore"]
    assert all(e["actor"] == "cli" for e in events)
    table = memctl("history").stdout
    assert "restore" in table and "user-preference-tabs" in table


def test_history_shows_who_made_each_run(memctl: MemctlRunner) -> None:
    add_tabs(memctl)
    who = {"identity": getpass.getuser(), "host": socket.gethostname()}
    [event] = json.loads(memctl("history", "--json").stdout)
    [run] = json.loads(memctl("history", "--runs", "--json").stdout)
    assert {k: event[k] for k in who} == who and {k: run[k] for k in who} == who
    detail = memctl("history", "--run", run["run_id"][:8])
    assert detail.returncode == 0, detail.stderr
    assert f"identity: {who['identity']}" in detail.stdout
    assert f"host:     {who['host']}" in detail.stdout and "user-preference-tabs" in detail.stdout
    shown = json.loads(memctl("history", "--run", run["run_id"], "--json").stdout)
    assert shown["id"] == run["run_id"] and shown["identity"] == who["identity"]
    assert [e["identity"] for e in shown["events"]] == [who["identity"]]
    missing = memctl("history", "--run", "nosuchrun")
    assert missing.returncode == 1 and missing.stderr == "memctl: error: no run 'nosuchrun'\n"


def test_db_option_and_environment(memctl: MemctlRunner, tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "mem.db"
    add = memctl(
        "add", "a-note", "-t", "project", "-d", "d", "-b", "b", env={"MEMSTORE_DB": str(db)}
    )
    assert add.returncode == 0, add.stderr
    assert add.stderr == "added a-note\n"
    assert db.exists() and not (tmp_path / ".memory").exists()
    assert "a-note" in memctl("--db", str(db), "list").stdout
    shown = memctl("path", env={"MEMSTORE_DB": str(db)})
    assert shown.stdout.strip() == str(db)
    assert "(given by --db or MEMSTORE_DB)" in shown.stderr


def test_old_variable_names_work_with_a_note(memctl: MemctlRunner, tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "mem.db"
    old = {"MEMCTL_DB": str(db)}
    add = memctl("add", "a-note", "-t", "project", "-d", "d", "-b", "b", env=old)
    assert add.returncode == 0, add.stderr
    assert db.exists() and not (tmp_path / ".memory").exists()
    assert add.stderr == (
        "memctl: MEMCTL_DB is deprecated: set MEMSTORE_DB instead (the old name goes in a later"
        " release)\nadded a-note\n"
    )
    # The command line still wins over it, before or after the command name.
    other = tmp_path / "other.db"
    assert memctl("--db", str(other), "path", env=old).stdout.strip() == str(other)
    assert memctl("path", "--db", str(other), env=old).stdout.strip() == str(other)
    # Where the new name is set too, it wins, without a word.
    both = memctl("path", env={**old, "MEMSTORE_DB": str(other)})
    assert both.stdout.strip() == str(other) and "deprecated" not in both.stderr
    assert "deprecated" not in memctl("path").stderr


def test_old_ceiling_variable_works_with_a_note(memctl: MemctlRunner, tmp_path: Path) -> None:
    (tmp_path / ".memory").mkdir()
    below = tmp_path / "project" / "src"
    below.mkdir(parents=True)
    for variable in ("MEMSTORE_CEILING_DIRECTORIES", "MEMCTL_CEILING_DIRECTORIES"):
        # (An empty variable counts as not set: the tests' own ceiling is set by the new name.)
        ceiling = {"MEMSTORE_CEILING_DIRECTORIES": "", variable: str(tmp_path / "project")}
        shown = memctl("path", env=ceiling, cwd=below)
        assert shown.stdout.strip() == str(below / ".memory" / "memstore.db"), shown.stderr
        noted = f"memctl: {variable} is deprecated: set MEMSTORE_CEILING_DIRECTORIES instead"
        assert (noted in shown.stderr) == variable.startswith("MEMCTL_")
        assert shown.stderr.count("deprecated") == (1 if variable.startswith("MEMCTL_") else 0)


def test_export_index_and_conflict(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    assert memctl("export").returncode == 0
    memory_file = tmp_path / ".memory" / "user-preference-tabs.md"
    assert memory_file.read_text().startswith("---\nname: user-preference-tabs\n")
    index = memctl("index").stdout
    assert index == (tmp_path / ".memory" / "MEMORY.md").read_text()
    memory_file.write_text(memory_file.read_text() + "hand edit\n")
    memctl("edit", "user-preference-tabs", "-d", "changed")
    assert_one_line_error(memctl("export"), "user-preference-tabs.md")
    assert "hand edit" in memory_file.read_text()
    assert memctl("export", "--force").returncode == 0
    assert "hand edit" not in memory_file.read_text()


def test_export_then_import_into_a_new_database(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    memctl("export")
    done = memctl("--db", str(tmp_path / "other.db"), "import")
    assert done.returncode == 0, done.stderr
    assert "1 created" in done.stderr
    again = memctl("--db", str(tmp_path / "other.db"), "import")
    assert "0 created, 0 updated, 1 unchanged" in again.stderr


def test_sql_table_and_json(memctl: MemctlRunner) -> None:
    add_tabs(memctl)
    rows = json.loads(memctl("sql", "SELECT name, type FROM live_memory", "--json").stdout)
    assert rows == [{"name": "user-preference-tabs", "type": "user"}]
    table = memctl("sql", "SELECT operation, actor FROM memory_history").stdout
    assert table.splitlines() == ["operation  actor", "create     cli"]


def test_documented_audit_queries_run(memctl: MemctlRunner, tmp_path: Path) -> None:
    """Every ```sql block of docs/audit.md runs in plain sqlite3 against a real database."""
    add_tabs(memctl)
    memctl("edit", "user-preference-tabs", "-d", "Four spaces")
    memctl("rm", "user-preference-tabs")
    # What the chat agent writes: an extraction in a session, a consolidation that merges.
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        with store.transaction(actor="extraction", session_id="session-1") as tx:
            first = tx.create("project-a", "project", "A", "a")
            second = tx.create("project-b", "project", "B", "b")
            stale = tx.create("project-c", "project", "C", "c")
        with store.transaction(actor="consolidation") as tx:  # merges two, drops one
            merged = tx.create("project-ab", "project", "A and B", "a, b")
            tx.delete(first, merged_into=merged)
            tx.delete(second, merged_into=merged)
            tx.delete(stale, reason="C was replaced by the new build")
    recipes = (Path(__file__).parent.parent / "docs" / "audit.md").read_text()
    blocks = [b.split("```", 1)[0] for b in recipes.split("```sql\n")[1:]]
    assert len(blocks) >= 3
    connection = sqlite3.connect(tmp_path / ".memory" / "memstore.db")
    for block in blocks:
        assert connection.execute(block).fetchall(), block
    connection.close()


def test_sql_cannot_create_files(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    for statement in (f"ATTACH '{tmp_path}/x.db' AS x", f"VACUUM INTO '{tmp_path}/y.db'"):
        assert_one_line_error(memctl("sql", statement), "authoriz")
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()


def test_invalid_editor_text_is_kept_and_nothing_changes(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    add_tabs(memctl)
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "p.write_text(p.read_text().replace('type: user', 'type: preference'))\n"
    )
    done = memctl(
        "edit", "user-preference-tabs", env={"EDITOR": f"{sys.executable} {editor}", "VISUAL": ""}
    )
    assert_one_line_error(done, "invalid type")
    kept = Path(done.stderr.strip().rsplit("kept in ", 1)[1])
    assert "type: preference" in kept.read_text()
    assert json.loads(memctl("show", "user-preference-tabs", "--json").stdout)["type"] == "user"


def test_search_leaves_out_stopwords(memctl: MemctlRunner) -> None:
    """Issue 11.9: stopwords are in every memory, so bm25 scored them 0.00 and `search "the"`
    listed the whole store; a question listed memories that share only its stopwords."""
    for name, body in [
        ("tabs", "The user wants spaces, not tabs. How we format is up to the linter."),
        ("fridays", "We do not ship on Fridays; that is the rule."),
        ("k8s-cluster", "The kubernetes cluster runs in eu-west-1."),
    ]:
        done = memctl("add", name, "-t", "project", "-d", f"about {name}", "-b", body)
        assert done.returncode == 0, done.stderr
    only_stopwords = memctl("search", "the")
    assert only_stopwords.returncode == 0 and only_stopwords.stdout == ""
    assert only_stopwords.stderr.strip().splitlines() == [
        "no searchable words in 'the': common words like 'the' or 'how' are not searched"
    ]
    assert json.loads(memctl("search", "how do we", "--json").stdout or "[]") == []
    question = json.loads(
        memctl("search", "how do we deploy the kubernetes cluster", "--json").stdout
    )
    assert [hit["name"] for hit in question] == ["k8s-cluster"]
    assert question[0]["score"] > 0.01
    nothing = memctl("search", "how do we deploy the database")
    assert nothing.stdout == "" and "no memory matches" in nothing.stderr


def test_a_match_in_a_small_store_is_not_shown_as_score_zero(memctl: MemctlRunner) -> None:
    """In a store of two memories bm25 scores a word one of them has at about 0 (its idf is
    floored at 1e-6): the table showed the match at 0.00. It shows the score as it is, the
    order as the JSON's."""
    for name, description, body in [
        ("tabs", "Indentation: 4 spaces", "Indentation is 4 spaces; indentation is checked."),
        ("db", "Tests hit a real database", "Integration tests use a real SQLite database."),
    ]:
        assert memctl("add", name, "-t", "project", "-d", description, "-b", body).returncode == 0
    for word in ("indentation", "database"):
        rows = [line.split() for line in memctl("search", word).stdout.splitlines()[1:]]
        (hit,) = json.loads(memctl("search", word, "--json").stdout)
        assert [row[0] for row in rows] == [hit["name"]]
        assert rows[0][2] != "0.00" and float(rows[0][2]) == pytest.approx(hit["score"], rel=0.05)
        assert 0 < hit["score"] < 0.005  # bm25 as it is: the JSON's meaning is unchanged
    recalled = memctl("recall", "--offline", "indentation rules", env={"MEMSTORE_SEMANTIC": "off"})
    (row,) = [line.split() for line in recalled.stdout.splitlines()[1:]]
    assert row[0] == "tabs" and row[1] != "0.00" and float(row[1]) > 0


def test_search_finds_a_lone_letter_or_digit_and_quotes_a_long_query_short(
    memctl: MemctlRunner,
) -> None:
    """A search names "phase b" on purpose: the b is searched (recall still drops it), and a
    message quotes at most 80 characters of what was typed."""
    for phase in ("a", "b"):
        done = memctl(
            "add", f"runbook-{phase}", "-t", "reference", "-d", f"Phase {phase.upper()} of the"
            " release", "-b", f"Phase {phase.upper()}: the images",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    hits = json.loads(memctl("search", "phase b", "--json").stdout)
    assert [hit["name"] for hit in hits] == ["runbook-b"]
    assert [hit["name"] for hit in json.loads(memctl("search", "B", "--json").stdout)] == [
        "runbook-b"
    ]
    nothing = memctl("search", "zebra " * 2_000)
    assert nothing.returncode == 0 and nothing.stdout == ""
    assert len(nothing.stderr) < 200 and "zebra zebra" in nothing.stderr and "…" in nothing.stderr


def test_json_listings_print_the_empty_answer_when_there_is_no_database(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    """A script parsing `--json` gets JSON on stdout, not nothing, from a workspace with no
    database yet, and from a search of stopwords only."""
    for args, empty in [
        (("list",), []),
        (("search", "deploy"), []),
        (("history",), []),
        (("history", "--runs"), []),
        (("sql", "SELECT 1"), []),
        (
            ("recall", "--offline", "deploy"),
            {"path": "none", "reason": "no memories", "memories": []},
        ),
    ]:
        done = memctl(*args, "--json")
        assert done.returncode == 0 and json.loads(done.stdout) == empty, (args, done.stderr)
        assert "no memory here" in done.stderr
    assert not (tmp_path / ".memory").exists()
    assert json.loads(memctl("search", "the", "--json").stdout) == []


def test_export_and_import_refuse_an_empty_folder_name_and_import_a_file(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    """`memctl export "$DIR"` with DIR unset would write into the current folder; `memctl
    import notes.md` said "no such folder" of a file that is there."""
    assert memctl("add", "keep", "-t", "user", "-d", "kept", "-b", "body").returncode == 0
    for command in ("export", "import"):
        assert_one_line_error(memctl(command, ""), "empty string")
    assert not (tmp_path / "keep.md").exists() and not (tmp_path / "MEMORY.md").exists()
    (tmp_path / "notes.md").write_text("---\nname: n\ndescription: d\ntype: user\n---\nbody\n")
    assert_one_line_error(
        memctl("import", "notes.md"), "notes.md is a file: memctl import reads a folder"
    )


def test_a_teammate_s_rm_reaches_the_store_through_the_committed_folder(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    """A team commits .memory/: after a pull, `memctl import` deletes the memory whose file
    the teammate's export removed (restorable), instead of the next export bringing it back;
    a memory changed here since is kept, and --keep-removed keeps them all."""
    import shutil

    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for folder in (alice, bob):
        (folder / ".git").mkdir(parents=True)  # a workspace each, as two clones are

    def pull() -> None:  # what git pull does to bob's .memory/ files
        for name in ("fact-one.md", "fact-two.md", "fact-three.md", "MEMORY.md"):
            theirs, ours = alice / ".memory" / name, bob / ".memory" / name
            if theirs.exists():
                ours.parent.mkdir(exist_ok=True)
                shutil.copyfile(theirs, ours)
            else:
                ours.unlink(missing_ok=True)

    for name in ("fact-one", "fact-two", "fact-three"):
        assert (
            memctl("add", name, "-t", "project", "-d", name, "-b", name, cwd=alice).returncode == 0
        )
    assert memctl("export", cwd=alice).returncode == 0
    pull()
    assert memctl("import", cwd=bob).returncode == 0
    assert memctl("edit", "fact-three", "-b", "bob's own words", cwd=bob).returncode == 0

    for name in ("fact-two", "fact-three"):
        assert memctl("rm", name, cwd=alice).returncode == 0
    assert memctl("export", cwd=alice).returncode == 0
    pull()
    dry = memctl("import", "--dry-run", cwd=bob)
    assert "delete  fact-two" in dry.stdout and "fact-three" not in dry.stdout
    kept = memctl("import", "--keep-removed", "--dry-run", cwd=bob)
    assert "delete" not in kept.stdout
    done = memctl("import", cwd=bob)
    assert done.returncode == 0, done.stderr
    assert (
        "1 deleted" in done.stderr and "'fact-three' changed in the database since" in done.stderr
    )
    names = [m["name"] for m in json.loads(memctl("list", "--json", cwd=bob).stdout)]
    assert names == ["fact-one", "fact-three"]
    assert memctl("restore", "fact-two", cwd=bob).returncode == 0


def test_undo_reverts_any_run_an_import_or_an_edit(memctl: MemctlRunner, tmp_path: Path) -> None:
    add_tabs(memctl)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(
        "---\nname: deploy\ndescription: How we deploy\ntype: project\n---\n\nOn Monday.\n"
    )
    assert memctl("import", "notes").returncode == 0
    assert memctl("edit", "user-preference-tabs", "--body", "Tabs, after all.").returncode == 0
    runs = json.loads(memctl("history", "--runs", "--json").stdout)
    imported, edited = runs[-2]["run_id"], runs[-1]["run_id"]

    done = memctl("undo", edited[:8])
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"undid run {edited[:8]}: reverted user-preference-tabs")
    tabs = tmp_path / ".memory" / "user-preference-tabs.md"
    assert "4 spaces" in tabs.read_text()  # re-exported
    done = memctl("undo", imported)
    assert done.returncode == 0, done.stderr
    assert "removed deploy" in done.stderr
    assert [m["name"] for m in json.loads(memctl("list", "--json").stdout)] == [
        "user-preference-tabs"
    ]
    assert not (tmp_path / ".memory" / "deploy.md").exists()

    again = memctl("undo", edited[:8])
    assert_one_line_error(again, f"run {edited[:8]} was already undone")
    assert_one_line_error(memctl("undo", "ffffffff"), "no run 'ffffffff'")
