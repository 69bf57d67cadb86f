"""memstore in Claude Code's settings files, for those who do not use its plugins: the hooks
`memctl hook` answers and the MCP server `memctl mcp`, the same the plugin in `plugins/memstore/`
wires, written in (`memctl claude install`) and taken out (`memctl claude uninstall`).

Where Claude Code reads them (its settings and MCP documentation):

- user: the hooks in `<config>/settings.json`, the server in the top-level `mcpServers` of
  `.claude.json` beside the config folder (`~/.claude.json`; `$CLAUDE_CONFIG_DIR/.claude.json`
  when that is set);
- project: the hooks in `<project>/.claude/settings.json`, the server in `<project>/.mcp.json`.

The commands name `memctl` when PATH finds the memctl that installs them, else its absolute
path (a memctl in a virtual environment that is not on PATH), with `--db` when one was given
(`Memctl`). memstore's own entries are those of the form install writes, whichever memctl and
store they name: install brings them up to date, uninstall takes them out; a hook of the
person's own that runs `memctl hook` counts as installed and is left.

Every other setting is kept, in its order, and the file keeps its indentation and final
newline, so that install then uninstall gives back the same bytes. Installing twice is
installing once. A file that is not a JSON object is refused before anything is written; each
file is replaced atomically. Install copies a file it changes that held none of memstore's
settings to `<file>.memstore-install-backup` (the file before memstore); uninstall, when it
gives back exactly those bytes, removes that backup, else copies the file it changes to
`<file>.memstore-uninstall-backup` (the file before uninstall, memstore's settings in it).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstore.errors import ClaudeSettingsRefused

# What memctl hook answers (the index, a prompt's memories) and records (a session to learn
# from), as the plugin's hooks/hooks.json wires them.
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "PreCompact")
HOOK_TIMEOUT_SECONDS = 10
SERVER_NAME = "memstore"
PROGRAM = "memctl"
INSTALL_BACKUP = ".memstore-install-backup"
UNINSTALL_BACKUP = ".memstore-uninstall-backup"


@dataclass(frozen=True)
class Memctl:
    """The memctl Claude Code is to run: `program` is "memctl" (found on PATH) or a path;
    `db` the --db it is given, if any."""

    program: str = PROGRAM
    db: str | None = None

    def _words(self, subcommand: str) -> list[str]:
        return [self.program, *(["--db", self.db] if self.db is not None else []), subcommand]

    def hook_command(self) -> str:
        """The hook's command line: Claude Code runs it through a shell, so it is quoted."""
        return shlex.join(self._words("hook"))

    def server(self) -> dict[str, Any]:
        """The MCP server's entry: a program and its arguments, run without a shell."""
        program, *args = self._words("mcp")
        return {"command": program, "args": args}


def running_memctl(argv0: str, executable: str) -> str | None:
    """The absolute path of the memctl console script running now: the script itself, else
    the one beside the Python running it (`python -m memctl`); None when there is neither."""
    if os.sep in argv0 and Path(argv0).name.startswith(PROGRAM) and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    found = shutil.which(PROGRAM, path=os.path.dirname(os.path.abspath(executable)))
    return os.path.abspath(found) if found is not None else None


def program_for(running: str | None, on_path: str | None) -> str:
    """ "memctl" when PATH finds the running memctl (or none is known to run: then PATH is all
    there is), else the running one's path: Claude Code runs what its PATH finds."""
    if running is None:
        return PROGRAM
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(running):
        return PROGRAM
    return running


@dataclass(frozen=True)
class SettingsChange:
    """One settings file: what it holds now (None: there is none) and what it would hold."""

    path: Path
    before: bytes | None
    after: bytes | None
    # Where the former bytes are copied before the file changes (None: nowhere).
    backup: Path | None = None
    # Install's backup, removed once the file is written: uninstall gave back its bytes.
    spent_backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        before, after = (
            (content or b"").decode("utf-8").splitlines(keepends=True)
            for content in (self.before, self.after)
        )
        name = str(self.path)
        text = "".join(difflib.unified_diff(before, after, fromfile=name, tofile=name))
        return text if text.endswith("\n") or not text else text + "\n"


def settings_files(scope: str, config_dir: Path, project: Path) -> tuple[Path, Path]:
    """(the settings file of the hooks, the file of the MCP server) for `scope`."""
    if scope == "user":
        default = config_dir == Path.home() / ".claude"  # else CLAUDE_CONFIG_DIR names it
        home_file = (Path.home() if default else config_dir) / ".claude.json"
        return config_dir / "settings.json", home_file
    return project / ".claude" / "settings.json", project / ".mcp.json"


def plan(
    scope: str, config_dir: Path, project: Path, *, install: bool, memctl: Memctl | None = None
) -> list[SettingsChange]:
    """What install (or uninstall) would do to each file; nothing is written. `memctl`: the
    one install names (by default "memctl", on PATH)."""
    hooks_file, servers_file = settings_files(scope, config_dir, project)
    named = memctl or Memctl()
    if install:
        return [
            _change(hooks_file, lambda settings: _add_hooks(settings, named), install=True),
            _change(servers_file, lambda settings: _add_server(settings, named), install=True),
        ]
    return [
        _change(hooks_file, _remove_hooks, install=False),
        _change(servers_file, _remove_server, install=False),
    ]


def apply(changes: list[SettingsChange]) -> list[Path]:
    """Write the changed files (each after its backup); the backups written."""
    backups = []
    for change in changes:
        if not change.changed:
            continue
        target = Path(os.path.realpath(change.path))  # a linked settings file stays linked
        if _read(target) != change.before:  # Claude Code writes ~/.claude.json as it runs
            raise ClaudeSettingsRefused(f"{change.path} changed meanwhile: not changed; run again")
        # A new file: ~/.claude.json is the person's alone, as Claude Code makes it.
        mode = 0o600 if target.name == ".claude.json" else 0o644
        if change.before is not None:
            mode = os.stat(target).st_mode & 0o777
        if change.backup is not None and change.before is not None:
            _write_atomically(change.backup, change.before, mode)
            backups.append(change.backup)
        if change.after is None:
            target.unlink()
        else:
            _write_atomically(target, change.after, mode)
        if change.spent_backup is not None:
            change.spent_backup.unlink(missing_ok=True)
    return backups


def _change(path: Path, edit: Callable[[dict[str, Any]], None], *, install: bool) -> SettingsChange:
    before = _read(path)
    settings = _parsed(path, before)
    original = json.dumps(settings)
    try:
        edit(settings)
    except _Unexpected as error:
        raise ClaudeSettingsRefused(
            f"{path}: {error} is not what Claude Code writes: not changed"
        ) from None
    if json.dumps(settings) == original:
        return SettingsChange(path, before, before)
    if before is None:
        return SettingsChange(path, before, _render(settings, None))  # install creates it
    install_backup = _backup_of(path, INSTALL_BACKUP)
    if install:
        # A file that held memstore's settings already only has them brought up to date:
        # its backup, if any, stays the file before memstore.
        held_none = not _holds_ours(json.loads(before))
        backup = install_backup if held_none else None
        return SettingsChange(path, before, _render(settings, before), backup=backup)
    found = _read(install_backup)
    if found is not None and _same(_parsed_or_none(found), settings):
        # Only memstore's settings changed since install: the bytes it found, however the
        # file was laid out since.
        return SettingsChange(path, before, found, spent_backup=install_backup)
    if not settings and _was_only(before):
        return SettingsChange(path, before, None)  # install made it: uninstall removes it
    return SettingsChange(
        path, before, _render(settings, before), backup=_backup_of(path, UNINSTALL_BACKUP)
    )


def _parsed(path: Path, content: bytes | None) -> dict[str, Any]:
    if content is None:
        return {}
    try:
        settings = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ClaudeSettingsRefused(f"{path} is not valid JSON ({error}): not changed") from None
    if not isinstance(settings, dict):
        raise ClaudeSettingsRefused(f"{path} does not hold a JSON object: not changed")
    return settings


def _parsed_or_none(content: bytes) -> dict[str, Any] | None:
    try:
        settings = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return settings if isinstance(settings, dict) else None


def _same(one: dict[str, Any] | None, other: dict[str, Any]) -> bool:
    """The same settings in the same order (a dict's == ignores the order)."""
    return one is not None and json.dumps(one) == json.dumps(other)


def _backup_of(path: Path, suffix: str) -> Path:
    target = Path(os.path.realpath(path))
    return target.with_name(target.name + suffix)


def _holds_ours(settings: dict[str, Any]) -> bool:
    without = json.loads(json.dumps(settings))
    _remove_hooks(without)
    _remove_server(without)
    return not _same(without, settings)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ClaudeSettingsRefused(f"cannot read {path}: {error.strerror or error}") from None


class _Unexpected(Exception):
    pass


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise _Unexpected(f"{where} (not an object)")
    return value


def _group(memctl: Memctl) -> dict[str, Any]:
    return {
        "hooks": [
            {"type": "command", "command": memctl.hook_command(), "timeout": HOOK_TIMEOUT_SECONDS}
        ]
    }


def _names_memctl(words: list[str], subcommand: str) -> bool:
    """Whether `words` are memctl's (by name or path), with a --db or none, then `subcommand`:
    the forms install writes."""
    if not words or os.path.basename(words[0]) != PROGRAM or words[-1] != subcommand:
        return False
    options = words[1:-1]
    return not options or (len(options) == 2 and options[0] == "--db")


def _is_our_group(group: Any) -> bool:
    """A hook group as install writes it, whichever memctl and store it names."""
    if not isinstance(group, dict) or set(group) != {"hooks"}:
        return False
    hooks = group["hooks"]
    if not isinstance(hooks, list) or len(hooks) != 1 or not isinstance(hooks[0], dict):
        return False
    hook = hooks[0]
    if set(hook) != {"type", "command", "timeout"} or not isinstance(hook["command"], str):
        return False
    if hook["type"] != "command" or hook["timeout"] != HOOK_TIMEOUT_SECONDS:
        return False
    return _names_memctl(_words(hook["command"]), "hook")


def _is_our_server(server: Any) -> bool:
    if not isinstance(server, dict) or set(server) != {"command", "args"}:
        return False
    command, args = server["command"], server["args"]
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    return all(isinstance(arg, str) for arg in args) and _names_memctl([command, *args], "mcp")


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return []


def _runs_the_hook(command: str) -> bool:
    """Any command that runs memctl (by name or path) with `hook`: one is installed already."""
    words = _words(command)
    return any(
        os.path.basename(word) == PROGRAM and "hook" in words[place + 1 :]
        for place, word in enumerate(words)
    )


def _add_hooks(settings: dict[str, Any], memctl: Memctl) -> None:
    hooks = _object(settings, "hooks", "hooks")
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise _Unexpected(f"hooks.{event} (not a list)")
        ours = [place for place, group in enumerate(groups) if _is_our_group(group)]
        if ours:  # memstore's own, perhaps naming another memctl: this one, in its place
            groups[ours[0]] = _group(memctl)
            for place in reversed(ours[1:]):
                del groups[place]
        elif not any(_runs_the_hook(command) for command in _commands(groups)):
            groups.append(_group(memctl))


def _remove_hooks(settings: dict[str, Any]) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in HOOK_EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = [group for group in groups if not _is_our_group(group)]
        if len(kept) != len(groups):
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del settings["hooks"]


def _commands(groups: list[Any]) -> list[str]:
    return [
        hook["command"]
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
        if isinstance(hook, dict) and isinstance(hook.get("command"), str)
    ]


def _add_server(settings: dict[str, Any], memctl: Memctl) -> None:
    servers = _object(settings, "mcpServers", "mcpServers")
    # A server of that name that install did not write, whatever it runs, is the person's.
    if SERVER_NAME not in servers or _is_our_server(servers[SERVER_NAME]):
        servers[SERVER_NAME] = memctl.server()


def _remove_server(settings: dict[str, Any]) -> None:
    servers = settings.get("mcpServers")
    if isinstance(servers, dict) and _is_our_server(servers.get(SERVER_NAME)):
        del servers[SERVER_NAME]
        if not servers:
            del settings["mcpServers"]


def _was_only(before: bytes) -> bool:
    """Whether the file held nothing but memstore's own settings (install created it)."""
    settings = _parsed_or_none(before)
    if settings is None:
        return False
    if set(settings) == {"mcpServers"} and isinstance(settings["mcpServers"], dict):
        servers = settings["mcpServers"]
        return set(servers) == {SERVER_NAME} and _is_our_server(servers[SERVER_NAME])
    hooks = settings.get("hooks")
    if set(settings) != {"hooks"} or not isinstance(hooks, dict) or set(hooks) != set(HOOK_EVENTS):
        return False
    return all(
        isinstance(groups, list) and len(groups) == 1 and _is_our_group(groups[0])
        for groups in hooks.values()
    )


def _render(settings: dict[str, Any], before: bytes | None) -> bytes:
    """JSON as the file had it: its indentation and final newline (Claude Code's own: two
    spaces, no final newline, for a file it creates)."""
    indent: int | str = 2
    newline = ""
    if before is not None:
        text = before.decode("utf-8")
        first = re.search(r"\n([ \t]+)\S", text)
        if first is not None:
            spaces = first[1]
            indent = len(spaces) if set(spaces) == {" "} else spaces
        newline = text[len(text.rstrip()) :]
    return (json.dumps(settings, indent=indent, ensure_ascii=False) + newline).encode()


def _write_atomically(path: Path, content: bytes, mode: int) -> None:
    """`content` in `path`, with `mode`, through a temporary file renamed over it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(content)
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as error:
        where = error.filename or path
        raise ClaudeSettingsRefused(f"cannot write {where}: {error.strerror or error}") from None
