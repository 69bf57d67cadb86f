"""Processes writing one database at once lose nothing and never see "database is locked"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memstore.storage.store import MemoryStore

WRITER = """
import sys
from memstore.storage.store import MemoryStore

db, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with MemoryStore(db, actor=prefix) as store:
    for i in range(count):
        store.create(f"{prefix}-{i}", "project", f"written by {prefix}", f"note {i} of {prefix}")
        if i % 5 == 4:
            store.update(f"{prefix}-{i}", body=f"updated note {i}")
"""


def test_two_library_writers_on_a_fresh_database(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"  # does not exist yet: both processes race to create it
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), prefix, "150"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("alpha", "beta")
    ]
    errors = [w.communicate(timeout=300)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0], errors
    with MemoryStore(db) as store:
        assert store.count() == 300
        events = store.history.events()
    assert len(events) == 300 + 2 * 30
    assert {e.actor for e in events} == {"alpha", "beta"}


def test_two_memctl_add_loops(tmp_path: Path) -> None:
    loop = (
        'for i in $(seq 1 6); do "$PY" -m memctl add "$P-$i" -t project -d "from $P" -b "note $i"'
        " || exit 1; done"
    )
    env = {**os.environ, "PY": sys.executable, "MEMSTORE_DB": str(tmp_path / "m.db")}
    loops = [
        subprocess.Popen(
            ["bash", "-c", loop],
            env={**env, "P": prefix},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for prefix in ("left", "right")
    ]
    outputs = [p.communicate(timeout=300) for p in loops]
    stderr = "".join(err for _, err in outputs)
    assert [p.returncode for p in loops] == [0, 0], stderr
    assert "locked" not in stderr and "Traceback" not in stderr
    with MemoryStore(tmp_path / "m.db") as store:
        assert sorted(m.name for m in store.memories()) == sorted(
            f"{p}-{i}" for p in ("left", "right") for i in range(1, 7)
        )
