"""The PostgreSQL implementation of storage: its engine, search, server and namespace."""
