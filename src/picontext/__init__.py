"""picontext: Pi-compatible sessions, context projection and compaction for long agent runs."""

__version__ = "0.1.0"
