"""The PostgreSQL session store (optional extra: `pip install 'picontext[postgres]'`)."""

from __future__ import annotations

from picontext.session.postgres.database import Database, StoreUnavailableError, database, is_store_url
from picontext.session.postgres.store import PgSessionStore

__all__ = ["Database", "PgSessionStore", "StoreUnavailableError", "database", "is_store_url"]
