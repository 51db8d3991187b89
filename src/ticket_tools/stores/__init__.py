"""Stores beyond the in-memory dict: the records rules they share, SQLite, PostgreSQL."""
