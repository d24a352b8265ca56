"""The training monitor. This package (``training_monitor``, the ``monitor/`` folder) is the framework-free
core: records, rules, engine, ledger, metrics, replay; nothing in it imports MindSpore.
``training_monitor.callbacks`` (the ``callbacks/`` folder) adapts it to MindSpore and MindFormers; its public
names are also reachable here (``from training_monitor import TrainingMonitor``), imported on first use, so
``import training_monitor`` alone never loads MindSpore.
"""
from .engine import Engine
from .events import Event
from .record import StepRecord
from .ruleset import Rules

_ADAPTERS = ("TrainingMonitor", "LoopMonitor", "MonitorFailure", "ScaledLearningRate", "SkippableSource",
             "LossScaleTrainStep", "mindformers_train_step", "register_mindformers", "MINDFORMERS_REGISTER_PATH")

__all__ = ["Engine", "Event", "StepRecord", "Rules", *_ADAPTERS]


def __getattr__(name: str):
    """The MindSpore adapters (``training_monitor.callbacks``), imported when first asked for (PEP 562)."""
    if name in _ADAPTERS:
        from . import callbacks
        return getattr(callbacks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
