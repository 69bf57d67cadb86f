"""Claude Code's memory folder: found through a fake HOME, imported and written back by the
real `memctl claude` process, and checked file by file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from memstore.files.exporter import export_memories
from memstore.integrations.claude_code import find_folder, project_of, slug
from memstore.storage.store import MemoryStore
from memstore.text import HIDDEN
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import MemctlRunner
from tests.test_hidden_text import BIDI, BODY, DESCRIPTION, HIDDEN_TAG, SHOWN_TAG

FEEDBACK = (
    b"---\r\n"
    b"name: Testing preferences\r\n"
    b"description: Run the tests with pytest -x\r\n"
    b"type: feedback\r\n"
    b"originSessionId: 6f1c2d3e-aaaa-bbbb-cccc-1234567890ab\r\n"
    b"---\r\n"
    b"\r\n"
    b"Run pytest with -x: stop at the first failure.\r\n"
    b"**Why:** the suite is slow.\r\n"
)
ROLE = (
    b"---\n"
    b"name: user-role\n"
    b"description: The user is a data engineer\n"
    b"metadata:\n"
    b"  type: user\n"
    b"  tags: [sql, airflow]\n"
    b"---\n"
    b"\n"
    b"The user is a data engineer who knows SQL well.\n"
)
OLD_NOTE = b"---\nname: old-ci\ndescription: CI runs on Jenkins\ntype: project\n---\n\nJenkins.\n"
INDEX = (
    b"# Memory index\n"
    b"\n"
    b"- [Testing](feedback_testing.md) \xe2\x80\x94 pytest -x, always\n"
    b"- [Role](user_role.md) \xe2\x80\x94 data engineer\n"
    b"- [Old CI](old_ci.md) \xe2\x80\x94 Jenkins\n"
    b"\n"
    b"Notes of my own stay here.\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git checkout whose path has what the slug replaces: a dot and an underscore."""
    folder = tmp_path / "my_project.v2"
    (folder / ".git").mkdir(parents=True)
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def claude_folder(home: Path, project: Path) -> Path:
    """Where Claude Code keeps the project's memory, by its rule written out here again."""
    return home / ".claude" / "projects" / re.sub(r"[^a-zA-Z0-9]", "-", str(project)) / "memory"


@pytest.fixture
def folder(home: Path, project: Path) -> Path:
    memory = claude_folder(home, project)
    memory.mkdir(parents=True)
    for name, content in [
        ("feedback_testing.md", FEEDBACK),
        ("user_role.md", ROLE),
        ("old_ci.md", OLD_NOTE),
        ("MEMORY.md", INDEX),
    ]:
        (memory / name).write_bytes(content)
    return memory


@pytest.fixture
def run(memctl: MemctlRunner, project: Path, home: Path) -> MemctlRunner:
    """memctl in the project, with the fake HOME (and no CLAUDE_CONFIG_DIR of the user's)."""

    def in_project(*args: str) -> object:
        environment = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
        environment["HOME"] = str(home)
        return memctl(*args, cwd=project, env=environment)

    return in_project  # type: ignore[return-value]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def entries(folder: Path) -> dict[str, tuple[int, int, int, int]]:
    """Each entry as it is on disk, without reading it (a 50 MB file, a link)."""
    return {
        p.name: (s.st_mode, s.st_ino, s.st_size, s.st_mtime_ns)
        for p in folder.iterdir()
        for s in [p.lstat()]
    }


def memories(run: MemctlRunner) -> dict[str, dict[str, object]]:
    listed = run("list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {m["name"]: m for m in json.loads(listed.stdout or "[]")}


def test_the_slug_is_claude_codes() -> None:
    assert slug("/home/u/my_project.v2") == "-home-u-my-project-v2"
    # One dash per UTF-16 code unit: an emoji is two, an accented letter (NFC) one.
    assert slug("/tmp/a b/😀é_x.y") == "-tmp-a-b-----x-y"
    assert slug("/tmp/cafe\u0301") == "-tmp-caf-"
    # Past 200 characters: cut, and the djb2 hash in base 36 (Node's reference output).
    long = "/p/" + "a_b." * 60 + "😀"
    assert slug(long) == "-p-" + "a-b-" * 49 + "a-" + "wmrorb"


def test_a_long_path_finds_the_folder_claude_code_made(tmp_path: Path) -> None:
    project = tmp_path / ("deep_" * 50)
    project.mkdir()
    config = tmp_path / "claude"
    made = config / "projects" / (slug(str(project))[:200] + "-bunhash1")
    (made / "memory").mkdir(parents=True)
    assert find_folder(project, config).path == made / "memory"


def test_a_worktree_is_its_main_checkouts_project(tmp_path: Path) -> None:
    main = tmp_path / "repo"
    git_dir = main / ".git" / "worktrees" / "feature"
    git_dir.mkdir(parents=True)
    worktree = tmp_path / "feature"
    (worktree / "src").mkdir(parents=True)
    (worktree / ".git").write_text(f"gitdir: {git_dir}\n")
    (git_dir / "commondir").write_text("../..\n")
    (git_dir / "gitdir").write_text(f"{worktree / '.git'}\n")
    assert project_of(worktree / "src") == main
    # A link back that does not agree is not followed (Claude Code checks it too).
    (git_dir / "gitdir").write_text(f"{tmp_path / 'elsewhere' / '.git'}\n")
    assert project_of(worktree / "src") == worktree


def test_import_edit_write_back_and_import_again(
    run: MemctlRunner, folder: Path, project: Path
) -> None:
    before = snapshot(folder)
    path = run("claude", "path")
    assert path.stdout.strip() == str(folder)

    dry = run("claude", "import", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert sorted(dry.stdout.splitlines()) == [
        "create  feedback-testing",
        "create  old-ci",
        "create  user-role",
    ]
    assert not (project / ".memory").exists()  # no database made for a dry run

    imported = run("claude", "import")
    assert imported.returncode == 0, imported.stderr
    assert set(memories(run)) == {"feedback-testing", "old-ci", "user-role"}
    assert snapshot(folder) == before
    assert (project / ".memory" / "feedback-testing.md").exists()  # .memory/ written again
    runs = json.loads(run("history", "--runs", "--json").stdout)
    assert [(r["actor"], r["created"]) for r in runs] == [("claude-code", 3)]

    # Nothing changed: writing back changes no byte.
    unchanged = run("claude", "export")
    assert unchanged.returncode == 0, unchanged.stderr
    assert snapshot(folder) == before

    # memstore's side: an edit, a new memory, a deletion.
    assert run("edit", "feedback-testing", "--body", "Run pytest -x -q.").returncode == 0
    added = run("add", "deploy-fridays", "-t", "project", "-d", "No deploys on Fridays",
                "-b", "We never deploy on a Friday.")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert run("rm", "old-ci").returncode == 0

    plan = run("claude", "export", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        "rewrite  feedback_testing.md",
        "create   deploy-fridays.md",
        "rewrite  MEMORY.md",
        "remove   old_ci.md",
    ]
    assert snapshot(folder) == before

    written = run("claude", "export")
    assert written.returncode == 0, written.stderr
    after = snapshot(folder)
    assert set(after) == {"MEMORY.md", "deploy-fridays.md", "feedback_testing.md", "user_role.md"}
    assert after["user_role.md"] == ROLE
    # In place: its frontmatter, unknown key and CRLF kept; only the body is new.
    assert after["feedback_testing.md"] == FEEDBACK.split(b"\r\n\r\n")[0] + (
        b"\r\n\r\nRun pytest -x -q.\r\n"
    )
    assert after["deploy-fridays.md"] == (
        b"---\nname: deploy-fridays\ndescription: No deploys on Fridays\ntype: project\n---\n\n"
        b"We never deploy on a Friday.\n"
    )
    assert (
        after["MEMORY.md"]
        == INDEX.replace("- [Old CI](old_ci.md) — Jenkins\n".encode(), b"")
        + "- [deploy-fridays](deploy-fridays.md) — No deploys on Fridays\n".encode()
    )

    # Claude Code's side: it edits a file, and saves a new memory with its index line.
    edited_role = ROLE.replace(b"knows SQL well.", b"knows SQL and dbt well.")
    (folder / "user_role.md").write_bytes(edited_role)
    (folder / "project_release.md").write_bytes(
        b"---\nname: release-train\ndescription: Releases go out on Tuesdays\ntype: project\n"
        b"---\n\nReleases go out every Tuesday.\n"
    )
    with (folder / "MEMORY.md").open("ab") as index:
        index.write("- [Releases](project_release.md) — Tuesdays\n".encode())
    claude_side = snapshot(folder)

    again = run("claude", "import")
    assert again.returncode == 0, again.stderr
    assert "feedback_testing.md" not in again.stderr  # its repairs were said the first time
    found = memories(run)
    assert set(found) == {"deploy-fridays", "feedback-testing", "release-train", "user-role"}
    assert found["user-role"]["body"] == "The user is a data engineer who knows SQL and dbt well."
    assert found["feedback-testing"]["body"] == "Run pytest -x -q."
    settled = run("claude", "export")
    assert settled.returncode == 0, settled.stderr
    assert "0 written, 0 removed" in settled.stderr
    assert snapshot(folder) == claude_side


def test_a_memory_changed_on_both_sides_is_a_conflict(run: MemctlRunner, folder: Path) -> None:
    assert run("claude", "import").returncode == 0
    assert run("edit", "user-role", "--body", "A data engineer (memstore's edit).").returncode == 0
    (folder / "user_role.md").write_bytes(ROLE.replace(b"well.", b"well (Claude's edit)."))
    before = snapshot(folder)

    refused = run("claude", "import")
    assert refused.returncode == 1
    assert "invalid: user_role.md: edited by hand" in refused.stderr
    assert "memctl claude import --force" in refused.stderr
    # The command that keeps the database's text is the Claude folder's, not .memory/'s.
    assert "keep the database's with 'memctl claude export --force'" in refused.stderr
    assert memories(run)["user-role"]["body"] == "A data engineer (memstore's edit)."
    not_written = run("claude", "export")
    assert not_written.returncode == 1
    refusal = not_written.stderr.splitlines()[-1]
    assert "user_role.md" in refusal
    # Its advice is Claude Code's folder's: `memctl export --force` would write .memory/.
    assert "'memctl claude export --force' overwrites them all" in refusal
    assert "'memctl export --force'" not in not_written.stderr
    assert snapshot(folder) == before

    # The file's text wins on request; the memory's stays in history.
    taken = run("claude", "import", "--force")
    assert taken.returncode == 0, taken.stderr
    assert memories(run)["user-role"]["body"].endswith("(Claude's edit).")
    history = run("history", "user-role", "--json")
    bodies = [e["new_value"]["body"] for e in json.loads(history.stdout) if e["new_value"]]
    assert "A data engineer (memstore's edit)." in bodies
    assert run("claude", "export").returncode == 0
    assert snapshot(folder) == before


def test_export_force_keeps_claudes_edit_and_says_where(run: MemctlRunner, folder: Path) -> None:
    assert run("claude", "import").returncode == 0
    assert run("edit", "user-role", "--body", "A data engineer (memstore's edit).").returncode == 0
    edited = ROLE.replace(b"well.", b"well (Claude's edit).")
    (folder / "user_role.md").write_bytes(edited)
    forced = run("claude", "export", "--force")
    assert forced.returncode == 0, forced.stderr
    [note] = [line for line in forced.stderr.splitlines() if line.startswith("note:")]
    assert note.startswith("note: user_role.md held text the database does not have: kept in ")
    kept = Path(note.rsplit(" kept in ", 1)[1])
    assert kept.parent == folder and kept.read_bytes() == edited
    assert b"memstore's edit" in (folder / "user_role.md").read_bytes()


def test_a_file_claude_code_deletes_deletes_its_memory_unless_it_changed(
    run: MemctlRunner, folder: Path
) -> None:
    assert run("claude", "import").returncode == 0
    (folder / "old_ci.md").unlink()
    (folder / "user_role.md").unlink()
    assert run("edit", "user-role", "--body", "Changed in memstore since.").returncode == 0
    plan = run("claude", "import", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == ["delete  old-ci"]
    assert set(memories(run)) == {"feedback-testing", "old-ci", "user-role"}

    applied = run("claude", "import")
    assert applied.returncode == 0, applied.stderr
    assert "user_role.md: removed from the folder, but its memory 'user-role' changed" in (
        applied.stderr
    )
    assert set(memories(run)) == {"feedback-testing", "user-role"}
    events = json.loads(run("history", "old-ci", "--json").stdout)
    assert [(e["operation"], e["actor"]) for e in events][-1] == ("delete", "claude-code")
    # Writing back brings back only the memory memstore changed, in the file it had, so
    # that its line in MEMORY.md holds again; the deleted memory's line, which would point
    # at nothing, goes.
    assert (folder / "MEMORY.md").read_bytes() == INDEX
    exported = run("claude", "export")
    assert exported.returncode == 0, exported.stderr
    assert sorted(p.name for p in folder.iterdir()) == [
        "MEMORY.md",
        "feedback_testing.md",
        "user_role.md",
    ]
    assert b"Changed in memstore since." in (folder / "user_role.md").read_bytes()
    assert (folder / "MEMORY.md").read_bytes() == INDEX.replace(
        "- [Old CI](old_ci.md) — Jenkins\n".encode(), b""
    )
    # Settled: the next import and export change nothing.
    settled = snapshot(folder)
    assert run("claude", "import").returncode == 0
    again = run("claude", "export")
    assert again.returncode == 0, again.stderr
    assert "0 written, 0 removed" in again.stderr
    assert snapshot(folder) == settled


def test_a_memory_restored_after_claude_code_deleted_it_goes_back_to_its_file(
    run: MemctlRunner, folder: Path
) -> None:
    assert run("claude", "import").returncode == 0
    before = snapshot(folder)
    (folder / "old_ci.md").unlink()
    assert run("claude", "import").returncode == 0
    assert "old-ci" not in memories(run)
    restored = run("restore", "old-ci")
    assert restored.returncode == 0, restored.stderr
    exported = run("claude", "export")
    assert exported.returncode == 0, exported.stderr
    # Its file again, in canonical form, and its line in MEMORY.md as Claude Code wrote it.
    after = snapshot(folder)
    assert set(after) == set(before)
    assert after["MEMORY.md"] == INDEX
    assert after["old_ci.md"] == OLD_NOTE


def test_a_line_of_memory_md_whose_file_is_gone_goes_at_the_next_export(
    run: MemctlRunner, folder: Path
) -> None:
    assert run("claude", "import").returncode == 0
    # Claude Code deletes a file and leaves its line; the memory goes at the next import.
    (folder / "old_ci.md").unlink()
    assert run("claude", "import").returncode == 0
    assert "old-ci" not in memories(run)
    # A line of the person's own linking a file that was never there goes too, while lines
    # linking files of other kinds, or below the folder, stay.
    extra = "- [Gone](never_there.md) — stale\n- [Team](team/shared.md) — kept\n".encode()
    (folder / "MEMORY.md").write_bytes(INDEX + extra)
    plan = run("claude", "export", "--dry-run")
    assert plan.stdout.splitlines() == ["rewrite  MEMORY.md"], plan.stderr
    assert run("claude", "export").returncode == 0
    assert (folder / "MEMORY.md").read_bytes() == INDEX.replace(
        "- [Old CI](old_ci.md) — Jenkins\n".encode(), b""
    ) + "- [Team](team/shared.md) — kept\n".encode()


def test_no_folder_is_one_line(run: MemctlRunner, home: Path, project: Path) -> None:
    for command in ("import", "export"):
        result = run("claude", command)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1
        assert "no Claude Code memory folder for" in result.stderr
        assert 'mkdir -p "$(memctl claude path)"' in result.stderr  # how to start one
    assert not (home / ".claude").exists()
    assert not (project / ".memory").exists()  # refused: no database made for nothing


@pytest.mark.parametrize("case", ["link", "climbing-name", "huge"])
def test_hostile_files_are_refused_and_change_nothing(
    run: MemctlRunner, folder: Path, tmp_path: Path, project: Path, case: str
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"---\nname: secret-plan\ndescription: x\ntype: user\n---\n\nOutside.\n")
    if case == "link":
        (folder / "linked.md").symlink_to(outside)
        expected = "invalid: linked.md: a symbolic link; only regular files are imported"
    elif case == "climbing-name":
        (folder / "escape.md").write_bytes(
            b"---\nname: ../../../outside\ndescription: x\ntype: user\n---\n\nEscape.\n"
        )
        expected = "invalid: escape.md: name '../../../outside' is a path that leaves its folder"
    else:
        with (folder / "huge.md").open("wb") as huge:
            huge.write(b"---\nname: huge\ndescription: x\ntype: user\n---\n\n")
            huge.truncate(50 * 1024 * 1024)
        expected = "invalid: huge.md: file is over the limit of 1,048,576 bytes"
    before = entries(folder)
    outside_before = outside.read_bytes()

    result = run("claude", "import")
    assert result.returncode == 1
    assert expected in result.stderr.splitlines()
    assert result.stderr.splitlines()[-1].startswith("memctl: error: import aborted")
    assert not (project / ".memory").exists()  # no database made for nothing
    assert memories(run) == {}
    assert entries(folder) == before
    assert outside.read_bytes() == outside_before

    # Writing back never goes through the link nor replaces it, nor reads the huge file.
    assert run("add", "linked", "-t", "user", "-d", "d", "-b", "From memstore.").returncode == 0
    written = run("claude", "export")
    if case == "link":
        assert written.returncode == 1
        assert (
            written.stderr.count("\n") == 1 and "linked.md is not a regular file" in written.stderr
        )
        assert entries(folder) == before
    else:
        assert written.returncode == 0, written.stderr
        assert (folder / "linked.md").read_bytes().endswith(b"From memstore.\n")
    assert outside.read_bytes() == outside_before


def test_chat_reads_claude_md_and_agents_md_into_its_system_prompt(
    memctl: MemctlRunner, anthropic_server: AnthropicServer, tmp_path: Path, home: Path
) -> None:
    workspace = tmp_path / "chat"
    (workspace / ".git").mkdir(parents=True)
    (workspace / "CLAUDE.md").write_text("Build with `make <target>` & never push to main.\n")
    (workspace / "AGENTS.md").write_text("Agents: " + "x" * 30_000)
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text("PERSONAL-RULE-FOR-CLAUDE-CODE\n")
    env = {
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": anthropic_server.url,
        "MEMSTORE_SETTINGS": os.devnull,
        "HOME": str(home),
    }
    # An empty store: no selection call; the answer; extraction finds nothing to keep.
    anthropic_server.script(text_reply("Understood."), text_reply("[]"))
    chat = memctl("chat", input="how do I build?\n", env=env, cwd=workspace)
    assert chat.returncode == 0, chat.stderr
    (request,) = [r for r in anthropic_server.requests if "tools" in r]
    system = request["system"][0]["text"]
    instructions = system[system.index("<project_instructions>") : system.index("</project_")]
    assert "## CLAUDE.md\n\nBuild with `make &lt;target&gt;` &amp; never push to main." in (
        instructions
    )
    assert "## AGENTS.md\n\nAgents: " + "x" * (20_000 - len("Agents: ")) + "\n[… cut" in (
        instructions
    )
    assert "x" * 20_000 not in instructions
    assert "PERSONAL-RULE" not in system
    # The project's instructions come before the memory's, and are never stored.
    assert system.index("<project_instructions>") < system.index("<memory_index>")
    database = (workspace / ".memory" / "memstore.db").read_bytes()
    assert b"never push to main" not in database and b"xxxxxxxx" not in database

    # Absent files are skipped; a link out of the workspace is never followed.
    (workspace / "AGENTS.md").unlink()
    (workspace / "CLAUDE.md").unlink()
    (workspace / "CLAUDE.md").symlink_to(home / ".claude" / "CLAUDE.md")
    anthropic_server.requests.clear()
    anthropic_server.script(text_reply("Hello."), text_reply("[]"))
    again = memctl("chat", input="hello\n", env=env, cwd=workspace)
    assert again.returncode == 0, again.stderr
    (request,) = [r for r in anthropic_server.requests if "tools" in r]
    assert "project_instructions" not in request["system"][0]["text"]
    assert "PERSONAL-RULE" not in request["system"][0]["text"]


def assert_nothing_hidden(folder: Path) -> None:
    """No file of Claude Code's folder holds a character its model reads and no one sees."""
    for name, content in snapshot(folder).items():
        found = HIDDEN.search(content.decode())
        assert found is None, (name, ascii(found and found.group()))


def test_claude_codes_model_reads_the_hidden_characters_shown_and_the_store_keeps_them(
    run: MemctlRunner, folder: Path, project: Path
) -> None:
    # Claude Code loads its folder into its model as it is: a memory hiding an instruction
    # in tag characters must reach it shown, as the hook and MCP show it.
    added = run("add", "deploy-notes", "-t", "project", "-d", DESCRIPTION, "-b", BODY)
    assert added.returncode == 0, added.stderr
    # A file and a MEMORY.md line of Claude Code's own hiding characters too.
    (folder / "own_notes.md").write_text(
        f"---\nname: own-notes\ndescription: Mine{HIDDEN_TAG}\ntype: user\n---\n\nSee {BIDI}\n"
    )
    with (folder / "MEMORY.md").open("a") as index:
        index.write(f"- [Own](own_notes.md) — mine{HIDDEN_TAG}\n")

    synced = run("claude", "sync")
    assert synced.returncode == 0, synced.stderr
    assert_nothing_hidden(folder)
    written = (folder / "deploy-notes.md").read_text()
    assert SHOWN_TAG in written and "invoice\\u{202E}txt.exe" in written
    assert "Zero\\u{200B}width" in written
    assert SHOWN_TAG in (folder / "MEMORY.md").read_text()
    # The store and the workspace's .memory/ keep every character.
    found = memories(run)
    assert (found["deploy-notes"]["description"], found["deploy-notes"]["body"]) == (
        DESCRIPTION,
        BODY,
    )
    assert found["own-notes"]["description"] == f"Mine{HIDDEN_TAG}"
    assert found["own-notes"]["body"] == f"See {BIDI}"
    assert BIDI in (project / ".memory" / "own-notes.md").read_text()

    # The files say what the memories say: syncing again changes nothing on either side.
    events = run("history", "--json").stdout
    store_files = {p.name: p.read_bytes() for p in (project / ".memory").glob("*.md")}
    folder_before = snapshot(folder)
    for command in (("claude", "sync"), ("claude", "import"), ("claude", "export")):
        again = run(*command)
        assert again.returncode == 0, again.stderr
    assert "0 created, 0 updated" in again.stderr or "0 written, 0 removed" in again.stderr
    assert run("history", "--json").stdout == events
    assert snapshot(folder) == folder_before
    assert {p.name: p.read_bytes() for p in (project / ".memory").glob("*.md")} == store_files

    # A file edited by hand: the field edited takes the file's text, escapes and all (said
    # in docs/integrations.md); the fields left as they were keep their characters.
    (folder / "deploy-notes.md").write_text(written.replace("Zero", "Edited, zero"))
    imported = run("claude", "import")
    assert imported.returncode == 0, imported.stderr
    edited = memories(run)["deploy-notes"]
    assert edited["description"] == DESCRIPTION
    assert edited["body"].startswith("Deploy with make deploy.\\u{E003C}")
    assert "Edited, zero\\u{200B}width" in edited["body"]


def test_a_file_an_older_memstore_wrote_hiding_characters_is_written_again_shown(
    run: MemctlRunner, home: Path, project: Path
) -> None:
    # Before this version, the write-back kept the characters: such a file, as memstore
    # recorded it, is rewritten at the next export although its memory did not change.
    added = run("add", "deploy-notes", "-t", "project", "-d", DESCRIPTION, "-b", BODY)
    assert added.returncode == 0, added.stderr
    assert run("add", "plain", "-t", "user", "-d", "Plain", "-b", "Nothing hidden.").returncode == 0
    folder = claude_folder(home, project)
    folder.mkdir(parents=True)
    with MemoryStore(project / ".memory" / "memstore.db") as store:
        export_memories(store, folder, personal=True)  # as the older write-back did
    assert HIDDEN_TAG in (folder / "deploy-notes.md").read_text()
    plain = (folder / "plain.md").stat()
    events = run("history", "--json").stdout

    plan = run("claude", "export", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == ["rewrite  deploy-notes.md", "rewrite  MEMORY.md"]
    written = run("claude", "export")
    assert written.returncode == 0, written.stderr
    assert_nothing_hidden(folder)
    assert (folder / "plain.md").stat().st_mtime_ns == plain.st_mtime_ns
    assert run("history", "--json").stdout == events
    again = run("claude", "sync")
    assert again.returncode == 0, again.stderr
    assert run("history", "--json").stdout == events
    assert memories(run)["deploy-notes"]["body"] == BODY
