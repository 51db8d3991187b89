"""The SQLite store: its schema, its import, and the reader that serves the tools."""
