"""`memctl purge` takes the memory out of `.memory/` at once (issue 28): its file and its
MEMORY.md line, whatever else in the folder was edited by hand, and says so; afterwards the
secret is in no file under `.memory/`, and exports go on as before."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import MemctlRunner

SECRET = "zebra-quartz-leak-7f3a"
LEAK = f"the staging password is {SECRET}"


def files_holding(folder: Path, text: str) -> list[str]:
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and text.encode() in path.read_bytes()
    )


def ok(done: object) -> str:
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    return done.stderr  # type: ignore[attr-defined,no-any-return]


def setup(memctl: MemctlRunner) -> None:
    ok(
        memctl(
            "add",
            "leak",
            "-t",
            "project",
            "-d",
            f"Staging login {SECRET}",
            "-b",
            LEAK,
            "--allow-secret",
        )
    )
    ok(memctl("add", "other", "-t", "project", "-d", "Other notes", "-b", "kept"))
    ok(memctl("export"))


def test_purge_removes_the_file_and_the_index_line_and_says_so(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    folder = tmp_path / ".memory"
    setup(memctl)
    assert files_holding(folder, SECRET) == ["MEMORY.md", "leak.md", "memstore.db"]
    said = ok(memctl("purge", "leak", "--yes")).splitlines()
    assert said[0].startswith("purged leak: the content of 2 events erased")
    assert said[1:] == [f"removed {folder / 'leak.md'} and its line in {folder / 'MEMORY.md'}"]
    assert files_holding(folder, SECRET) == []
    assert (folder / "other.md").exists()
    assert "- [other](other.md) — Other notes" in (folder / "MEMORY.md").read_text()
    # The export's records stay true: the next export has nothing to do, and no conflict.
    again = ok(memctl("export"))
    assert "0 written, 0 removed, 2 unchanged" in again, again


def test_purge_removes_them_when_the_folder_has_hand_edits(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    """A whole export would stop at a file edited by hand; the purge does not wait for it."""
    folder = tmp_path / ".memory"
    setup(memctl)
    (folder / "other.md").write_text((folder / "other.md").read_text() + "\nedited by hand\n")
    (folder / "leak.md").write_text((folder / "leak.md").read_text() + f"\nalso {SECRET}\n")
    index = (folder / "MEMORY.md").read_text()
    (folder / "MEMORY.md").write_text("# Our index\n\nSee the wiki.\n\n" + index)
    # A killed export's temporary file, with the secret in it.
    (folder / ".leak.md.999999999-0123456789abcdef.tmp").write_text(LEAK)
    said = ok(memctl("purge", "leak", "--yes"))
    assert "removed" in said and "MEMORY.md" in said
    assert files_holding(folder, SECRET) == []
    assert (folder / "other.md").read_text().endswith("edited by hand\n")
    leak_line = f"- [leak](leak.md) — Staging login {SECRET}\n"
    assert leak_line in index
    assert (folder / "MEMORY.md").read_text() == (
        "# Our index\n\nSee the wiki.\n\n" + index.replace(leak_line, "")
    )


def test_a_name_another_memory_holds_now_keeps_its_file(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    folder = tmp_path / ".memory"
    ok(memctl("add", "old-leak", "-t", "project", "-d", "Staging", "-b", LEAK, "--allow-secret"))
    ok(memctl("edit", "old-leak", "--name", "leak", "--allow-secret"))
    ok(memctl("add", "old-leak", "-t", "project", "-d", "Unrelated", "-b", "harmless"))
    ok(memctl("export"))
    said = ok(memctl("purge", "leak", "--yes"))
    assert files_holding(folder, SECRET) == [], said
    assert (folder / "old-leak.md").read_text().endswith("harmless\n")
    assert "- [old-leak](old-leak.md) — Unrelated" in (folder / "MEMORY.md").read_text()


def test_a_purge_with_nothing_exported_says_so(memctl: MemctlRunner, tmp_path: Path) -> None:
    ok(memctl("add", "leak", "-t", "project", "-d", "Staging", "-b", LEAK, "--allow-secret"))
    said = ok(memctl("purge", "leak", "--yes"))
    assert said.splitlines()[-1] == f"{tmp_path / '.memory'} held no file of it"
    assert files_holding(tmp_path / ".memory", SECRET) == []
