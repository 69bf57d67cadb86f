"""Hostile queries and odd databases (issue 12.7, 12.9): `memctl sql` is bounded in time and
rows, streams, prints valid JSON and refuses functions that leak addresses or load code; a
read-only database is read, a corrupt one is one line; a memory cannot drive the terminal."""

from __future__ import annotations

import json
import os
import pty
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstore.errors import QueryFailed
from memstore.storage.query import FETCH_ROWS
from memstore.storage.store import MemoryStore
from tests.conftest import MemctlRunner, raw_sql
from tests.read_only_mount import memctl_read_only, skip_without_read_only_mounts

RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "


def add(memctl: MemctlRunner, name: str, body: str = "text", description: str = "") -> None:
    done = memctl("add", name, "-t", "project", "-d", description or f"about {name}", "-b", body)
    assert done.returncode == 0, done.stderr


def one_line_error(done: subprocess.CompletedProcess[str], text: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memctl: error: "), done.stderr
    assert text in lines[0], done.stderr


def memctl_process(
    tmp_path: Path, *args: str, unbuffered: bool = False, **kwargs: object
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "MEMSTORE_CEILING_DIRECTORIES": str(tmp_path.parent)}
    env.pop("MEMSTORE_DB", None)
    if unbuffered:  # each row written reaches the pipe at once
        env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "memctl", *args],
        cwd=tmp_path,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize(
    "query",
    [
        "SELECT fts3_tokenizer('simple')",
        "SELECT FTS3_TOKENIZER('porter') AS p",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT name FROM memory WHERE fts3_tokenizer('simple') IS NOT NULL",
    ],
)
def test_functions_that_leak_or_load_code_are_refused(memctl: MemctlRunner, query: str) -> None:
    add(memctl, "a-note")
    done = memctl("sql", query)
    one_line_error(done, "is not allowed here")
    assert done.stdout == ""


def test_runaway_query_stops_at_the_time_limit(memctl: MemctlRunner) -> None:
    add(memctl, "a-note")
    started = time.monotonic()
    done = memctl("sql", RUNAWAY + "SELECT count(*) FROM c", "--timeout", "1")
    one_line_error(done, "stopped after 1 s")
    assert time.monotonic() - started < 30


def test_row_cap_and_override(memctl: MemctlRunner) -> None:
    add(memctl, "a-note")
    capped = memctl("sql", RUNAWAY + "SELECT x FROM c", "--json", "--max-rows", "5")
    assert capped.returncode == 0, capped.stderr
    assert [row["x"] for row in json.loads(capped.stdout)] == [1, 2, 3, 4, 5]
    assert "stopped after 5 rows" in capped.stderr
    default = memctl("sql", RUNAWAY + "SELECT x FROM c")
    assert default.returncode == 0 and len(default.stdout.splitlines()) == 1 + 10_000
    more = memctl("sql", RUNAWAY + "SELECT x FROM c LIMIT 12000", "--max-rows", "0")
    assert len(more.stdout.splitlines()) == 1 + 12_000 and "stopped" not in more.stderr


def test_a_value_too_big_to_print_is_refused_at_once_in_bounded_memory(tmp_path: Path) -> None:
    """randomblob(3e8) took 18 s and 2.1 GB (the blob, its hex, its JSON) whatever the
    --timeout: SQLite builds no value longer than the output limit, so the query fails at
    once; under a 1 GB address space, as it did not."""
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        store.create("a-note", "project", "about a note", "text")
    one_gigabyte = 1 << 30

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (one_gigabyte, one_gigabyte))

    started = time.monotonic()
    process = memctl_process(
        tmp_path,
        *("sql", "SELECT randomblob(3e8)", "--json", "--timeout", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=limit_memory,
    )
    stdout, stderr = process.communicate(timeout=60)
    assert time.monotonic() - started < 10
    assert process.returncode == 1 and stdout == b"", stderr
    assert stderr.decode().splitlines() == [
        "memctl: error: sql: a row would print more than 16,000,000 bytes, the output limit"
        " (--max-bytes N to allow more, 0 for none)"
    ]


def test_output_stops_at_its_byte_limit(memctl: MemctlRunner) -> None:
    add(memctl, "a-note")
    rows = RUNAWAY + "SELECT x, randomblob(500) AS b FROM c LIMIT 100"
    cut = memctl("sql", rows, "--json", "--max-bytes", "10000")
    assert cut.returncode == 0, cut.stderr
    # 1,000 hex characters a row, and a few for x: nine rows fit in 10,000 bytes.
    assert [row["x"] for row in json.loads(cut.stdout)] == list(range(1, 10))
    assert cut.stderr == (
        "stopped before 10,000 bytes of output: --max-bytes N for more, 0 for all\n"
    )
    table = memctl("sql", rows, "--max-bytes", "10000")
    assert table.returncode == 0 and len(table.stdout.splitlines()) == 1 + 9
    assert "stopped before 10,000 bytes" in table.stderr
    whole = memctl("sql", rows, "--json", "--max-bytes", "0")
    assert len(json.loads(whole.stdout)) == 100 and whole.stderr == ""
    one_line_error(memctl("sql", "SELECT randomblob(6000)", "--max-bytes", "10000"), "the output")


def test_the_byte_limit_holds_on_a_server(postgres_url: str, memctl: MemctlRunner) -> None:
    MemoryStore(postgres_url).close()
    rows = "SELECT x, repeat('y', 1000) AS b FROM generate_series(1, 100) AS x"
    cut = memctl("--db", postgres_url, "sql", rows, "--json", "--max-bytes", "10000")
    assert cut.returncode == 0, cut.stderr
    assert [row["x"] for row in json.loads(cut.stdout)] == list(range(1, 10))
    assert "stopped before 10,000 bytes of output" in cut.stderr
    big = memctl("--db", postgres_url, "sql", "SELECT repeat('y', 20000)", "--max-bytes", "10000")
    one_line_error(big, "a row would print more than 10,000 bytes")


def test_the_time_limit_covers_printing_the_rows(tmp_path: Path) -> None:
    """The rows come a batch at a time; however slow what prints them, the time limit
    holds (SQLite's progress handler only sees SQLite's own work)."""
    with MemoryStore(tmp_path / "memstore.db") as store:
        running = store.read_only_query(RUNAWAY + "SELECT x FROM c", timeout=0.5)
    printed = []
    with running, pytest.raises(QueryFailed, match=r"stopped after 0\.5 s, the time limit"):
        running.start()
        for row in running.rows():
            printed.append(row)
            time.sleep(0.1)
    assert 2 <= len(printed) <= 10


def test_rows_are_streamed(tmp_path: Path, memctl: MemctlRunner) -> None:
    """An endless result (no cap, no limit) prints its first rows at once: fetchall() never
    returned, and 10M rows ended in a MemoryError."""
    add(memctl, "a-note")
    process = memctl_process(
        tmp_path,
        "sql",
        RUNAWAY + "SELECT x FROM c",
        "--json",
        "--max-rows",
        "0",
        "--timeout",
        "0",
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"[\n"
        assert json.loads(process.stdout.readline().rstrip(b",\n")) == {"x": 1}
    finally:
        process.kill()
        process.wait()


def test_ctrl_c_interrupts_a_running_query(tmp_path: Path, memctl: MemctlRunner) -> None:
    add(memctl, "a-note")
    # A first batch of rows comes at once, then SQLite looks for the next row without end
    # (sqlite3 reads a row ahead: one more row lets the batch out). Ctrl-C is pressed once
    # those rows are out, so inside the query: a fixed pause could end, on a busy machine,
    # while memctl was still starting, and test start-up instead.
    first_batch = FETCH_ROWS
    process = memctl_process(
        tmp_path,
        "sql",
        RUNAWAY + f"SELECT x FROM c WHERE x <= {first_batch + 1} OR x < 0",
        "--json",
        "--timeout",
        "0",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        unbuffered=True,
    )
    assert process.stdout is not None
    out, deadline = b"", time.monotonic() + 60
    while f'{{"x": {first_batch}}}'.encode() not in out:
        ready, _, _ = select.select([process.stdout], [], [], deadline - time.monotonic())
        if not ready:
            process.kill()
            pytest.fail(f"no first rows in 60 s: {out[-200:]!r}")
        chunk = os.read(process.stdout.fileno(), 65536)
        assert chunk, f"memctl ended before its first rows: {out[-200:]!r}"
        out += chunk
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("Ctrl-C did not stop the query")
    assert process.returncode == 130
    assert b"interrupted" in stderr and b"Traceback" not in stderr


def test_json_is_valid_json(memctl: MemctlRunner) -> None:
    add(memctl, "a-note")
    done = memctl(
        "sql", "SELECT 1e999 AS big, -1e999 AS small, 0.5 AS half, x'00ff' AS blob", "--json"
    )
    assert done.returncode == 0, done.stderr

    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    rows = json.loads(done.stdout, parse_constant=refuse)
    assert rows == [{"big": "Infinity", "small": "-Infinity", "half": 0.5, "blob": "00ff"}]
    assert json.loads(memctl("sql", "SELECT 1 WHERE 0", "--json").stdout) == []


def test_query_writes_nothing(memctl: MemctlRunner, tmp_path: Path) -> None:
    """Neither the database nor its WAL changes while a query runs, or after."""
    add(memctl, "a-note")
    database = tmp_path / ".memory" / "memstore.db"
    wal = database.with_name("memstore.db-wal")
    before = database.read_bytes()
    wal_before = wal.stat().st_size if wal.exists() else 0
    done = memctl("sql", RUNAWAY + "SELECT max(x) FROM c", "--timeout", "2")
    assert done.returncode == 1
    for query in ["DELETE FROM memory", "PRAGMA journal_mode = DELETE", "VACUUM"]:
        refused = memctl("sql", query)
        # in SQLite's words ("disk I/O error" for the PRAGMA), then why
        assert refused.returncode == 1 and "memctl sql runs one read-only query" in refused.stderr
    misspelt = memctl("sql", "SELECT nosuch FROM memory")
    assert misspelt.stderr.strip() == "memctl: error: sql: no such column: nosuch"
    assert (wal.stat().st_size if wal.exists() else 0) == wal_before
    assert database.read_bytes() == before


def corrupt_every_page_but_the_first(database: Path) -> None:
    data = bytearray(database.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for offset in range(page_size, len(data), page_size):
        data[offset : offset + page_size] = bytes([0xA5]) * page_size
    database.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["show", "note-3"],
        ["search", "corrupt"],
        ["history"],
        ["index"],
        ["sql", "SELECT count(*) FROM memory"],
        ["add", "new-note", "-t", "user", "-d", "d", "-b", "b"],
        ["rm", "note-3"],
        ["export"],
        ["recall", "--offline", "corrupt pages"],
    ],
    ids=" ".join,
)
def test_corrupt_database_is_one_line(
    memctl: MemctlRunner, tmp_path: Path, command: list[str]
) -> None:
    database = tmp_path / ".memory" / "memstore.db"
    with MemoryStore(database) as store, store.transaction() as tx:
        for i in range(40):
            tx.create(f"note-{i}", "project", f"note {i}", "corrupt pages " * 200)
    corrupt_every_page_but_the_first(database)
    one_line_error(memctl(*command), f"the database {database} is corrupt")


def test_read_only_filesystem(memctl: MemctlRunner, tmp_path: Path) -> None:
    """Every command failed on a read-only filesystem, list and sql included."""
    skip_without_read_only_mounts()
    add(memctl, "a-note", body="read me")
    add(memctl, "b-note")
    memory = tmp_path / ".memory"
    assert not (memory / "memstore.db-wal").exists()  # closed cleanly

    def read_only(*args: str) -> subprocess.CompletedProcess[str]:
        return memctl_read_only(memory, *args, cwd=tmp_path)

    listed = read_only("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [m["name"] for m in json.loads(listed.stdout)] == ["a-note", "b-note"]
    assert "read me" in read_only("show", "a-note").stdout
    assert "a-note" in read_only("search", "read").stdout
    assert read_only("history", "--json").returncode == 0
    rows = read_only("sql", "SELECT count(*) AS n FROM live_memory", "--json")
    assert json.loads(rows.stdout) == [{"n": 2}], rows.stderr
    one_line_error(read_only("add", "c-note", "-t", "user", "-d", "d", "-b", "b"), "read-only")
    one_line_error(read_only("rm", "a-note"), "read-only")
    assert sorted(p.name for p in memory.iterdir()) == [".gitignore", "memstore.db"]


OLD_HOSTILE = "desc \x1b]0;title\x07 end"
HOSTILE = (
    "before \x1b]52;c;cm0gLXJmIH4=\x07 clipboard, \x1b]0;pwned\x07 title, \x1b[2J\x1b[H clear,"
    " \x9b31m C1, \u202eevil\u202c after"
)


def on_a_terminal(tmp_path: Path, *args: str) -> bytes:
    """memctl's stdout when it is a terminal (a pseudo-terminal)."""
    controller, terminal = pty.openpty()
    process = memctl_process(
        tmp_path, *args, stdout=terminal, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the terminal closed
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(controller)
    return output


def test_terminal_escapes_in_a_memory_are_shown_not_run(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    refused = memctl("add", "x", "-t", "project", "-d", "desc \x1b]0;title\x07 end", "-b", "b")
    one_line_error(refused, "must not contain control characters, got '\\x1b'")
    add(memctl, "hostile", body=HOSTILE, description="desc, clipboard")
    # A description written before control characters were refused: shown escaped too.
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store, raw_sql(store) as sql:
        sql.execute("UPDATE memory SET description = ? WHERE name = 'hostile'", (OLD_HOSTILE,))
    for command in (["show", "hostile"], ["list"], ["search", "clipboard"], ["index"]):
        shown = on_a_terminal(tmp_path, *command).decode()
        assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown, command
        assert "\u202e" not in shown, command
        assert "\\x1b]0;" in shown, (command, shown)
    shown = on_a_terminal(tmp_path, "show", "hostile").decode()
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07 clipboard" in shown and "\\x9b31m" in shown
    # Piped, show prints the canonical file as it is (`memctl show x > x.md`), but for what
    # no one would see, which a model reading the pipe would (docs/file-format.md).
    shown_piped = HOSTILE.replace("\u202e", "\\u{202E}").replace("\u202c", "\\u{202C}")
    assert shown_piped in memctl("show", "hostile").stdout
