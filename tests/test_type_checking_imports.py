"""A name imported only for type checking is never used when the code runs.

Heavy modules are imported under `if TYPE_CHECKING:` so that a command's start-up does not
pay for them; ruff and mypy both accept a run-time use of such a name (the annotation makes
it look defined), and the command then fails with NameError on the path that uses it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memctl

import memstore


def _type_checking_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Import | ast.ImportFrom):
                    names |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
    return names


def _imported_in(function: ast.AST) -> set[str]:
    return {
        (alias.asname or alias.name).split(".")[0]
        for sub in ast.walk(function)
        if isinstance(sub, ast.Import | ast.ImportFrom)
        for alias in sub.names
    }


def run_time_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of each run-time use of a name imported only under TYPE_CHECKING:
    annotations (strings under `from __future__ import annotations`) do not count, nor does a
    name a function imports itself."""
    tree = ast.parse(source)
    only_typing = _type_checking_names(tree)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, imported_here: set[str]) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for expression in [*node.decorator_list, *node.args.defaults]:
                visit(expression, imported_here)
            for default in node.args.kw_defaults:
                if default is not None:
                    visit(default, imported_here)
            inside = imported_here | _imported_in(node)
            for statement in node.body:
                visit(statement, inside)
            return
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                visit(node.value, imported_here)
            return
        if (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in only_typing - imported_here
        ):
            found.append((node.lineno, node.id))
        for child in ast.iter_child_nodes(node):
            visit(child, imported_here)

    visit(tree, set())
    return found


def test_the_check_finds_a_run_time_use() -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from memstore.storage.store import MemoryStore\n"
        "def typed(store: MemoryStore) -> MemoryStore:\n"
        "    return store\n"
        "def imports_it() -> None:\n"
        "    from memstore.storage.store import MemoryStore\n"
        "    MemoryStore('x')\n"
        "def uses_it() -> None:\n"
        "    MemoryStore('x')\n"
    )
    assert run_time_uses(source) == [(11, "MemoryStore")]


def test_no_module_uses_a_name_imported_only_for_type_checking() -> None:
    found = [
        f"{path}:{line}: {name}"
        for package in (memstore, memctl)
        for path in sorted(Path(package.__file__).parent.rglob("*.py"))
        for line, name in run_time_uses(path.read_text(encoding="utf-8"))
    ]
    assert found == []
