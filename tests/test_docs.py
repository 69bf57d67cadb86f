"""The documents point at what exists: every relative link and heading anchor, every
`memstore.…` name and every source path they mention. Modules move; the docs must follow."""

from __future__ import annotations

import importlib
import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "benchmarks").glob("*.md")),  # the measurements the docs link to
    *sorted((ROOT / "benchmarks" / "eval").glob("**/README.md")),
]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_NAME = re.compile(r"`(memstore(?:\.\w+)+)")
_PATH = re.compile(r"`((?:memstore|cli|tests|benchmarks|migrations)/[\w/.]*\w)`")


def _anchors(document: Path) -> set[str]:
    """GitHub's anchors of the document's headings."""
    headings = re.findall(r"^#+ (.+)$", _without_code(document.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _without_code(text: str) -> str:
    """The text without code blocks and code spans, whose brackets are no links."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))


def _resolves(dotted: str) -> bool:
    """Whether `dotted` is a module, or a name in one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():  # the deprecated shims are documented as such
                warnings.simplefilter("ignore", DeprecationWarning)
                found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_links_lead_somewhere(document: Path) -> None:
    broken = []
    for target in _LINK.findall(_without_code(document.read_text(encoding="utf-8"))):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"{document.name}: {broken}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_json_blocks_parse(document: Path) -> None:
    """A settings block a user pastes (Claude Desktop's, Claude Code's hooks) is valid JSON."""
    blocks = re.findall(
        r"^ *```json\n(.*?)^ *```", document.read_text(encoding="utf-8"), re.M | re.S
    )
    for block in blocks:
        json.loads(block)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_named_code_exists(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    missing = [name for name in sorted(set(_NAME.findall(text))) if not _resolves(name)]
    missing += [path for path in sorted(set(_PATH.findall(text))) if not (ROOT / path).exists()]
    assert not missing, f"{document.name} names what does not exist: {missing}"


def test_architecture_lists_every_module() -> None:
    """Each module of the library and of memctl is named in its layer's row of the table."""
    rows = {
        line.split("|")[1].strip(): line
        for line in (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| ")
    }
    # The package's face and the deprecated shims are in no layer (test_architecture).
    faces = {"__init__.py", "__main__.py", "store.py", "exporter.py", "importer.py"}
    sources = [(path, "cli") for path in (ROOT / "cli" / "memctl").rglob("*.py")]
    library = (ROOT / "memstore").glob("*/**/*.py")
    sources += [(path, path.relative_to(ROOT / "memstore").parts[0]) for path in library]
    sources += [(p, "base") for p in (ROOT / "memstore").glob("*.py") if p.name not in faces]
    unlisted = []
    for path, layer in sources:
        named = f"`{path.name}`" if layer == "base" else f"`{path.stem}`"
        if layer == "cli":  # `commands/chat`, beside `chat`
            named = f"`{path.relative_to(ROOT / 'cli' / 'memctl').with_suffix('').as_posix()}`"
        elif layer != "base" and path.parent.parent != ROOT / "memstore":  # `postgres/engine`
            named = f"`{path.relative_to(path.parent.parent).with_suffix('').as_posix()}`"
        if path.name not in {"__init__.py", "__main__.py"} and named not in rows.get(layer, ""):
            unlisted.append(f"{layer}: {path.relative_to(ROOT)}")
    assert not unlisted, "add them to ARCHITECTURE.md's table: " + ", ".join(sorted(unlisted))


def test_python_api_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```python blocks of docs/python-api.md run, in order, in a fresh workspace."""
    from memstore import MemoryStore

    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    assert len(blocks) >= 4
    with MemoryStore(tmp_path / ".memory" / "memstore.db") as store:
        names: dict[str, object] = {}
        for block in blocks:
            names["store"] = store  # the blocks after "Open a store" use one open store
            exec(compile(block, "docs/python-api.md", "exec"), names)
        assert store.find("project-deploy") is not None
