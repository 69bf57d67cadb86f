"""README.md's table of memctl's commands names exactly the commands `memctl --help` lists,
and those of its groups (`memctl semantic`, `memctl claude`): a command added, renamed or
removed is said there too."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import typer.main
from memctl.app import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _listed(group: typer.main.TyperGroup) -> list[str]:
    """The commands `--help` lists for `group`, in its order."""
    return group.list_commands(typer.Context(group))


def help_commands() -> dict[str, list[str]]:
    """'' -> the top-level commands; a group's name -> its commands."""
    root = typer.main.get_command(app)
    assert isinstance(root, typer.main.TyperGroup)
    commands = {"": _listed(root)}
    for name in commands[""]:
        sub = root.commands[name]
        if isinstance(sub, typer.main.TyperGroup):
            commands[name] = _listed(sub)
    return commands


def readme_commands(groups: set[str]) -> dict[str, set[str]]:
    """The commands the README's table names, in the same shape. A row's first cell holds one
    or more code spans: `memctl NAME ...`, `memctl GROUP SUB ...`, or, after a group's, a bare
    `SUB ...` of that group (`memctl semantic status` / `index`)."""
    named: dict[str, set[str]] = {"": set(), **{group: set() for group in groups}}
    lines = README.read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| `memctl ")]
    assert rows, "README.md has no table of memctl's commands"
    for row in rows:
        group = None
        for span in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            words = span.split()
            if words[0] == "memctl":
                named[""].add(words[1])
                group = words[1] if words[1] in groups else None
                if group is not None:
                    named[group].add(words[2])
            else:
                assert group is not None, f"{span!r} follows no group in: {row}"
                named[group].add(words[0])
    return named


def test_the_readme_names_every_command_and_no_other() -> None:
    listed = help_commands()
    assert {"semantic", "claude"} <= set(listed)  # the walk sees the groups
    named = readme_commands(set(listed) - {""})
    for group, commands in listed.items():
        where = f"memctl {group}".strip()
        assert named[group] == set(commands), f"README.md's table and `{where} --help` differ"
