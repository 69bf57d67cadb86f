"""Which schema revision this code expects, and the table where a database records its own.

Both the engine (to open an up-to-date database without Alembic) and the migrations need
these, so they live apart from either.
"""

# Head of migrations/versions; tests check that it matches the Alembic script directory.
SCHEMA_HEAD = "0012"
VERSION_TABLE = "memstore_alembic_version"
