"""memstore in Claude Code's settings files, for those who do not use its plugins: the hooks
`memctl hook` answers and the MCP server `memctl mcp`, the same the plugin in `plugins/memstore/`
wires, written in (`memctl claude install`) and taken out (`memctl claude uninstall`).

Where Claude Code reads them (its settings and MCP documentation):

- user: the hooks in `<config>/settings.json`, the server in the top-level `mcpServers` of
  `.claude.json` beside the config folder (`~/.claude.json`; `$CLAUDE_CONFIG_DIR/.claude.json`
  when that is set);
- project: the hooks in `<project>/.claude/settings.json`, the server in `<project>/.mcp.json`.

Every other setting is kept, in its order, and the file keeps its indentation and final
newline, so that install then uninstall gives back the same bytes. Installing twice is
installing once. A file that is not a JSON object is refused before anything is written; before
a file changes, its former bytes are copied beside it; each file is replaced atomically.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstore.errors import ClaudeSettingsRefused

# What memctl hook answers (the index, a prompt's memories) and records (a session to learn
# from), as the plugin's hooks/hooks.json wires them.
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "PreCompact")
HOOK_COMMAND = "memctl hook"
HOOK_TIMEOUT_SECONDS = 10
SERVER_NAME = "memstore"
SERVER = {"command": "memctl", "args": ["mcp"]}
BACKUP_SUFFIX = ".memstore-backup"
# Any command that runs `memctl hook`, by name or by path: one is installed already.
_RUNS_THE_HOOK = re.compile(r"(?:^|/)memctl\s+hook(?:\s|$)")


@dataclass(frozen=True)
class SettingsChange:
    """One settings file: what it holds now (None: there is none) and what it would hold."""

    path: Path
    before: bytes | None
    after: bytes | None

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


def plan(scope: str, config_dir: Path, project: Path, *, install: bool) -> list[SettingsChange]:
    """What install (or uninstall) would do to each file; nothing is written."""
    hooks_file, servers_file = settings_files(scope, config_dir, project)
    hooks_edit = _add_hooks if install else _remove_hooks
    servers_edit = _add_server if install else _remove_server
    return [_change(hooks_file, hooks_edit), _change(servers_file, servers_edit)]


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
            backup = _backup_of(target)
            _write_atomically(backup, change.before, mode)
            backups.append(backup)
        if change.after is None:
            target.unlink()
        else:
            _write_atomically(target, change.after, mode)
    return backups


def _change(path: Path, edit: Callable[[dict[str, Any]], None]) -> SettingsChange:
    before = _read(path)
    if before is None:
        settings: dict[str, Any] = {}
    else:
        try:
            settings = json.loads(before)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ClaudeSettingsRefused(
                f"{path} is not valid JSON ({error}): not changed"
            ) from None
        if not isinstance(settings, dict):
            raise ClaudeSettingsRefused(f"{path} does not hold a JSON object: not changed")
    original = json.dumps(settings)
    try:
        edit(settings)
    except _Unexpected as error:
        raise ClaudeSettingsRefused(
            f"{path}: {error} is not what Claude Code writes: not changed"
        ) from None
    if json.dumps(settings) == original:
        return SettingsChange(path, before, before)
    if edit in (_remove_hooks, _remove_server) and before is not None:
        backup = _read(_backup_of(path))
        if backup is not None and _installed(backup, edit) == before:
            # Unchanged since install: the bytes it found, however they were laid out.
            return SettingsChange(path, before, backup)
    if not settings and before is not None and _was_only(before):
        return SettingsChange(path, before, None)  # install made it: uninstall removes it
    return SettingsChange(path, before, _render(settings, before))


def _backup_of(path: Path) -> Path:
    target = Path(os.path.realpath(path))
    return target.with_name(target.name + BACKUP_SUFFIX)


def _installed(content: bytes, remove: Callable[[dict[str, Any]], None]) -> bytes | None:
    """What install makes of a file that holds `content`, or None if it is no JSON object."""
    try:
        settings = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(settings, dict):
        return None
    without = json.loads(content)
    remove(without)
    if without != settings:
        return None  # it holds memstore's settings already: not what install started from
    try:
        (_add_hooks if remove is _remove_hooks else _add_server)(settings)
    except _Unexpected:
        return None
    return _render(settings, content)


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


def _group() -> dict[str, Any]:
    return {
        "hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT_SECONDS}]
    }


def _add_hooks(settings: dict[str, Any]) -> None:
    hooks = _object(settings, "hooks", "hooks")
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise _Unexpected(f"hooks.{event} (not a list)")
        if not any(_RUNS_THE_HOOK.search(command) for command in _commands(groups)):
            groups.append(_group())


def _remove_hooks(settings: dict[str, Any]) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in HOOK_EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = [group for group in groups if group != _group()]
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


def _add_server(settings: dict[str, Any]) -> None:
    servers = _object(settings, "mcpServers", "mcpServers")
    if SERVER_NAME not in servers:  # a server of that name, whatever it runs, is the person's
        servers[SERVER_NAME] = dict(SERVER)


def _remove_server(settings: dict[str, Any]) -> None:
    servers = settings.get("mcpServers")
    if isinstance(servers, dict) and servers.get(SERVER_NAME) == SERVER:
        del servers[SERVER_NAME]
        if not servers:
            del settings["mcpServers"]


def _was_only(before: bytes) -> bool:
    """Whether the file held nothing but memstore's own settings (install created it)."""
    try:
        settings = json.loads(before)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    if settings == {"mcpServers": {SERVER_NAME: SERVER}}:
        return True
    return settings == {"hooks": {event: [_group()] for event in HOOK_EVENTS}}


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
