"""``monitor replay``: run logged training runs through the same engine as a live run."""
from .runner import ReplayError, ReplayResult, replay_file

__all__ = ["ReplayError", "ReplayResult", "replay_file"]
