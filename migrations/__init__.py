"""Alembic migrations of the memstore schema (installed as memstore.migrations)."""
