"""Framework-free core of the training monitor: records, rules, engine, ledger, metrics, replay.

Nothing here imports MindSpore; ``callbacks`` adapts it to MindSpore and MindFormers.
"""
from .engine import Engine
from .events import Event
from .record import StepRecord
from .rules import Rules

__all__ = ["Engine", "Event", "StepRecord", "Rules"]
