"""Export: atomic, minimal rewrites, stale-file removal, and hand edits never lost silently."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.errors import ExportConflict, ExportFailed
from memstore.files.export_state import folder_key
from memstore.files.exporter import export_memories
from memstore.files.format import INDEX_MAX_LINES
from memstore.files.importer import import_memories
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner, raw_sql
from tests.read_only_mount import memctl_read_only, skip_without_read_only_mounts

# The store tests run on SQLite and on PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.both_engines


def fill(store: MemoryStore, count: int = 3) -> None:
    with store.transaction() as tx:
        for i in range(count):
            tx.create(f"note-{i}", "project", f"note number {i}", f"body of note {i}")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_export_writes_files_and_index(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    result = export_memories(store, tmp_path / "out")
    assert sorted(result.written) == ["MEMORY.md", "note-0.md", "note-1.md", "note-2.md"]
    assert (tmp_path / "out" / "MEMORY.md").read_text().splitlines()[0] == (
        "- [note-0](note-0.md) — note number 0"
    )
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temp files


def test_second_export_rewrites_only_what_changed(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    out = tmp_path / "out"
    export_memories(store, out)
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert export_memories(store, out).written == []
    store.update("note-1", body="a new body")
    result = export_memories(store, out)
    assert result.written == ["note-1.md"]  # the description did not change: same index
    assert (out / "note-0.md").stat().st_mtime_ns == mtimes["note-0.md"]
    assert "a new body" in (out / "note-1.md").read_text()


def test_export_removes_files_of_deleted_memories_only(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    out = tmp_path / "out"
    export_memories(store, out)
    (out / "someone-elses-notes.md").write_text("not ours")
    store.delete("note-2")
    result = export_memories(store, out)
    assert result.removed == ["note-2.md"]
    assert not (out / "note-2.md").exists()
    assert (out / "someone-elses-notes.md").read_text() == "not ours"
    assert "note-2" not in (out / "MEMORY.md").read_text()


def test_hand_edit_is_refused_then_forced(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    out = tmp_path / "out"
    export_memories(store, out)
    edited = (out / "note-0.md").read_text() + "\nA line the user added by hand.\n"
    (out / "note-0.md").write_text(edited)
    store.update("note-0", body="changed in the database")
    store.update("note-1", body="also changed")
    before = snapshot(out)
    with pytest.raises(ExportConflict) as raised:
        export_memories(store, out)
    assert raised.value.paths == ["note-0.md"]
    assert "--force" in str(raised.value)
    assert snapshot(out) == before  # nothing at all was written
    export_memories(store, out, force=True)
    assert "changed in the database" in (out / "note-0.md").read_text()


def test_hand_edit_of_a_deleted_memorys_file_is_kept(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    out = tmp_path / "out"
    export_memories(store, out)
    (out / "note-2.md").write_text((out / "note-2.md").read_text() + "edited\n")
    store.delete("note-2")
    with pytest.raises(ExportConflict):
        export_memories(store, out)
    assert (out / "note-2.md").exists()


def test_touching_a_file_without_changing_it_is_not_a_conflict(
    store: MemoryStore, tmp_path: Path
) -> None:
    fill(store)
    out = tmp_path / "out"
    export_memories(store, out)
    os.utime(out / "note-0.md", ns=(1, 1))
    assert export_memories(store, out).written == []


def test_existing_identical_files_are_adopted(store: MemoryStore, tmp_path: Path) -> None:
    fill(store)
    export_memories(store, tmp_path / "a")
    # A copy of the folder elsewhere (a clone, a moved workspace) is recognised, not a conflict.
    (tmp_path / "b").mkdir()
    for path in (tmp_path / "a").iterdir():
        (tmp_path / "b" / path.name).write_bytes(path.read_bytes())
    assert export_memories(store, tmp_path / "b").written == []


def test_unknown_file_with_a_memorys_name_is_a_conflict(store: MemoryStore, tmp_path: Path) -> None:
    fill(store, 1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "note-0.md").write_text("a file memstore never wrote")
    with pytest.raises(ExportConflict):
        export_memories(store, out)
    assert (out / "note-0.md").read_text() == "a file memstore never wrote"


def test_index_file_is_capped(store: MemoryStore, tmp_path: Path) -> None:
    fill(store, 230)
    export_memories(store, tmp_path / "out")
    lines = (tmp_path / "out" / "MEMORY.md").read_text().splitlines()
    assert len(lines) == INDEX_MAX_LINES
    assert lines[-1].startswith("> 31 more memories are not listed")
    assert len(list((tmp_path / "out").glob("note-*.md"))) == 230


def test_a_hand_edited_database_cannot_steer_export_outside_the_folder(
    store: MemoryStore, tmp_path: Path
) -> None:
    fill(store, 1)
    out = tmp_path / "deep" / "out"
    export_memories(store, out)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    with raw_sql(store) as connection:
        # Under the folder's key, and its absolute path (the key of old, and on a server).
        for key in {folder_key(out, store.path), str(out.resolve())}:
            connection.execute(
                "INSERT INTO exported_file VALUES"
                f" ('{key}', '../../victim.txt', NULL, NULL, 'x', 1, 1, 'now')"
            )
        export_memories(store, out)
        assert victim.read_text() == "keep me"
        if store.url is not None:
            # A server refuses a memory without its event (revision 0011): a superuser's
            # session that fires no trigger writes one all the same.
            connection.execute("SET session_replication_role = replica")
        connection.execute(
            "INSERT INTO memory (id, name, type, description, body, extra, version, created_at,"
            " updated_at) SELECT max(id) + 1, '../../escaped', 'project', 'd', 'b', '{}', 1, 'now',"
            " 'now' FROM memory"
        )
    with pytest.raises(ExportFailed, match="invalid name"):
        export_memories(store, out)
    assert not (tmp_path / "deep" / "escaped.md").exists()


def test_hand_edit_that_keeps_size_and_mtime_is_still_caught(
    store: MemoryStore, tmp_path: Path
) -> None:
    fill(store, 1)
    out = tmp_path / "out"
    export_memories(store, out)
    path = out / "note-0.md"
    before = path.stat()
    path.write_text(path.read_text().replace("body of note 0", "BODY OF NOTE 0"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    store.update("note-0", body="changed in the database")
    with pytest.raises(ExportConflict):
        export_memories(store, out)
    assert "BODY OF NOTE 0" in path.read_text()


# -- which side is newer, and safe advice -------------------------------------------------------


def test_conflict_says_which_side_is_newer(store: MemoryStore, tmp_path: Path) -> None:
    fill(store, 2)
    out = tmp_path / "out"
    export_memories(store, out)
    for name in ("note-0.md", "note-1.md"):
        (out / name).write_text((out / name).read_text() + "A line added by hand.\n")
    store.update("note-1", body="changed in the database")
    with pytest.raises(ExportConflict) as raised:
        export_memories(store, out)
    message = str(raised.value)
    assert raised.value.reasons == {"note-0.md": "file", "note-1.md": "both"}
    assert "note-0.md (edited by hand; the file is newer" in message
    assert "note-1.md (edited by hand, and its memory changed in the database since" in message
    assert "redo the file's edit with 'memctl edit'" in message
    # The import the message offers takes note-0's edit and refuses to revert note-1.
    report = import_memories(store, out, skip_invalid=True)
    assert report.updated == ["note-0"]
    assert [p.path for p in report.problems] == ["note-1.md"]
    assert store.get("note-1").body == "changed in the database"


def test_an_export_killed_mid_write_leaves_no_hand_edits(
    store: MemoryStore, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    fill(store, 1500)
    export_memories(store, out)
    with store.transaction() as tx:
        for memory in tx.memories():
            tx.update(memory, body=f"{memory.body}, second version")
    watched = out / "note-0.md"
    old = watched.read_bytes()
    script = (
        "import sys\nfrom memstore.files.exporter import export_memories\n"
        "from memstore.storage.store import MemoryStore\n"
        "export_memories(MemoryStore(sys.argv[1]), sys.argv[2])\n"
    )
    database = str(store.url or store.path)
    export = subprocess.Popen([sys.executable, "-c", script, database, str(out)])
    while export.poll() is None and watched.read_bytes() == old:
        pass
    export.send_signal(signal.SIGKILL)  # once it has started writing
    assert export.wait() == -signal.SIGKILL, "the export finished before it could be killed"
    store.update("note-0", body="edited after the kill")

    report = import_memories(store, out)  # what a conflict message used to advise
    assert report.updated == [] and report.created == []
    assert store.get("note-0").body == "edited after the kill"
    export_memories(store, out)  # no conflict: every file there is memstore's
    assert watched.read_text().endswith("edited after the kill\n")
    assert (out / "note-1499.md").read_text().endswith("second version\n")
    assert export_memories(store, out).written == []


def test_a_renamed_memory_moves_to_its_new_file(store: MemoryStore, tmp_path: Path) -> None:
    fill(store, 2)
    out = tmp_path / "out"
    export_memories(store, out)
    store.update("note-0", new_name="renamed")
    result = export_memories(store, out)
    assert sorted(result.written) == ["MEMORY.md", "renamed.md"]
    assert result.removed == ["note-0.md"]


def test_an_unknown_metadata_type_survives_a_canonical_rewrite(
    store: MemoryStore, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "x.md").write_text("---\nname: x\nmetadata:\n  type: note\n---\n\nbody\n")
    import_memories(store, folder, default_type="project")
    store.update("x", new_name="y")  # renamed: written canonically, to y.md
    export_memories(store, folder)
    assert "  type: note\n" in (folder / "y.md").read_text()
    assert not (folder / "x.md").exists()


HAND_INDEX = (
    "- [note-0](note-0.md) — my own description of note 0\n"
    "- [other](other.md) — a file I keep elsewhere\n"
)


def test_a_hand_written_index_in_memstores_line_shape_is_left_alone(
    store: MemoryStore, tmp_path: Path
) -> None:
    """Claude Code's index has memstore's line shape; only an index that says exactly what
    memstore would write for some state of the database is memstore's."""
    fill(store, 1)
    out = tmp_path / "out"
    out.mkdir()
    for hand in [
        HAND_INDEX,
        "- [note-0](note-0.md) — note number 0\n- [other](other.md) — not a memory\n",
        "- [note-0](note-0.md) — note number 0\n- [note-0](note-0.md) — note number 0\n",
    ]:
        (out / "MEMORY.md").write_text(hand)
        result = export_memories(store, out)
        assert (out / "MEMORY.md").read_text() == hand
        assert "MEMORY.md" not in result.written
        assert [n for n in result.notes if "MEMORY.md was not written by memstore" in n]
    result = export_memories(store, out, force=True)
    assert result.written == ["MEMORY.md"]
    assert (out / "MEMORY.md").read_text() == "- [note-0](note-0.md) — note number 0\n"
    (out / "MEMORY.md").write_text(HAND_INDEX)  # memstore's since --force, edited again
    export_memories(store, out)
    assert (out / "MEMORY.md").read_text() == HAND_INDEX


def test_an_index_memstore_wrote_for_an_older_state_is_rewritten(
    store: MemoryStore, tmp_path: Path
) -> None:
    """A copy of the folder (or an export cut short before it recorded its index) holds an
    index of an earlier state: it is memstore's, and is kept current."""
    fill(store, 3)
    with store.transaction() as tx:
        tx.create("a-user-note", "user", "about the user", "body")
    out = tmp_path / "out"
    export_memories(store, out)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "MEMORY.md").write_bytes((out / "MEMORY.md").read_bytes())
    store.update("note-1", description="a new description")
    store.delete("note-2")
    result = export_memories(store, copy)
    assert "MEMORY.md" in result.written and result.notes == []
    assert "a new description" in (copy / "MEMORY.md").read_text()
    assert "note-2" not in (copy / "MEMORY.md").read_text()


def test_the_index_links_the_file_each_memory_is_kept_in(
    store: MemoryStore, tmp_path: Path
) -> None:
    # A folder of hand-written notes, imported: each memory stays in its file, and MEMORY.md
    # linked `<name>.md`, which is not there.
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "my notes (deploy).md").write_text(
        "---\nname: deploy\ntype: project\ndescription: How we deploy\n---\nWith compose.\n"
    )
    (folder / "feedback_commits.md").write_text(
        "---\nname: commits\ntype: feedback\ndescription: Commit style\n---\nImperative.\n"
    )
    import_memories(store, folder)
    store.create("fresh", "project", "A new one", "Written by the export.")
    export_memories(store, folder)
    index = (folder / "MEMORY.md").read_text()
    assert "- [deploy](<my notes (deploy).md>) — How we deploy\n" in index
    links = re.findall(r"\]\(<?(.+?)>?\) — ", index)
    assert sorted(links) == ["feedback_commits.md", "fresh.md", "my notes (deploy).md"]
    assert all((folder / link).is_file() for link in links)
    # The index is memstore's: the next change rewrites it.
    store.update("fresh", description="A newer one")
    assert "MEMORY.md" in export_memories(store, folder).written


def test_a_read_only_store_is_exported_to_a_folder_that_can_be_written(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    skip_without_read_only_mounts()
    for name in ("note-a", "note-b"):
        added = memctl("add", name, "-t", "project", "-d", f"about {name}", "-b", "text")
        assert added.returncode == 0, added.stderr
    memory, out = tmp_path / ".memory", tmp_path / "out"
    before = snapshot(memory)
    first = memctl_read_only(memory, "export", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert sorted(snapshot(out)) == ["MEMORY.md", "note-a.md", "note-b.md"]
    # Nothing recorded what was written: the next export finds the files are the memories'.
    again = memctl_read_only(memory, "export", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 written, 0 removed, 3 unchanged" in again.stderr
    # The store's own folder cannot be written: one line.
    refused = memctl_read_only(memory, "export", cwd=tmp_path)
    assert refused.returncode == 1 and "Read-only file system" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert snapshot(memory) == before
