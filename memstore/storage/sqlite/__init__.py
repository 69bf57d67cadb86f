"""The SQLite implementation of storage: its engine, search (FTS5) and reader."""
