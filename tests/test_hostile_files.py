"""Hostile files: what a folder someone else prepared can do to import and export.

Import reads only regular files inside the folder; export never writes through a link it did
not make, survives a second export into the same folder and a full disk. Real files, real
links and FIFOs, and `memctl` as a subprocess where the user would see the outcome.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memstore.files.exporter import export_memories
from memstore.files.importer import import_memories
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner, write

posix_only = pytest.mark.skipif(os.name != "posix", reason="links, FIFOs and rlimits are POSIX")


def canonical(name: str, body: str = "a body") -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: project\n---\n\n{body}\n"


# -- import -------------------------------------------------------------------------------------


@posix_only
def test_import_refuses_a_link_to_a_file_outside_the_folder(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    secret = write(tmp_path / "outside" / "secret.md", canonical("secret", "hunter2 lives here"))
    folder = tmp_path / "notes"
    write(folder / "good.md", canonical("good"))
    (folder / "link.md").symlink_to(secret)

    refused = memctl("import", "notes")
    assert refused.returncode != 0
    assert "invalid: link.md: a symbolic link" in refused.stderr
    assert "Traceback" not in refused.stderr

    skipped = memctl("import", "notes", "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped: link.md: a symbolic link" in skipped.stderr
    listing = memctl("list").stdout
    assert "good" in listing and "secret" not in listing
    assert "hunter2" not in memctl("sql", "select body from memory").stdout


@posix_only
def test_import_of_a_fifo_does_not_hang(memctl: MemctlRunner, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "good.md", canonical("good"))
    os.mkfifo(folder / "pipe.md")
    result = memctl("import", "notes", "--skip-invalid")  # the fixture times out at 120 s
    assert result.returncode == 0, result.stderr
    assert "skipped: pipe.md: not a regular file" in result.stderr
    assert "1 created" in result.stderr


@posix_only
def test_import_refuses_a_device(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write(folder / "good.md", canonical("good"))
    (folder / "zero.md").symlink_to("/dev/zero")  # a link to a device: refused as a link
    report = import_memories(store, folder, skip_invalid=True)
    assert report.created == ["good"]
    assert [p.path for p in report.problems] == ["zero.md"]


def nested_frontmatter(depth: int, shape: str) -> str:
    if shape == "list":
        nested = "deep: " + "[" * depth + "x" + "]" * depth
    else:
        nested = "deep: " + "{a: " * depth + "x" + "}" * depth
    return f"---\nname: deep\ndescription: d\ntype: user\n{nested}\n---\n\nbody\n"


@pytest.mark.parametrize("depth", [40, 350, 500, 900])
@pytest.mark.parametrize("shape", ["list", "mapping"])
def test_deeply_nested_frontmatter_is_refused(
    store: MemoryStore, tmp_path: Path, depth: int, shape: str
) -> None:
    write(tmp_path / "notes" / "deep.md", nested_frontmatter(depth, shape))
    write(tmp_path / "notes" / "good.md", canonical("good"))
    report = import_memories(store, tmp_path / "notes", skip_invalid=True)
    assert report.created == ["good"]
    [problem] = report.problems
    assert problem.path == "deep.md" and problem.reason.startswith("frontmatter nests")


def test_deeply_nested_frontmatter_is_one_line_and_leaves_the_store_usable(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    write(tmp_path / "notes" / "deep.md", nested_frontmatter(500, "list"))
    write(tmp_path / "notes" / "good.md", canonical("good"))
    refused = memctl("import", "notes")
    assert refused.returncode != 0
    assert "invalid: deep.md: frontmatter nests" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert memctl("import", "notes", "--skip-invalid").returncode == 0
    exported = memctl("export")
    assert exported.returncode == 0, exported.stderr
    assert memctl("show", "good").returncode == 0


def test_moderate_nesting_is_still_imported(store: MemoryStore, tmp_path: Path) -> None:
    nested = "deep: " + "[" * 10 + "x" + "]" * 10
    write(
        tmp_path / "notes" / "ok.md",
        f"---\nname: ok\ndescription: d\ntype: user\n{nested}\n---\n\nbody\n",
    )
    import_memories(store, tmp_path / "notes")
    value = store.get("ok").extra["deep"]
    for _ in range(10):
        value = value[0]
    assert value == "x"


def test_many_files_sharing_a_name_get_distinct_names(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    for i in range(300):
        write(folder / f"n{i:03d}.md", canonical("same", f"body {i}"))
    write(folder / "declared.md", canonical("same-3"))  # a declared name keeps its name
    write(folder / "z" / "copy.md", canonical("same", "body 7"))  # says what n007.md says
    report = import_memories(store, folder)
    assert sorted(report.created) == sorted(["same", *(f"same-{n}" for n in range(2, 302))])
    assert store.get("same-3").description == "about same-3"
    assert "z/copy.md: says exactly what n007.md says: the same memory, read once" in (report.notes)


# -- export -------------------------------------------------------------------------------------


def fill(store: MemoryStore, count: int, body: str = "a body") -> None:
    with store.transaction() as tx:
        for i in range(count):
            tx.create(f"note-{i}", "project", f"note {i}", f"{body} {i}")


def dead_pid() -> int:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(finished.stdout)


@posix_only
def test_export_never_writes_through_a_planted_temporary_link(
    store: MemoryStore, tmp_path: Path
) -> None:
    fill(store, 2)
    out = tmp_path / "out"
    out.mkdir()
    victims = {}
    # Where an export in this process used to put its temporary files, and a dead one's.
    for pid in (os.getpid(), dead_pid()):
        for name in ("MEMORY.md", "note-0.md"):
            victim = write(tmp_path / f"victim-{pid}-{name}", "keep me")
            (out / f".{name}.{pid}.tmp").symlink_to(victim)
            victims[victim] = pid
    fifo = out / f".note-1.md.{dead_pid()}.tmp"
    os.mkfifo(fifo)

    export_memories(store, out)

    for victim in victims:
        assert victim.read_text() == "keep me"
    assert (out / "note-0.md").read_text().startswith("---\nname: note-0\n")
    assert not os.path.islink(out / "note-0.md")
    # The stale entries of a dead process are gone (links, not their targets; the FIFO too).
    left = sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))
    assert left == sorted(f".{n}.{os.getpid()}.tmp" for n in ("MEMORY.md", "note-0.md"))
    assert not os.path.lexists(fifo)


def test_two_exports_into_one_folder_at_once_both_succeed(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "memstore.db") as store:
        fill(store, 150)
    out = tmp_path / "out"
    errors: list[BaseException] = []

    def export_repeatedly(round_: int) -> None:
        try:
            with MemoryStore(tmp_path / "memstore.db") as own:
                for _ in range(3):
                    export_memories(own, out, force=True)
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    for round_ in range(3):
        with MemoryStore(tmp_path / "memstore.db") as store, store.transaction() as tx:
            for memory in tx.memories():
                tx.update(memory, body=f"{memory.body} round {round_}")
        threads = [threading.Thread(target=export_repeatedly, args=(round_,)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    with MemoryStore(tmp_path / "memstore.db") as store:
        assert export_memories(store, out).written == []
        assert (out / "note-7.md").read_text().endswith("round 2\n")


def test_two_memctl_exports_at_once_end_cleanly(memctl: MemctlRunner, tmp_path: Path) -> None:
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        fill(store, 200)
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("MEMSTORE_DB", None)
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "memctl", "export"],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=120), run.communicate()[1]) for run in runs]
    for code, stderr in outcomes:
        assert "Traceback" not in stderr
        assert code == 0 or len(stderr.strip().splitlines()) == 1, stderr
    assert any(code == 0 for code, _ in outcomes)
    assert len(list((tmp_path / ".memory").glob("note-*.md"))) == 200


FILE_SIZE_LIMIT = 64 * 1024


def _limit_file_size() -> None:
    """In the child: a file may not grow past FILE_SIZE_LIMIT; writes past it fail with
    EFBIG (SIGXFSZ ignored), as writes on a full disk fail with ENOSPC."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


@posix_only
def test_export_on_a_full_disk_leaves_the_folder_consistent_and_recovers(
    tmp_path: Path,
) -> None:
    out = tmp_path / ".memory"
    with MemoryStore(out / "memstore.db") as store:
        fill(store, 3)
        export_memories(store, out)
        before = {p.name: p.read_bytes() for p in out.glob("*.md")}
        store.update("note-0", body="changed")
        store.delete("note-2")
        store.create("big", "project", "too big to write", "x" * (FILE_SIZE_LIMIT + 1000))
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("MEMSTORE_DB", None)
    failed = subprocess.run(
        [sys.executable, "-m", "memctl", "export"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        timeout=120,
    )
    assert failed.returncode != 0
    assert failed.stderr.startswith("memctl: error: cannot write ")
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    # Every file is whole: as it was, or gone with its deleted memory; no temporaries left.
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    for path in out.glob("*.md"):
        assert path.read_bytes() == before[path.name]
    # With room again, the next export finishes the job without --force.
    with MemoryStore(out / "memstore.db") as store:
        result = export_memories(store, out)
        assert "big.md" in result.written and "note-0.md" in result.written
        assert not (out / "note-2.md").exists()
        assert export_memories(store, out).written == []
