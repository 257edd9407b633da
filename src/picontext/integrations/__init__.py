"""picontext inside Python agent frameworks.

`memory.ConversationMemory` is the framework-neutral core (a session of any store, Pi's
projection and compaction); one module per framework adapts it to that framework's memory hook:
`openai_agents` (the Agents SDK's `Session`). Each adapter imports its framework, installed with
the matching extra (`picontext[openai-agents]`); importing this package imports none of them.
"""
