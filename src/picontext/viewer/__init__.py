"""See a session: the self-contained HTML export (`page.py`) of the data computed in `model.py`
(`timeline.py` for the context-over-time plot), and the local viewer server (`server.py`)."""
