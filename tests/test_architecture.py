"""The layers of ARCHITECTURE.md, enforced on the installed source: imports point only
downward, no module imports itself back through others, and only memstore.llm (and the
memory tool's handler, which subclasses the SDK's base class) imports anthropic.

Every import counts, wherever it stands: at the top, inside a function, or under
`if TYPE_CHECKING:`. A type-only import is still knowledge of the other module, and the
usual way to hide a cycle or a wrong-way arrow, so it is held to the same rules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import memctl
import memstore.migrations  # binds memstore too

# Which layers each layer may import, besides its own (ARCHITECTURE.md draws them).
ALLOWED = {
    "base": set(),
    "storage": {"base"},
    "files": {"storage", "base"},
    "llm": {"base"},
    "recall": {"llm", "files", "storage", "base"},
    "learning": {"recall", "llm", "files", "storage", "base"},
    "agent": {"learning", "recall", "llm", "files", "storage", "base"},
    "integrations": {"learning", "recall", "llm", "files", "storage", "base"},
    # The page shows what the Claude Code hook adds to a prompt: the hook's own answer.
    "ui": {"integrations", "recall", "llm", "files", "storage", "base"},
    "cli": {"ui", "integrations", "agent", "learning", "recall", "llm", "files", "storage", "base"},
}
BASE = {"memstore.errors", "memstore.settings", "memstore.text", "memstore.limits"}
# The Anthropic memory tool's handler subclasses the SDK's own base class: it is the SDK's
# interface for that tool, not a call to the model, which still goes through llm/ only.
ANTHROPIC_IMPORTERS = {"memstore.integrations.memory_tool"}
# The package's public face and the deprecated shims re-export from every layer: they are
# for users (memctl among them), and the library itself never imports them.
FACES = {"memstore", "memstore.store", "memstore.exporter", "memstore.importer"}

# Arrows that break the rules today and are being removed. The test fails when one of them
# is gone (take it off this list) and when a new one appears (fix the import instead).
KNOWN_VIOLATIONS: set[str] = set()

# storage/ is a core above two engines: storage/sqlite/ and storage/postgres/ implement one
# interface (storage/backend.py's Backend), and only the module that chooses one imports them.
# Neither engine imports the other.
ENGINES = ("memstore.storage.sqlite", "memstore.storage.postgres")
CHOOSER = "memstore.storage.backend"
# Core modules that still reach an engine directly, with why. The test fails when one of them
# no longer does (take it off) and when another starts (go through the Backend instead).
KNOWN_ENGINE_IMPORTS: set[str] = set()

# The house limit on a module's length.
MAX_LINES = 450
# Library modules over it, to be split (none today). The test fails when one of them gets
# down to it (take it off this list) and when another goes over (split that one instead). No
# module of memctl may join them: the commands are a module per group in memctl.commands.
KNOWN_LONG_MODULES: set[str] = set()


def _modules() -> dict[str, Path]:
    """Every module of the installed memstore and memctl, by dotted name."""
    roots = [
        ("memstore", Path(memstore.__file__).parent),
        ("memctl", Path(memctl.__file__).parent),
        ("memstore.migrations", Path(next(iter(memstore.migrations.__path__)))),
    ]
    modules: dict[str, Path] = {}
    for package, root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


MODULES = _modules()


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module.startswith("memctl"):
        return "cli"
    if module.startswith("memstore.migrations"):
        return "storage"  # Alembic's revisions: the schema, beside the engine that runs them
    top = module.split(".")[1] if "." in module else ""
    if top not in ALLOWED:
        raise AssertionError(f"{module} is in no layer: add it to ARCHITECTURE.md and here")
    return top


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(name: str) -> str | None:
    """The module of ours that importing `name` runs last, or None for another library's."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> Iterator[str]:
    """The modules of ours that `module` imports, and 'anthropic' if it imports that."""
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from a import b` imports the module a.b when there is one, else a name of a.
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "anthropic":
                yield "anthropic"
            elif (target := _resolve(name)) is not None and target != module:
                yield target


GRAPH = {module: set(imports(module)) for module in MODULES}


def violations() -> Iterator[str]:
    for module, targets in GRAPH.items():
        if module in FACES:
            continue
        for target in sorted(targets):
            if target == "anthropic":
                if layer(module) != "llm" and module not in ANTHROPIC_IMPORTERS:
                    yield f"{module} imports anthropic"
            elif target in FACES and layer(module) != "cli":
                yield f"{module} imports {target}"
            elif target in FACES:
                continue
            elif layer(target) != layer(module) and layer(target) not in ALLOWED[layer(module)]:
                yield f"{module} ({layer(module)}) imports {target} ({layer(target)})"
    for cycle in cycles():
        yield "cycle " + " -> ".join([*cycle, cycle[0]])


def cycles() -> list[list[str]]:
    """Each strongly connected group of two or more modules, as one cycle through it."""
    graph = {m: {t for t in ts if t in MODULES and t not in FACES} for m, ts in GRAPH.items()}
    found = []
    for group in _strongly_connected(graph):
        if len(group) > 1:
            found.append(_cycle_in(sorted(group), graph))
    return found


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def _cycle_in(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest cycle through the group's first module (breadth-first)."""
    start = group[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & set(group)):
            if child == start:
                return paths[node]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")


def test_the_layers_are_found() -> None:
    """The walk sees the installed package: a wrong root would pass every other test."""
    assert {"memstore.storage.store", "memstore.llm.client", "memctl.app"} <= set(MODULES)
    assert "memstore.storage.backend" in GRAPH["memstore.storage.store"]


def _engine(module: str) -> str | None:
    return next((e for e in ENGINES if module == e or module.startswith(e + ".")), None)


def engine_imports() -> Iterator[str]:
    """Core storage modules (the chooser aside) importing an engine; an engine the other."""
    for module, targets in GRAPH.items():
        if not module.startswith("memstore.storage.") or module == CHOOSER:
            continue
        for target in sorted(t for t in targets if _engine(t) is not None):
            if _engine(module) is None or _engine(module) != _engine(target):
                yield f"{module} imports {target}"


def test_the_storage_core_reaches_the_engines_through_the_backend() -> None:
    found = set(engine_imports())
    new = sorted(found - KNOWN_ENGINE_IMPORTS)
    gone = sorted(KNOWN_ENGINE_IMPORTS - found)
    assert not new, "go through storage.backend.Backend instead:\n" + "\n".join(new)
    assert not gone, "fixed, so take them off KNOWN_ENGINE_IMPORTS:\n" + "\n".join(gone)
    assert {f"{CHOOSER} imports {e}.backend" for e in ENGINES} <= {
        f"{CHOOSER} imports {t}" for t in GRAPH[CHOOSER]
    }


def test_imports_point_down_and_close_no_cycle() -> None:
    found = set(violations())
    new = sorted(found - KNOWN_VIOLATIONS)
    gone = sorted(KNOWN_VIOLATIONS - found)
    assert not new, "imports against ARCHITECTURE.md's layers:\n" + "\n".join(new)
    assert not gone, "fixed, so take them off KNOWN_VIOLATIONS:\n" + "\n".join(gone)


def test_no_module_is_over_the_length_limit() -> None:
    """memstore's and memctl's modules (the Alembic revisions aside) are at most MAX_LINES."""
    assert not {m for m in KNOWN_LONG_MODULES if m.startswith("memctl")}
    lengths = {
        module: len(path.read_text(encoding="utf-8").splitlines())
        for module, path in MODULES.items()
        if not module.startswith("memstore.migrations")
    }
    long = {module for module, lines in lengths.items() if lines > MAX_LINES}
    new = sorted(f"{module} ({lengths[module]} lines)" for module in long - KNOWN_LONG_MODULES)
    gone = sorted(KNOWN_LONG_MODULES - long)
    assert not new, f"over {MAX_LINES} lines, split them:\n" + "\n".join(new)
    assert not gone, f"at most {MAX_LINES} lines now, take them off KNOWN_LONG_MODULES:\n" + (
        "\n".join(gone)
    )
