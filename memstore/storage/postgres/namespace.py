"""Project namespaces on a PostgreSQL server: which project's memories a workspace sees.

One server holds many projects. Each project namespace is a PostgreSQL schema of its own,
holding the whole store (memories, history, search, vectors: every revision migrates it),
and every connection memstore makes to the server reads and writes that schema only (its
search_path). Two projects share nothing, not even ids or the history chain, and a person
moves between them by changing folder. docs/postgresql.md, "Projects".

The namespace is, first to last:
- the URL's own `?namespace=NAME` (memstore takes it out before libpq sees the URL);
- MEMSTORE_NAMESPACE;
- the workspace's git remote (`origin`, else the first remote), as host/path: both
  `git@github.com:acme/app.git` and `https://github.com/acme/app` are github.com/acme/app, so
  every clone of a repository shares one namespace, on any machine;
- none: the server's default store (the `public` schema, where stores lived before
  namespaces), for a workspace with no remote, or a URL's empty `namespace=`.

This module imports nothing heavy: `memctl hook` resolves the namespace before every prompt.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memstore.errors import InvalidSettings

URL_PARAMETER = "namespace"
# How the namespace was chosen, as `memctl path` says it.
FROM_URL = "given in the database URL"
FROM_SETTING = "given by MEMSTORE_NAMESPACE"
FROM_REMOTE = "the workspace's git remote"
NO_NAMESPACE = "the server's default store: no git remote (MEMSTORE_NAMESPACE=NAME chooses one)"

# A namespace is printable and short: it names a schema (through a hash) and shows in
# messages. Letters, digits and the characters of a host/path or a URL's, nothing else.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~/@:+-]{0,199}")
_SCHEMA_PREFIX = "ms_"
# Left as they are in a URL's query, for the URL to read as typed ("+" would read as a space).
SAFE = "/:@"
# PostgreSQL names are 63 bytes at most: prefix 3 + slug 40 + "_" + hash 8.
_SLUG_LENGTH = 40


@dataclass(frozen=True)
class Namespace:
    name: str | None  # None: the server's default store
    how: str

    @property
    def schema(self) -> str | None:
        return schema_of(self.name) if self.name else None


def checked_name(name: str) -> str:
    """`name` when it is a namespace name memstore accepts; InvalidSettings otherwise."""
    if not _NAME.fullmatch(name):
        raise InvalidSettings(
            f"{name[:80]!r} is no namespace name: up to 200 letters, digits and . _ ~ / @ : + -,"
            " starting with a letter or digit"
        )
    return name


def schema_of(name: str) -> str:
    """The PostgreSQL schema of namespace `name`: readable (its last part, lowercased) and
    unique (a hash of the whole name, which keeps case and punctuation apart)."""
    last = name.rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^a-z0-9]+", "_", last.lower()).strip("_")[:_SLUG_LENGTH] or "ns"
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{_SCHEMA_PREFIX}{slug}_{digest}"


def split_url(url: str) -> tuple[str, str | None]:
    """The URL without its `namespace` parameter (what libpq reads), and that parameter:
    None when there is none, "" when it names the default store (`namespace=`)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    names = [value for key, value in pairs if key == URL_PARAMETER]
    if not names:
        return url, None
    if len(names) > 1:
        raise InvalidSettings("the database URL gives namespace= more than once")
    rest = urlencode([(key, value) for key, value in pairs if key != URL_PARAMETER], safe=SAFE)
    # An empty one names the default store, from a workspace whose remote names another.
    return urlunsplit(parts._replace(query=rest)), names[0] and checked_name(names[0])


def with_namespace(url: str, name: str | None) -> str:
    """`url` naming namespace `name` (replacing any it named); as it is for None."""
    if name is None:
        return url
    bare, _ = split_url(url)
    parts = urlsplit(bare)
    added = urlencode({URL_PARAMETER: checked_name(name)}, safe=SAFE)
    query = "&".join(q for q in (parts.query, added) if q)
    return urlunsplit(parts._replace(query=query))


def resolve(url: str, setting: str | None, workspace_root: Path | None) -> tuple[str, Namespace]:
    """The server URL naming the namespace chosen (see the module's docstring), and how."""
    _, in_url = split_url(url)
    if in_url is not None:
        return url, Namespace(in_url or None, FROM_URL)
    if setting:
        return with_namespace(url, setting), Namespace(checked_name(setting), FROM_SETTING)
    remote = git_remote(workspace_root) if workspace_root is not None else None
    if remote is not None:
        return with_namespace(url, remote), Namespace(remote, FROM_REMOTE)
    return url, Namespace(None, NO_NAMESPACE)


def git_remote(root: Path) -> str | None:
    """The namespace of the git repository at `root`, from its remote's URL (`origin`, else
    the first one); None with no repository, no remote, or one memstore cannot name.
    Read from the repository's config file, without running git."""
    config = _git_config(root)
    if config is None:
        return None
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    remotes: dict[str, str] = {}
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        header = re.fullmatch(r'\[\s*remote\s+"([^"]*)"\s*\]', line)
        if header:
            section = header.group(1)
        elif line.startswith("["):
            section = None
        elif section is not None and section not in remotes:
            setting = re.fullmatch(r"url\s*=\s*(.*)", line, flags=re.IGNORECASE)
            if setting:
                remotes[section] = setting.group(1).strip().strip('"')
    url = remotes.get("origin") or next(iter(remotes.values()), None)
    return None if url is None else remote_name(url)


def remote_name(url: str) -> str | None:
    """A git remote's URL as a namespace: host/path, without scheme, user, port, password
    or `.git`, the host lowercased; None for a local path (no host: not shared)."""
    scp = re.fullmatch(r"(?:[^@/]+@)?([^:/]+):(?!//)(.+)", url)
    if "://" in url:
        parts = urlsplit(url)
        host, path = parts.hostname or "", parts.path
    elif scp:
        host, path = scp.group(1), scp.group(2)
    else:
        return None
    path = re.sub(r"(\.git)?/*$", "", path.strip("/"))
    if not host or not path or host == "file":
        return None
    name = f"{host.lower()}/{path}"
    return name if _NAME.fullmatch(name) else None


def _git_config(root: Path) -> Path | None:
    """The config file of the repository at `root`: `.git/config`, or for a worktree or a
    submodule (`.git` a file: `gitdir: …`) its common folder's."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git / "config"
    try:
        pointer = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not pointer.startswith("gitdir:"):
        return None
    git_dir = Path(os.path.join(root, pointer.removeprefix("gitdir:").strip()))
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        git_dir = Path(os.path.join(git_dir, common))
    except (OSError, UnicodeDecodeError):
        pass
    return git_dir / "config"
