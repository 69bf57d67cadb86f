"""Alembic, driven from code: the migrations ship inside the package (memstore.migrations)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine

from memstore.errors import SchemaTooNew
from memstore.storage.schema_version import VERSION_TABLE


def migrations_path() -> Path:
    spec = importlib.util.find_spec("memstore.migrations")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_path()))
    config.set_main_option("version_table", VERSION_TABLE)
    return config


def script_head() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def upgrade_to_head(engine: Engine, path: str) -> None:
    """Upgrade in one write transaction, so concurrent openers migrate once, in turn."""
    config = alembic_config()
    script = ScriptDirectory.from_config(config)
    with engine.begin() as connection:
        # Read the revision under the write lock: another process may have just migrated.
        current = MigrationContext.configure(
            connection, opts={"version_table": VERSION_TABLE}
        ).get_current_revision()
        if current is not None:
            try:
                script.get_revision(current)
            except CommandError:
                raise SchemaTooNew(path, current) from None
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
