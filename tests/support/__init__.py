"""Test doubles of this repository's suite (not part of the picontext package): a throwaway
PostgreSQL cluster, a PgBouncer, a fault-injecting PostgreSQL proxy, a llama.cpp server."""
