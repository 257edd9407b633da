"""Run modes of the agent CLI: interactive chat (`interactive`), JSON-lines RPC (`rpc`), and what they
share (`common`: flags, opening the session, compaction and tree navigation, the footer)."""
