"""Stores beyond the in-memory dict: the records rules they share, SQLite, PostgreSQL."""

from ticket_tools.stores.failure import FailureReason, StoreError, StoreFailure

__all__ = ["FailureReason", "StoreError", "StoreFailure"]
