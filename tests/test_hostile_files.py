"""Hostile files: what a folder someone else prepared can do to import and export.

Import reads only regular files inside the folder; export never writes through a link it did
not make, survives a second export into the same folder and a full disk. Real files, real
links and FIFOs, and `memctl` as a subprocess where the user would see the outcome.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memstore.importer import import_memories
from memstore.store import MemoryStore
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
        write(folder / f"n{i:03d}.md", canonical("same"))
    write(folder / "declared.md", canonical("same-3"))  # a declared name keeps its name
    report = import_memories(store, folder)
    assert sorted(report.created) == sorted(["same", *(f"same-{n}" for n in range(2, 302))])
    assert store.get("same-3").description == "about same-3"
