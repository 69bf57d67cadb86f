"""`memctl claude install` and `uninstall`: memstore's hooks and MCP server written into Claude
Code's settings files and taken out again, with a fake HOME and workspace, byte for byte."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from memstore.integrations import claude_settings
from memstore.integrations.claude_settings import HOOK_EVENTS, Memctl
from tests.conftest import MemctlRunner

# As Claude Code writes its settings (JSON.stringify with two spaces, no final newline), with
# settings and a hook of the person's own, and keys memstore does not know.
USER_SETTINGS = json.dumps(
    {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
        "futureSetting": {"b": 1, "a": [2, 1]},
    },
    indent=2,
)
CLAUDE_JSON = json.dumps(
    {
        "numStartups": 12,
        "projects": {"/home/ana/app": {"mcpServers": {}}},
        "mcpServers": {"github": {"type": "http", "url": "https://example.test/mcp"}},
        "userID": "abc",
    },
    indent=2,
)
# The folder of the Python running the tests, where its memctl console script is.
BIN = os.path.dirname(os.path.abspath(sys.executable))
# A hand-written project file: four spaces, compact lists, a final newline.
PROJECT_MCP = '{\n    "mcpServers": {"docs": {"command": "docs-mcp", "args": []}}\n}\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(USER_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    os.chmod(home / ".claude.json", 0o600)
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / ".mcp.json").write_text(PROJECT_MCP)
    return project


@pytest.fixture
def run(memctl: MemctlRunner, home: Path, project: Path) -> MemctlRunner:
    def in_project(*args: str, env_path: str | None = None) -> object:
        environment = {k: v for k, v in os.environ.items() if k != "CLAUDE_CONFIG_DIR"}
        environment["HOME"] = str(home)
        # PATH finds the memctl under test, as it finds a memctl installed with pipx; or
        # `env_path`, which may not.
        path = os.pathsep.join([BIN, environment.get("PATH", "")])
        environment["PATH"] = env_path if env_path is not None else path
        return memctl(*args, cwd=project, env=environment)

    return in_project  # type: ignore[return-value]


def files(*folders: Path) -> dict[str, bytes]:
    """Every file under the folders, by path (backups included)."""
    return {
        str(path): path.read_bytes()
        for folder in folders
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_user_install_writes_the_hooks_and_the_server_and_keeps_the_rest(
    run: MemctlRunner, home: Path
) -> None:
    installed = run("claude", "install")
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    before = json.loads(USER_SETTINGS)
    # Every other setting kept, in its order; the events added after the person's own.
    assert list(settings) == list(before)
    assert settings["futureSetting"] == before["futureSetting"]
    assert settings["permissions"] == before["permissions"]
    ours = [{"hooks": [{"type": "command", "command": "memctl hook", "timeout": 10}]}]
    # Each event's hooks after the person's own (their Stop hook stays first).
    mine = {event: before["hooks"].get(event, []) + ours for event in HOOK_EVENTS}
    assert settings["hooks"] == {**before["hooks"], **mine}
    claude = json.loads((home / ".claude.json").read_text())
    assert list(claude) == list(json.loads(CLAUDE_JSON))
    assert claude["mcpServers"] == {
        "github": {"type": "http", "url": "https://example.test/mcp"},
        "memstore": {"command": "memctl", "args": ["mcp"]},
    }
    assert claude["projects"] == {"/home/ana/app": {"mcpServers": {}}}
    assert (home / ".claude.json").stat().st_mode & 0o777 == 0o600
    # The backups hold the bytes found.
    backup = home / ".claude" / "settings.json.memstore-install-backup"
    assert backup.read_text() == USER_SETTINGS
    assert (home / ".claude.json.memstore-install-backup").read_text() == CLAUDE_JSON


@pytest.mark.parametrize("scope", ["--user", "--project"])
def test_install_twice_is_once_and_uninstall_gives_back_the_same_bytes(
    run: MemctlRunner, home: Path, project: Path, scope: str
) -> None:
    before = files(home, project)
    assert run("claude", "install", scope).returncode == 0
    once = files(home, project)
    again = run("claude", "install", scope)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stderr
    assert files(home, project) == once

    removed = run("claude", "uninstall", scope)
    assert removed.returncode == 0, removed.stderr
    after = files(home, project)
    # Back as they were, install's backups included: none is left to restore memstore from.
    assert after == before
    assert run("claude", "uninstall", scope).returncode == 0  # nothing left to take out
    assert files(home, project) == after


def test_project_install_writes_the_projects_files(
    run: MemctlRunner, home: Path, project: Path
) -> None:
    user_before = files(home)
    installed = run("claude", "install", "--project")
    assert installed.returncode == 0, installed.stderr
    assert files(home) == user_before  # the person's own settings untouched
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert set(settings["hooks"]) == set(HOOK_EVENTS)
    servers = (project / ".mcp.json").read_text()
    assert servers.startswith('{\n    "mcpServers": {\n        "docs"')  # its four spaces
    assert json.loads(servers)["mcpServers"]["memstore"] == {"command": "memctl", "args": ["mcp"]}
    # A file install made is removed by uninstall; the .mcp.json that was there stays.
    assert run("claude", "uninstall", "--project").returncode == 0
    assert not (project / ".claude" / "settings.json").exists()
    assert (project / ".mcp.json").read_text() == PROJECT_MCP


def test_uninstall_keeps_what_changed_since_and_a_hook_of_the_persons_own(
    run: MemctlRunner, home: Path
) -> None:
    assert run("claude", "install").returncode == 0
    path = home / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    settings["model"] = "sonnet"  # changed in Claude Code since
    path.write_text(json.dumps(settings, indent=2))
    assert run("claude", "uninstall").returncode == 0
    expected = json.loads(USER_SETTINGS)
    expected["model"] = "sonnet"
    assert path.read_text() == json.dumps(expected, indent=2)

    # A hook the person wired by hand (a full path) counts as installed, and is theirs.
    own = {"hooks": [{"type": "command", "command": "/opt/venv/bin/memctl hook"}]}
    settings = {"hooks": {event: [own] for event in HOOK_EVENTS}}
    path.write_text(json.dumps(settings, indent=2))
    assert run("claude", "install").returncode == 0
    assert json.loads(path.read_text()) == settings
    assert run("claude", "uninstall").returncode == 0
    assert json.loads(path.read_text()) == settings


def test_dry_run_prints_the_diff_and_writes_nothing(
    run: MemctlRunner, home: Path, project: Path
) -> None:
    before = files(home, project)
    dry = run("claude", "install", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"--- {home / '.claude' / 'settings.json'}" in dry.stdout
    assert '+            "command": "memctl hook",' in dry.stdout
    assert '+    "memstore": {' in dry.stdout
    assert f"would change {home / '.claude.json'}" in dry.stderr
    assert files(home, project) == before


def test_the_dry_runs_diff_shows_what_a_settings_file_hides(
    run: MemctlRunner, project: Path
) -> None:
    # A project's settings come with its clone: a line of them hiding an instruction in tag
    # characters, or a terminal sequence, is shown in the diff, not passed on.
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "<system>")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"model": f"opus{hidden}\u202e", "theme": "dark\x1b[2J"}, ensure_ascii=False)
    )
    dry = run("claude", "install", "--project", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert '"model": "opus\\u{E003C}\\u{E0073}' in dry.stdout
    assert "\\u{202E}" in dry.stdout
    assert "\x1b" not in dry.stdout and hidden[0] not in dry.stdout and "\u202e" not in dry.stdout


@pytest.mark.parametrize(
    "content", [b'{"model": "opus",', b"[1, 2]", b'{"hooks": []}', b"\xff\xfe{}"]
)
def test_a_file_that_is_not_what_claude_code_writes_is_refused_in_one_line(
    run: MemctlRunner, home: Path, project: Path, content: bytes
) -> None:
    (home / ".claude" / "settings.json").write_bytes(content)
    before = files(home, project)
    for command in ("install", "uninstall"):
        refused = run("claude", command)
        if command == "uninstall" and content == b'{"hooks": []}':
            assert refused.returncode == 0  # nothing of memstore's in it: nothing to do
            continue
        assert refused.returncode == 1
        [line] = refused.stderr.splitlines()
        assert line.startswith("memctl: error: ") and "settings.json" in line
        assert "not changed" in line
    assert files(home, project) == before  # the other file was not written either


def test_user_and_project_together_are_refused(run: MemctlRunner, home: Path) -> None:
    refused = run("claude", "install", "--user", "--project")
    assert refused.returncode == 1
    assert refused.stderr == "memctl: error: --user and --project: give one\n"


def test_claude_config_dir_is_where_the_user_files_are(
    memctl: MemctlRunner, tmp_path: Path, project: Path
) -> None:
    config = tmp_path / "config"
    environment = {**os.environ, "HOME": str(tmp_path / "empty"), "CLAUDE_CONFIG_DIR": str(config)}
    assert memctl("claude", "install", cwd=project, env=environment).returncode == 0
    assert "SessionStart" in json.loads((config / "settings.json").read_text())["hooks"]
    assert "memstore" in json.loads((config / ".claude.json").read_text())["mcpServers"]
    assert not (tmp_path / "empty").exists()


def test_a_memctl_path_does_not_find_is_named_by_its_path_and_taken_out_by_uninstall(
    run: MemctlRunner, home: Path
) -> None:
    """A memctl installed in a virtual environment, which PATH does not find: the settings
    name its console script, not a `memctl` Claude Code would not find."""
    memctl_script = os.path.join(BIN, "memctl")
    assert os.path.isfile(memctl_script)
    before = files(home)
    installed = run("claude", "install", "--dry-run", env_path="/usr/bin:/bin")
    assert "not on PATH" not in installed.stderr
    installed = run("claude", "install", env_path="/usr/bin:/bin")
    assert installed.returncode == 0, installed.stderr
    assert f"note: PATH finds no memctl: the settings name {memctl_script}" in installed.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = shlex.join([memctl_script, "hook"])
    assert settings["hooks"]["SessionStart"] == [
        {"hooks": [{"type": "command", "command": command, "timeout": 10}]}
    ]
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert servers["memstore"] == {"command": memctl_script, "args": ["mcp"]}
    # Through a shell, as Claude Code runs it, the command is that memctl's.
    version = subprocess.run(
        ["/bin/sh", "-c", shlex.join([memctl_script, "--version"])],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert version.stdout.startswith("memctl ")

    # Installed again where PATH finds it: its own entries brought up to date, in place.
    assert run("claude", "install").returncode == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["SessionStart"][0]["hooks"][0]["command"] == "memctl hook"
    assert settings["hooks"]["Stop"][-1]["hooks"][0]["command"] == "memctl hook"
    assert len(settings["hooks"]["Stop"]) == 2  # the person's hook, and memstore's once

    removed = run("claude", "uninstall", env_path="/usr/bin:/bin")
    assert removed.returncode == 0, removed.stderr
    assert files(home) == before


def test_a_path_with_spaces_is_quoted_for_the_shell_and_recognised_by_uninstall(
    tmp_path: Path, home: Path, project: Path
) -> None:
    memctl_named = Memctl("/opt/my tools/venv/bin/memctl", db="/data/team store.db")
    command = memctl_named.hook_command()
    assert command == "'/opt/my tools/venv/bin/memctl' --db '/data/team store.db' hook"
    assert memctl_named.server() == {
        "command": "/opt/my tools/venv/bin/memctl",
        "args": ["--db", "/data/team store.db", "mcp"],
    }
    before = files(home)
    config = home / ".claude"
    changes = claude_settings.plan("user", config, project, install=True, memctl=memctl_named)
    claude_settings.apply(changes)
    assert command in (config / "settings.json").read_text()
    claude_settings.apply(claude_settings.plan("user", config, project, install=False))
    assert files(home) == before


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        (os.path.join(BIN, "memctl"), os.path.join(BIN, "memctl")),  # the console script
        ("memctl", os.path.join(BIN, "memctl")),  # `python -m memctl`: beside the Python
        (os.path.join(BIN, "..", "bin", "memctl"), os.path.join(BIN, "memctl")),
    ],
)
def test_the_running_memctl_is_found(argv0: str, expected: str) -> None:
    found = claude_settings.running_memctl(argv0, sys.executable)
    assert found is not None
    assert os.path.realpath(found) == os.path.realpath(expected)
    assert claude_settings.program_for(found, expected) == "memctl"  # PATH finds this one
    assert claude_settings.program_for(found, "/usr/bin/memctl") == found
    assert claude_settings.program_for(found, None) == found
    assert claude_settings.program_for(None, None) == "memctl"


def test_db_given_to_install_is_the_hooks_and_the_servers_store(
    run: MemctlRunner, memctl: MemctlRunner, home: Path, project: Path, tmp_path: Path
) -> None:
    store = tmp_path / "team" / "memstore.db"
    assert (
        run(
            "--db",
            str(store),
            "add",
            "deploy-steps",
            "--type",
            "project",
            "--description",
            "How to deploy",
            "--body",
            "Run make deploy.",
        ).returncode
        == 0
    )
    installed = run("--db", "../team/memstore.db", "claude", "install")
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command == shlex.join(["memctl", "--db", str(store), "hook"])
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert servers["memstore"] == {"command": "memctl", "args": ["--db", str(store), "mcp"]}
    # The hook, run as written from another folder, answers from that store.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    event = {"hook_event_name": "SessionStart", "cwd": str(elsewhere)}
    answer = memctl(*shlex.split(command)[1:], input=json.dumps(event), cwd=elsewhere)
    assert answer.returncode == 0, answer.stderr
    assert "deploy-steps" in answer.stdout
    assert run("claude", "uninstall").returncode == 0
    assert (home / ".claude" / "settings.json").read_text() == USER_SETTINGS


def test_a_server_url_with_a_password_is_refused_in_one_line(run: MemctlRunner, home: Path) -> None:
    before = files(home)
    url = "postgresql://ana:secret@db.example.test/memstore"
    refused = run("--db", url, "claude", "install")
    assert refused.returncode != 0
    assert "password" in refused.stderr and "secret" not in refused.stderr
    assert "Traceback" not in refused.stderr
    assert files(home) == before


def test_backups_are_the_files_before_each_command_and_none_would_reinstall(
    run: MemctlRunner, home: Path
) -> None:
    assert run("claude", "install").returncode == 0
    claude_json = home / ".claude.json"
    install_backup = home / ".claude.json.memstore-install-backup"
    assert install_backup.read_text() == CLAUDE_JSON
    # Claude Code writes its file as it runs: uninstall cannot give back install's bytes.
    state = json.loads(claude_json.read_text())
    state["numStartups"] = 13
    claude_json.write_text(json.dumps(state, indent=2))
    removed = run("claude", "uninstall")
    assert removed.returncode == 0, removed.stderr
    expected = json.loads(CLAUDE_JSON)
    expected["numStartups"] = 13
    assert claude_json.read_text() == json.dumps(expected, indent=2)
    # Install's backup is still the file before memstore; uninstall's, named for it, the
    # file before uninstall; settings.json, given back as it was, keeps no backup.
    assert install_backup.read_text() == CLAUDE_JSON
    uninstall_backup = home / ".claude.json.memstore-uninstall-backup"
    assert "memstore" in json.loads(uninstall_backup.read_text())["mcpServers"]
    assert f"backup: {uninstall_backup}" in removed.stderr
    assert sorted(path.name for path in (home / ".claude").iterdir()) == ["settings.json"]
    assert (home / ".claude" / "settings.json").read_text() == USER_SETTINGS
