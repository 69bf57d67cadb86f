"""memctl history and sql as a newcomer meets them: options that cannot go together refused,
never dropped; a query that cannot run said in words that fit; counts in the right number."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import MemctlRunner
from tests.test_cli import assert_one_line_error


def _one_memory(memctl: MemctlRunner) -> None:
    done = memctl("add", "project-deploy", "-t", "project", "-d", "How we deploy", "-b", "Monday")
    assert done.returncode == 0, done.stderr


def test_history_refuses_options_another_view_would_drop(memctl: MemctlRunner) -> None:
    _one_memory(memctl)
    for args, said in [
        (("--runs", "--verify"), "--verify and --runs cannot be combined"),
        (("--run", "abc", "--verify"), "--verify and --run cannot be combined"),
        (("--run", "abc", "--runs"), "--run and --runs cannot be combined"),
        (("project-deploy", "--verify"), "--verify checks the whole history; leave out the name"),
        (("--verify", "-n", "3"), "--verify checks the whole history; leave out --limit"),
        (("project-deploy", "--runs"), "--runs lists every run; leave out the name"),
        (("--run", "abc", "-n", "1"), "--run shows one run; leave out --limit"),
    ]:
        done = memctl("history", *args)
        assert_one_line_error(done, said)
        assert done.stdout == "", args
    assert memctl("history", "--runs", "-n", "1").returncode == 0  # --limit is --runs' too


def test_history_verify_counts_in_the_singular(memctl: MemctlRunner) -> None:
    _one_memory(memctl)
    verified = memctl("history", "--verify")
    assert verified.stdout.startswith("history verified: 1 event, 1 run, 1 memory as"), verified


def test_sql_refuses_an_empty_query_and_says_it_is_read_only(
    memctl: MemctlRunner, tmp_path: Path
) -> None:
    _one_memory(memctl)
    for empty in ("", "  \n"):
        assert_one_line_error(memctl("sql", empty), "sql: the query is empty")
    refused = memctl("sql", "pragma journal_mode=delete")
    assert_one_line_error(refused, "sql: the store is read-only here")
    assert refused.stderr.index("read-only") < refused.stderr.index("disk I/O error")
    # A query that starts with a comment, after `--` (docs/memctl.md).
    commented = memctl("sql", "--", "-- the names\nSELECT name FROM live_memory")
    assert commented.returncode == 0 and commented.stdout.split() == ["name", "project-deploy"]
    nothing = memctl("sql", "--", "-- only a comment")
    assert nothing.returncode == 0 and "returns no columns" in nothing.stderr
