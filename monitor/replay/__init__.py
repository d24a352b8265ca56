"""``monitor replay``: run logged training runs through the same engine as a live run."""
from .runner import PARSERS, ReplayError, ReplayResult, replay_file, replay_paths

__all__ = ["PARSERS", "ReplayError", "ReplayResult", "replay_file", "replay_paths"]
