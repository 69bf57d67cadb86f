"""Import of many files that declare the same `name:` (every one after the first needs a
numbered name). Not a test: it prints one line per size and never fails on time.

    .venv/bin/python benchmarks/bench_import_names.py                 # 5,000 / 10,000 / 20,000
    .venv/bin/python benchmarks/bench_import_names.py --sizes 1000    # a quick look

`reading` is read_folder (parse every file and give each a unique name); `import` is the
whole `import_memories` into a fresh database, reading included.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from memstore.files.import_folder import read_folder
from memstore.files.importer import import_memories
from memstore.storage.store import MemoryStore


def make_folder(folder: Path, count: int) -> None:
    folder.mkdir()
    for i in range(count):
        (folder / f"note-{i:05d}.md").write_text(
            f"---\nname: same-name\ndescription: note {i}\ntype: project\n---\n\nbody {i}\n",
            encoding="utf-8",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 10_000, 20_000])
    args = parser.parse_args()
    for count in args.sizes:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch) / "memories"
            make_folder(folder, count)
            started = time.perf_counter()
            items, _ = read_folder(folder)
            reading = time.perf_counter() - started
            assert len({item.name for item in items}) == count
            with MemoryStore(Path(scratch) / "memstore.db") as store:
                started = time.perf_counter()
                report = import_memories(store, folder)
                importing = time.perf_counter() - started
            assert len(report.created) == count
            print(
                f"{count:>6,} files named 'same-name': reading {reading:7.2f} s, "
                f"import {importing:7.2f} s"
            )


if __name__ == "__main__":
    main()
