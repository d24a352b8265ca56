"""MindSpore / MindFormers adapters of the monitor: ``from training_monitor import TrainingMonitor``."""
import os
import sys

from .cpu import LossScaleTrainStep, mindformers_train_step
from .data import SkippableSource
from .loop import LoopMonitor
from .lr import ScaledLearningRate
from .training_monitor import MonitorFailure, TrainingMonitor

__all__ = ["TrainingMonitor", "LoopMonitor", "MonitorFailure", "ScaledLearningRate", "SkippableSource",
           "LossScaleTrainStep", "mindformers_train_step", "register_mindformers", "MINDFORMERS_REGISTER_PATH"]

# the folder for ``run_mindformer.py --register_path``: its module ``training_monitor_plugin`` registers the
# monitor's classes when a YAML entry names ``auto_register: training_monitor_plugin.<class>``
MINDFORMERS_REGISTER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mindformers_register")


def register_mindformers() -> bool:
    """Register ``TrainingMonitor`` (callback), ``ScaledLearningRate`` (LR) and ``MFTrainOneStepCellFinite``
    (wrapper, the CPU-safe ``MFTrainOneStepCell``) with MindFormers' registry, so a YAML's ``callbacks: -
    type: TrainingMonitor``, ``lr_schedule: type: ScaledLearningRate`` and ``runner_wrapper: type:
    MFTrainOneStepCellFinite`` build them. Returns False when mindformers is absent."""
    try:
        from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
    except ImportError:
        return False
    from .mf import MFTrainOneStepCellFinite

    for cls, kind in ((TrainingMonitor, MindFormerModuleType.CALLBACK), (ScaledLearningRate, MindFormerModuleType.LR),
                      (MFTrainOneStepCellFinite, MindFormerModuleType.WRAPPER)):
        if not MindFormerRegister.is_exist(kind, cls.__name__):
            MindFormerRegister.register_cls(cls, module_type=kind)
    return True


# Importing mindformers costs ~10 s, so only register on import when the program already uses it.
if "mindformers" in sys.modules:
    register_mindformers()
