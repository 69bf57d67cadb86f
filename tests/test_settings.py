"""memstore.settings: every environment variable, read in one place (memctl's own use of them,
old names included, is tested through memctl in test_cli.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memstore import settings
from memstore.settings import Settings


def test_defaults_where_nothing_is_set(tmp_path: Path) -> None:
    read = Settings.from_environment({"HOME": str(tmp_path), "XDG_CONFIG_HOME": "/c"})
    assert read.db is None and read.ceiling_directories == frozenset()
    assert (read.model, read.small_model) == (settings.DEFAULT_MODEL, settings.DEFAULT_SMALL_MODEL)
    assert read.semantic and read.model_dir is None
    assert read.settings_file == Path("/c/memstore/settings.toml")
    assert read.api_key is None and read.auth_token is None and read.base_url is None


def test_each_variable_read() -> None:
    read = Settings.from_environment(
        {
            "MEMSTORE_DB": "/d/m.db",
            "MEMSTORE_CEILING_DIRECTORIES": "/a:/b",
            "MEMSTORE_MODEL": "big",
            "MEMSTORE_SMALL_MODEL": "small",
            "MEMSTORE_MODEL_DIR": "/m",
            "MEMSTORE_SEMANTIC": " Off ",
            "MEMSTORE_SETTINGS": "/s.toml",
            "XDG_CACHE_HOME": "/cache",
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "EDITOR": "nano",
        }
    )
    assert read.db == Path("/d/m.db")
    assert read.ceiling_directories == {Path("/a"), Path("/b")}
    assert (read.model, read.small_model, read.model_dir) == ("big", "small", Path("/m"))
    assert not read.semantic and read.settings_file == Path("/s.toml")
    assert read.cache_folder == Path("/cache") and read.editor == "nano"
    assert (read.api_key, read.base_url) == ("k", "http://127.0.0.1:9")


def test_an_old_name_is_read_and_noted_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(settings, "_noted", set())
    with caplog.at_level(logging.WARNING):
        first = Settings.from_environment({"MEMCTL_DB": "/old.db"})
        again = Settings.from_environment({"MEMCTL_DB": "/old.db"})
        newer = Settings.from_environment({"MEMCTL_DB": "/old.db", "MEMSTORE_DB": "/new.db"})
    assert first.db == again.db == Path("/old.db") and newer.db == Path("/new.db")
    assert [r.getMessage() for r in caplog.records] == [
        "MEMCTL_DB is deprecated: set MEMSTORE_DB instead (the old name goes in a later release)"
    ]
