"""MindSpore / MindFormers adapters of the monitor: ``from callbacks import TrainingMonitor``."""
import sys

from .cpu import LossScaleTrainStep, mindformers_train_step
from .data import SkippableSource
from .lr import ScaledLearningRate
from .training_monitor import TrainingMonitor

__all__ = ["TrainingMonitor", "ScaledLearningRate", "SkippableSource", "LossScaleTrainStep",
           "mindformers_train_step", "register_mindformers"]


def register_mindformers() -> bool:
    """Register ``TrainingMonitor`` (callback) and ``ScaledLearningRate`` (LR) with MindFormers' registry,
    so YAML ``callbacks: - type: TrainingMonitor`` builds it. Returns False when mindformers is absent."""
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError:
        return False
    for cls, kind in ((TrainingMonitor, MindFormerModuleType.CALLBACK), (ScaledLearningRate, MindFormerModuleType.LR)):
        if not MindFormerRegister.is_exist(kind, cls.__name__):
            MindFormerRegister.register_cls(cls, module_type=kind)
    return True


# Importing mindformers costs ~10 s, so only register on import when the program already uses it.
if "mindformers" in sys.modules:
    register_mindformers()
