"""The PostgreSQL store (extra `postgres`): row-level security per tenant."""
