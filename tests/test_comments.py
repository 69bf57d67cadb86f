"""The code says why, never a measured figure: figures go stale as the code changes, and
they are kept, dated, in benchmarks/ beside the script that makes them (recall's in
benchmarks/recall-notes.md, the others in benchmarks/README.md)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted([*(ROOT / "memstore").rglob("*.py"), *(ROOT / "cli" / "memctl").rglob("*.py")])
# A duration (12 ms, 0.2 s, 3 seconds), a retrieval measure (R@5, hit@5, MRR, p50), or a
# measurement's before and after (.698 -> .704).
FIGURE = re.compile(
    r"\d(?:[\d,.]*\d)? ?(?:ms|µs|s|seconds?)\b|\b(?:R|hit|P)@\d|\bMRR\b|\bp(?:50|95)\b"
    r"|\d ?(?:->|→) ?\.?\d"
)


def _prose(source: str) -> list[tuple[int, str]]:
    """The comments and docstrings of a module, with their line numbers."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                found.append((node.body[0].lineno, docstring))
    return found


@pytest.mark.parametrize("module", MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_comments_state_no_figures(module: Path) -> None:
    figures = [
        f"{module.relative_to(ROOT)}:{line}: {match.group()!r}"
        for line, text in _prose(module.read_text(encoding="utf-8"))
        for match in FIGURE.finditer(text)
    ]
    assert not figures, "move the figure to benchmarks/: " + ", ".join(figures)


def test_the_check_finds_a_figure() -> None:
    source = '"""Loads in about 0.2 s."""\n# R@5 .698 -> .704 at 10,000 memories\nX = 1\n'
    found = {match.group() for _, text in _prose(source) for match in FIGURE.finditer(text)}
    assert found == {"0.2 s", "R@5", "8 -> .7"}
