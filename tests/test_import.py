"""Import: canonical folders, Claude Code's auto-memory folders and messy hand-written notes.

Everything runs against a real SQLite database and real files under tmp_path; the memory
files are written inline by each test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.errors import ExportConflict, ImportRejected, InvalidMemory
from memstore.files.exporter import export_memories
from memstore.files.import_file import MAX_FILE_BYTES
from memstore.files.importer import import_memories
from memstore.storage.store import MemoryStore
from memstore.storage.validation import NAME_PATTERN, check_name
from tests.conftest import MemctlRunner, raw_sql, write

# -- helpers ------------------------------------------------------------------------------------

# The store tests run on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.both_engines


def canonical(name: str, type_: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}\n"


def event_count(store: MemoryStore) -> int:
    with raw_sql(store) as connection:
        return connection.execute("SELECT count(*) FROM memory_event").fetchone()[0]


def database_rows(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row a write could touch, to prove that nothing changed."""
    with raw_sql(store) as connection:
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("memory", "memory_event", "run", "exported_file")
        }


def notes_for(notes: list[str], path: str) -> list[str]:
    return [note for note in notes if note.startswith(f"{path}: ")]


def assert_valid_name(name: str) -> None:
    assert NAME_PATTERN.fullmatch(name), name
    assert check_name(name) == name


CLAUDE_CODE_NESTED = """\
---
name: testing-approach
description: "Integration tests must hit a real database"
metadata:
  node_type: memory
  type: feedback
  originSessionId: 3f1c2a9e-8b7d-4c1e-9f00-123456789abc
  modified: 2026-03-04T10:22:31.000Z
---

We got burned last quarter when mocked tests passed but the prod migration failed.

**How to apply:** never mock the database in integration tests.
"""

CLAUDE_CODE_TOP_LEVEL = """\
---
name: user-role
description: The user is a data scientist new to this codebase
type: user
---

Explain the repository's structure before diving into details.
"""


# -- canonical folders and re-import ------------------------------------------------------------


def test_canonical_folder_imports_every_file(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write(folder / "prefers-uv.md", canonical("prefers-uv", "user", "Uses uv, not pip", "Use uv."))
    write(
        folder / "release-freeze.md",
        canonical("release-freeze", "project", "Merge freeze from March 5", "No merges."),
    )

    report = import_memories(store, folder)

    assert sorted(report.created) == ["prefers-uv", "release-freeze"]
    assert report.problems == []
    memory = store.get("release-freeze")
    assert (memory.type, memory.description, memory.body) == (
        "project",
        "Merge freeze from March 5",
        "No merges.",
    )
    assert store.get("prefers-uv").type == "user"


def test_reimporting_the_same_folder_changes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write(folder / "prefers-uv.md", canonical("prefers-uv", "user", "Uses uv, not pip", "Use uv."))
    write(folder / "feedback_testing.md", CLAUDE_CODE_NESTED)
    write(folder / "messy.md", "---\nname: A free text name\ntype: project\n---\nSome body\n")
    import_memories(store, folder)
    events_after_first = len(store.history.events())
    rows_after_first = database_rows(store)
    assert events_after_first == 3

    report = import_memories(store, folder)

    assert report.created == [] and report.updated == []
    assert sorted(report.unchanged) == sorted(m.name for m in store.memories())
    assert report.run_id is None
    assert len(store.history.events()) == events_after_first
    assert event_count(store) == events_after_first
    assert database_rows(store) == rows_after_first


def test_a_file_the_store_refuses_as_written_is_its_problem(
    store: MemoryStore, tmp_path: Path
) -> None:
    """On a server a memory never changes to or from `user` (whose it is decides who sees its
    history): a file that would change one is a problem of that file, found as the store
    writes (it was a crash, found by the fuzz test below); on SQLite the type just changes."""
    folder = tmp_path / "memory"
    write(folder / "style.md", canonical("style", "project", "Tabs", "Use tabs."))
    write(folder / "other.md", canonical("other", "project", "Other", "Kept."))
    import_memories(store, folder)
    write(folder / "style.md", canonical("style", "user", "Tabs", "I use tabs."))
    write(folder / "other.md", canonical("other", "project", "Other", "Changed."))
    if store.url is None:
        assert import_memories(store, folder).updated == ["other", "style"]
        return
    rows = database_rows(store)
    with pytest.raises(ImportRejected) as rejected:
        import_memories(store, folder)
    assert [p.path for p in rejected.value.problems] == ["style.md"]
    assert "cannot change to or from `user`" in rejected.value.problems[0].reason
    assert database_rows(store) == rows  # nothing of the import written
    report = import_memories(store, folder, skip_invalid=True)
    assert report.updated == ["other"]
    assert [(p.path, "user" in p.reason) for p in report.problems] == [("style.md", True)]
    assert store.get("style").type == "project"


# -- Claude Code's auto-memory folders ----------------------------------------------------------


def test_claude_code_file_with_top_level_type(store: MemoryStore, tmp_path: Path) -> None:
    write(tmp_path / "cc" / "user_role.md", CLAUDE_CODE_TOP_LEVEL)

    import_memories(store, tmp_path / "cc")

    memory = store.get("user-role")
    assert memory.type == "user"
    assert memory.description == "The user is a data scientist new to this codebase"
    assert memory.body == "Explain the repository's structure before diving into details."


def test_claude_code_file_with_type_under_metadata(store: MemoryStore, tmp_path: Path) -> None:
    write(tmp_path / "cc" / "testing.md", CLAUDE_CODE_NESTED)

    report = import_memories(store, tmp_path / "cc")

    assert report.created == ["testing-approach"]
    memory = store.get("testing-approach")
    assert memory.type == "feedback"
    assert memory.description == "Integration tests must hit a real database"
    assert memory.body.startswith("We got burned last quarter")
    assert memory.body.endswith("never mock the database in integration tests.")
    # The unmodeled mapping is kept whole; the timestamp is the text that was written.
    assert memory.extra == {
        "metadata": {
            "node_type": "memory",
            "type": "feedback",
            "originSessionId": "3f1c2a9e-8b7d-4c1e-9f00-123456789abc",
            "modified": "2026-03-04T10:22:31.000Z",
        }
    }


def test_export_writes_unmodeled_keys_back(store: MemoryStore, tmp_path: Path) -> None:
    source = CLAUDE_CODE_NESTED.replace(
        "---\n\nWe got", "created: 2026-03-01\ntags: [database, tests]\n---\n\nWe got"
    )
    write(tmp_path / "cc" / "testing.md", source)
    import_memories(store, tmp_path / "cc")

    export_memories(store, tmp_path / "out")

    text = (tmp_path / "out" / "testing-approach.md").read_text(encoding="utf-8")
    front = text.split("---\n")[1]
    # BaseLoader reads every scalar as the text written, so a changed timestamp would show.
    exported = yaml.load(front, Loader=yaml.BaseLoader)
    original = yaml.load(source.split("---\n")[1], Loader=yaml.BaseLoader)
    for key, value in original.items():
        assert exported[key] == value, key
    assert exported["metadata"]["modified"] == "2026-03-04T10:22:31.000Z"
    assert exported["created"] == "2026-03-01"
    assert exported["type"] == "feedback"
    assert "We got burned last quarter" in text.split("---\n", 2)[2]


def test_import_export_import_loses_nothing(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "cc"
    write(folder / "testing.md", CLAUDE_CODE_NESTED)
    write(folder / "user_role.md", CLAUDE_CODE_TOP_LEVEL)
    write(
        folder / "feedback_commits.md",
        "---\nname: Commit messages in English\ndescription: Style: imperative mood\n"
        "metadata:\n  type: feedback\n  modified: 2026-02-01T08:00:00.000Z\n---\nAlways.\n",
    )
    write(folder / "笔记" / "数据库.md", "---\nname: 数据库\ntype: project\n---\n生产库只读。\n")
    import_memories(store, folder)
    before = {m.name: (m.type, m.description, m.body, m.extra) for m in store.memories()}
    export_memories(store, tmp_path / "out", personal=True)  # all, on a server too

    with MemoryStore(tmp_path / "fresh.db") as fresh:
        import_memories(fresh, tmp_path / "out")
        after = {m.name: (m.type, m.description, m.body, m.extra) for m in fresh.memories()}
        export_memories(fresh, tmp_path / "out-again")

    assert after == before
    for exported in (tmp_path / "out").iterdir():
        again = tmp_path / "out-again" / exported.name
        assert again.read_bytes() == exported.read_bytes(), exported.name
    # Importing our own export into the store it came from changes nothing either.
    events = event_count(store)
    report = import_memories(store, tmp_path / "out")
    assert report.created == [] and report.updated == []
    assert event_count(store) == events


# -- messy input that is brought in, with a note ------------------------------------------------


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (
            "name: Integration tests must hit a real database",
            "Integration tests must hit a real database",
        ),
        ("name: 集成测试必须连接真实数据库", "集成测试必须连接真实数据库"),
        ('name: ""', None),
        ("name:", None),
    ],
    ids=["sentence", "chinese", "empty-string", "empty"],
)
def test_unusable_name_is_derived_and_noted(
    store: MemoryStore, tmp_path: Path, given: str, kept: str | None
) -> None:
    write(
        tmp_path / "notes" / "db-testing.md",
        f"---\n{given}\ntype: feedback\ndescription: Use the real database\n---\nNo mocks.\n",
    )

    report = import_memories(store, tmp_path / "notes")

    assert len(report.created) == 1
    name = report.created[0]
    assert_valid_name(name)
    memory = store.get(name)
    assert memory.body == "No mocks."
    if kept is not None:
        assert memory.extra["original_name"] == kept
    notes = notes_for(report.notes, "db-testing.md")
    assert notes and name in notes[0]


def test_name_differing_from_filename_keeps_frontmatter_name(
    store: MemoryStore, tmp_path: Path
) -> None:
    write(
        tmp_path / "notes" / "notes-about-tests.md",
        canonical("testing-approach", "feedback", "Hit a real database", "No mocks."),
    )

    import_memories(store, tmp_path / "notes")

    assert [m.name for m in store.memories()] == ["testing-approach"]
    assert store.find("notes-about-tests") is None


@pytest.mark.parametrize(
    ("file_name", "type_"),
    [("feedback_testing.md", "feedback"), ("project_release.md", "project")],
)
def test_missing_type_is_taken_from_the_file_name(
    store: MemoryStore, tmp_path: Path, file_name: str, type_: str
) -> None:
    write(tmp_path / "notes" / file_name, "---\nname: some-note\ndescription: A note\n---\nBody\n")

    report = import_memories(store, tmp_path / "notes")

    assert store.get("some-note").type == type_
    assert any(type_ in note for note in notes_for(report.notes, file_name))


def test_default_type_applies_to_files_that_name_none(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "misc.md", "---\nname: misc\ndescription: Misc\n---\nBody\n")

    with pytest.raises(ImportRejected):
        import_memories(store, folder)
    report = import_memories(store, folder, default_type="reference")

    assert store.get("misc").type == "reference"
    assert any("reference" in note for note in notes_for(report.notes, "misc.md"))


def test_unknown_default_type_is_refused(store: MemoryStore, tmp_path: Path) -> None:
    write(tmp_path / "notes" / "misc.md", "---\nname: misc\ndescription: Misc\n---\nBody\n")

    with pytest.raises(InvalidMemory):
        import_memories(store, tmp_path / "notes", default_type="opinion")
    assert store.count() == 0


def test_quoted_descriptions_are_stored_without_quotes(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(
        folder / "a.md", '---\nname: a\ntype: user\ndescription: "Says \\"hi\\": always"\n---\nA\n'
    )
    write(folder / "b.md", "---\nname: b\ntype: user\ndescription: 'Don''t mock: ever'\n---\nB\n")

    import_memories(store, folder)

    assert store.get("a").description == 'Says "hi": always'
    assert store.get("b").description == "Don't mock: ever"


def test_unquoted_colon_in_description_is_read_leniently(
    store: MemoryStore, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    text = (
        "---\nname: db-rule\ndescription: Testing: always hit the real DB: no mocks\n"
        "metadata:\n  type: feedback\n  modified: 2026-03-04T10:22:31.000Z\n---\nBody\n"
    )
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text.split("---\n")[1])
    write(folder / "db-rule.md", text)

    report = import_memories(store, folder)

    memory = store.get("db-rule")
    assert memory.description == "Testing: always hit the real DB: no mocks"
    assert memory.type == "feedback"
    assert memory.extra["metadata"] == {"type": "feedback", "modified": "2026-03-04T10:22:31.000Z"}
    assert notes_for(report.notes, "db-rule.md")


def test_crlf_line_endings(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    text = (
        "---\r\nname: crlf\r\ntype: user\r\ndescription: Written on Windows\r\n---\r\n"
        "\r\nLine one\r\nLine two\r\n"
    )
    (folder / "crlf.md").write_bytes(text.encode("utf-8"))

    import_memories(store, folder)

    memory = store.get("crlf")
    assert memory.description == "Written on Windows"
    assert memory.body == "Line one\nLine two"


def test_no_blank_line_after_closing_dashes(store: MemoryStore, tmp_path: Path) -> None:
    write(
        tmp_path / "notes" / "tight.md",
        "---\nname: tight\ntype: user\ndescription: Tight\n---\nBody right away\n",
    )

    import_memories(store, tmp_path / "notes")

    assert store.get("tight").body == "Body right away"


def test_files_in_subfolders_are_imported(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "top.md", canonical("top", "user", "Top", "Top body"))
    write(folder / "team" / "deep" / "deeper.md", canonical("deeper", "project", "Deep", "Deep"))

    import_memories(store, folder)

    assert [m.name for m in store.memories()] == ["deeper", "top"]


def test_a_subfolder_file_and_its_exported_copy_are_one_memory(
    store: MemoryStore, tmp_path: Path
) -> None:
    """Export writes a memory read from a subfolder to `<name>.md` at the top; the next
    import reads the two files, which say the same memory, as that one memory."""
    folder = tmp_path / "notes"
    write(folder / "team" / "rule.md", canonical("team-rule", "feedback", "a team rule", "rule"))
    import_memories(store, folder)
    for _ in range(2):
        export_memories(store, folder)
        report = import_memories(store, folder)
        assert report.created == [] and report.updated == []
        assert report.unchanged == ["team-rule"]
        assert report.notes == [
            "team/rule.md: says exactly what team-rule.md says: the same memory, read once"
        ]
        assert [m.name for m in store.memories()] == ["team-rule"]
    # Two identical files never imported before: one memory too; different ones are two.
    other = tmp_path / "other"
    write(other / "a" / "x.md", canonical("shared", "project", "shared", "same"))
    write(other / "b" / "x.md", canonical("shared", "project", "shared", "same"))
    write(other / "c" / "x.md", canonical("shared", "project", "shared", "not the same"))
    report = import_memories(store, other)
    assert report.created == ["shared", "shared-2"]
    assert store.get("shared").body == "same" and store.get("shared-2").body == "not the same"


def test_a_subfolder_file_edited_after_export_updates_its_memory(
    store: MemoryStore, tmp_path: Path
) -> None:
    """The subfolder file is read instead of the copy export wrote of its memory: an edit
    updates that memory; the text of an older version never brings it back."""
    folder = tmp_path / "notes"
    rule = folder / "team" / "rule.md"
    write(rule, canonical("team-rule", "feedback", "a team rule", "rule"))
    import_memories(store, folder)
    export_memories(store, folder)
    write(rule, canonical("team-rule", "feedback", "a team rule", "rule, second version"))
    report = import_memories(store, folder)
    assert (report.created, report.updated, report.unchanged) == ([], ["team-rule"], [])
    assert "team-rule.md: as the last export wrote it; team/rule.md says its memory" in (
        report.notes
    )
    assert [(m.name, m.body) for m in store.memories()] == [("team-rule", "rule, second version")]
    assert export_memories(store, folder).written == ["team-rule.md"]
    report = import_memories(store, folder)
    assert (report.created, report.updated) == ([], [])

    store.update("team-rule", body="rule, third version")  # the subfolder file is older now
    export_memories(store, folder)
    report = import_memories(store, folder)
    assert (report.created, report.updated) == ([], [])
    assert "team/rule.md: an older version of its memory" in "\n".join(report.notes)
    assert [(m.name, m.body) for m in store.memories()] == [("team-rule", "rule, third version")]

    # A file of the user's own at the top is not an exported copy: a subfolder file of the
    # same name and other text is another memory, as before.
    write(folder / "own.md", "---\nname: own\ntype: project\n---\nmy own file\n")
    import_memories(store, folder)
    export_memories(store, folder)
    write(folder / "sub" / "own.md", canonical("own", "project", "own", "another text"))
    report = import_memories(store, folder)
    assert report.created == ["own-2"]


def test_chinese_text_is_kept(store: MemoryStore, tmp_path: Path) -> None:
    write(
        tmp_path / "notes" / "db-rule.md",
        "---\nname: db-rule\ntype: feedback\ndescription: 集成测试必须连接真实数据库\n---\n"
        "上个季度模拟测试通过了，但生产迁移失败了。\n",
    )

    import_memories(store, tmp_path / "notes")

    memory = store.get("db-rule")
    assert memory.description == "集成测试必须连接真实数据库"
    assert memory.body == "上个季度模拟测试通过了，但生产迁移失败了。"
    assert [hit.memory.name for hit in store.search("db")] == ["db-rule"]


def test_all_chinese_file_gets_a_valid_name(store: MemoryStore, tmp_path: Path) -> None:
    write(
        tmp_path / "notes" / "数据库.md",
        "---\nname: 数据库规则\ntype: feedback\n"
        "description: 集成测试必须连接真实数据库\n---\n不要模拟。\n",
    )

    report = import_memories(store, tmp_path / "notes")

    (name,) = report.created
    assert_valid_name(name)
    assert store.get(name).extra["original_name"] == "数据库规则"
    assert notes_for(report.notes, "数据库.md")


def test_editing_an_all_chinese_file_updates_its_memory(store: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "notes" / "数据库.md"
    head = "---\nname: 数据库规则\ntype: feedback\ndescription: 集成测试必须连接真实数据库\n---\n"
    write(path, head + "不要模拟。\n")
    import_memories(store, tmp_path / "notes")
    write(path, head + "不要模拟数据库。\n")

    report = import_memories(store, tmp_path / "notes")

    assert report.created == []
    assert len(report.updated) == 1
    assert store.count() == 1
    assert store.get(report.updated[0]).body == "不要模拟数据库。"


def test_two_files_deriving_the_same_name_both_import(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "a" / "feedback_testing.md", "---\nname: Use a real DB\n---\nFirst\n")
    write(folder / "b" / "feedback_testing.md", "---\nname: Use a real DB too\n---\nSecond\n")

    report = import_memories(store, folder)

    assert len(report.created) == 2
    assert len(set(report.created)) == 2
    for name in report.created:
        assert_valid_name(name)
    assert sorted(m.body for m in store.memories()) == ["First", "Second"]
    assert notes_for(report.notes, "a/feedback_testing.md")
    assert notes_for(report.notes, "b/feedback_testing.md")
    again = import_memories(store, folder)
    assert again.created == [] and again.updated == []


def test_two_long_files_deriving_the_same_name_both_import(
    store: MemoryStore, tmp_path: Path
) -> None:
    stem = "feedback_integration_tests_must_hit_the_real_database_mock_do_ok"
    assert len(stem) == 64 and stem[61] == "_"
    folder = tmp_path / "notes"
    write(folder / "a" / f"{stem}.md", "---\nname: Real DB\ndescription: One\n---\nFirst\n")
    write(folder / "b" / f"{stem}.md", "---\nname: Real DB too\ndescription: Two\n---\nSecond\n")

    report = import_memories(store, folder)

    assert len(set(report.created)) == 2
    for name in report.created:
        assert_valid_name(name)
    assert store.count() == 2


# -- files that cannot be read ------------------------------------------------------------------

BAD_FILES: dict[str, tuple[bytes, str]] = {
    "no-closing-line": (b"---\nname: x\ntype: user\nBody\n", "no closing '---' line"),
    "bad-yaml": (b"---\n[unclosed: {\nname: x\n---\nBody\n", "not readable YAML"),
    "no-body": (b"---\nname: empty\ntype: user\ndescription: Empty\n---\n\n", "no body"),
    "unknown-type": (
        b"---\nname: misc\ntype: opinion\ndescription: Misc\n---\nBody\n",
        "unknown type 'opinion'",
    ),
    "latin-1": (
        "---\nname: cafe\ntype: user\ndescription: Café\n---\nBody\n".encode("latin-1"),
        "UTF-8",
    ),
    "oversized": (
        b"---\nname: huge\ntype: user\ndescription: Huge\n---\n" + b"x" * MAX_FILE_BYTES,
        "limit",
    ),
}


@pytest.fixture
def seeded(store: MemoryStore, tmp_path: Path) -> Path:
    """A store with one memory, and a folder whose good file would update it."""
    store.create("prefers-uv", "user", "Uses uv", "Use uv.")
    folder = tmp_path / "notes"
    write(folder / "prefers-uv.md", canonical("prefers-uv", "user", "Uses uv", "Use uv, always."))
    write(folder / "new-one.md", canonical("new-one", "project", "New", "New body"))
    return folder


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_unreadable_file_aborts_the_import_with_nothing_changed(
    store: MemoryStore, seeded: Path, kind: str
) -> None:
    content, reason = BAD_FILES[kind]
    (seeded / "sub").mkdir()
    (seeded / "sub" / "notes.md").write_bytes(content)
    before = database_rows(store)

    with pytest.raises(ImportRejected) as raised:
        import_memories(store, seeded)

    (problem,) = raised.value.problems
    assert problem.path == "sub/notes.md"
    assert reason in problem.reason
    assert database_rows(store) == before
    assert store.get("prefers-uv").body == "Use uv."


def test_each_bad_file_is_reported_once(store: MemoryStore, seeded: Path) -> None:
    for kind, (content, _) in BAD_FILES.items():
        (seeded / f"{kind}.md").write_bytes(content)

    with pytest.raises(ImportRejected) as raised:
        import_memories(store, seeded)

    problems = raised.value.problems
    assert sorted(p.path for p in problems) == sorted(f"{kind}.md" for kind in BAD_FILES)
    for problem in problems:
        assert BAD_FILES[problem.path.removesuffix(".md")][1] in problem.reason


def test_skip_invalid_imports_the_good_files(store: MemoryStore, seeded: Path) -> None:
    for kind, (content, _) in BAD_FILES.items():
        (seeded / f"{kind}.md").write_bytes(content)

    report = import_memories(store, seeded, skip_invalid=True)

    assert report.created == ["new-one"]
    assert report.updated == ["prefers-uv"]
    assert len(report.problems) == len(BAD_FILES)
    assert [m.name for m in store.memories()] == ["new-one", "prefers-uv"]
    assert store.get("prefers-uv").body == "Use uv, always."


def test_dry_run_reports_but_changes_nothing(store: MemoryStore, seeded: Path) -> None:
    before = database_rows(store)

    report = import_memories(store, seeded, dry_run=True)

    assert report.dry_run
    assert report.created == ["new-one"]
    assert report.updated == ["prefers-uv"]
    assert database_rows(store) == before
    assert store.find("new-one") is None


# -- history -----------------------------------------------------------------------------------


def test_import_records_its_events_under_one_run(store: MemoryStore, seeded: Path) -> None:
    events_before = len(store.history.events())

    report = import_memories(store, seeded)

    events = store.history.events()[events_before:]
    assert sorted((e.operation, e.memory_name) for e in events) == [
        ("create", "new-one"),
        ("update", "prefers-uv"),
    ]
    assert {e.actor for e in events} == {"import"}
    assert {e.run_id for e in events} == {report.run_id}
    run = store.history.run(report.run_id or "")
    assert run is not None and run.actor == "import"
    (update,) = [e for e in events if e.operation == "update"]
    assert update.old_value and update.old_value["body"] == "Use uv."
    assert update.new_value and update.new_value["body"] == "Use uv, always."


# -- what is not a memory ------------------------------------------------------------------------


def test_hidden_folders_and_index_file_are_skipped(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "vault"
    write(folder / "kept.md", canonical("kept", "user", "Kept", "Kept"))
    write(folder / "MEMORY.md", "- [kept](kept.md) — Kept\n")
    write(folder / ".obsidian" / "workspace.md", "not a memory at all\n")
    write(folder / ".obsidian" / "plugin.md", canonical("plugin", "user", "Plugin", "Plugin"))
    write(folder / ".trash" / "old.md", canonical("old", "user", "Old", "Old"))

    report = import_memories(store, folder)

    assert report.created == ["kept"]
    assert report.problems == []
    assert [m.name for m in store.memories()] == ["kept"]


# -- the CLI ------------------------------------------------------------------------------------


def cli_store(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / ".memory" / "memstore.db")


def test_cli_refuses_bad_files_with_one_line_each(memctl: MemctlRunner, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "good.md", canonical("good", "user", "Good", "Good"))
    (folder / "no-closing-line.md").write_bytes(BAD_FILES["no-closing-line"][0])
    (folder / "latin-1.md").write_bytes(BAD_FILES["latin-1"][0])

    result = memctl("import", "notes")

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    invalid = sorted(line for line in lines if line.startswith("invalid: "))
    assert len(invalid) == 2
    assert invalid[0].startswith("invalid: latin-1.md: ") and "UTF-8" in invalid[0]
    assert invalid[1].startswith("invalid: no-closing-line.md: ")
    assert "no closing" in invalid[1]
    assert len([line for line in lines if line.startswith("memctl: error: ")]) == 1
    with cli_store(tmp_path) as store:
        assert store.count() == 0


NOTE = b"# TODO\n\n- ask about the staging database\n"


def test_a_note_without_frontmatter_is_skipped_and_the_rest_imported(
    store: MemoryStore, seeded: Path
) -> None:
    (seeded / "TODO.md").write_bytes(NOTE)
    (seeded / "sub").mkdir()
    (seeded / "sub" / "notes.md").write_bytes(NOTE)

    report = import_memories(store, seeded, deletions=True)

    assert [str(p) for p in report.not_memories] == [
        f"{path}: not a memory: no frontmatter (the file must start with a '---' line)"
        for path in ("TODO.md", "sub/notes.md")
    ]
    assert report.problems == [] and report.created == ["new-one"]
    assert store.get("prefers-uv").body == "Use uv, always."
    # Export writes its own files beside the notes, and never touches them.
    export_memories(store, seeded, force=True)
    assert (seeded / "TODO.md").read_bytes() == NOTE
    assert (seeded / "sub" / "notes.md").read_bytes() == NOTE
    assert "TODO" not in (seeded / "MEMORY.md").read_text()
    again = import_memories(store, seeded, deletions=True)
    assert len(again.not_memories) == 2 and not again.created and not again.deleted


def test_cli_a_note_of_your_own_in_memory_is_skipped_once_on_every_import(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    added = memctl("add", "deploy", "-t", "project", "-d", "How we deploy", "-b", "make ship")
    assert added.returncode == 0, added.stderr
    todo = write(tmp_path / ".memory" / "TODO.md", NOTE.decode())
    for command in ("export", "import", "export", "import"):
        done = memctl(command)
        assert done.returncode == 0, done.stderr
        if command == "import":
            said = [line for line in done.stderr.splitlines() if "TODO.md" in line]
            assert said == [
                "skipped: TODO.md: not a memory: no frontmatter (the file must start"
                " with a '---' line)"
            ]
            assert done.stderr.rstrip().endswith("1 unchanged, 1 skipped")
        assert todo.read_bytes() == NOTE
    listed = memctl("list", "--json")
    assert [m["name"] for m in json.loads(listed.stdout)] == ["deploy"]


def test_cli_skip_invalid(memctl: MemctlRunner, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "good.md", canonical("good", "user", "Good", "Good"))
    (folder / "no-body.md").write_bytes(BAD_FILES["no-body"][0])

    result = memctl("import", "notes", "--skip-invalid")

    assert result.returncode == 0, result.stderr
    assert "no-body.md" in result.stderr
    with cli_store(tmp_path) as store:
        assert [m.name for m in store.memories()] == ["good"]


def test_cli_dry_run(memctl: MemctlRunner, tmp_path: Path) -> None:
    write(tmp_path / "notes" / "good.md", canonical("good", "user", "Good", "Good"))

    result = memctl("import", "notes", "--dry-run")

    assert result.returncode == 0, result.stderr
    assert "create  good" in result.stdout
    with cli_store(tmp_path) as store:
        assert store.count() == 0
        assert store.history.events() == []


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every file and folder below `folder`, with the files' content: the disk as it is."""
    return {
        str(path.relative_to(folder)): None if path.is_dir() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
    }


def test_a_refused_import_creates_nothing(memctl: MemctlRunner, tmp_path: Path) -> None:
    write(tmp_path / "notes" / "good.md", canonical("good", "user", "Good", "Good"))
    (tmp_path / "notes" / "no-body.md").write_bytes(BAD_FILES["no-body"][0])
    write(tmp_path / "typeless" / "misc.md", "---\nname: misc\ndescription: Misc\n---\nBody\n")
    secret = "sk-ant-api03-" + "A" * 80
    write(tmp_path / "secret" / "key.md", canonical("key", "user", "Key", f"The key: {secret}"))
    write(tmp_path / "fine" / "good.md", canonical("good", "user", "Good", "Good"))
    for workspace in ("bare", "with-memory"):
        if workspace == "with-memory":  # a .memory/ of the user's own, with no database yet
            write(tmp_path / ".memory" / "mine.md", canonical("mine", "user", "Mine", "Mine"))
        before = tree(tmp_path)
        for args in (
            ["notes"],
            ["notes", "--dry-run"],
            ["typeless"],
            ["secret"],
            ["no-such-folder"],
            ["fine", "--default-type", "bogus"],
            ["fine", "--dry-run"],  # a dry run that would import: nothing written either
            ["--db", "new/m.db", "notes"],
        ):
            done = memctl("import", *args)
            assert done.returncode == (0 if "--dry-run" in args and "fine" in args else 1), done
            assert "Traceback" not in done.stderr
            assert tree(tmp_path) == before, (workspace, args)
    # What it would have imported, it does once nothing refuses it.
    done = memctl("import", "notes", "--skip-invalid")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".memory" / "memstore.db").is_file()
    assert (tmp_path / ".memory" / ".gitignore").is_file()
    with cli_store(tmp_path) as store:
        assert [m.name for m in store.memories()] == ["good"]


def test_cli_default_type(memctl: MemctlRunner, tmp_path: Path) -> None:
    write(tmp_path / "notes" / "misc.md", "---\nname: misc\ndescription: Misc\n---\nBody\n")

    refused = memctl("import", "notes")
    result = memctl("import", "notes", "--default-type", "reference")

    assert refused.returncode == 1
    assert "invalid: misc.md: " in refused.stderr
    assert result.returncode == 0, result.stderr
    with cli_store(tmp_path) as store:
        assert store.get("misc").type == "reference"


def test_cli_does_not_import_the_index_file(memctl: MemctlRunner, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "kept.md", canonical("kept", "user", "Kept", "Kept"))
    write(folder / "MEMORY.md", "- [kept](kept.md) — Kept\n")

    result = memctl("import", "notes")

    assert result.returncode == 0, result.stderr
    assert "MEMORY.md" not in result.stderr
    with cli_store(tmp_path) as store:
        assert [m.name for m in store.memories()] == ["kept"]


def test_unmodeled_values_keep_what_was_written(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(
        folder / "meeting.md",
        "---\nname: meeting\ndescription: 12:30\ntype: project\nmeeting: 12:30\nzip: 012345\n"
        "version: 1.10\nreviewed: yes\ncount: 3\nflag: true\nweight: .nan\n---\nBody.\n",
    )
    import_memories(store, folder)
    memory = store.get("meeting")
    assert memory.description == "12:30"
    assert memory.extra == {
        "meeting": "12:30",
        "zip": "012345",
        "version": "1.10",
        "reviewed": "yes",
        "count": 3,
        "flag": True,
        "weight": ".nan",
    }
    export_memories(store, tmp_path / "out")
    with MemoryStore(tmp_path / "again.db") as again:
        import_memories(again, tmp_path / "out")
        assert again.get("meeting").extra == memory.extra
        assert import_memories(again, tmp_path / "out").updated == []


def test_following_the_export_conflict_advice_loses_nothing(
    store: MemoryStore, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    for name in ("foo", "bar", "gone"):
        store.create(name, "project", f"{name} v1", f"{name} body")
    export_memories(store, out)
    store.update("foo", description="foo v2")  # changed in the database only
    store.delete("gone")  # deleted in the database only
    bar = out / "bar.md"
    bar.write_text(bar.read_text() + "A line added by hand.\n")  # changed in the file only
    with pytest.raises(ExportConflict):
        export_memories(store, out)

    report = import_memories(store, out)  # what the conflict message advises

    assert report.updated == ["bar"] and report.created == []
    assert store.get("foo").description == "foo v2"
    assert store.find("gone") is None
    assert store.get("bar").body.endswith("A line added by hand.")
    result = export_memories(store, out)  # and now export goes through
    assert sorted(result.written) == ["MEMORY.md", "foo.md"]
    assert result.removed == ["gone.md"]
    assert export_memories(store, out).written == []


def test_edits_on_both_sides_since_export_are_a_conflict(
    store: MemoryStore, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    store.create("foo", "project", "foo v1", "foo body")
    export_memories(store, out)
    store.update("foo", body="changed in the database")
    (out / "foo.md").write_text("---\nname: foo\ndescription: foo v2\ntype: project\n---\nfoo body")
    with pytest.raises(ImportRejected) as raised:
        import_memories(store, out)
    assert "changed in the database since the last export" in str(raised.value.problems[0])
    assert store.get("foo").body == "changed in the database"


def test_edit_in_file_after_export_is_imported_and_export_settles(
    store: MemoryStore, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    store.create("foo", "project", "foo v1", "foo body")
    export_memories(store, out)
    (out / "foo.md").write_text("---\nname: foo\ndescription: foo v2\ntype: project\n---\nfoo body")
    assert import_memories(store, out).updated == ["foo"]
    # The file says what the memory says now: it stays as the user wrote it.
    assert export_memories(store, out).written == ["MEMORY.md"]
    assert (out / "foo.md").read_text().endswith("---\nfoo body")
    assert import_memories(store, out).updated == []
    store.update("foo", body="new body")  # a later change is written into the same file
    assert export_memories(store, out).written == ["foo.md"]
    assert (out / "foo.md").read_text() == (
        "---\nname: foo\ndescription: foo v2\ntype: project\n---\nnew body\n"
    )


def test_changed_type_round_trips_through_claude_code_metadata(
    store: MemoryStore, tmp_path: Path
) -> None:
    write(
        tmp_path / "in" / "x.md",
        "---\nname: x\ndescription: d\nmetadata:\n  type: project\n  node_type: memory\n---\nb\n",
    )
    import_memories(store, tmp_path / "in")
    store.update("x", type="feedback")
    export_memories(store, tmp_path / "out")
    assert "  type: feedback\n" in (tmp_path / "out" / "x.md").read_text()
    report = import_memories(store, tmp_path / "out")
    assert report.updated == [] and report.unchanged == ["x"]


def test_overlong_description_is_cut_with_a_note(store: MemoryStore, tmp_path: Path) -> None:
    write(
        tmp_path / "in" / "x.md", f"---\nname: x\ntype: user\ndescription: {'w' * 1500}\n---\nb\n"
    )
    report = import_memories(store, tmp_path / "in")
    assert len(store.get("x").description) == 1000
    assert any("cut it" in note for note in report.notes)


def test_declared_names_claim_theirs_before_derived_ones(
    store: MemoryStore, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    write(folder / "b" / "deploy.md", "---\nname: Deploy rules!\ntype: project\n---\nfrom b\n")
    import_memories(store, folder)
    assert store.get("deploy").body == "from b"
    write(folder / "a" / "x.md", "---\nname: deploy\ntype: project\n---\nfrom a\n")
    report = import_memories(store, folder)
    # a/x.md declares "deploy"; b's derived name steps aside to deploy-2.
    assert store.get("deploy").body == "from a"
    assert store.get("deploy-2").body == "from b"
    assert any("b/deploy.md" in note and "deploy-2" in note for note in report.notes)


def test_unquoted_colon_keeps_the_rest_of_the_yaml(store: MemoryStore, tmp_path: Path) -> None:
    write(
        tmp_path / "in" / "x.md",
        "---\nname: x\ndescription: Rule: never push to main\ntype: feedback\n"
        "tags: [git, ci]\nmetadata:\n  node_type: memory\n  nested: {a: 1}\n---\nbody\n",
    )
    report = import_memories(store, tmp_path / "in")
    memory = store.get("x")
    assert memory.description == "Rule: never push to main"
    assert memory.extra == {
        "tags": ["git", "ci"],
        "metadata": {"node_type": "memory", "nested": {"a": 1}},
    }
    assert any("not strict YAML" in note for note in report.notes)


frontmatter_lines = st.sampled_from(
    [
        "name: x",
        "name: Some Free Text",
        "name: 中文名字",
        "name:",
        "type: user",
        "type: feedback",
        "type: nonsense",
        "description: plain words",
        "description: Rule: with colon",
        'description: "quoted"',
        "description: [a, b]",
        "description: {a: 1}",
        "metadata:",
        "  type: project",
        "  - item",
        "tags: [x, y",
        "&anchor key: *anchor",
        "? complex key",
        "- list item",
        "!!binary aGVsbG8=",
        "key: !!python/object:os.system ls",
        "\t tab",
        "---",
        "...",
        "%YAML 1.2",
        "",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(frontmatter_lines, max_size=8),
    body=st.text(max_size=40),
    stem=st.sampled_from(["note", "feedback_x", "中文", "CON", "a b", "x" * 80]),
)
def test_any_file_is_imported_or_reported_never_a_crash(
    store: MemoryStore,
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    body: str,
    stem: str,
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / f"{stem}.md").write_text(
        "---\n" + "\n".join(lines) + "\n---\n" + body, encoding="utf-8"
    )
    try:
        report = import_memories(store, folder, skip_invalid=True)
    except ImportRejected:
        pytest.fail("skip_invalid must not reject")
    for name in report.created + report.updated + report.unchanged:
        assert_valid_name(name)
    assert (
        len(report.created) + len(report.updated) + len(report.unchanged) + len(report.problems)
        == 1
    )


# -- a Claude Code folder, imported, edited and exported back in place --------------------------

CLAUDE_CODE_FOLDER = {
    "MEMORY.md": (
        "# Memory index\n\n"
        "- [User role](user_role.md) — data scientist, new to the codebase\n"
        "- [Testing approach](feedback_testing.md) — integration tests hit a real database\n"
        "- [Infrastructure](10-infrastructure.md) — clusters and how we deploy\n"
    ),
    "user_role.md": (
        "---\r\nname: user-role\r\ndescription: The user is a data scientist\r\n"
        "type: user\r\n---\r\n\r\nExplain the layout first.\r\n"
    ),
    "feedback_testing.md": (
        '---\nname: Testing approach\ndescription: "Integration tests must hit a real database"\n'
        "metadata:\n  node_type: memory\n  type: feedback\n"
        "  originSessionId: 3f1c2a9e-8b7d-4c1e-9f00-123456789abc\n"
        "  modified: 2026-03-04T10:22:31.000Z\n---\n\n"
        "We got burned when mocked tests passed but the migration failed.\n"
    ),
    "10-infrastructure.md": (
        "---\nname: Infrastructure\ndescription: 'Clusters: staging and prod'\n"
        "tags: [k8s, helm]\ncreated: 2026-03-04\n---\n\nDeploy with helm from the ops repo.\n"
    ),
    "20-infrastructure-old.md": (
        "---\nname: infra-notes\ndescription: the old cluster\n---\n\nRetired in May.\n"
    ),
    "infra-notes.md": "---\nname: infra-notes\ndescription: dev cluster\n---\n\nOn kind.\n",
    "release-process.md": (
        "---\nname: release process\nmetadata:\n  type: note\n  author: sam\n---\n\n"
        "Tag, then push the tag; CI publishes.\n"
    ),
    "notes.txt": "not a memory\n",
    ".gitignore": "memstore.db\n",
}


def claude_code_folder(folder: Path) -> dict[str, bytes]:
    folder.mkdir(parents=True)
    for name, text in CLAUDE_CODE_FOLDER.items():
        (folder / name).write_bytes(text.encode())
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_a_claude_code_folder_is_updated_in_place(memctl: MemctlRunner, tmp_path: Path) -> None:
    folder = tmp_path / "claude-memory"
    original = claude_code_folder(folder)
    imported = memctl("import", str(folder), "--skip-invalid", "--default-type", "project")
    assert imported.returncode == 0, imported.stderr
    assert "6 created" in imported.stderr
    names = memctl("list").stdout
    assert "infra-notes-2" in names and "feedback-testing" in names

    first = memctl("export", str(folder))  # nothing changed yet: nothing is written
    assert first.returncode == 0, first.stderr
    assert "0 written, 0 removed" in first.stderr
    assert "note: MEMORY.md was not written by memstore" in first.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == original

    for name, args in [
        ("user-role", ["-b", "Explain the layout first, then the tests."]),
        ("release-process", ["-b", "Tag, push the tag, and watch CI."]),
        ("10-infrastructure", ["-d", "Clusters: staging, prod and dev"]),
    ]:
        assert memctl("edit", name, *args).returncode == 0
    exported = memctl("export", str(folder))
    assert exported.returncode == 0, exported.stderr
    assert "3 written, 0 removed" in exported.stderr
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert after.keys() == original.keys()
    changed = {name for name in after if after[name] != original[name]}
    assert changed == {"user_role.md", "release-process.md", "10-infrastructure.md"}
    # Each edited file keeps its own frontmatter: line ends, layout, dates, lists, metadata.
    assert after["user_role.md"] == (
        b"---\r\nname: user-role\r\ndescription: The user is a data scientist\r\n"
        b"type: user\r\n---\r\n\r\nExplain the layout first, then the tests.\r\n"
    )
    assert after["release-process.md"] == (
        b"---\nname: release process\nmetadata:\n  type: note\n  author: sam\n"
        b"description: Tag, then push the tag; CI publishes.\n---\n\n"  # was the first line
        b"Tag, push the tag, and watch CI.\n"
    )
    assert after["10-infrastructure.md"] == (
        b"---\nname: Infrastructure\ndescription: 'Clusters: staging, prod and dev'\n"
        b"tags: [k8s, helm]\ncreated: 2026-03-04\n---\n\nDeploy with helm from the ops repo.\n"
    )
    # And the round trip settles: nothing to import, nothing to export.
    again = memctl("import", str(folder), "--skip-invalid", "--default-type", "project")
    assert "0 created, 0 updated" in again.stderr, again.stderr
    assert "0 written" in memctl("export", str(folder)).stderr


def test_a_hand_written_index_is_kept_until_forced(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "claude-memory"
    claude_code_folder(folder)
    import_memories(store, folder, skip_invalid=True, default_type="project")
    result = export_memories(store, folder)
    assert result.written == [] and result.notes
    assert (folder / "MEMORY.md").read_text().startswith("# Memory index")
    assert "MEMORY.md" in export_memories(store, folder, force=True).written
    assert (folder / "MEMORY.md").read_text().startswith("- [")
    store.create("new-one", "project", "a new memory", "body")
    assert export_memories(store, folder).written == ["new-one.md", "MEMORY.md"]


def test_export_removes_only_files_of_deleted_memories(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "claude-memory"
    original = claude_code_folder(folder)
    import_memories(store, folder, skip_invalid=True, default_type="project")
    store.delete("infra-notes")
    result = export_memories(store, folder, personal=True)  # Claude Code's: a person's own
    assert result.removed == ["20-infrastructure-old.md"]
    assert {p.name for p in folder.iterdir()} == set(original) - {"20-infrastructure-old.md"}
