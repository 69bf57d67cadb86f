"""A non-editable install (a built wheel) carries its migrations and its word lists, creates a
database and recalls from it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parent.parent

PROBE = """
import sys, memstore
from memstore import MemoryStore
from memstore.recall import keyword_recall
from memctl.app import app
assert memstore.__file__.startswith(sys.argv[1]), memstore.__file__
with MemoryStore(sys.argv[2]) as store:
    store.create("from-the-wheel", "project", "Deployment checklist", "Run the smoke tests")
    print(len(store.memories()))
    # 部署 is found through the glossary shipped in the wheel.
    print([hit.memory.name for hit in keyword_recall(store, "怎么部署？")])
"""


def test_wheel_ships_migrations_and_migrates_a_new_database(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(wheels),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("memstore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "memstore/migrations/env.py" in names
    assert "memstore/migrations/script.py.mako" in names
    assert any(n.startswith("memstore/migrations/versions/0001") for n in names)
    assert "memctl/app.py" in names
    assert "memstore/data/glossary_zh_en.tsv" in names
    assert "memstore/data/synonyms_en.txt" in names
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(site), str(tmp_path / "fresh.db")],
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1", "['from-the-wheel']"]
