"""The PostgreSQL store (extra `postgres`): its schema, its import, and the row-secured reader."""
